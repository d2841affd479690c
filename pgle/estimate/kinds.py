"""An instruction's kind in `pgle estimate`'s schedules: `collective`, `host_copy`, `compute`
or `other`, from the one classifier (pgle.xla.instruction_kinds), with what a schedule adds:
bookkeeping instructions that run no kernel are `other`."""

from __future__ import annotations

from pgle.xla import instruction_kinds
from pgle.xla.hlo_text import Instruction
from pgle.xla.instruction_kinds import COLLECTIVE, COMPUTE, HOST_COPY, OTHER

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


def classify(ins: Instruction) -> instruction_kinds.Kind:
    wrapped = None
    if ins.opcode in ("async-start", "async-done", "async-update"):
        wrapped = instruction_kinds.classify(ins.name)  # XLA names it after what it wraps
    return instruction_kinds.classify_instruction(ins, wrapped)


def kind_of(ins: Instruction) -> str:
    if ins.opcode in NOPS:
        return OTHER
    return classify(ins).category


def family(ins: Instruction) -> str | None:
    """The collective's family (`all-gather`), or None."""
    k = classify(ins)
    return k.family if k.category == COLLECTIVE else None
