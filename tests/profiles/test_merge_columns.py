"""`pgle merge`'s one path (issue 25): files whose names differ, text profiles and per-module
folders merge as numpy columns, with the report and the written bytes of the general path
(merge_profiles over Profile tuples), and the costs of jaxlib's aggregate."""

from __future__ import annotations

import json
import random

import pytest

from helpers.pgle_testing import run_pgle
from pgle.commands import profiles as commands
from pgle.commands.profiles import merge_report
from pgle.profiles import canonical, columns
from pgle.profiles.files import Profile, encode_profile, parse_profile, read_profile, write_profile

FPS = ["a" * 32, "b" * 32, "c" * 32, "d" * 32]


def general(monkeypatch, *args, **kw):
    """merge_report with the column path turned off: the general path alone."""
    with monkeypatch.context() as m:
        m.setattr(commands, "_merge_columns", lambda *a, **k: None)
        return merge_report(*args, **kw)


def columns_only(monkeypatch, *args, **kw):
    """merge_report that must not fall back to the general path."""
    from pgle.profiles import merge

    with monkeypatch.context() as m:
        for name in ("merge_profiles", "merge_directory_modules"):
            m.setattr(merge, name, lambda *a, **k: pytest.fail("general path taken"))
        return merge_report(*args, **kw)


def rank_costs(rng: random.Random, base: list[str], rank: int) -> list[tuple[str, float]]:
    """One rank of one program: the base names, a few renamed or repeated, some reordered,
    costs varying (zeros and negative zeros included, which proto3 writes differently)."""
    costs = []
    for name in base:
        r = rng.random()
        if r < 0.03:
            name = f"{name}.rank{rank}"  # names that differ between ranks
        elif r < 0.04:
            costs.append((name, rng.random()))  # a name twice in one input
        costs.append((name, rng.choice([rng.lognormvariate(2, 1.5), 0.0, -0.0, 1.0, 1e-9])))
    if rng.random() < 0.3:
        rng.shuffle(costs)
    return costs


def report_view(report) -> dict:
    d = report.to_dict()
    d.pop("profile", None)  # holds the output's sha and path, compared through the bytes
    return json.loads(json.dumps(d))


@pytest.mark.parametrize("seed", range(8))
def test_files_equal_the_general_path_and_jaxlib(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    base = [f"{rng.choice(['fusion', 'loop_add_fusion', 'all-gather-start'])}.{i}" for i in range(300)]
    paths = []
    for k in range(rng.randrange(2, 12)):
        fmt = rng.choice([".pb", ".pbtxt"])
        paths.append(write_profile(Profile(rank_costs(rng, base, k)), tmp_path / f"r{k}{fmt}"))
    for method, pct in (("percentile", 90), ("percentile", rng.randrange(101)), ("median", 90),
                        ("mean", 90), ("min", 90), ("max", 90)):
        for suffix in (".pb", ".pbtxt"):
            ours = columns_only(monkeypatch, paths, tmp_path / f"ours{suffix}", method=method,
                                percentile=pct, force=True)
            theirs = general(monkeypatch, paths, tmp_path / f"theirs{suffix}", method=method,
                             percentile=pct, force=True)
            assert (tmp_path / f"ours{suffix}").read_bytes() == (tmp_path / f"theirs{suffix}").read_bytes()
            view = report_view(ours)
            assert view == report_view(theirs) | {"summary": view["summary"]}
            assert [s.replace("ours", "theirs") for s in view["summary"]] == report_view(theirs)["summary"]
    jax_lib = pytest.importorskip("jax._src.lib")
    blobs = [encode_profile(read_profile(p), "binary") for p in paths]
    expected = parse_profile(jax_lib._profiler.aggregate_profiled_instructions(blobs, 90), "binary", "jaxlib")
    merge_report(paths, tmp_path / "p90.pb", force=True)
    assert dict(read_profile(tmp_path / "p90.pb").costs) == dict(expected.costs)


def per_module_folder(path, rng: random.Random, bases: dict[str, list[str]], rank: int, fmt: str,
                      manifest: dict | None) -> None:
    path.mkdir()
    for fp, base in bases.items():
        if rng.random() < 0.9 or fp == FPS[0]:
            write_profile(Profile(rank_costs(rng, base, rank)), path / f"{fp}{fmt}")
    if fmt == ".pbtxt" and rng.random() < 0.3:  # a shadowed .pb (XLA reads the .pbtxt)
        write_profile(Profile([("fusion.1", 5.0)]), path / f"{FPS[0]}.pb")
    (path / "notes.txt").write_text("ignored")
    if manifest:
        (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("seed", range(6))
def test_per_module_folders_equal_the_general_path(tmp_path, monkeypatch, seed):
    """Folders as `pgle collect --per-module` writes them (text), some binary, a module under
    another fingerprint on one rank (aliases from the manifests), modules missing on some ranks."""
    rng = random.Random(100 + seed)
    bases = {fp: [f"fusion.{i}" for i in range(rng.randrange(1, 120))] for fp in FPS[:3]}
    folders = []
    for k in range(rng.randrange(2, 7)):
        fp_train = FPS[3] if k == 1 and seed % 2 else FPS[0]
        rank_bases = dict(bases)
        if fp_train != FPS[0]:
            rank_bases[fp_train] = rank_bases.pop(FPS[0])
        manifest = {"modules": [{"module": "jit_train(5)", "name": "jit_train", "fingerprint": fp_train},
                                {"module": "jit_eval(9)", "name": "jit_eval", "fingerprint": FPS[1]}]}
        folder = tmp_path / f"rank-{k}"
        per_module_folder(folder, rng, rank_bases, k, rng.choice([".pbtxt", ".pbtxt", ".pb"]), manifest)
        folders.append(folder)
    for method in ("percentile", "mean", "max"):
        ours = columns_only(monkeypatch, folders, tmp_path / "ours", method=method, force=True)
        theirs = general(monkeypatch, folders, tmp_path / "theirs", method=method, force=True)
        files = sorted(p.name for p in (tmp_path / "theirs").iterdir())
        assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == files
        for name in files:
            assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name
        view, other = report_view(ours), report_view(theirs)
        assert [s.replace("ours", "theirs") for s in view.pop("summary")] == other.pop("summary")
        assert view == other


def test_inputs_only_the_general_path_reads(tmp_path, monkeypatch):
    """Latencies, names with a NUL byte, NaN costs, comments: the general path merges them."""
    a = write_profile(Profile([("x", 1.0)], [("x", "y", 2.0)]), tmp_path / "lat.pb")
    b = write_profile(Profile([("x", 3.0)]), tmp_path / "b.pb")
    c = tmp_path / "c.pbtxt"
    c.write_text('# a comment\ncosts { name: "x" cost_us: 5.0 }\n')
    d = write_profile(Profile([("x", float("nan"))]), tmp_path / "nan.pb")
    assert columns.read_file_columns(a) is None
    assert columns.read_file_columns(c) is not None  # protobuf reads it; columns of it
    for inputs in ([a, b], [b, d]):
        ours = merge_report(inputs, tmp_path / "m.pb", force=True)
        theirs = general(monkeypatch, inputs, tmp_path / "g.pb", force=True)
        assert (tmp_path / "m.pb").read_bytes() == (tmp_path / "g.pb").read_bytes()
        assert ours.warnings == theirs.warnings


def test_text_columns_equal_text_format(tmp_path):
    """The vectorized text reader against protobuf's text_format on the layouts pgle, jaxlib
    and text_format write; everything else steps aside (None)."""
    from google.protobuf import text_format

    from pgle.profiles.proto import message_class

    rng = random.Random(7)
    names = ["fusion.1", "", "a b", "x::y", "all-gather-start.2.remat2"]
    odd = ["t\tab", 'q"', "b\\s", "ü"]  # escaped by text_format: not taken
    values = [0.0, -0.0, 1.5, 1e-9, 1e300, 5e-324, float("inf"), -float("inf"), -2.5, 12345.678]
    taken = 0
    for _ in range(400):
        msg = message_class()()
        for _ in range(rng.randrange(0, 20)):
            msg.costs.add(name=rng.choice(names), cost_us=rng.choice(values + [rng.random() * 1e4]))
        data = text_format.MessageToString(msg).encode()
        got = canonical.text_columns(data)
        if got is None:
            assert any(set(c.name) & set('\t"\\ü') for c in msg.costs)
            continue
        taken += 1
        assert [n.decode() for n in got[0].tolist()] == [c.name for c in msg.costs]
        assert [repr(v) for v in got[1].tolist()] == [repr(c.cost_us) for c in msg.costs]
    assert taken > 100
    for bad in (b'costs {\n  name: "x"\n  cost_us: 1.0\n}\n# end\n', b'costs {\n  cost_us: 01\n}\n',
                b'latencies {\n  source: "a"\n}\n', b'costs {\n  name: "x"\n  name: "y"\n}\n',
                b'costs {\n  cost_us: 1E5\n}\n', b' costs {\n}\n'):
        assert canonical.text_columns(bad) is None, bad


def test_many_inputs_read_in_worker_processes(tmp_path, monkeypatch):
    """From 16 inputs on (and two cores), files and folders are read in worker processes: the
    same bytes and report, and a corrupt input is the same one-line error, in input order."""
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: inputs are read in this process")
    rng = random.Random(11)
    base = [f"fusion.{i}" for i in range(500)]
    paths = [write_profile(Profile(rank_costs(rng, base, k)), tmp_path / f"r{k:02d}{rng.choice(['.pb', '.pbtxt'])}")
             for k in range(24)]
    # The CLI (no jax loaded: fork is allowed), against the general path here.
    ours = cli_merge(tmp_path, paths, tmp_path / "ours.pb")
    theirs = general(monkeypatch, paths, tmp_path / "theirs.pb", force=True)
    assert (tmp_path / "ours.pb").read_bytes() == (tmp_path / "theirs.pb").read_bytes()
    assert ours["warnings"] == theirs.warnings
    assert ours["inputs"] == theirs.details["inputs"]  # details sit at the top of the JSON
    folders = []
    for k in range(18):
        per_module_folder(tmp_path / f"rank-{k:02d}", rng, {FPS[0]: base, FPS[1]: base[:40]}, k,
                          ".pbtxt", None)
        folders.append(tmp_path / f"rank-{k:02d}")
    cli_merge(tmp_path, folders, tmp_path / "ours_dir")
    general(monkeypatch, folders, tmp_path / "theirs_dir", force=True)
    for f in sorted((tmp_path / "theirs_dir").iterdir()):
        assert (tmp_path / "ours_dir" / f.name).read_bytes() == f.read_bytes()
    (tmp_path / "r07.pb").write_bytes(b"\x0a\x09abc")
    paths[7] = tmp_path / "r07.pb"
    p = run_pgle("merge", "-o", str(tmp_path / "x.pb"), *map(str, paths), cwd=tmp_path)
    assert p.returncode == 2 and "r07.pb is not a valid binary" in p.stderr.decode()
    assert len(p.stderr.decode().strip().splitlines()) == 1 and not (tmp_path / "x.pb").exists()


FORK_CHECK = """
import sys
from pgle.profiles import columns
assert columns._fork_is_safe(), "the CLI process would read in this process only"
"""


def cli_merge(tmp_path, inputs, out) -> dict:
    """`pgle merge --json` as a user runs it (a process without jax: inputs read in workers)."""
    import subprocess
    import sys

    from helpers.pgle_testing import pgle_env

    subprocess.run([sys.executable, "-c", FORK_CHECK], check=True, env=pgle_env())
    p = run_pgle("merge", "--json", "--force", "-o", str(out), *map(str, inputs), cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_binary_profile_protobuf_rejects_is_refused(tmp_path):
    """The binary column reader skips protobuf's parse only where nothing is left for it to
    reject (canonical layout, ASCII names); a name that is not UTF-8 still fails as before."""
    from pgle.errors import ProfileError

    good = encode_profile(Profile([("fusion.1", 1.0), ("fusion.2", 2.0)]), "binary")
    bad = good.replace(b"fusion.2", b"fusion\xff2")
    (tmp_path / "a.pb").write_bytes(good)
    (tmp_path / "b.pb").write_bytes(bad)
    assert columns.read_file_columns(tmp_path / "a.pb") is not None
    with pytest.raises(ProfileError, match="b.pb is not a valid binary"):
        columns.read_file_columns(tmp_path / "b.pb")
    with pytest.raises(ProfileError, match="b.pb is not a valid binary"):
        merge_report([tmp_path / "a.pb", tmp_path / "b.pb"], tmp_path / "m.pb")


@pytest.mark.parametrize("method", ["percentile", "median"])
def test_zeros_of_both_signs_pick_as_a_stable_sort_does(method):
    """0.0 and -0.0 are equal but written differently: the dense merge partitions its rows
    (issue 25), which orders equal values arbitrarily; names holding a -0.0 must still give
    the bits merge_profiles' stable sort gives."""
    import struct

    import numpy as np

    from pgle.profiles.merge import ColumnMerge, merge_profiles

    rng = random.Random(1)
    for _ in range(60):
        inputs = [[(f"n{j}", rng.choice([0.0, -0.0, 0.0, 1.0, -1.0])) for j in range(5)]
                  for _ in range(rng.randrange(5, 60))]
        merge = ColumnMerge()
        for costs in inputs:
            merge.add(np.array([n.encode() for n, _ in costs]), np.array([c for _, c in costs]))
        for pct in (0, 10, 50, 90, 100):
            _, got = merge.merge(method, pct)
            expected = merge_profiles([Profile(c) for c in inputs], method=method, percentile=pct)
            assert [struct.pack("<d", v) for v in got.tolist()] == \
                [struct.pack("<d", v) for _, v in expected.costs]
