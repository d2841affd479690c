"""Medians and percentiles against references (issue 37): `statistics` (an even count's median
is the mean of the two middle values, as statistics.median and the project's docs say), numpy's
linear percentiles, and jaxlib's own `aggregate_profiled_instructions` for `convert --stat pNN`
and `profiles merge` (its index rule: sorted values at int(p/100*(n-1)))."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgle.analysis import throughput
from pgle.commands.auto_env import percentile_index as auto_index
from pgle.evidence import steps
from pgle.profiles.convert import apply_stat, stat_of_chunks
from pgle.profiles.files import Profile, encode_profile, parse_profile
from pgle.profiles.merge import merge_profiles, percentile_index

jaxlib_profiler = pytest.importorskip("jax._src.lib")._profiler

floats = st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False) | st.integers(0, 20).map(float)
samples = st.lists(floats, min_size=1, max_size=40)
positive = st.floats(1e-6, 1e6) | st.integers(1, 20).map(float)
percentiles = st.integers(0, 100)


def jaxlib_percentile(values: list[float], p: int) -> float:
    """jaxlib's value for one instruction seen with `values` (one profile per value)."""
    blobs = [encode_profile(Profile([("x", v)]), "binary") for v in values]
    out = parse_profile(jaxlib_profiler.aggregate_profiled_instructions(blobs, p), "binary", "jaxlib")
    return dict(out.costs)["x"]


@given(samples, percentiles)
def test_convert_percentile_is_jaxlibs(values, p):
    assert apply_stat(values, f"p{p}") == jaxlib_percentile(values, p)
    assert sorted(values)[percentile_index(len(values), p)] == apply_stat(values, f"p{p}")
    if len(values) > 1:
        assert auto_index(len(values), p) == percentile_index(len(values), p)


def test_percentile_index_at_its_edges():
    # n=2: every p < 100 picks the smaller value; n=11, p=90: index 9, not 10.
    assert [percentile_index(2, p) for p in (0, 50, 90, 99, 100)] == [0, 0, 0, 0, 1]
    assert percentile_index(11, 90) == 9 and percentile_index(11, 100) == 10
    assert jaxlib_percentile([float(i) for i in range(11)], 90) == 9.0
    assert apply_stat([float(i) for i in range(11)], "p90") == 9.0


@given(samples)
def test_convert_median_mean_min_max_against_statistics(values):
    assert apply_stat(values, "median") == statistics.median(values)
    total = 0.0
    for v in values:
        total += v
    assert apply_stat(values, "mean") == total / len(values)
    assert apply_stat(values, "min") == min(values) and apply_stat(values, "max") == max(values)


@given(st.lists(floats, min_size=2, max_size=40).filter(lambda v: len(v) % 2 == 0))
def test_an_even_count_median_is_the_mean_of_the_two_middles(values):
    s = sorted(values)
    mid = len(s) // 2
    assert apply_stat(values, "median") == (s[mid - 1] + s[mid]) / 2
    assert steps.summarize(values)["median_s"] == (s[mid - 1] + s[mid]) / 2
    assert steps.summarize(values)["median_s"] == statistics.median(values)


@given(samples, st.sampled_from(["median", "mean", "min", "max", "p0", "p50", "p90", "p99",
                                 "p100"]), st.data())
def test_chunked_stats_equal_the_list_stats_bit_for_bit(values, stat, data):
    cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(values) - 1)), max_size=3)))
    cuts = [c for c in cuts if 0 < c < len(values)]
    chunks = [np.asarray(values[a:b], np.float64)
              for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)
              if b > a]
    assert stat_of_chunks(chunks, stat) == apply_stat(values, stat)


@given(samples)
def test_step_time_summary_against_numpy_and_statistics(values):
    got = steps.summarize(values)
    assert got["count"] == len(values)
    assert got["median_s"] == statistics.median(values)
    assert got["p25_s"] == pytest.approx(float(np.percentile(values, 25)), rel=1e-12, abs=1e-9)
    assert got["p75_s"] == pytest.approx(float(np.percentile(values, 75)), rel=1e-12, abs=1e-9)
    assert (got["min_s"], got["max_s"]) == (min(values), max(values))
    if len(values) > 1:
        q = statistics.quantiles(values, n=4, method="inclusive")
        assert got["p25_s"] == pytest.approx(q[0], rel=1e-12, abs=1e-9)
        assert got["p75_s"] == pytest.approx(q[2], rel=1e-12, abs=1e-9)


@given(st.lists(samples, min_size=1, max_size=6), st.sampled_from(["median", "min", "max"]))
def test_merge_methods_against_statistics(per_run, method):
    profiles = [Profile([("x", v) for v in vals]) for vals in per_run]
    pooled = [v for vals in per_run for v in vals]
    want = {"median": statistics.median, "min": min, "max": max}[method](pooled)
    assert dict(merge_profiles(profiles, method=method).costs)["x"] == want


@given(st.lists(positive, min_size=2, max_size=12),
       st.lists(positive, min_size=2, max_size=12), st.integers(0, 2**40))
def test_bootstrap_ratios_equal_pythons_random_choices_and_statistics_median(before, after, seed):
    """The numpy bootstrap is exactly random.Random(seed).choices + statistics.median (its
    docstring's claim), and the ratio is after over before (not inverted)."""
    rng = random.Random(seed)
    want = []
    for _ in range(30):
        b = rng.choices(before, k=len(before))
        a = rng.choices(after, k=len(after))
        want.append(statistics.median(a) / statistics.median(b))
    got = throughput._bootstrap_ratios(before, after, 30, seed)
    assert got == pytest.approx(want, rel=1e-12)
    ci = throughput.ratio_interval(before, after, resamples=200, seed=seed)
    assert ci["ratio"] == statistics.median(after) / statistics.median(before)
    assert ci["low"] <= ci["high"]
