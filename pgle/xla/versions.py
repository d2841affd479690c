"""Installed jax/jaxlib versions, read from package metadata so jax is never imported.

Feature gates name the jax release where the behaviour changed (docs/xla-facts.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import metadata


class Version(tuple):
    """A jax release as a tuple of ints; a pre-release (`0.5.1.dev20250101`, `0.5.1rc1`)
    sorts before its release and after the one before it: a nightly of 0.5.1 may lack what
    0.5.1 has, so feature gates treat it as older (`Version((0, 5, 1), pre=True) < (0, 5, 1)`).
    Compares with plain tuples, which are releases."""

    pre: bool

    def __new__(cls, parts: Iterable[int], pre: bool = False) -> Version:
        obj = super().__new__(cls, tuple(parts))
        obj.pre = pre
        return obj

    @staticmethod
    def _key(v: tuple) -> tuple:
        parts = tuple(v) + (0,) * max(0, 4 - len(v))
        return (parts, 0 if getattr(v, "pre", False) else 1)

    def __lt__(self, other: object) -> bool:
        return self._key(self) < self._key(other) if isinstance(other, tuple) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self._key(self) <= self._key(other) if isinstance(other, tuple) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self._key(self) > self._key(other) if isinstance(other, tuple) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self._key(self) >= self._key(other) if isinstance(other, tuple) else NotImplemented

    def __eq__(self, other: object) -> bool:
        return self._key(self) == self._key(other) if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((tuple(self), "pre")) if self.pre else tuple.__hash__(self)


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.4.36' -> (0, 4, 36); a pre-release such as '0.5.1.dev20250101' or '0.5.1rc1' sorts
    before 0.5.1 (see Version); None when unparsable."""
    if not text:
        return None
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)(.*)$", text)
    if not m:
        return None
    rest = m.group(2).strip().lower()
    pre = bool(re.match(r"^[.\-_]?(dev|rc|a|alpha|b|beta|pre|c)\d*", rest))
    return Version((int(p) for p in m.group(1).split(".")), pre=pre)


# The newest jax whose XLA:GPU compiler the deviceless lane runs (tests/xla_gpu/versions.txt,
# tests/test_docs-style check: tests/xla/test_versions.py). Newer jax may print other words.
NEWEST_VERIFIED_JAX = (0, 12, 0, 1)


def newer_than_verified(version: tuple[int, ...] | None) -> str | None:
    """One warning line when `version` is newer than any jax pgle's lane verified."""
    if version is None or not version > NEWEST_VERIFIED_JAX:
        return None
    return (
        f"jax {version_string(version)} is newer than the newest jax pgle verified its "
        f"verdicts on ({version_string(NEWEST_VERIFIED_JAX)}): XLA may word its log "
        "differently; check the verdict against the log"
    )


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


def version_string(version: tuple[int, ...] | None) -> str:
    if version is None:
        return "unknown"
    pre = " (pre-release)" if getattr(version, "pre", False) else ""
    return ".".join(map(str, version)) + pre
