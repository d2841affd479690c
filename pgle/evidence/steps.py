"""Step-time statistics from the harness's step events.

A step's time is the interval between the starts of consecutive steps: with
async dispatch the host runs ahead, so start-to-start is the throughput the
job sees. Step 0 (compilation) and profiled steps are left out.
"""

from __future__ import annotations

import statistics

from pgle.evidence.events import Step


def step_times(steps: list[Step], exclude: set[int] = frozenset()) -> list[float]:
    times = []
    for a, b in zip(steps, steps[1:]):
        if a.index == 0 or a.index in exclude:
            continue
        times.append(b.t_enter - a.t_enter)
    return times


def summarize(times: list[float]) -> dict | None:
    if not times:
        return None
    ordered = sorted(times)

    def pct(p: float) -> float:
        k = (len(ordered) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    return {
        "count": len(times),
        "median_s": statistics.median(times),
        "p25_s": pct(0.25),
        "p75_s": pct(0.75),
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }
