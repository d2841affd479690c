"""Step-time statistics from the harness's step events.

A step's time is the interval between the starts of consecutive steps: with
async dispatch the host runs ahead, so start-to-start is the throughput the
job sees. Step 0 (compilation) and profiled steps are left out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pgle.evidence.events import Step, Steps


def step_times(steps: Sequence[Step], exclude: Collection[int] = frozenset()) -> list[float]:
    """Start-to-start times of consecutive steps, leaving out the time after step 0 and after
    each excluded step (the same floats whichever form `steps` has)."""
    if isinstance(steps, Steps) and len(steps) > 1:
        return _step_times_columns(steps, exclude)
    times = []
    for a, b in zip(steps, steps[1:], strict=False):
        if a.index == 0 or a.index in exclude:
            continue
        times.append(b.t_enter - a.t_enter)
    return times


def _step_times_columns(steps: Steps, exclude: Collection[int]) -> list[float]:
    """Columns, no Step objects: a million steps in a fraction of a second (issue 25)."""
    index, t = steps.indices, steps.t_enter
    if len(index) < 4096:
        return [
            t[k + 1] - t[k]
            for k in range(len(index) - 1)
            if index[k] != 0 and index[k] not in exclude
        ]
    import numpy as np

    # Steps keeps its columns as array.array or numpy arrays: no copy for either.
    i = np.asarray(index, np.int64)
    v = np.asarray(t, np.float64)
    keep = i[:-1] != 0
    if exclude:
        keep &= ~np.isin(i[:-1], np.fromiter(exclude, np.int64, len(exclude)))
    times: list[float] = (v[1:] - v[:-1])[keep].tolist()  # IEEE: the loop's floats above
    return times


def summarize(times: list[float]) -> dict[str, Any] | None:
    if not times:
        return None
    ordered = sorted(times)
    n = len(ordered)

    def pct(p: float) -> float:
        k = (n - 1) * p
        lo, hi = int(k), min(int(k) + 1, n - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    mid = n // 2
    return {
        "count": n,
        # statistics.median's value, from the one sort: the middle, or the mean of the two.
        "median_s": ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2,
        "p25_s": pct(0.25),
        "p75_s": pct(0.75),
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }
