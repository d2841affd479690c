"""A fingerprint-keyed profile store shared by recurring jobs (`pgle store`, `--store`)."""
