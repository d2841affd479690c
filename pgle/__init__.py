"""pgle: XLA's Profile Guided Latency Estimator for JAX, end to end, with evidence.

The Python API (each name is imported on first use, so `import pgle` stays fast and never
imports jax: the workload's own process decides when jax is imported):

- workflows, each returning a `Report` (the same one `pgle COMMAND --json` prints):
  `collect`, `run`, `tune`, `verify`, `auto`, `prewarm`, `nsys` (pgle.api), e.g.
  `pgle.run("train.py", "--batch", "64", profile="profile.pb", require_applied=True)`;
- profiles: `read_profile`, `write_profile`, `load_profile_source` (pgle.profiles.files),
  `convert_trace` (pgle.profiles.convert);
- `Report` (pgle.report) and `PgleError` (pgle.errors; `.exit_code` is the CLI's).
"""

from __future__ import annotations

import importlib

from pgle.version import __version__

_API = {
    "collect": "pgle.api", "run": "pgle.api", "tune": "pgle.api", "verify": "pgle.api",
    "auto": "pgle.api", "prewarm": "pgle.api", "nsys": "pgle.api",
    "read_profile": "pgle.profiles.files", "write_profile": "pgle.profiles.files",
    "load_profile_source": "pgle.profiles.files", "convert_trace": "pgle.profiles.convert",
    "Report": "pgle.report", "PgleError": "pgle.errors",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'pgle' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
