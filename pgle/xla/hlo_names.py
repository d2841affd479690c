"""What an HLO instruction is from its name alone: the older face of
pgle.xla.instruction_kinds (the one classifier), kept for its callers.

`kind(name)` -> (class, family): (`collective`, `all-gather`) for `all-gather-start.12` or
`all_gather.3`; (`host_copy`, None) for `copy-start.2`; (`other`, None) for an async wrapper
whose kind the name does not show (`fusion-start`, `custom-call-start`); (`compute`, None)
for anything else.
"""

from __future__ import annotations

from pgle.xla.instruction_kinds import (
    COLLECTIVE,
    COMPUTE,
    FAMILIES,
    HOST_COPY,
    OTHER,
    bare,
    classify,
    is_async_collective_start,
)

__all__ = [
    "COLLECTIVE",
    "COMPUTE",
    "FAMILIES",
    "HOST_COPY",
    "OTHER",
    "bare",
    "is_async_collective_start",
    "is_communication",
    "kind",
]


def kind(name: str) -> tuple[str, str | None]:
    k = classify(name)
    return k.category, k.family


def is_communication(name: str) -> bool:
    """Not compute: a collective, a host copy, or an async wrapper of unknown kind (what the
    latency-hiding scheduler may overlap; a verdict never counts it as compute)."""
    return classify(name).never_compute
