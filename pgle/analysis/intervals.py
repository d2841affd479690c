"""Interval arithmetic on picosecond spans: merge, and covered length of windows.

Hand-written (a few lines of numpy) because the one library that has it, xprof's
`cli/internal/async_overlap.py`, is an optional extra and a private module there. On
numpy columns: a device plane of a GPU trace holds hundreds of thousands of kernels
(issue 25). Times are int64 picoseconds; every result is exact.
"""

from __future__ import annotations

import numpy as np


def merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint, non-empty intervals covering the same time as `[lo, hi)`; intervals
    that touch (one ends where the next starts) become one."""
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if not lo.size:
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)  # the furthest end so far
    new = np.empty(lo.size, bool)
    new[0] = True
    np.greater(lo[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, lo.size - 1)
    return lo[first], reach[last]


class Coverage:
    """How much of each window `[lo, hi)` fixed merged intervals cover, O(log n) per window."""

    def __init__(self, merged: tuple[np.ndarray, np.ndarray]):
        self.starts, self.ends = merged
        self.prefix = np.concatenate(([0], np.cumsum(self.ends - self.starts)))

    def covered(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        out = np.zeros(lo.size, np.int64)
        if not self.starts.size or not lo.size:
            return out
        first = np.maximum(np.searchsorted(self.starts, lo, side="right") - 1, 0)
        last = np.searchsorted(self.starts, hi, side="left") - 1
        ok = (hi > lo) & (last >= first)
        first, last, lo, hi = first[ok], last[ok], lo[ok], hi[ok]
        total = self.prefix[last + 1] - self.prefix[first]
        # Less what the first interval holds before lo and the last after hi.
        total -= np.maximum(0, np.minimum(lo, self.ends[first]) - self.starts[first])
        total -= np.maximum(0, self.ends[last] - np.maximum(hi, self.starts[last]))
        out[ok] = np.maximum(total, 0)
        return out
