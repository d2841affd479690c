"""A per-module directory read the way XLA reads it when `<fp>.pbtxt` does not parse.

XLA tries `<fp>.pbtxt`, logs its parse error and reads `<fp>.pb` (the XLA:GPU lane's scenario
`dir-pbtxt-fallback`, every jax 0.4.35-0.12.0.1: tests/data/xla_gpu/<v>/dir-pbtxt-fallback.log).
pgle read such a directory as corrupt (exit 2 from inspect, merge, convert); it now uses the
`.pb` and warns about the `.pbtxt`. The garbage text is the lane's own.
"""

from __future__ import annotations

import re

import pytest
from helpers.pgle_testing import DATA, report_of, run_pgle

from pgle.errors import ProfileError
from pgle.profiles.files import (
    Profile,
    content_addressed_copy,
    load_profile_source,
    write_profile,
)

FP_A = "fe8bd59d0f5f8ed3e9de8db97e1ec5eb"  # jit_prog_a_collectives, jax 0.10.2's lane log
FP_C = "5b555cdb08fb9a8f6afa7168fd9efe6c"  # jit_prog_c_scan
GARBAGE = "this is { not a proto\n"  # what the lane's scenario wrote


def _fallback_dir(d, costs_a=1.0):
    write_profile(Profile([("all-gather-start", 5000.0), ("fusion.1", costs_a)]), d / f"{FP_A}.pb")
    (d / f"{FP_A}.pbtxt").write_text(GARBAGE)
    write_profile(Profile([("loop_reduce_fusion", 50.0)]), d / f"{FP_C}.pbtxt")
    return d


def test_the_lane_proves_xla_falls_back_to_the_pb():
    """The fact the reading rests on, from the real compiler's logs (every lane version)."""
    logs = sorted(DATA.glob("xla_gpu/*/dir-pbtxt-fallback.log"))
    assert len(logs) >= 13
    for log in logs:
        text = log.read_text()
        failed = re.findall(r"failed to parse PGLE proto from text file '.*/(\w+)\.pbtxt'|"
                            r"Unable to read PGLE text proto from .*/(\w+)\.pbtxt", text)
        used = set(re.findall(r"Using PGLE profile from .*/(\w+)\.pb\s*$", text, re.MULTILINE))
        assert failed and {a or b for a, b in failed} <= used, log


def test_unparsable_pbtxt_falls_back_to_the_pb(tmp_path):
    d = _fallback_dir(tmp_path / "d")
    src = load_profile_source(d)
    assert src.modules[FP_A].costs == [("all-gather-start", 5000.0), ("fusion.1", 1.0)]
    assert [f.name for f in src.files] == [f"{FP_C}.pbtxt", f"{FP_A}.pb"]  # sorted by fp
    assert src.shadowed == []  # the .pb is what XLA reads
    assert [(p.name, "not a valid text" in why) for p, why in src.unreadable] == \
        [(f"{FP_A}.pbtxt", True)]
    assert len(src.warnings) == 1 and f"reads {FP_A}.pb instead" in src.warnings[0]
    assert src.to_dict()["unreadable"][0]["path"].endswith(f"{FP_A}.pbtxt")
    # The digest covers the unparsable file too: changing it changes the source.
    before = src.sha256
    (d / f"{FP_A}.pbtxt").write_text(GARBAGE + "more\n")
    assert load_profile_source(d).sha256 != before


def test_content_addressed_copy_keeps_the_unparsable_pbtxt(tmp_path):
    """XLA reads the copy as it reads the original: the .pbtxt fails, the .pb is used."""
    src = load_profile_source(_fallback_dir(tmp_path / "d"))
    copy = content_addressed_copy(src, tmp_path / "store")
    assert sorted(p.name for p in copy.iterdir()) == sorted(
        [f"{FP_A}.pb", f"{FP_A}.pbtxt", f"{FP_C}.pbtxt"])
    assert (copy / f"{FP_A}.pbtxt").read_text() == GARBAGE
    assert load_profile_source(copy).sha256 == src.sha256


def test_no_readable_form_is_still_an_error(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / f"{FP_A}.pbtxt").write_text(GARBAGE)  # no .pb: XLA gets no profile for the module
    with pytest.raises(ProfileError, match=rf"{FP_A}\.pbtxt is not a valid text"):
        load_profile_source(d)
    (d / f"{FP_A}.pb").write_bytes(b"\xff\xff\xff\xffnot a proto")  # neither parses
    with pytest.raises(ProfileError, match=rf"{FP_A}\.pb is not a valid binary"):
        load_profile_source(d)


def test_a_broken_shadowed_pb_is_a_warning(tmp_path):
    """XLA reads the good .pbtxt and never opens the .pb."""
    d = tmp_path / "d"
    write_profile(Profile([("fusion.1", 1.0)]), d / f"{FP_A}.pbtxt")
    (d / f"{FP_A}.pb").write_bytes(b"\xff\xff\xff\xffnot a proto")
    src = load_profile_source(d)
    assert [f.name for f in src.files] == [f"{FP_A}.pbtxt"]
    assert [f.name for f in src.shadowed] == [f"{FP_A}.pb"]
    assert "XLA never reads it" in src.warnings[0]


def test_inspect_and_merge_read_it_as_xla_does(tmp_path):
    """Before: `pgle inspect` and `pgle merge` exited 2 on the .pbtxt."""
    a = _fallback_dir(tmp_path / "a", 1.0)
    b = _fallback_dir(tmp_path / "b", 3.0)
    proc = run_pgle("inspect", "--json", str(a), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["inspect"]["instruction_count"] == 3
    assert any(f"{FP_A}.pbtxt" in w and "reads" in w for w in report["warnings"])
    proc = run_pgle("inspect", str(a), cwd=tmp_path)  # the human form says it on stderr
    assert proc.returncode == 0 and f"{FP_A}.pbtxt" in proc.stderr.decode()

    out = tmp_path / "merged"
    proc = run_pgle("merge", "--json", "--method", "max", str(a), str(b), "-o", str(out),
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert sum(f"{FP_A}.pbtxt" in w for w in report_of(proc)["warnings"]) == 2
    merged = load_profile_source(out)
    assert dict(merged.modules[FP_A].costs)["fusion.1"] == 3.0
    assert merged.unreadable == []  # pgle writes only what parses
