"""Installed jax/jaxlib versions, read from package metadata so jax is never imported.

Feature gates name the jax release where the behaviour changed (docs/xla-facts.md).
"""

from __future__ import annotations

import re
from importlib import metadata


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.4.36.dev20241101' -> (0, 4, 36); None when unparsable."""
    if not text:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)*)", text)
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def jax_version() -> tuple[int, ...] | None:
    return parse_version(installed("jax"))


def at_least(version: tuple[int, ...] | None, minimum: tuple[int, ...]) -> bool:
    """Unknown versions count as new: pgle targets current jax."""
    return version is None or version >= minimum


def needs_lhs_flag(version: tuple[int, ...] | None) -> bool:
    """jax <= 0.5.0 runs the latency-hiding scheduler only when asked, even with a profile."""
    return version is not None and version <= (0, 5, 0)


def supports_expect_pgle(version: tuple[int, ...] | None) -> bool:
    """JAX_COMPILATION_CACHE_EXPECT_PGLE exists since jax 0.5.1."""
    return at_least(version, (0, 5, 1))


def uses_absl_log_prefix(version: tuple[int, ...] | None) -> bool:
    """jax >= 0.7.2 logs through absl (`I0822 12:34:56.789012  123 file.cc:1] msg`)."""
    return at_least(version, (0, 7, 2))


def version_string(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else ".".join(map(str, version))
