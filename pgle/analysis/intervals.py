"""Interval arithmetic on picosecond spans: merge, and covered length of a window.

Hand-written (about 40 lines) because the one library that has it, xprof's
`cli/internal/async_overlap.py`, is an optional extra and a private module there.
"""

from __future__ import annotations

import bisect
from typing import Iterable


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-empty intervals covering the same time."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if hi <= lo:
            continue
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


class Coverage:
    """How much of `[lo, hi)` fixed merged intervals cover, in O(log n) per query."""

    def __init__(self, merged: list[tuple[int, int]]):
        self.merged = merged
        self.starts = [lo for lo, _ in merged]
        self.prefix = [0]
        for lo, hi in merged:
            self.prefix.append(self.prefix[-1] + hi - lo)

    def covered(self, lo: int, hi: int) -> int:
        if hi <= lo or not self.merged:
            return 0
        first = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        last = bisect.bisect_left(self.starts, hi) - 1
        if last < first:
            return 0
        total = self.prefix[last + 1] - self.prefix[first]
        f_lo, f_hi = self.merged[first]
        total -= max(0, min(lo, f_hi) - f_lo)
        l_lo, l_hi = self.merged[last]
        total -= max(0, l_hi - max(hi, l_lo))
        return max(total, 0)
