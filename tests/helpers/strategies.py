"""Version strategies shared by the property tests: any jax-like release, and the releases on
either side of a boundary."""

from __future__ import annotations

from hypothesis import strategies as st

from pgle.xla.versions import Version

releases = st.tuples(st.integers(0, 1), st.integers(0, 14), st.integers(0, 60)).map(tuple) | st.tuples(
    st.integers(0, 1), st.integers(0, 14), st.integers(0, 60), st.integers(0, 3)).map(tuple)
pre_releases = releases.map(lambda v: Version(v, pre=True))
versions = releases | pre_releases


def before(v: tuple[int, ...]) -> tuple[int, ...]:
    """The nearest release before `v` (0.10.1 -> 0.10.0, 0.11.0 -> 0.10.99, 0.12.0.1 ->
    0.12.0.0)."""
    parts = list(v)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] > 0:
            parts[i] -= 1
            return tuple(parts[: i + 1] + [99] * (len(parts) - i - 1))
    raise ValueError(f"nothing before {v}")


def both_sides(boundary: tuple[int, ...]) -> list[tuple[tuple[int, ...], bool]]:
    """(version, at or after the boundary) at the boundary itself, the release before it, and
    the boundary's pre-release (a nightly counts as older: pgle.xla.versions.Version)."""
    return [(boundary, True), (before(boundary), False), (Version(boundary, pre=True), False),
            (boundary + (1,), True)]
