"""Trace and run diagnostics that defeat PGLE: recompilation after warm-up, idle device gaps
between steps (host-bound input), host<->device copies inside the step."""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from pgle.analysis.intervals import merge
from pgle.analysis.timeline import DevicePlane, HostStep, relative_ps
from pgle.evidence.event_kinds import Compile
from pgle.evidence.events import Step

HOST_COPY_RE = re.compile(
    r"(?i)memcpy.?(h2d|d2h|htod|dtoh)|(h2d|d2h|htod|dtoh).?memcpy|"
    r"memcpy.*(host.?to.?device|device.?to.?host)"
)
# A device gap counts as idle when it is longer than this share of the median step.
IDLE_FRACTION = 0.05


def recompilations(compiles: Sequence[Compile], steps: Sequence[Step]) -> list[dict[str, Any]]:
    """Compilations that happened after the first step finished warming up (step 1 began):
    every step from then on should reuse compiled executables; one that compiles again has
    unstable shapes, retraces, or changed static arguments, and loses its PGLE schedule."""
    if len(steps) < 2:
        return []
    warm = steps[1].t_enter
    late: dict[str, dict[str, Any]] = {}
    for c in compiles:
        if c.t >= warm:
            row = late.setdefault(
                c.fun_name or "?", {"function": c.fun_name, "count": 0, "seconds": 0.0}
            )
            row["count"] += 1
            row["seconds"] += c.seconds or 0.0
    return sorted(late.values(), key=lambda r: -r["seconds"])


class TraceDiagnostics:
    """Idle gaps and host copies, one device plane at a time (numpy columns: linear in the
    plane's events and the steps; a step-by-step scan per gap was quadratic, issue 25)."""

    def __init__(self, steps: list[HostStep]):
        self.steps = steps
        durations = [b.start_ps - a.start_ps for a, b in itertools.pairwise(steps)]
        self.median_step_ps = statistics.median(durations) if durations else None
        self.gap_count = 0
        self.gaps_between_steps = 0
        # The largest gaps so far: (gap, order of finding, row); at most LARGEST of them.
        self.largest: list[tuple[int, int, dict[str, Any]]] = []
        self.idle_ps = 0
        self.window_ps = 0
        self.copies: dict[str, list[int]] = {}
        self.planes = 0

    def add(self, plane: DevicePlane) -> None:
        self.planes += 1
        origin = plane.origin_ps
        if self.steps:
            lo_abs, hi_abs = self.steps[0].start_ps, self.steps[-1].end_ps
        elif len(plane):
            lo_abs = int(plane.start.min()) + origin
            hi_abs = int((plane.start + plane.duration).max()) + origin
        else:
            return
        lo, hi = (int(x) for x in relative_ps([lo_abs, hi_abs], origin))
        start, end = plane.start, plane.start + plane.duration
        not_async = np.array([n != "Async XLA Ops" for n in plane.line_names], bool)
        busy = (
            not_async[plane.line] & (end > lo) & (start < hi)
            if plane.line_names
            else np.zeros(len(plane), bool)
        )
        b_lo, b_hi = merge(start[busy], end[busy])
        threshold = IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0
        self.window_ps += hi_abs - lo_abs
        # gap > threshold, exactly: gaps are integers, so compare with the threshold's floor.
        gap_start, gap = b_hi[:-1], b_lo[1:] - b_hi[:-1]
        idle = np.flatnonzero(gap > math.floor(threshold))
        if idle.size:
            g_start, g_end, g = gap_start[idle], b_lo[1:][idle], gap[idle]
            self.idle_ps += int(g.sum())
            # A gap lies between steps when a step starts inside it (ends included).
            if self.steps:
                starts = relative_ps([s.start_ps for s in self.steps], origin)
                k = np.searchsorted(starts, g_start, side="left")
                between = (k < starts.size) & (starts[np.minimum(k, starts.size - 1)] <= g_end)
            else:
                between = np.zeros(g.size, bool)
            self.gaps_between_steps += int(between.sum())
            top = np.lexsort((np.arange(g.size), -g))[:LARGEST]
            for i in top.tolist():
                self.largest.append(
                    (
                        int(g[i]),
                        self.gap_count + i,
                        {
                            "device": plane.name,
                            "start_ps": int(g_start[i]) + origin,
                            "gap_ps": int(g[i]),
                            "between_steps": bool(between[i]),
                        },
                    )
                )
            self.largest.sort(key=lambda row: (-row[0], row[1]))
            del self.largest[LARGEST:]
            self.gap_count += int(g.size)
        # Host copies inside the window, per kind; kinds in the order they first appear.
        kind_of = (
            np.array(
                [COPY_KINDS.index(k) if k else -1 for k in map(_copy_kind, plane.texts)], np.int64
            )
            if plane.texts
            else np.zeros(0, np.int64)
        )
        ev_kind = kind_of[plane.op] if len(plane) else np.zeros(0, np.int64)
        hit = np.flatnonzero((ev_kind >= 0) & (start >= lo) & (start < hi))
        if hit.size:
            for k, count, time_ps in _copy_totals(ev_kind[hit], plane.duration[hit]):
                row = self.copies.setdefault(COPY_KINDS[k], [0, 0])
                row[0] += count
                row[1] += time_ps

    def result(self) -> dict[str, Any]:
        steps = max(len(self.steps), 1)
        return {
            "idle_threshold_ps": IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0,
            "idle_ps": self.idle_ps,
            "idle_fraction": self.idle_ps / self.window_ps if self.window_ps else None,
            "gaps_between_steps": self.gaps_between_steps,
            "largest_gaps": [row for _, _, row in self.largest],
            "host_copies": {
                k: {"count": v[0], "time_ps": v[1], "per_step": v[0] / steps}
                for k, v in self.copies.items()
            },
        }


LARGEST = 5
COPY_KINDS = ("host to device", "device to host")


def _copy_totals(kinds: np.ndarray, durations: np.ndarray):
    """(kind, count, summed duration) per kind present, in order of first appearance."""
    out = []
    for k in range(len(COPY_KINDS)):
        where = np.flatnonzero(kinds == k)
        if where.size:
            out.append((int(where[0]), k, int(where.size), int(durations[where].sum())))
    return [row[1:] for row in sorted(out)]


def _copy_kind(op: str) -> str | None:
    m = HOST_COPY_RE.search(op)
    if not m:
        return None
    return "host to device" if re.search(r"(?i)h2d|htod|host.?to", m.group(0)) else "device to host"
