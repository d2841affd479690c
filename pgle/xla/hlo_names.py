"""What an HLO instruction is, from its name alone: a collective (by opcode family), a host
copy, or compute.

XLA's accuracy checker names the instructions a profile misses and nothing else (no
opcode), so the name is all a verdict has. XLA names an instruction after its opcode
(`all-gather-start.12`, `reduce-scatter-start`, `collective-permute-start.1`; seen from the
real XLA:GPU compiler of jax 0.10.2, tests/xla_gpu/), the async wrapper of a collective after
the wrapped opcode (`all-to-all-start`), and an instruction converted from StableHLO may keep
the JAX primitive's name (`psum.3`, `ragged_all_to_all.5`; seen in users' GPU logs). Both
spellings map to one family here. Stdlib only: the log scanner uses it while it reads.
"""

from __future__ import annotations

import functools
import re

# Family -> the spellings an instruction of it is named with (HLO opcode first, then JAX's).
FAMILIES: dict[str, tuple[str, ...]] = {
    "all-reduce": ("all-reduce", "psum", "pmax", "pmin", "pmean", "all_reduce"),
    "all-gather": ("all-gather", "all_gather"),
    "reduce-scatter": ("reduce-scatter", "psum_scatter", "reduce_scatter"),
    "all-to-all": ("all-to-all", "all_to_all"),
    "ragged-all-to-all": ("ragged-all-to-all", "ragged_all_to_all"),
    "collective-permute": ("collective-permute", "ppermute", "collective_permute"),
    "collective-broadcast": ("collective-broadcast", "pbroadcast", "collective_broadcast"),
    # jax >= 0.8 names the instructions of jax.lax.psend/precv after the primitive (`psend.10`,
    # `precv.11`: opcodes send, send-done, recv, recv-done; the lane's program i).
    "send": ("send", "psend"),
    "recv": ("recv", "precv"),
}
# Longest spelling first, so `ragged-all-to-all` is not read as `all-to-all`.
_SPELLINGS = sorted(
    ((s, fam) for fam, ss in FAMILIES.items() for s in ss), key=lambda p: -len(p[0])
)
_FAMILY_RE = re.compile(
    r"^(?P<spelling>" + "|".join(re.escape(s) for s, _ in _SPELLINGS) + r")"
    r"(?P<phase>-start|-done|_start|_done)?(?:[.\-_]\d+)*$"
)
_BY_SPELLING = dict(_SPELLINGS)
# Async copies between host and device memory (host offloading) are scheduled like
# collectives: the latency-hiding scheduler overlaps them with compute.
_HOST_COPY_RE = re.compile(r"^copy-(?:start|done)(?:[.\-]\d+)*$")
_QUALIFIER_RE = re.compile(r"^[0-9a-f]{32}::")

COLLECTIVE = "collective"
HOST_COPY = "host_copy"
COMPUTE = "compute"


@functools.lru_cache(maxsize=65536)
def kind(name: str) -> tuple[str, str | None]:
    """(class, family) of an instruction name: (`collective`, `all-gather`) for
    `all-gather-start.12` or `all_gather.3`; (`host_copy`, None) for `copy-start.2`;
    (`compute`, None) for anything else (fusions, gemms, custom calls ...)."""
    bare = _QUALIFIER_RE.sub("", name.strip())
    m = _FAMILY_RE.match(bare)
    if m:
        return COLLECTIVE, _BY_SPELLING[m.group("spelling")]
    if _HOST_COPY_RE.match(bare):
        return HOST_COPY, None
    return COMPUTE, None


def is_communication(name: str) -> bool:
    """A collective or a host copy: what the latency-hiding scheduler overlaps."""
    return kind(name)[0] != COMPUTE


def is_async_collective_start(name: str) -> bool:
    """The start of an async collective (`all-reduce-start`, `all-gather-start.12`,
    `collective-permute-start.1`, with or without a `<fp>::` qualifier): what XLA may turn
    into a synchronous instruction after scheduling (pgle.verdicts.collectives)."""
    m = _FAMILY_RE.match(_QUALIFIER_RE.sub("", name.strip()))
    return bool(m and m.group("phase") in ("-start", "_start"))


def bare(name: str) -> str:
    """The instruction name without a `<fingerprint>::` qualifier."""
    return _QUALIFIER_RE.sub("", name.strip())
