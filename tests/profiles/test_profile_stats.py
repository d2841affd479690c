"""`pgle inspect`, `pgle diff` and `pgle convert`: categories, reports, CLI exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pgle.cli.main import cli
from pgle.errors import BadInput, ProfileError
from pgle.profiles.files import (
    Profile,
    load_profile_source,
    module_view,
    qualified_fingerprints,
    qualify_profile,
    read_profile,
    write_profile,
)
from pgle.commands.convert import convert_profile
from pgle.commands.profiles import inspect_report
from pgle.profiles.stats import classify, diff_sources, inspect_source

FA, FB = "a" * 32, "b" * 32


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def sample() -> Profile:
    return Profile(
        costs=[("all-reduce-start.1", 50.0), ("all-reduce-done.1", 1.0), ("all-gather.2", 7.0),
               ("reduce-scatter-start.4", 9.0), ("collective-permute-done.9", 1.0),
               ("cublas-gemm.3", 100.0), ("gemm_fusion_dot.5", 20.0), ("custom-call.2", 5.0),
               ("loop_fusion.1", 10.0), ("input_reduce_fusion.7.remat2", 4.0), ("copy-start.3", 2.0),
               ("copy.8", 1.0), ("convert.2", 0.5), (f"{FA}::fusion.3", 3.0)],
        latencies=[("all-reduce-start.1", "all-reduce-done.1", 45.0)],
    )


@pytest.mark.parametrize("name,category,kind,phase", [
    ("all-reduce-start.1", "collective", "all-reduce", "start"),
    ("all-reduce-done", "collective", "all-reduce", "done"),
    ("all-gather.2", "collective", "all-gather", None),
    ("ragged-all-to-all.1", "collective", "ragged-all-to-all", None),
    ("all-to-all.3", "collective", "all-to-all", None),
    ("send.1", "collective", "send", "start"),
    ("recv-done.1", "collective", "recv", "done"),
    (f"{FA}::collective-permute-start.2.remat", "collective", "collective-permute", "start"),
    ("cublas-gemm.1", "gemm", None, None),
    ("cublas-lt-matmul.4", "gemm", None, None),
    ("gemm_fusion_dot.12", "gemm", None, None),
    ("cudnn-conv.1", "gemm", None, None),
    ("custom-call.7", "gemm", None, None),
    ("dot.3", "gemm", None, None),
    ("loop_fusion.4", "fusion", None, None),
    ("fusion", "fusion", None, None),
    ("copy-start.1", "copy", None, None),
    ("copy.2", "copy", None, None),
    ("convert.3", "other", None, None),
    ("all-reducer.1", "other", None, None),
])
def test_classify(name, category, kind, phase):
    c = classify(name)
    assert (c.category, c.kind, c.phase) == (category, kind, phase)


def test_inspect_counts_categories_pairs(tmp_path):
    src = load_profile_source(write_profile(sample(), tmp_path / "p.pb"))
    data = inspect_source(src, top=3)
    assert data["instruction_count"] == 14 and data["latency_count"] == 1
    assert data["total_cost_us"] == pytest.approx(213.5)
    assert [r["name"] for r in data["top"]] == ["cublas-gemm.3", "all-reduce-start.1", "gemm_fusion_dot.5"]
    cats = data["categories"]
    assert cats["collective"]["count"] == 5 and cats["collective"]["cost_us"] == pytest.approx(68.0)
    assert cats["gemm"]["count"] == 3 and cats["fusion"]["count"] == 3 and cats["copy"]["count"] == 2
    assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0)
    coll = data["collectives"]["kinds"]
    assert coll["all-reduce"]["pairs"] == 1 and coll["all-gather"]["sync"] == 1
    assert coll["reduce-scatter"]["start"] == 1 and coll["reduce-scatter"]["pairs"] == 0
    assert data["collectives"]["latency_pairs"] == 1
    assert data["remat_entries"] == 1
    assert data["fingerprints"]["qualified"] == {FA: {"instruction_count": 1, "total_cost_us": 3.0}}


def test_inspect_directory_groups_by_module(tmp_path):
    write_profile(Profile([("fusion.3", 2.0)]), tmp_path / "d" / f"{FA}.pb")
    write_profile(Profile([("fusion.3", 5.0), ("fusion.3", 6.0)]), tmp_path / "d" / f"{FB}.pbtxt")
    report = inspect_report(tmp_path / "d")
    data = report.details["inspect"]
    assert data["fingerprints"] == {FA: {"instruction_count": 1, "total_cost_us": 2.0},
                                    FB: {"instruction_count": 2, "total_cost_us": 6.0}}
    assert data["duplicates"] == 1 and any("last entry" in w for w in report.warnings)
    assert any(f"module {FB}" in line for line in report.summary)


def test_inspect_cli_json_and_exit_codes(tmp_path):
    p = write_profile(sample(), tmp_path / "p.pbtxt")
    r = run("inspect", p, "--top", "2", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["command"] == "inspect" and report["inspect"]["instruction_count"] == 14
    assert len(report["inspect"]["top"]) == 2 and "cublas-gemm.3" in r.stderr
    empty = write_profile(Profile(), tmp_path / "e.pb")
    r = run("inspect", empty)
    assert r.exit_code == 1 and "empty" in r.stderr
    r = run("inspect", tmp_path / "p.txt")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr
    (tmp_path / "t.pb").write_bytes(b"\x0a\x05ab")
    r = run("inspect", tmp_path / "t.pb")
    assert r.exit_code == 2 and "t.pb" in r.stderr and "at byte 0" in r.stderr
    assert "Traceback" not in r.output


def test_diff(tmp_path):
    a = Profile([("fusion.1", 10.0), ("cublas-gemm.2", 100.0), ("all-reduce-start.1", 50.0), ("old.1", 1.0)])
    b = Profile([("fusion.1", 12.0), ("cublas-gemm.2", 90.0), ("all-reduce-start.1", 25.0), ("new.1", 5.0)])
    sa = load_profile_source(write_profile(a, tmp_path / "a.pb"))
    sb = load_profile_source(write_profile(b, tmp_path / "b.pbtxt"))
    d = diff_sources(sa, sb, top=2)
    assert d["only_in_a"] == ["old.1"] and d["only_in_b"] == ["new.1"] and d["common"] == 3
    assert [r["name"] for r in d["largest_changes"]] == ["all-reduce-start.1", "cublas-gemm.2"]
    assert [r["name"] for r in d["largest_relative_changes"]] == ["all-reduce-start.1", "fusion.1"]
    assert d["largest_relative_changes"][0]["relative"] == pytest.approx(-0.5)
    assert d["categories"]["collective"]["delta_us"] == pytest.approx(-25.0)
    assert d["total_delta_us"] == pytest.approx(-29.0)
    r = run("diff", tmp_path / "a.pb", tmp_path / "b.pbtxt", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["diff"]["only_in_b"] == ["new.1"]
    other = write_profile(Profile([("x.1", 1.0)]), tmp_path / "c.pb")
    r = run("diff", tmp_path / "a.pb", other)
    assert r.exit_code == 0 and "different programs" in r.stderr


def test_inspect_and_diff_print_their_product_on_stdout(tmp_path):
    """Issue 13 case 7: `pgle inspect p.pb > x.txt` is not empty; warnings stay on stderr."""
    p = write_profile(sample(), tmp_path / "p.pbtxt")
    r = run("inspect", p, "--top", "2")
    assert r.exit_code == 0, r.output
    assert "cublas-gemm.3" in r.stdout and "top 2:" in r.stdout and not r.stdout.startswith("pgle:")
    assert "top 2:" not in r.stderr
    other = write_profile(Profile([("x.1", 1.0)]), tmp_path / "c.pb")
    r = run("diff", p, other)
    assert r.exit_code == 0 and "only in B: x.1" in r.stdout
    assert "pgle: warning:" in r.stderr and "different programs" in r.stderr
    assert "different programs" not in r.stdout


def test_module_view_follows_xla_filter():
    p = Profile([("fusion.1", 1.0), (f"{FA}::fusion.2", 2.0), (f"{FB}::fusion.2", 3.0), ("a::b::c", 4.0)],
                [(f"{FA}::s", f"{FA}::d", 5.0), ("s", f"{FB}::d", 6.0)])
    assert module_view(p, FA) == Profile([("fusion.1", 1.0), ("fusion.2", 2.0)], [("s", "d", 5.0)])
    assert module_view(p, FB) == Profile([("fusion.1", 1.0), ("fusion.2", 3.0)], [("s", "d", 6.0)])
    assert qualified_fingerprints(p) == [FA, FB]
    assert qualify_profile(Profile([("x", 1.0), (f"{FB}::y", 2.0)]), FA).costs == \
        [(f"{FA}::x", 1.0), (f"{FB}::y", 2.0)]


def test_convert_round_trips_between_all_forms(tmp_path):
    original = Profile([(f"{FA}::fusion.1", 1.0), (f"{FB}::fusion.1", 2.0), ("shared.1", 3.0)],
                       [(f"{FA}::s", f"{FA}::d", 4.0)])
    src = write_profile(original, tmp_path / "q.pb")
    # binary -> text -> binary keeps every entry
    convert_profile(src, tmp_path / "q.pbtxt")
    convert_profile(tmp_path / "q.pbtxt", tmp_path / "q2.pb")
    assert read_profile(tmp_path / "q2.pb") == original
    # qualified file -> directory: each module gets exactly XLA's view
    report = convert_profile(src, tmp_path / "dir", fmt="text")
    d = load_profile_source(tmp_path / "dir")
    assert d.modules == {FA: module_view(original, FA), FB: module_view(original, FB)}
    assert all(f.suffix == ".pbtxt" for f in d.files) and report.profile["kind"] == "directory"
    # directory -> qualified file -> directory gives the same per-module views back
    convert_profile(tmp_path / "dir", tmp_path / "back.pb")
    back = read_profile(tmp_path / "back.pb")
    for fp in (FA, FB):
        assert module_view(back, fp) == module_view(original, fp)
    convert_profile(tmp_path / "back.pb", tmp_path / "dir2/")
    assert load_profile_source(tmp_path / "dir2").modules == d.modules
    # directory -> directory, re-encoded, one module only
    convert_profile(tmp_path / "dir", tmp_path / "dir3", fmt="binary", module=[FA])
    d3 = load_profile_source(tmp_path / "dir3")
    assert list(d3.modules) == [FA] and d3.files[0].suffix == ".pb"
    # bare file -> qualified file, and back to XLA's view of that module
    bare = write_profile(Profile([("fusion.1", 1.0)]), tmp_path / "bare.pb")
    convert_profile(bare, tmp_path / "qual.pb", qualify=FA)
    assert read_profile(tmp_path / "qual.pb").costs == [(f"{FA}::fusion.1", 1.0)]
    convert_profile(tmp_path / "qual.pb", tmp_path / "view.pbtxt", module=[FA])
    assert read_profile(tmp_path / "view.pbtxt").costs == [("fusion.1", 1.0)]


def test_convert_errors(tmp_path):
    bare = write_profile(Profile([("fusion.1", 1.0)]), tmp_path / "bare.pb")
    with pytest.raises(ProfileError, match="no <fingerprint>::name entries"):
        convert_profile(bare, tmp_path / "dir")
    convert_profile(bare, tmp_path / "dir", module=[FA, FB])
    assert sorted(load_profile_source(tmp_path / "dir").modules) == [FA, FB]
    with pytest.raises(ProfileError, match="already exists and is not empty"):
        convert_profile(bare, tmp_path / "dir", module=[FA])
    convert_profile(bare, tmp_path / "dir", module=[FA], force=True)  # replaced as a whole
    assert list(load_profile_source(tmp_path / "dir").modules) == [FA]
    with pytest.raises(ProfileError, match="not a module fingerprint"):
        convert_profile(bare, tmp_path / "x.pb", qualify="XYZ")
    with pytest.raises(ProfileError, match="silently ignores"):
        convert_profile(bare, tmp_path / "x.txt")
    with pytest.raises(BadInput, match="already exists"):
        convert_profile(bare, bare, force=False)
    r = run("convert", bare, tmp_path / "x.json")
    assert r.exit_code == 2 and "silently ignores" in r.stderr
    r = run("convert", bare, tmp_path / "ok.pbtxt")
    assert r.exit_code == 0 and read_profile(tmp_path / "ok.pbtxt") == read_profile(bare)
