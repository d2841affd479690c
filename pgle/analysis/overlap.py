"""Exposed vs hidden communication per step, from a kept trace.

Two shapes of device plane exist:
- GPU traces as JAX writes them: one line per CUDA stream, one event per kernel, each with
  an `hlo_op` stat. A collective runs as its own kernel (NCCL) on a communication stream,
  named by the `*-start` (or synchronous) instruction that launched it. Its time counts as
  hidden where compute kernels of the same device run at the same moment, else exposed.
- Planes with an "XLA Ops" line (TPU, and traces xprof has post-processed): the async op's
  window comes from the "Async XLA Ops" line, else from pairing `<op>-start`/`<op>-done`;
  coverage is by the other "XLA Ops" events. This follows xprof 2.24's
  `analyze_async_overlap` (xprof/cli/internal/async_overlap.py) so the two can be checked
  against each other on one trace (tests/test_report_overlap.py).

Steps: the host's StepTraceAnnotation events; step k owns the device time from its start
to the next step's start (device work runs behind the host, so a step's first kernels can
fall in the previous window: per-step numbers are approximate, totals are exact).
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from pgle.analysis.intervals import Coverage, merge
from pgle.analysis.timeline import DevicePlane, HostStep

COLLECTIVE_RE = re.compile(
    r"^%?(all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all|ragged-all-to-all|"
    r"collective-broadcast|send|recv)(?:-start|-done)?(?:[.\-]\d+)*(?:\s|$)")
ASYNC_ROLE_RE = re.compile(r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$")
XLA_OPS_LINES = ("XLA Ops", "Sparse Core Ops")
ASYNC_OPS_LINE = "Async XLA Ops"
MEMCPY_RE = re.compile(r"(?i)memcpy|memset")
PER_OP_MAX = 500  # collectives listed per trace (a step rarely runs more distinct ones)


def collective_kind(op: str) -> str | None:
    """`all-gather` for `all-gather-start.3`; None for anything that is not a collective."""
    m = COLLECTIVE_RE.match(op)
    if m:
        return m.group(1)
    if "nccl" in op.lower():
        return "nccl"
    return None


def _instruction(name: str) -> str:
    name = name.strip()
    return name[1:].split(" = ", 1)[0].strip() if name.startswith("%") else name


def _windows(plane: DevicePlane) -> tuple[list[tuple], list[tuple[int, int]], str]:
    """(communication windows (op, module, start, end), compute intervals, source)."""
    idx = range(len(plane.ops))
    if any(plane.lines[i] in XLA_OPS_LINES for i in idx):
        ops = [i for i in idx if plane.lines[i] in XLA_OPS_LINES]
        compute = [(plane.starts[i], plane.starts[i] + plane.durations[i]) for i in ops
                   if not ASYNC_ROLE_RE.match(_instruction(plane.ops[i]))]
        asyncs = [i for i in idx if plane.lines[i] == ASYNC_OPS_LINE]
        if asyncs:
            wins = [(_instruction(plane.ops[i]), plane.modules[i], plane.starts[i],
                     plane.starts[i] + plane.durations[i]) for i in asyncs]
            return wins, compute, ASYNC_OPS_LINE
        open_: dict[str, list[int]] = {}
        wins = []
        for i in sorted(ops, key=lambda i: plane.starts[i]):
            m = ASYNC_ROLE_RE.match(_instruction(plane.ops[i]))
            if not m:
                continue
            key = m["base"] + (m["n"] or "")
            if m["role"] == "start":
                open_.setdefault(key, []).append(i)
            elif open_.get(key):
                s = open_[key].pop(0)
                wins.append((_instruction(plane.ops[s]), plane.modules[s], plane.starts[s],
                             plane.starts[i] + plane.durations[i]))
        return wins, compute, "start_done_pairs"
    wins, compute = [], []
    for i in idx:
        if plane.lines[i] == ASYNC_OPS_LINE:
            continue
        op = plane.ops[i]
        span = (plane.starts[i], plane.starts[i] + plane.durations[i])
        if collective_kind(op):
            wins.append((op, plane.modules[i], *span))
        elif not MEMCPY_RE.search(op) and not MEMCPY_RE.search(plane.lines[i]):
            compute.append(span)
    return wins, compute, "kernels"


class OverlapAccumulator:
    """Adds device planes one at a time; `result()` gives totals, per step and top ops."""

    def __init__(self, steps: list[HostStep], top: int = 10):
        self.steps = steps
        self.step_starts = [s.start_ps for s in steps]
        self.top = top
        self.planes = 0
        self.span = self.exposed = self.count = 0
        self.sources: set[str] = set()
        self.by_kind: dict[str, list[int]] = {}
        self.by_op: dict[tuple[str, str | None], list[int]] = {}
        self.per_step: dict[int, list[int]] = {}

    def _step_of(self, t: int) -> int | None:
        k = bisect.bisect_right(self.step_starts, t) - 1
        if k < 0:
            return None
        if k == len(self.steps) - 1 and t >= self.steps[k].end_ps:
            return None
        return self.steps[k].step_num

    def add(self, plane: DevicePlane) -> None:
        wins, compute, source = _windows(plane)
        self.planes += 1
        if not wins:
            return
        self.sources.add(source)
        cover = Coverage(merge(compute))
        for op, module, lo, hi in wins:
            span = hi - lo
            if span <= 0:
                continue
            exposed = span - cover.covered(lo, hi)
            kind = collective_kind(op) or (ASYNC_ROLE_RE.match(op)["base"].split(".")[0]
                                          if ASYNC_ROLE_RE.match(op) else op)
            self.count += 1
            self.span += span
            self.exposed += exposed
            for table, key in ((self.by_kind, kind), (self.by_op, (op, module))):
                row = table.setdefault(key, [0, 0, 0])
                row[0] += 1
                row[1] += span
                row[2] += exposed
            step = self._step_of(lo)
            if step is not None:
                row = self.per_step.setdefault(step, [0, 0])
                row[0] += span
                row[1] += exposed

    def result(self) -> dict[str, Any]:
        n = max(self.planes, 1)
        top = sorted(self.by_op.items(), key=lambda kv: -kv[1][2])[: self.top]
        return {
            "device_planes": self.planes,
            "window_source": sorted(self.sources),
            "collectives": self.count,
            "span_ps": self.span,
            "exposed_ps": self.exposed,
            "hidden_ps": self.span - self.exposed,
            "hidden_fraction": (1 - self.exposed / self.span) if self.span else None,
            "by_kind": {k: {"count": v[0], "span_ps": v[1], "exposed_ps": v[2]}
                        for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1][2])},
            "top_exposed": [{"op": op, "module": module, "count": v[0], "span_ps": v[1],
                             "exposed_ps": v[2]} for (op, module), v in top],
            # Every collective (HLO op, module), most exposed first: `pgle report` sets the
            # runs without and with the profile side by side, per collective.
            "per_op": [{"op": op, "module": module, "count": v[0], "span_ps": v[1],
                        "exposed_ps": v[2]}
                       for (op, module), v in sorted(self.by_op.items(),
                                                     key=lambda kv: -kv[1][2])[:PER_OP_MAX]],
            # Per step and per device (averaged over the device planes).
            "per_step": [{"step": s, "span_ps": v[0] / n, "exposed_ps": v[1] / n}
                         for s, v in sorted(self.per_step.items())],
        }
