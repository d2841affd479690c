"""Merging profiles: equality with jaxlib's aggregate_profiled_instructions, methods, CLI."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from pgle.errors import BadInput
from pgle.profiles.files import Profile, encode_profile, load_profile_source, parse_profile, read_profile, write_profile
from pgle.commands.profiles import merge_report
from pgle.profiles.merge import merge_profiles, name_overlap, percentile_index

# No public API exposes jaxlib's aggregate (JAX auto PGLE calls it from jax._src.compiler);
# jax._src.lib._profiler.aggregate_profiled_instructions checked with jax/jaxlib 0.10.2.
jax_lib = pytest.importorskip("jax._src.lib")
jaxlib_profiler = jax_lib._profiler


def jaxlib_aggregate(profiles: list[Profile], percentile: int) -> dict[str, float]:
    data = jaxlib_profiler.aggregate_profiled_instructions(
        [encode_profile(p, "binary") for p in profiles], percentile)
    result = parse_profile(data, "binary", "jaxlib")
    assert not result.latencies  # jaxlib drops them
    return dict(result.costs)


def random_profiles(rng: random.Random, n: int) -> list[Profile]:
    pool = [f"fusion.{i}" for i in range(30)] + ["all-reduce-start.1", "fp0123::x", "", "ü.remat2"]
    out = []
    for _ in range(n):
        k = rng.randrange(0, 25)
        costs = [(rng.choice(pool), rng.choice([rng.random() * 1000, float(rng.randrange(5)), 0.0, 1e-9]))
                 for _ in range(k)]
        lats = [(rng.choice(pool), rng.choice(pool), rng.random()) for _ in range(rng.randrange(3))]
        out.append(Profile(costs, lats))
    return out


def test_n2_p90_picks_the_smaller_value_like_jaxlib():
    a, b = Profile([("x", 5.0)]), Profile([("x", 3.0)])
    assert percentile_index(2, 90) == 0
    assert dict(merge_profiles([a, b], percentile=90).costs) == {"x": 3.0} == jaxlib_aggregate([a, b], 90)


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_jaxlib_on_random_inputs(seed):
    rng = random.Random(seed)
    n = 2 if seed % 4 == 0 else rng.randrange(1, 9)
    profiles = random_profiles(rng, n)
    for p in (90, 0, 100, 50, rng.randrange(101)):
        ours = merge_profiles(profiles, percentile=p)
        assert dict(ours.costs) == jaxlib_aggregate(profiles, p), (seed, p)
        assert len(ours.costs) == len(dict(ours.costs))  # one entry per name


def test_duplicates_within_one_input_are_pooled_like_jaxlib():
    a = Profile([("x", 1.0), ("x", 3.0)])
    b = Profile([("x", 2.0)])
    for p in (0, 50, 90, 100):
        assert dict(merge_profiles([a, b], percentile=p).costs) == jaxlib_aggregate([a, b], p)


def test_latencies_are_kept_and_merged():
    a = Profile([("s", 1.0)], [("s", "d", 10.0)])
    b = Profile([("s", 2.0)], [("s", "d", 30.0), ("s", "e", 5.0)])
    m = merge_profiles([a, b], method="max")
    assert m.latencies == [("s", "d", 30.0), ("s", "e", 5.0)]


def test_methods():
    ps = [Profile([("x", v)]) for v in (1.0, 2.0, 10.0, 3.0)]
    assert merge_profiles(ps, method="median").costs == [("x", statistics.median([1, 2, 10, 3]))]
    assert merge_profiles(ps, method="mean").costs == [("x", 4.0)]
    assert merge_profiles(ps, method="min").costs == [("x", 1.0)]
    assert merge_profiles(ps, method="max").costs == [("x", 10.0)]
    with pytest.raises(BadInput):
        merge_profiles(ps, method="mode")
    for bad in (-1, 101, 90.5, True):
        with pytest.raises(BadInput, match="percentile"):
            merge_profiles(ps, percentile=bad)


def test_order_is_first_seen():
    m = merge_profiles([Profile([("b", 1.0), ("a", 1.0)]), Profile([("c", 1.0), ("a", 2.0)])])
    assert [n for n, _ in m.costs] == ["b", "a", "c"]


def test_low_overlap_is_flagged():
    same = [Profile([(f"f.{i}", 1.0) for i in range(10)]) for _ in range(3)]
    other = Profile([(f"g.{i}", 1.0) for i in range(10)] + [("f.1", 1.0)])
    overlaps = name_overlap([(f"r{i}", p) for i, p in enumerate(same + [other])])
    assert [o.low for o in overlaps] == [False, False, False, True]
    assert round(overlaps[3].shared, 2) == 0.09


def test_merge_files_report(tmp_path):
    paths = [write_profile(Profile([("x", float(i)), ("y", 1.0)], [("x", "y", float(i))]), tmp_path / f"r{i}.pb")
             for i in range(4)]
    odd = write_profile(Profile([("z", 1.0)]), tmp_path / "odd.pbtxt")
    report = merge_report(paths + [odd], tmp_path / "m.pbtxt", percentile=50)
    assert report.exit_code == 0
    assert read_profile(tmp_path / "m.pbtxt") == Profile([("x", 1.0), ("y", 1.0), ("z", 1.0)], [("x", "y", 1.0)])
    assert any("odd.pbtxt shares only 0%" in w for w in report.warnings)
    with pytest.raises(BadInput, match="already exists"):
        merge_report(paths, tmp_path / "m.pbtxt")
    module_dir = tmp_path / "modules"
    write_profile(Profile([("x", 1.0)]), module_dir / f"{'c' * 32}.pb")
    with pytest.raises(BadInput, match="mix"):
        merge_report([paths[0], module_dir], tmp_path / "n.pb")


def test_merge_directories_per_module(tmp_path):
    fa, fb = "a" * 32, "b" * 32
    for rank, cost in enumerate((1.0, 5.0)):
        write_profile(Profile([("fusion.3", cost)]), tmp_path / f"rank{rank}" / f"{fa}.pb")
    write_profile(Profile([("fusion.3", 9.0)]), tmp_path / "rank1" / f"{fb}.pb")
    report = merge_report([tmp_path / "rank0", tmp_path / "rank1"], tmp_path / "merged", method="max")
    src = load_profile_source(tmp_path / "merged")
    assert src.modules == {fa: Profile([("fusion.3", 5.0)]), fb: Profile([("fusion.3", 9.0)])}
    assert any(f"module {fb} is in 1 of 2" in w for w in report.warnings)
    with pytest.raises(BadInput, match="directories|directory"):
        merge_report([tmp_path / "rank0"], tmp_path / "x.pb")


def test_merge_cli_json(tmp_path):
    from click.testing import CliRunner

    from pgle.cli.main import cli

    a = write_profile(Profile([("x", 1.0)]), tmp_path / "a.pb")
    b = write_profile(Profile([("x", 3.0)]), tmp_path / "b.pb")
    r = CliRunner().invoke(cli, ["merge", str(a), str(b), "-o", str(tmp_path / "m.pb"), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["command"] == "merge" and report["profile"]["instruction_count"] == 1
    assert read_profile(tmp_path / "m.pb").costs == [("x", 1.0)]  # n=2, p=90: the minimum
    r = CliRunner().invoke(cli, ["merge", str(a), "-o", str(tmp_path / "m.pb")])
    assert r.exit_code == 2 and "already exists" in r.stderr
    r = CliRunner().invoke(cli, ["merge", str(a), "-o", str(tmp_path / "m2.pb"), "--percentile", "101"])
    assert r.exit_code == 2
    (tmp_path / "bad.pb").write_bytes(b"\x0a\x09abc")
    r = CliRunner().invoke(cli, ["merge", str(a), str(tmp_path / "bad.pb"), "-o", str(tmp_path / "m3.pb")])
    assert r.exit_code == 2 and "bad.pb" in r.stderr and "at byte 0" in r.stderr
    assert not (tmp_path / "m3.pb").exists()


def python_merge(profiles: list[Profile], method: str, percentile: int) -> Profile:
    """The Python reduction merge_profiles was before it ran on the one engine (issue 35)."""
    def reduce(vals: list[float]) -> float:
        if method == "percentile":
            return sorted(vals)[percentile_index(len(vals), percentile)]
        if method == "median":
            return statistics.median(vals)
        if method == "mean":
            total = 0.0
            for v in vals:
                total += v
            return total / len(vals)
        return min(vals) if method == "min" else max(vals)

    costs: dict[str, list[float]] = {}
    lats: dict[tuple[str, str], list[float]] = {}
    for p in profiles:
        for name, cost in p.costs:
            costs.setdefault(name, []).append(cost)
        for src, dst, lat in p.latencies:
            lats.setdefault((src, dst), []).append(lat)
    return Profile([(n, reduce(v)) for n, v in costs.items()],
                   [(s, d, reduce(v)) for (s, d), v in lats.items()])


@pytest.mark.parametrize("seed", range(12))
def test_the_engine_equals_python_reduction_nan_and_latencies_included(seed):
    """NaN costs (Python's sort orders them its own way), -0.0, names with a NUL byte,
    repeated names and latencies: bit for bit the Python reduction."""
    rng = random.Random(seed)
    profiles = random_profiles(rng, rng.randrange(1, 9))
    for p in profiles:
        p.costs = [(n + ("\0" if rng.random() < 0.05 else ""),
                    rng.choice([c, c, float("nan"), -0.0])) for n, c in p.costs]
    for method in ("percentile", "median", "mean", "min", "max"):
        pct = rng.randrange(101)
        ours, want = merge_profiles(profiles, method=method, percentile=pct), python_merge(profiles, method, pct)
        assert [(n, repr(c)) for n, c in ours.costs] == [(n, repr(c)) for n, c in want.costs]
        assert [(s, d, repr(v)) for s, d, v in ours.latencies] == [(s, d, repr(v)) for s, d, v in want.latencies]
