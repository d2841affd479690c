"""The latency-hiding scheduler's own statistics, read from XLA's log
(`TF_CPP_VMODULE=latency_hiding_scheduler=1`; latency_hiding_scheduler.cc, VLOG 1). Per
scheduled computation, as printed by jax 0.10.2 (also seen on 0.8.3, 0.11.2, 0.12.0.1):

    I... latency_hiding_scheduler.cc:4268] [latency-hiding-scheduler] Statistics before scheduling:
    I... latency_hiding_scheduler.cc:4271] Total wasted cycles: 95.7108
    I... latency_hiding_scheduler.cc:4271] Wasted cycles for all-reduce: 50.0583
    ...
    I... latency_hiding_scheduler.cc:4271] Total cycles: 134.936

Some versions print `For computation: NAME, module M(ID)` first. A "before" block is followed
by its computation's "after" block (LatencyHidingScheduler::Run); computations come callees
first, the entry last (MakeNonfusionComputations' post order).
"""

from __future__ import annotations

import dataclasses
import re

_OPEN = re.compile(r"Statistics (before|after) scheduling:\s*$")
_FOR = re.compile(r"^For computation: ([\w.\-]+), module ([\w.\-]+)")
_TOTAL = re.compile(r"^Total cycles: ([0-9.eE+\-]+|inf|nan)\s*$")
_WASTED = re.compile(r"^Total wasted cycles: ([0-9.eE+\-]+|inf|nan)\s*$")
_PER = re.compile(r"^Wasted cycles for ([\w\- ]+): ([0-9.eE+\-]+)\s*$")


@dataclasses.dataclass
class Block:
    phase: str  # before | after
    total_cycles: float | None = None
    wasted_cycles: float | None = None
    wasted_by: dict[str, float] = dataclasses.field(default_factory=dict)
    computation: str | None = None
    module: str | None = None


@dataclasses.dataclass
class Statistics:
    """One computation's statistics before and after scheduling."""

    before: Block
    after: Block

    def to_dict(self) -> dict[str, float | str | None]:
        return {
            "computation": self.after.computation or self.before.computation,
            "total_cycles_before": self.before.total_cycles,
            "wasted_cycles_before": self.before.wasted_cycles,
            "total_cycles_after": self.after.total_cycles,
            "wasted_cycles_after": self.after.wasted_cycles,
        }


def _body(line: str) -> str:
    # glog/absl prefix `I1128 17:14:24.741574 25332 file.cc:4268] `; a bare line stays as is
    head, sep, tail = line.partition("] ")
    if sep and re.match(r"^[IWEF]\d{4}|^\d{4}-\d\d-\d\d", head.strip()):
        line = tail
    return line.replace("[latency-hiding-scheduler]", "").strip()


def parse_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    cur: Block | None = None
    for raw in text.splitlines():
        body = _body(raw)
        m = _OPEN.search(body)
        if m:
            cur = Block(m.group(1))
            blocks.append(cur)
            continue
        if cur is None:
            continue
        if m := _FOR.match(body):
            cur.computation, cur.module = m.group(1), m.group(2)
        elif m := _WASTED.match(body):
            cur.wasted_cycles = float(m.group(1))
        elif m := _PER.match(body):
            cur.wasted_by[m.group(1)] = float(m.group(2))
        elif m := _TOTAL.match(body):
            cur.total_cycles = float(m.group(1))
            cur = None  # the block's last line
    return [b for b in blocks if b.total_cycles is not None]


def parse(text: str) -> list[Statistics]:
    """Before/after pairs in log order."""
    out: list[Statistics] = []
    pending: Block | None = None
    for block in parse_blocks(text):
        if block.phase == "before":
            pending = block
        elif pending is not None:
            out.append(Statistics(pending, block))
            pending = None
    return out
