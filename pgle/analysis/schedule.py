"""The schedule change: what XLA placed between each async op's start and done.

Input is the optimized, scheduled HLO text of one module (`compiled.as_text()`, XLA's
`*after_optimizations.txt` dump, or the `hlo/` files pgle keeps in a run folder): within a
computation, instructions are listed in schedule order (XLA prints a scheduled module in
sequence order). For each async pair (`all-gather-start` ... `all-gather-done`, `send` ...
`send-done`, `async-start` ... `async-done`) the instructions between start and done are the
work the latency-hiding scheduler chose to overlap with the transfer. Comparing the module
compiled without and with a profile says which collectives PGLE moved, and how much work it
put behind each. Checked on jax 0.10.2 deviceless XLA:GPU compiles (tests/test_report_schedule.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pgle.errors import BadInput
from pgle.xla import hlo_text, instruction_kinds

# Instructions that cost nothing on the device: never counted as overlapped work.
FREE_OPCODES = frozenset(
    {
        "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
        "opt-barrier", "partition-id", "replica-id",
    }
)  # fmt: skip
ASYNC_STARTS = {"send": "send-done", "recv": "recv-done"}


@dataclasses.dataclass
class AsyncPair:
    computation: str
    start: str
    done: str
    kind: str  # all-gather, all-reduce, ...
    between: list[str]  # work placed between start and done, in schedule order
    start_position: int
    done_position: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"overlapped_ops": len(self.between)}


def _kind(
    start: hlo_text.Instruction, kind: instruction_kinds.Kind, module: hlo_text.Module
) -> str:
    """A collective's family (one classifier: an async Triton collective fusion of jax >= 0.11
    is the all-reduce it runs), else what the wrapper runs, else the opcode."""
    if kind.category == instruction_kinds.COLLECTIVE and kind.family:
        return kind.family
    wrapped = module.computations.get(start.attribute("calls") or "")
    if start.opcode == "async-start" and wrapped is not None:
        inner = [i.opcode for i in wrapped.instructions if i.opcode not in FREE_OPCODES]
        if inner:
            return inner[-1]
    return start.opcode.removesuffix("-start")


def async_pairs(text: str) -> list[AsyncPair]:
    """Every async start/done pair of every computation, with the work scheduled between."""
    module = hlo_text.parse(text)
    if not module.computations:
        raise BadInput(
            "the HLO text holds no computation (expected XLA's optimized HLO, "
            "as `compiled.as_text()` prints it)."
        )
    pairs = []
    for comp in module.computations.values():
        instrs = comp.instructions
        position = {i.name: k for k, i in enumerate(instrs)}
        for k, ins in enumerate(instrs):
            is_done = ins.opcode.endswith("-done")
            if not is_done or not ins.operands or ins.operands[0] not in position:
                continue
            s = position[ins.operands[0]]
            start = instrs[s]
            if not (start.opcode.endswith("-start") or start.opcode in ASYNC_STARTS):
                continue
            between = [
                i.name
                for i in instrs[s + 1 : k]
                if i.opcode not in FREE_OPCODES and not i.opcode.endswith("-done")
            ]
            kind = _kind(start, instruction_kinds.kind_in(module, start), module)
            pairs.append(AsyncPair(comp.name, start.name, ins.name, kind, between, s, k))
    return pairs


def compare(before_text: str, after_text: str) -> dict[str, Any]:
    """Per async pair, the work between start and done without (before) and with (after) the
    profile; pairs are matched by start name, which one program keeps across profiles."""
    before = {(p.computation, p.start): p for p in async_pairs(before_text)}
    after = {(p.computation, p.start): p for p in async_pairs(after_text)}
    rows: list[dict[str, Any]] = []
    for key in list(before) + [k for k in after if k not in before]:
        b, a = before.get(key), after.get(key)
        pair = a or b
        assert pair is not None  # key comes from before or after
        row: dict[str, Any] = {
            "computation": key[0],
            "start": key[1],
            "kind": pair.kind,
            "before": b.between if b else None,
            "after": a.between if a else None,
        }
        if a and b:
            row["moved"] = a.between != b.between
            row["overlap_change"] = len(a.between) - len(b.between)
            # Sets, not list membership: one collective spanning 30k ops took seconds (issue 25).
            in_a, in_b = set(a.between), set(b.between)
            row["added"] = [n for n in a.between if n not in in_b]
            row["removed"] = [n for n in b.between if n not in in_a]
        else:
            row["moved"] = True
            row["overlap_change"] = None
        rows.append(row)
    moved = [r for r in rows if r["moved"]]
    return {
        "pairs": rows,
        "pair_count": len(rows),
        "moved_count": len(moved),
        "more_overlap": sum(1 for r in moved if (r["overlap_change"] or 0) > 0),
        "less_overlap": sum(1 for r in moved if (r["overlap_change"] or 0) < 0),
    }
