"""An instruction's kind in `pgle estimate`'s schedules: `collective`, `host_copy`, `compute`
or `other`. One function, so one classifier can replace it (pgle.xla.hlo_names names the
collective families)."""

from __future__ import annotations

from pgle.estimate.hlo import Instruction
from pgle.xla import hlo_names

COLLECTIVE = "collective"
HOST_COPY = "host_copy"
COMPUTE = "compute"
OTHER = "other"
KINDS = (COLLECTIVE, HOST_COPY, COMPUTE, OTHER)

# Bookkeeping and control flow: no kernel of their own (XLA:GPU's latency estimators give
# them no cost; gpu_latency_estimator.cc's IsNopInstruction, 2026).
NOPS = frozenset(
    {
        "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
        "partition-id", "replica-id", "opt-barrier", "add-dependency", "while", "conditional",
        "call", "domain",
    }
)  # fmt: skip
_COLLECTIVE_OPCODES = (
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-permute", "collective-broadcast", "send", "recv",
)  # fmt: skip
_HOST_TARGETS = ("MoveToHost", "MoveToDevice")


def kind_of(ins: Instruction) -> str:
    op = ins.opcode
    base = op.removesuffix("-start").removesuffix("-done")
    if base in _COLLECTIVE_OPCODES:
        return COLLECTIVE
    if op in ("async-start", "async-done", "async-update"):
        return COLLECTIVE if hlo_names.kind(ins.name)[0] == COLLECTIVE else COMPUTE
    if op in ("copy-start", "copy-done"):
        # S(5): host memory space (XLA's memory_space_assignment, host offloading)
        return HOST_COPY if "S(5)" in ins.shape or "S(5)" in ins.attrs else COMPUTE
    if op == "custom-call" and any(t in ins.attrs for t in _HOST_TARGETS):
        return HOST_COPY
    if op in NOPS:
        return OTHER
    return COMPUTE


def family(ins: Instruction) -> str | None:
    """The collective's opcode family (`all-gather`), or None."""
    base = ins.opcode.removesuffix("-start").removesuffix("-done")
    if base in _COLLECTIVE_OPCODES:
        return base
    kind, fam = hlo_names.kind(ins.name)
    return fam if kind == COLLECTIVE else None
