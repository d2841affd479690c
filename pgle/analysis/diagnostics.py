"""Trace and run diagnostics that defeat PGLE: recompilation after warm-up, idle device gaps
between steps (host-bound input), host<->device copies inside the step."""

from __future__ import annotations

import re
import statistics
from typing import Any

from pgle.analysis.intervals import merge
from pgle.analysis.timeline import DevicePlane, HostStep

HOST_COPY_RE = re.compile(r"(?i)memcpy.?(h2d|d2h|htod|dtoh)|(h2d|d2h|htod|dtoh).?memcpy|"
                          r"memcpy.*(host.?to.?device|device.?to.?host)")
# A device gap counts as idle when it is longer than this share of the median step.
IDLE_FRACTION = 0.05


def recompilations(compiles: list[dict], steps: list) -> list[dict[str, Any]]:
    """Compilations that happened after the first step finished warming up (step 1 began):
    every step from then on should reuse compiled executables; one that compiles again has
    unstable shapes, retraces, or changed static arguments, and loses its PGLE schedule."""
    if len(steps) < 2:
        return []
    warm = steps[1].t_enter
    late: dict[str, dict[str, Any]] = {}
    for c in compiles:
        if c.get("t", 0) >= warm:
            row = late.setdefault(c.get("fun_name") or "?", {"function": c.get("fun_name"),
                                                            "count": 0, "seconds": 0.0})
            row["count"] += 1
            row["seconds"] += c.get("seconds") or 0.0
    return sorted(late.values(), key=lambda r: -r["seconds"])


class TraceDiagnostics:
    """Idle gaps and host copies, one device plane at a time."""

    def __init__(self, steps: list[HostStep]):
        self.steps = steps
        durations = [b.start_ps - a.start_ps for a, b in zip(steps, steps[1:])]
        self.median_step_ps = statistics.median(durations) if durations else None
        self.gaps: list[dict[str, Any]] = []
        self.idle_ps = 0
        self.window_ps = 0
        self.copies: dict[str, list[int]] = {}
        self.planes = 0

    def add(self, plane: DevicePlane) -> None:
        self.planes += 1
        if self.steps:
            lo, hi = self.steps[0].start_ps, self.steps[-1].end_ps
        elif plane.starts:
            lo, hi = min(plane.starts), max(s + d for s, d in zip(plane.starts, plane.durations))
        else:
            return
        busy = merge((s, s + d) for s, d, line in zip(plane.starts, plane.durations, plane.lines)
                     if line != "Async XLA Ops" and s + d > lo and s < hi)
        threshold = IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0
        self.window_ps += hi - lo
        if busy:
            for (_, end), (start, _) in zip(busy, busy[1:]):
                gap = start - end
                if gap > threshold:
                    self.idle_ps += gap
                    self.gaps.append({"device": plane.name, "start_ps": end, "gap_ps": gap,
                                      "between_steps": any(end <= s.start_ps <= start
                                                           for s in self.steps)})
        for op, s, d in zip(plane.ops, plane.starts, plane.durations):
            if HOST_COPY_RE.search(op) and lo <= s < hi:
                m = HOST_COPY_RE.search(op)
                kind = "host to device" if re.search(r"(?i)h2d|htod|host.?to", m.group(0)) \
                    else "device to host"
                row = self.copies.setdefault(kind, [0, 0])
                row[0] += 1
                row[1] += d

    def result(self) -> dict[str, Any]:
        steps = max(len(self.steps), 1)
        return {
            "idle_threshold_ps": IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0,
            "idle_ps": self.idle_ps,
            "idle_fraction": self.idle_ps / self.window_ps if self.window_ps else None,
            "gaps_between_steps": sum(1 for g in self.gaps if g["between_steps"]),
            "largest_gaps": sorted(self.gaps, key=lambda g: -g["gap_ps"])[:5],
            "host_copies": {k: {"count": v[0], "time_ps": v[1], "per_step": v[0] / steps}
                            for k, v in self.copies.items()},
        }
