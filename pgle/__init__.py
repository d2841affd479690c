"""pgle: XLA's Profile Guided Latency Estimator for JAX, end to end, with evidence.

Importing this package never imports jax: the CLI must start fast, and the
workload's own process decides when jax is imported.
"""

__version__ = "0.1.0"
