"""pgle's version: its own module at the bottom floor, so that what records it (a profile's
manifest) need not import the package's front door (pgle/__init__.py, which re-exports the API)."""

__version__ = "0.1.0"
