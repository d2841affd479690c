"""The fast paths for large profiles (issue 16) give exactly what protobuf and the general
merge give, and step aside for anything outside the layout they read."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import text_format

from pgle.profiles import files
from pgle.profiles.files import BINARY, TEXT, Profile, encode_profile, parse_profile
from pgle.profiles.merge import METHODS, ColumnMerge, merge_profiles
from pgle.profiles.canonical import text_columns
from pgle.profiles.proto import binary_columns, message_class


def _by_protobuf(data: bytes, fmt: str) -> Profile:
    msg = message_class()()
    if fmt == BINARY:
        msg.ParseFromString(data)
    else:
        text_format.Parse(data.decode(), msg)
    return Profile([(c.name, c.cost_us) for c in msg.costs],
                   [(x.source, x.target, x.latency_us) for x in msg.latencies])


def _random_profile(rng: random.Random, n: int, *, zero: bool = False, latencies: bool = False) -> Profile:
    costs = []
    for i in range(n):
        name = rng.choice(["fusion", "all-reduce-start", "custom-call", "ü-op"]) + f".{i}"
        name *= rng.choice([1, 1, 1, 9])  # some names too long for one-byte lengths
        costs.append((name, 0.0 if zero and i % 5 == 0 else rng.choice([rng.random() * 1e4, 1e300, -2.5])))
    lats = [(costs[0][0], costs[-1][0], 3.0)] if latencies else []
    return Profile(costs, lats)


@pytest.mark.parametrize("seed", range(40))
def test_binary_columns_agree_with_protobuf_or_step_aside(seed):
    rng = random.Random(seed)
    profile = _random_profile(rng, rng.randrange(1, 300), zero=seed % 3 == 0, latencies=seed % 4 == 0)
    data = encode_profile(profile, BINARY)
    expected = _by_protobuf(data, BINARY)
    cols = binary_columns(data)
    if cols is not None:
        names, costs, layout = cols
        assert list(zip([n.decode() for n in names.tolist()], costs.tolist())) == expected.costs
        assert not expected.latencies
        again = layout.read(data)
        assert again is not None and np.array_equal(again[1], costs)
    if seed % 4 == 0 or seed % 3 == 0:
        assert cols is None  # latencies, or a cost of 0 (omitted by proto3): not the layout


def test_layout_reuse_reads_only_matching_files():
    names = [f"fusion.{i}" for i in range(500)]
    a = encode_profile(Profile([(n, float(i + 1)) for i, n in enumerate(names)]), BINARY)
    b = encode_profile(Profile([(n, float(i + 2)) for i, n in enumerate(names)]), BINARY)
    swapped = names[1:] + names[:1]
    c = encode_profile(Profile([(n, float(i + 1)) for i, n in enumerate(swapped)]), BINARY)
    _, _, layout = binary_columns(a)
    assert layout.read(b)[1].tolist() == [float(i + 2) for i in range(500)]
    assert layout.read(c) is None  # same size, other names in the places: not reused
    names_c, costs_c, _ = binary_columns(c, like=layout)  # falls back to the scan
    assert names_c[0] == b"fusion.1" and costs_c[0] == 1.0


@pytest.mark.parametrize("seed", range(20))
def test_text_columns_agree_with_text_format(seed):
    rng = random.Random(seed)
    profile = _random_profile(rng, rng.randrange(0, 100), zero=True, latencies=seed % 2 == 0)
    data = encode_profile(profile, TEXT)
    expected = _by_protobuf(data, TEXT)
    got = text_columns(data)
    if got is not None:
        assert not expected.latencies
        assert list(zip([n.decode() for n in got[0].tolist()], got[1].tolist())) == expected.costs
    else:
        assert expected.latencies or not data.isascii() or b"\\" in data
    assert parse_profile(data, TEXT, "t") == expected


@pytest.mark.parametrize("text", [
    '# a comment\ncosts {\n  name: "a"\n  cost_us: 1\n}\n',
    'costs { name: "a" cost_us: 1 }\n',
    'costs {\n  name: "a\\"b"\n  cost_us: 1.0\n}\n',
    'costs {\n  cost_us: 1.0\n  name: "a"\n}\n',
    'costs {\n  name: "a"\n  cost_us: 1.5E+3\n}\n',
    'costs {\n  name: "a"\n  cost_us: 7\n}\ncosts {\n  name: "b"\n  cost_us: .5\n}\n',
])
def test_text_outside_the_layout_goes_to_text_format(text):
    assert text_columns(text.encode()) is None
    assert parse_profile(text.encode(), TEXT, "t") == _by_protobuf(text.encode(), TEXT)


def test_large_binary_profile_parses_through_columns_identically():
    rng = random.Random(7)
    profile = Profile([(f"fusion.{i}", rng.random() * 100 + 1) for i in range(80_000)])
    data = encode_profile(profile, BINARY)
    assert len(data) >= 1 << 20
    assert parse_profile(data, BINARY, "big") == _by_protobuf(data, BINARY)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("count", [1, 2, 5, 16])
def test_column_merge_equals_merge_profiles(method, count):
    rng = random.Random(count)
    names = [f"fusion.{i}" for i in range(300)]
    profiles = []
    for k in range(count):
        costs = [(n, rng.random() * 50) for n in names]
        if k % 3 == 1:
            rng.shuffle(costs)
        if k % 4 == 2:  # other names, a duplicate
            costs = costs[:200] + [("other.1", 1.0), costs[0]]
        profiles.append(Profile(costs))
    merge = ColumnMerge()
    for p in profiles:
        merge.add(*binary_columns(encode_profile(p, BINARY))[:2])
    got_names, got = merge.merge(method, 90)
    expected = merge_profiles(profiles, method=method, percentile=90)
    assert list(zip(got_names, got.tolist())) == expected.costs


def test_pgle_merge_of_one_programs_ranks_equals_jaxlib(tmp_path):
    """The command's column path against jaxlib's C++ (the anchor of benchmarks/bench_merge.py),
    with some ranks in another order."""
    from jax._src.lib import _profiler  # the anchor; checked with jaxlib 0.10.2

    rng = random.Random(3)
    names = [f"fusion.{i}" for i in range(2000)]
    paths, blobs = [], []
    for k in range(9):
        costs = [(n, rng.random() * 10 + 0.5) for n in names]
        if k % 4 == 2:
            rng.shuffle(costs)
        blob = encode_profile(Profile(costs), BINARY)
        (tmp_path / f"r{k}.pb").write_bytes(blob)
        paths.append(str(tmp_path / f"r{k}.pb"))
        blobs.append(blob)
    out = tmp_path / "m.pb"
    proc = subprocess.run([sys.executable, "-m", "pgle", "merge", "-o", str(out), "--json", *paths],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert all(i["shared"] == 1.0 for i in report["inputs"])
    theirs = parse_profile(_profiler.aggregate_profiled_instructions(blobs, 90), BINARY, "jaxlib")
    assert dict(files.read_profile(out).costs) == dict(theirs.costs)


def test_pgle_merge_column_path_reports_a_corrupt_input(tmp_path):
    good = encode_profile(Profile([(f"fusion.{i}", 1.0 + i) for i in range(100)]), BINARY)
    (tmp_path / "a.pb").write_bytes(good)
    (tmp_path / "b.pb").write_bytes(good[:-3])
    proc = subprocess.run([sys.executable, "-m", "pgle", "merge", "-o", str(tmp_path / "m.pb"),
                           str(tmp_path / "a.pb"), str(tmp_path / "b.pb")], capture_output=True, text=True)
    assert proc.returncode == 2 or proc.returncode == 1
    assert proc.stderr.startswith("pgle: error: profile ") and "b.pb" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "m.pb").exists()
