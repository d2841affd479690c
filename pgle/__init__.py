"""pgle: XLA's Profile Guided Latency Estimator for JAX, end to end, with evidence.

The Python API (each name is imported on first use, so `import pgle` stays fast and never
imports jax: the workload's own process decides when jax is imported):

- every command, each returning a `Report` (the same one `pgle COMMAND --json` prints), with
  keywords named as the command's flags (pgle.api; docs/reference/api.md): the workflows
  `collect`, `run`, `tune`, `auto`, `prewarm`, `nsys`, and `verify`, `inspect`, `diff`,
  `merge`, `convert`, `doctor`, `flags_explain`, `view`, `cache_ls`, `cache_stats`,
  `cache_prune`, `store_ls`, `store_add`, `store_get`, `store_prune`, `runs_ls`, `runs_prune`
  (`pgle report`: `pgle.api.report`, as `pgle.report` is the Report's module), e.g.
  `pgle.run("train.py", "--batch", "64", profile="profile.pb", require_applied=True)`;
- profiles: `read_profile`, `write_profile`, `load_profile_source` (pgle.profiles.files),
  `convert_trace` (pgle.profiles.convert);
- `Report` (pgle.report) and `PgleError` (pgle.errors; `.exit_code` is the CLI's).

Progress and notices go to the `pgle` logger; pgle adds no handler but a NullHandler, so a
program shows them the standard way (`logging.basicConfig(level=logging.INFO)`).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from pgle.version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

_COMMANDS = (
    "collect",
    "run",
    "tune",
    "verify",
    "auto",
    "prewarm",
    "nsys",
    "inspect",
    "diff",
    "merge",
    "convert",
    "doctor",
    "flags_explain",
    "view",
    "cache_ls",
    "cache_stats",
    "cache_prune",
    "store_ls",
    "store_add",
    "store_get",
    "store_prune",
    "runs_ls",
    "runs_prune",
)
_API = {
    **{name: "pgle.api" for name in _COMMANDS},
    "read_profile": "pgle.profiles.files",
    "write_profile": "pgle.profiles.files",
    "load_profile_source": "pgle.profiles.files",
    "convert_trace": "pgle.profiles.convert",
    "Report": "pgle.report",
    "PgleError": "pgle.errors",
}

# Computed from _API so that the two cannot disagree; ruff only reads literal lists.
__all__ = sorted(_API) + ["__version__"]  # noqa: PLE0605


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'pgle' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
