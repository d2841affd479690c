"""The verdict rules each jax version forces, on the real XLA:GPU logs of the lane
(tests/data/xla_gpu/<jax>/, captured 2026-11-25) and the public ones, through the real
`pgle verify`."""
from __future__ import annotations

import json
import tracemalloc

import pytest
from click.testing import CliRunner

from helpers.pgle_testing import REPO
from pgle.cli.main import cli as pgle_main
from pgle.evidence import log_version, xla_log
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts import checker
from pgle.verdicts.pgle_applied import SILENCE_FULL
from pgle.xla.versions import parse_version

DATA = REPO / "tests" / "data" / "xla_gpu"


def verify(*args: str) -> tuple[dict, int]:
    result = CliRunner().invoke(pgle_main, ["verify", "--json", *args], catch_exceptions=False)
    return json.loads(result.stdout), result.exit_code


@pytest.mark.parametrize("version", ["0.4.38", "0.5.0"])
def test_a_silent_warn_checker_never_reads_as_full_coverage(version):
    # jax 0.4.38/0.5.0 print no checker block under WARN even when instructions are missing
    # (their ERROR reruns fail the compile): with or without --jax, no row says 100%.
    for log in sorted((DATA / version).glob("*.log")):
        if "Discarding the profile" in log.read_text():
            continue  # ERROR strictness shows itself: a module that compiled missed nothing
        for args in ([], ["--jax", version]):
            report, _ = verify(*args, str(log))
            assert all(m["coverage"] != 1.0 for m in report["modules"]), (log.name, report)
    # A profile none of whose names is in any module: not a pass under --require-applied.
    report, code = verify("--require-applied", str(DATA / version / "fp-other.log"))
    assert code == 3 and report["coverage_unknown"] == 5, report
    assert "jax 0.4.36-0.5.0" in " ".join(report["reasons"])


def test_without_jax_the_version_comes_from_the_log_and_is_said():
    report, _ = verify(str(DATA / "0.4.38" / "good-pbtxt.log"))
    assert report["jax_assumed"].startswith("jax 0.4.38")
    report, _ = verify(str(DATA / "0.12.0.1" / "good-pbtxt.log"))
    assert "0.12.0.1" in report["jax_assumed"]
    assert sorted(m["coverage"] for m in report["modules"]) == [pytest.approx(20 / 21)] + [1.0] * 4
    # The 2023 public log (jax ~0.4.14, no checker): never "coverage 100%".
    report, _ = verify(str(DATA / "public" / "jax-docs-gpu-performance-tips-2023.log"))
    assert report["status"] == "applied" and report["modules"][0]["coverage"] is None
    assert "<= 0.6" in report["jax_assumed"]


@pytest.mark.parametrize("version", ["0.11.2", "0.12.0.1"])
def test_autotuner_candidates_are_not_the_workloads_modules(version):
    report, code = verify("--require-applied", str(DATA / version / "dir-pbtxt.log"))
    rows = {m["module"]: m for m in report["modules"]}
    assert set(rows) == {
        "jit_prog_a_collectives", "jit_prog_b_cond", "jit_prog_c_scan", "jit_prog_d_train",
        "jit_prog_d_eval"}
    subs = report["sub_compiles"]
    assert subs and all(s["recognised_by"] == "module id" for s in subs)
    assert {s["compiled_for"] for s in subs} <= set(rows)
    assert "gemm_fusion_dot" in " ".join(s["module"] for s in subs)
    assert any("autotuner candidates" in r for r in report["reasons"])
    # The candidates count for nothing: every module is applied but jit_prog_d_train, whose
    # all-reduce-start XLA turned into the synchronous all-reduce.6 after scheduling (the
    # compile's own HLO, scenarios.json; jax >= 0.11.1), so that no profile can hold it. This
    # log (without convert_async_collectives_to_sync=3 in TF_CPP_VMODULE) cannot show that:
    # partial, and how to tell (issue 22: never applied while a collective may be missing).
    assert {k for k, m in rows.items() if m["status"] != "applied"} == {"jit_prog_d_train"}
    d = rows["jit_prog_d_train"]
    assert (d["status"], d["rule"], d["collectives_unresolved"]) == (
        "partial", "collectives_unresolved", ["all-reduce-start"])
    assert (report["status"], code) == ("partial", 3)
    # The same directory, its log showing the pass's lines (scenario sync-converted): the
    # per-module directory holding the user's modules is applied, candidates apart.
    report, code = verify("--require-applied", str(DATA / version / "sync-converted.log"))
    assert (report["status"], code) == ("applied", 0), report["reasons"]
    rows = {m["module"]: m for m in report["modules"]}
    assert set(rows) == {"jit_prog_a_collectives", "jit_prog_d_train", "jit_prog_d_eval",
                         "jit_prog_e_ring", "jit_prog_h_gspmd"}
    assert report["sub_compiles"] and all(m["coverage"] == 1.0 for m in rows.values())
    assert rows["jit_prog_d_train"]["collectives_converted"] == [
        {"scheduled": "all-reduce-start", "executed": None}]
    # Without module ids (no VLOG): told apart by their names, and said so.
    report, _ = verify(str(DATA / version / "no-vmodule.log"))
    assert len(report["modules"]) == 5 and report["sub_compiles"]
    assert all(s["recognised_by"] == "name" for s in report["sub_compiles"])


@pytest.mark.parametrize("version", ["0.4.35", "0.4.38", "0.5.0", "0.5.1", "0.5.3", "0.12.0.1"])
def test_a_directory_with_files_for_some_modules_is_partial(version):
    # jax <= 0.5.x print only the fingerprint line for a module without a file.
    report, _ = verify(str(DATA / version / "dir-some-missing.log"))
    assert report["status"] == "partial", report["reasons"]
    rows = {m["module"]: m["status"] for m in report["modules"]}
    assert rows["jit_prog_a_collectives"] == "applied" and rows["jit_prog_c_scan"] == "applied"
    assert rows["jit_prog_b_cond"] == rows["jit_prog_d_train"] == "not_applied"


@pytest.mark.parametrize("version", ["0.4.35", "0.5.1", "0.7.2", "0.12.0.1"])
def test_pbtxt_to_pb_fallback_is_not_an_error(version):
    report, _ = verify(str(DATA / version / "dir-pbtxt-fallback.log"))
    rows = {m["module"]: m for m in report["modules"]}
    # jax >= 0.11.1: jit_prog_d_train's all-reduce-start runs as the synchronous all-reduce.6
    # (the compile's own HLO), which this log cannot show: that module alone is unresolved.
    unresolved = {"jit_prog_d_train"} if parse_version(version) >= (0, 11, 1) else set()
    assert {k for k, m in rows.items() if m["rule"] == "collectives_unresolved"} == unresolved
    assert all(m["status"] == "applied" for k, m in rows.items() if k not in unresolved)
    assert report["status"] == ("partial" if unresolved else "applied"), report["reasons"]
    assert any("read the .pb beside it" in n for m in report["modules"] for n in m["notes"])
    assert any("did not parse and XLA read the <fp>.pb" in r for r in report["reasons"])


def test_verify_judges_the_log_when_pgle_cannot_read_the_profile(tmp_path):
    # jax <= 0.5.0 reads a .txt profile as text; pgle refuses the extension: a warning only.
    (tmp_path / "good.txt").write_text("costs { name: \"x\" cost_us: 1.0 }\n")
    log = tmp_path / "run.log"  # the real log, read from where this test put the profile
    log.write_text((DATA / "0.4.35" / "wrong-extension.log").read_text().replace(
        "/tmp/pgle-lane/0.4.35/profiles/good.txt", str(tmp_path / "good.txt")))
    report, code = verify("--profile", str(tmp_path / "good.txt"), str(log))
    assert code == 0 and report["status"] == "applied", report
    assert any("cannot read the profile" in w for w in report["warnings"])
    (tmp_path / "empty-dir").mkdir()
    report, code = verify("--profile", str(tmp_path / "empty-dir"),
                          str(DATA / "0.10.2" / "dir-empty.log"))
    assert code == 0 and report["status"] == "not_applied"


def test_checker_without_profile_path_is_recognised():
    report, _ = verify(str(DATA / "public" / "jax-toolbox-1135-checker-without-path.log"))
    assert report["status"] == "not_applied"
    assert "no profile path specified" in report["reasons"][0]
    assert "INFO log" not in report["reasons"][0]


def test_divergent_rank_fingerprints_are_named():
    report, _ = verify(str(DATA / "0.10.2" / "ranks-divergent.log"))
    assert report["status"] == "partial"
    assert "the ranks compiled different programs for jit_prog_a_collectives" in report["reasons"][0]


def test_interleaved_blocks_of_parallel_compiles_and_the_traceback_line():
    # Real: five modules compiled from five Python threads (their blocks interleave) and a
    # compile that raised (Python's traceback, no module name in it).
    for version in ("0.4.35", "0.5.3", "0.7.2", "0.12.0.1"):
        doc = json.loads((DATA / version / "scenarios.json").read_text())
        truth = {m["module"]: (m.get("checker_found"), m.get("checker_missing") or 0)
                 for m in doc["scenarios"]["threads"]["facts"]["log_per_module"]
                 if m.get("module", "").startswith("jit_") and "-clone" not in m["module"]}
        report, _ = verify(str(DATA / version / "threads.log"))
        rows = {m["module"]: (m["instructions_found"], m["instructions_missing"] or 0)
                for m in report["modules"]}
        assert rows == truth, version
        report, _ = verify(str(DATA / version / "runtime-error.log"))
        assert report["status"] == "error" and "Discarding the profile" in report["reasons"][0]
        row = next(m for m in report["modules"] if m["module"] == "jit_prog_a_collectives"
                   or m["module"] is None)
        assert row["status"] == "not_applied"


def test_seventeen_identical_stale_profile_lines_are_one(tmp_path):
    lines = (DATA / "public" / "maxtext-jax0.4.25-h100x8-may-not-applicable.log").read_text()
    using, found, nope = [ln for ln in lines.splitlines() if "gpu_hlo_schedule" in ln][:3]
    log = tmp_path / "stale.log"
    log.write_text("".join(f"{using}\n{found}\n{nope.replace('jit_convert_element_type', f'jit_m{i}')}\n"
                           for i in range(17)))
    result = CliRunner().invoke(pgle_main, ["verify", str(log)], catch_exceptions=False)
    shown = [ln for ln in result.stderr.splitlines() if "partial (coverage ?)" in ln]
    assert len(shown) == 1 and shown[0].startswith("pgle:   17 modules"), result.stderr
    assert "first: all-gather-start" in shown[0]  # XLA's note reaches the terminal


def test_pre_release_versions_sort_before_their_release():
    assert parse_version("0.5.1.dev20250101") < (0, 5, 1)
    assert parse_version("0.5.1.dev20250101") >= (0, 5, 0)
    assert parse_version("0.5.1rc1") < (0, 5, 1) and parse_version("0.5.1") == (0, 5, 1)


def test_a_line_longer_than_the_buffer_is_scanned_in_bounded_memory(tmp_path, monkeypatch):
    # The figure in docs/reliability.md: memory stays max(CHUNK, LONG_LINE) whatever the line's
    # length (here scaled down: a 64 MiB line against a 128 KiB buffer and a 256 KiB limit).
    monkeypatch.setattr(xla_log, "CHUNK", 128 << 10)
    monkeypatch.setattr(xla_log, "LONG_LINE", 256 << 10)
    monkeypatch.setattr(xla_log, "LONG_LINE_TAIL", 16 << 10)
    found = "I0822 12:34:56.789012  7 gpu_hlo_schedule.cc:1] Found profile for module jit_m, " \
            "using profile guided latency estimator"
    log = tmp_path / "long.log"
    with open(log, "wb") as f:
        f.write(b"I0822 12:34:56.789012  7 gpu_hlo_schedule.cc:1] Using PGLE profile from /p.pb\n")
        for _ in range(64):
            f.write(b"\r" * (1 << 20))
        f.write(b"\r" + found.encode())
    tracemalloc.start()
    ev = LogScanner().scan_file(log)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert ev.long_lines == 1 and [m.module for m in ev.modules] == ["jit_m"]
    assert peak < 4 * (256 << 10), peak


def test_each_wordings_bounds_are_as_tight_as_the_lane_proves():
    """A wording's first (last) version lies above (below) the lane version just before (after)
    the ones that print it: the lane captured that version without it. A looser bound admits
    a version known not to print it, and a jax >= 0.5.1 log then reads as "maybe 0.5.0", whose
    silent WARN checker proves nothing (coverage unknown instead of full)."""
    lane = sorted(log_version.LINES, key=log_version.parse)
    checked = 0
    for kind, first, last, _ in log_version.FEATURES:
        printed = [v for v in lane if kind in log_version.LINES[v]]
        if not printed:
            continue  # a wording the grid does not hold (prefixes, module names)
        checked += 1
        for v in printed:  # safe: every lane version that prints it lies within
            assert log_version._in(log_version.parse(v), first, last), (kind, v)
        before = lane.index(printed[0]) - 1
        after = lane.index(printed[-1]) + 1
        if first is not None and before >= 0:
            assert log_version.parse(lane[before]) < first, (kind, lane[before], first)
        if last is not None and after < len(lane):
            assert log_version.parse(lane[after]) > last, (kind, lane[after], last)
    assert checked >= 15
    # A log of a version the lane never captured (its line numbers match none), with the
    # jax >= 0.5.1 wording: the WARN checker's silence there is full coverage.
    inference = log_version.infer({"using_fdo": 9999})
    assert inference.low == (0, 5, 1) and not inference.matches
    assert checker.silence_of_log(inference, checker_off=False, checker_lines=0,
                                  discards=0) == SILENCE_FULL


def test_a_reissue_lies_within_a_bound_on_its_release():
    # jax 0.12.0.1 (a lane version) reissues 0.12.0: a rule up to 0.12.0 holds for it, one
    # up to 0.11.2 does not (Inference.within compares a version cut to the bound's length).
    pinned = log_version.Inference(None, None, ("0.12.0.1",), ())
    assert pinned.within(None, (0, 12, 0)) and pinned.within((0, 12, 0), None)
    assert pinned.within(None, (0, 12)) and not pinned.within(None, (0, 11, 2))
    assert not log_version.Inference(None, None, ("0.12.1",), ()).within(None, (0, 12, 0))
