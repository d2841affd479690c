"""Async collectives XLA makes synchronous after scheduling (pgle/verdicts/sync_converted.py).

On jax >= 0.11.1 XLA's gpu-convert-async-collectives-to-sync pass replaces an async pair that
nothing overlaps with a new synchronous instruction (`all-reduce-start` -> `all-reduce.6`):
the accuracy checker asks for `all-reduce-start`, which no trace and no profile can hold. Real
data throughout: the lane's logs (tests/data/xla_gpu/<jax>/) and the executed HLO of the same
compiles (tests/data/xla_gpu/<jax>/hlo/<scenario>/, tests/xla_gpu/capture_hlo.py: the compile
repeated with the scenario's flags, its fingerprints and checker lines equal to the log's).
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.pgle_testing import REPO
from pgle.cli.main import cli as pgle_main

from pgle.evidence.xla_log import LogScanner
from pgle.verdicts import sync_converted
from pgle.verdicts.pgle_applied import judge
from pgle.verdicts.sync_converted import ExecutedModules, executed_of, split

DATA = REPO / "tests" / "data" / "xla_gpu"
V12 = DATA / "0.12.0.1"
D_TRAIN_FP = "206051e0bbc148cac6d904e652181980"


def verify(*args: str) -> tuple[dict, int]:
    result = CliRunner().invoke(pgle_main, ["verify", "--json", *args], catch_exceptions=False)
    return json.loads(result.stdout), result.exit_code


def hlo(version: str, scenario: str, module: str):
    return executed_of((DATA / version / "hlo" / scenario / f"{module}.txt").read_text())


def rows(verdict) -> dict[str, dict]:
    return {m["module"]: m for m in verdict.modules}


def test_the_executed_hlo_names_the_synchronous_instruction():
    new = hlo("0.12.0.1", "dir-pbtxt", "jit_prog_d_train")
    assert new.fingerprint == D_TRAIN_FP
    assert "all-reduce-start" not in new.names and "all-reduce.6" in new.names
    assert new.renamed["all-reduce-start"] == "all-reduce.6"
    # jax 0.10.2 makes the same pair synchronous (is_sync) and keeps its names.
    old = hlo("0.10.2", "sync-converted", "jit_prog_d_train")
    assert {"all-reduce-start", "all-reduce-done"} <= old.names
    assert "all-reduce-start" not in old.renamed
    assert '"is_sync":true' in (DATA / "0.10.2" / "hlo" / "sync-converted" /
                                "jit_prog_d_train.txt").read_text()


def test_pgle_run_judges_from_the_executed_hlo():
    # What `pgle run` does with the module's HLO its harness kept: the real 0.12.0.1 log of a
    # per-module directory (dir-pbtxt, no VLOG lines of the pass) is exactly judged.
    ev = LogScanner().scan_file(V12 / "dir-pbtxt.log")
    executed = ExecutedModules([("jit_prog_d_train", hlo("0.12.0.1", "dir-pbtxt",
                                                          "jit_prog_d_train"))])
    v = judge(ev, executed=executed, renamed=True, sol_fallback=True)
    assert v.status == "applied", v.reasons
    d = rows(v)["jit_prog_d_train"]
    assert (d["status"], d["rule"], d["coverage"]) == ("applied", "converted_to_sync", 1.0)
    assert d["instructions_missing"] == 1 and d["collectives_missing"] == []
    assert d["collectives_converted"] == [{"scheduled": "all-reduce-start",
                                           "executed": "all-reduce.6"}]
    assert any("all-reduce-start ran as the synchronous all-reduce.6" in n for n in d["notes"])
    # The log alone cannot tell: partial, and how to tell.
    v = judge(LogScanner().scan_file(V12 / "dir-pbtxt.log"), renamed=True, sol_fallback=True)
    d = rows(v)["jit_prog_d_train"]
    assert (v.status, d["rule"]) == ("partial", "collectives_unresolved")
    assert d["coverage"] == pytest.approx(20 / 21)
    assert any("pgle run" in n and sync_converted.VMODULE in n for n in d["notes"])
    assert any("(jit_prog_d_train) miss only async collectives that XLA may have made "
               "synchronous" in r for r in v.reasons)


def test_a_collective_the_executed_module_runs_async_is_missing():
    # sync-converted-missing: program a's file lacks its all-gather-start, which XLA keeps
    # async (it is in a's executed HLO); d_train's all-reduce-start it made synchronous. The
    # log's VLOG lines of the pass are dropped: the HLO alone decides.
    text = (V12 / "sync-converted-missing.log").read_text()
    log = "".join(ln for ln in text.splitlines(keepends=True)
                  if "convert_async_collectives_to_sync" not in ln)
    ev = LogScanner().feed_lines(ln.encode() for ln in log.splitlines())
    executed = ExecutedModules([
        (m, hlo("0.12.0.1", "sync-converted-missing", m))
        for m in ("jit_prog_a_collectives", "jit_prog_d_train")])
    v = judge(ev, executed=executed, renamed=True, sol_fallback=True)
    r = rows(v)
    assert (r["jit_prog_a_collectives"]["status"], r["jit_prog_a_collectives"]["rule"]) == (
        "partial", "collectives")
    assert r["jit_prog_a_collectives"]["collectives_missing"] == ["all-gather-start"]
    assert r["jit_prog_d_train"]["status"] == "applied"
    assert v.status == "partial"


def test_the_hlo_of_another_compile_is_not_used():
    # Found by fingerprint: jax 0.10.2's jit_prog_d_train (another fingerprint, the name kept)
    # says nothing about the 0.12.0.1 compile the log shows.
    executed = ExecutedModules([("jit_prog_d_train", hlo("0.10.2", "sync-converted",
                                                          "jit_prog_d_train"))])
    assert executed.find("jit_prog_d_train", D_TRAIN_FP) is None
    v = judge(LogScanner().scan_file(V12 / "dir-pbtxt.log"), executed=executed, renamed=True)
    assert rows(v)["jit_prog_d_train"]["rule"] == "collectives_unresolved"


@pytest.mark.parametrize("version", ["0.11.2", "0.12.0.1"])
def test_the_pass_lines_in_the_log_decide_where_the_jax_renames(version):
    # TF_CPP_VMODULE=...,convert_async_collectives_to_sync=3: `Found async start %S` for each
    # async collective the pass looks at, `Added pair: {S, D` for each it makes synchronous.
    report, code = verify("--require-applied", str(DATA / version / "sync-converted.log"))
    assert (report["status"], code) == ("applied", 0), report["reasons"]
    assert version in report["jax_assumed"]  # the pass's own line numbers are a clue too
    r = {m["module"]: m for m in report["modules"]}
    assert sorted(c["scheduled"] for c in r["jit_prog_h_gspmd"]["collectives_converted"]) == [
        "all-gather-start", "reduce-scatter-start"]
    assert r["jit_prog_e_ring"]["collectives_converted"] == [
        {"scheduled": "collective-permute-start.1", "executed": None}]
    # A collective the pass looked at and kept async (program a's all-gather-start): missing.
    report, code = verify("--require-applied", str(DATA / version / "sync-converted-missing.log"))
    r = {m["module"]: m for m in report["modules"]}
    assert (report["status"], code) == ("partial", 3)
    assert (r["jit_prog_a_collectives"]["rule"], r["jit_prog_d_train"]["status"]) == (
        "collectives", "applied")


def test_the_same_lines_from_a_jax_that_keeps_the_names_excuse_nothing():
    # jax <= 0.11.0 keeps the names of the pair it makes synchronous: a profile of the run
    # holds all-reduce-start, so its absence is a miss. --jax says which jax wrote the log.
    report, _ = verify("--jax", "0.11.0", str(V12 / "sync-converted.log"))
    r = {m["module"]: m for m in report["modules"]}
    assert (r["jit_prog_d_train"]["status"], r["jit_prog_d_train"]["rule"]) == (
        "partial", "collectives")
    assert split(["all-reduce-start"], added_pairs=["all-reduce-start"], renamed=False).missing
    unknown = split(["all-reduce-start"], added_pairs=["all-reduce-start"], renamed=None)
    assert (unknown.unresolved, unknown.why_unresolved) == (["all-reduce-start"], "version")
    assert split(["all-reduce-start"], added_pairs=["all-reduce-start"], renamed=True).converted
    # Synchronous collectives and host copies run under their names: never converted.
    s = split(["psum.7", "copy-start.2", "all-reduce.6"], renamed=True)
    assert s.missing == ["psum.7", "copy-start.2", "all-reduce.6"] and not s.unresolved


def test_pass_lines_without_fingerprint_lines_are_given_to_no_module(tmp_path):
    # Without gpu_hlo_schedule=1 in TF_CPP_VMODULE nothing shows where each module's compile
    # begins: the pairs could be another module's. Unresolved, and said so.
    text = (V12 / "sync-converted.log").read_text()
    log = tmp_path / "no-fp.log"
    log.write_text("".join(ln for ln in text.splitlines(keepends=True)
                           if "Fingerprint before LHS" not in ln))
    report, code = verify("--require-applied", str(log))
    r = {m["module"]: m for m in report["modules"]}
    assert r["jit_prog_d_train"]["rule"] == "collectives_unresolved" and code == 3
    assert any("cannot give to a module" in x for x in report["reasons"])


def test_rows_say_what_was_not_counted():
    report, _ = verify(str(V12 / "sync-converted.log"))
    lines = "\n".join(report["summary"])
    assert ("jit_prog_d_train: applied (coverage 100%; 1 async collective made synchronous "
            "by XLA, in no profile: not counted)") in lines
    report, _ = verify(str(V12 / "dir-pbtxt.log"))
    lines = "\n".join(report["summary"])
    assert "jit_prog_d_train: partial (coverage 95%, 1 missing; 1 collective missing; 1 of " \
           "them maybe made synchronous by XLA (the log cannot tell))" in lines
