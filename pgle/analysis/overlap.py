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

import re
from typing import Any

import numpy as np

from pgle.analysis.intervals import Coverage, merge
from pgle.analysis.timeline import DevicePlane, HostStep, relative_ps
from pgle.xla import instruction_kinds

COLLECTIVE_RE = re.compile(
    r"^%?(all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all|ragged-all-to-all|"
    r"collective-broadcast|send|recv)(?:-start|-done)?(?:[.\-]\d+)*(?:\s|$)"
)
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
    # The classifier verify and inspect use (issue 32): JAX's spellings too (`psum.3`, and on
    # jax >= 0.11 `all_gather.3.2` for a collective XLA made synchronous, `psum_invariant.7`).
    head = op.lstrip("%").split(maxsplit=1)
    kind = instruction_kinds.classify(head[0]) if head else None
    if kind is not None and kind.category == instruction_kinds.COLLECTIVE and kind.family:
        return kind.family
    if "nccl" in op.lower():
        return "nccl"
    return None


def _kind(op: str) -> str:
    """The table key of a window's op: its collective, else the async op's base name."""
    m = ASYNC_ROLE_RE.match(op)
    return collective_kind(op) or (m["base"].split(".")[0] if m else op)


def _totals(keys: np.ndarray, span: np.ndarray, exposed: np.ndarray):
    """(key, count, span sum, exposed sum) per distinct key, keys in first-seen order, as
    Python ints (sums in int64: exact, unlike np.bincount's float64)."""
    distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    counts = np.bincount(inverse, minlength=distinct.size)
    span_sum = np.zeros(distinct.size, np.int64)
    exposed_sum = np.zeros(distinct.size, np.int64)
    np.add.at(span_sum, inverse, span)
    np.add.at(exposed_sum, inverse, exposed)
    return zip(
        distinct[order].tolist(),
        counts[order].tolist(),
        span_sum[order].tolist(),
        exposed_sum[order].tolist(),
        strict=False,
    )


def _instruction(name: str) -> str:
    name = name.strip()
    return name[1:].split(" = ", 1)[0].strip() if name.startswith("%") else name


class _Windows:
    """A plane's communication windows (in the order the per-event reading found them) and
    its compute intervals, as columns: `op` indexes `names` (the window's op as shown)."""

    def __init__(self, names: list[str], op, module, lo, hi, compute_lo, compute_hi, source: str):
        self.names, self.op, self.module, self.lo, self.hi = names, op, module, lo, hi
        self.compute_lo, self.compute_hi, self.source = compute_lo, compute_hi, source


def _text_flags(texts: list[str], test) -> np.ndarray:
    return np.array([bool(test(t)) for t in texts], bool) if texts else np.zeros(0, bool)


def _windows(plane: DevicePlane) -> _Windows:
    """The communication windows and compute intervals of one plane (see the module docstring)."""
    end = plane.start + plane.duration

    def line_is(names):
        return _text_flags(plane.line_names, lambda n: n in names)[plane.line]

    on_ops = line_is(XLA_OPS_LINES) if plane.line_names else np.zeros(len(plane), bool)
    on_async = line_is((ASYNC_OPS_LINE,)) if plane.line_names else np.zeros(len(plane), bool)
    if on_ops.any():
        # Each text once: its instruction name, and whether that is an async start/done.
        instr = [_instruction(t) for t in plane.texts]
        role = _text_flags(instr, ASYNC_ROLE_RE.match)
        ops = np.flatnonzero(on_ops)
        compute = ops[~role[plane.op[ops]]]
        names = _Names()
        asyncs = np.flatnonzero(on_async)
        if asyncs.size:
            starts = dones = asyncs
            source = ASYNC_OPS_LINE
        else:
            starts, dones = _pair_starts_and_dones(plane, ops, instr)
            source = "start_done_pairs"
        ids = names.of([instr[t] for t in range(len(plane.texts))])
        return _Windows(
            names.list,
            ids[plane.op[starts]],
            plane.module[starts],
            plane.start[starts],
            end[dones],
            plane.start[compute],
            end[compute],
            source,
        )
    kind = _text_flags(plane.texts, collective_kind)
    memcpy_text = _text_flags(plane.texts, MEMCPY_RE.search)
    memcpy_line = _text_flags(plane.line_names, MEMCPY_RE.search)
    keep = ~on_async
    is_win = keep & kind[plane.op]
    is_compute = keep & ~kind[plane.op] & ~memcpy_text[plane.op] & ~memcpy_line[plane.line]
    w = np.flatnonzero(is_win)
    c = np.flatnonzero(is_compute)
    return _Windows(
        plane.texts,
        plane.op[w],
        plane.module[w],
        plane.start[w],
        end[w],
        plane.start[c],
        end[c],
        "kernels",
    )


class _Names:
    """Window op names, each once: `of(texts)` maps texts to their numbers."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def of(self, texts: list[str]) -> np.ndarray:
        return (
            np.array([self.ids.setdefault(t, len(self.ids)) for t in texts], np.int64)
            if texts
            else np.zeros(0, np.int64)
        )

    @property
    def list(self) -> list[str]:
        return list(self.ids)


def _pair_starts_and_dones(plane: DevicePlane, ops: np.ndarray, instr: list[str]):
    """Indices of (start, done) events paired as a queue per async op: in time order (ties in
    plane order), each `-done` takes the earliest `-start` of the same op still open; a done
    with none open is ignored. Returned in the order the dones come."""
    key_of: dict[str, int] = {}
    key = np.full(len(plane.texts), -1, np.int64)
    is_start = np.zeros(len(plane.texts), bool)
    for t, name in enumerate(instr):
        m = ASYNC_ROLE_RE.match(name)
        if m:
            key[t] = key_of.setdefault(m["base"] + (m["n"] or ""), len(key_of))
            is_start[t] = m["role"] == "start"
    ops = ops[np.argsort(plane.start[ops], kind="stable")]
    ops = ops[key[plane.op[ops]] >= 0]
    if not ops.size:
        return ops, ops
    k = key[plane.op[ops]]
    # Group by op, time order kept within each; rank = time-order position of the event.
    by = np.argsort(k, kind="stable")
    ev, kk = ops[by], k[by]
    starts = is_start[plane.op[ev]].astype(np.int64)
    dones = 1 - starts
    group_first = np.flatnonzero(np.r_[True, kk[1:] != kk[:-1]])
    group_of = np.repeat(np.arange(group_first.size), np.diff(np.r_[group_first, kk.size]))

    def in_group_cumsum(x):
        c = np.cumsum(x)
        return c - (c - x)[group_first][group_of]

    s_count = in_group_cumsum(starts)
    d_count = in_group_cumsum(dones)
    # Dones served after event i: M_i = min(S_i, M_{i-1} + 1) at a done, unchanged at a start;
    # unrolled, M_i = D_i + min(0, min_{j<=i} (S_j - D_j)) (S, D: starts, dones so far).
    slack = s_count - d_count
    big = 2 * int(kk.size) + 2  # per-group offset: the cumulative minimum restarts per group
    run_min = np.minimum.accumulate(slack - group_of * big) + group_of * big
    served = d_count + np.minimum(run_min, 0)  # 0: nothing served before the group starts
    prev = np.r_[0, served[:-1]]
    prev[group_first] = 0
    took = (dones == 1) & (served > prev)
    # The n-th done served in a group takes the group's n-th start (starts are in group, then
    # time order already).
    start_rank = np.flatnonzero(starts == 1)
    start_base = np.searchsorted(group_of[start_rank], np.arange(group_first.size))
    d_idx = np.flatnonzero(took)
    pairs_start = ev[start_rank[start_base[group_of[d_idx]] + served[d_idx] - 1]]
    pairs_done = ev[d_idx]
    # In the order the dones come in time.
    when = np.argsort(by[d_idx], kind="stable")
    return pairs_start[when], pairs_done[when]


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

    def _step_index(self, plane: DevicePlane, t: np.ndarray) -> np.ndarray:
        """Index into self.steps of the step each time falls in (-1: none): the last step
        starting at or before it, unless it is past the end of the last step."""
        if not self.steps:
            return np.full(t.size, -1, np.int64)
        rel = relative_ps(self.step_starts, plane.origin_ps)
        k = np.searchsorted(rel, t, side="right") - 1
        last_end = relative_ps([self.steps[-1].end_ps], plane.origin_ps)[0]
        k[(k == len(self.steps) - 1) & (t >= last_end)] = -1
        return k

    def add(self, plane: DevicePlane) -> None:
        w = _windows(plane)
        self.planes += 1
        if not w.lo.size:
            return
        self.sources.add(w.source)
        span = w.hi - w.lo
        ok = span > 0
        op, module, lo, hi, span = w.op[ok], w.module[ok], w.lo[ok], w.hi[ok], span[ok]
        exposed = span - Coverage(merge(w.compute_lo, w.compute_hi)).covered(lo, hi)
        self.count += int(span.size)
        self.span += int(span.sum())
        self.exposed += int(exposed.sum())
        # Each op name's kind once; tables keep the order in which their keys first appear
        # (ties in the top lists keep it), as the per-window loop did.
        kind_names = _Names()
        kind = kind_names.of([_kind(name) for name in w.names])[op]
        width = len(plane.texts) + 1  # module -1 (none) .. len(texts) - 1
        tables: tuple[tuple[dict[Any, list[int]], Any, Any], ...] = (
            (self.by_kind, kind, lambda key: kind_names.list[key]),
            (
                self.by_op,
                op * width + module + 1,
                lambda key: (
                    w.names[key // width],
                    plane.texts[key % width - 1] if key % width else None,
                ),
            ),
        )
        for table, keys, key_of in tables:
            for key, count, sp, ex in _totals(keys, span, exposed):
                row = table.setdefault(key_of(key), [0, 0, 0])
                row[0] += count
                row[1] += sp
                row[2] += ex
        k = self._step_index(plane, lo)
        has = k >= 0
        if has.any():
            nums = np.array([s.step_num for s in self.steps], np.int64)[k[has]]
            for num, _, sp, ex in _totals(nums, span[has], exposed[has]):
                row = self.per_step.setdefault(num, [0, 0])
                row[0] += sp
                row[1] += ex

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
            "by_kind": {
                k: {"count": v[0], "span_ps": v[1], "exposed_ps": v[2]}
                for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1][2])
            },
            "top_exposed": [
                {"op": op, "module": module, "count": v[0], "span_ps": v[1], "exposed_ps": v[2]}
                for (op, module), v in top
            ],
            # Every collective (HLO op, module), most exposed first: `pgle report` sets the
            # runs without and with the profile side by side, per collective.
            "per_op": [
                {"op": op, "module": module, "count": v[0], "span_ps": v[1], "exposed_ps": v[2]}
                for (op, module), v in sorted(self.by_op.items(), key=lambda kv: -kv[1][2])[
                    :PER_OP_MAX
                ]
            ],
            # Per step and per device (averaged over the device planes).
            "per_step": [
                {"step": s, "span_ps": v[0] / n, "exposed_ps": v[1] / n}
                for s, v in sorted(self.per_step.items())
            ],
        }
