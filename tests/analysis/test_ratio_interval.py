"""The step-time ratio's bootstrap interval, now in numpy, gives exactly what the seeded
Python loop gave (random.Random(seed).choices and statistics.median, 2000 resamples)."""

from __future__ import annotations

import random
import statistics

import pytest

from pgle.analysis.throughput import ratio_interval


def ratio_interval_loop(before, after, *, confidence=0.95, resamples=2000, seed=0):
    """pgle 0.1.0's implementation (commit bec513a), verbatim."""
    if len(before) < 2 or len(after) < 2:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        b = statistics.median(rng.choices(before, k=len(before)))
        a = statistics.median(rng.choices(after, k=len(after)))
        ratios.append(a / b)
    ratios.sort()
    lo = ratios[int((1 - confidence) / 2 * (resamples - 1))]
    hi = ratios[int((1 + confidence) / 2 * (resamples - 1))]
    return {"ratio": statistics.median(after) / statistics.median(before), "low": lo, "high": hi,
            "confidence": confidence, "beyond_noise": not lo <= 1.0 <= hi}


@pytest.mark.parametrize("sizes", [(2, 2), (3, 8), (11, 10), (150, 151), (1000, 700), (1, 5)])
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, -5])
def test_identical_to_the_python_loop(sizes, seed):
    rng = random.Random(sum(sizes))
    before = [0.010 + rng.random() * 1e-3 for _ in range(sizes[0])]
    after = [0.009 + rng.random() * 1e-3 for _ in range(sizes[1])]
    before[: min(4, len(before))] = [before[0]] * min(4, len(before))  # ties
    for kw in ({}, {"confidence": 0.9, "resamples": 333}):
        assert ratio_interval(before, after, seed=seed, **kw) == \
            ratio_interval_loop(before, after, seed=seed, **kw)
