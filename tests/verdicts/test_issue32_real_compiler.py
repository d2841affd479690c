"""Issue 32 on the real XLA:GPU compiler (deviceless H100 x8; tests/data/xla_gpu/<jax>/issue32,
captured by tests/xla_gpu/capture_issue32.py, provenance in tests/data/xla_gpu/README.md):
the verdict of each log, through the real `pgle verify` command, against what the compiler did
(cases.json: its exit code, the compile's error, the names the checker listed)."""
from __future__ import annotations

import json

import pytest

from helpers.pgle_testing import REPO, pgle_lines, report_of, run_pgle

DATA = REPO / "tests" / "data" / "xla_gpu"
NEW = ("0.11.2", "0.12.0.1")


def cases(version: str) -> dict:
    return json.loads((DATA / version / "issue32" / "cases.json").read_text())["cases"]


def verify(tmp_path, version: str, case: str, *args: str):
    proc = run_pgle("verify", "--json", "--jax", version, *args,
                    str(DATA / version / "issue32" / f"{case}.log"), cwd=tmp_path)
    return proc, report_of(proc)


@pytest.mark.parametrize("version", NEW)
@pytest.mark.parametrize("case", ["verifier-complete-error", "verifier-no-profile-error",
                                  "verifier-traceback"])
def test_a_compile_the_hlo_verifier_failed_is_never_applied(tmp_path, version, case):
    truth = cases(version)[case]
    assert truth["exit_code"] != 0 and "[hlo verifier]" in truth["compile_failed"]
    proc, rep = verify(tmp_path, version, case, "--require-applied")
    assert proc.returncode == 3
    assert rep["status"] == "error"
    (row,) = rep["modules"]
    assert (row["module"], row["status"], row["rule"]) == ("jit_prog_k_sync", "not_applied",
                                                           "compile_failed")
    xla = truth["compile_failed"].split("Error: ", 1)[1]  # without the exception's class
    assert f"the compile failed (XLA: {xla})" in row["notes"]
    reasons = " ".join(rep["reasons"])
    assert "HLO verifier" in reasons and "PGLE_STRICTNESS_LEVEL_WARN" in reasons
    assert "jit_prog_k_sync: not_applied (compile failed)" in "\n".join(pgle_lines(proc))


def test_the_same_program_compiles_on_jax_0_10_2(tmp_path):
    """jax 0.10.2 keeps the all-gather's name when it makes it synchronous: ERROR compiles."""
    assert cases("0.10.2")["verifier-complete-error"]["exit_code"] == 0
    _, rep = verify(tmp_path, "0.10.2", "verifier-complete-error")
    assert rep["status"] == "applied", rep["reasons"]


@pytest.mark.parametrize("version", NEW)
def test_a_missing_triton_collective_fusion_is_never_compute(tmp_path, version):
    truth = cases(version)["triton-psum-missing"]
    assert truth["checker_missing_names"] == ["fusion-start", "fusion-done"] or sorted(
        truth["checker_missing_names"]) == ["fusion-done", "fusion-start"]
    proc, rep = verify(tmp_path, version, "triton-psum-missing", "--require-applied")
    assert proc.returncode == 3
    (row,) = rep["modules"]
    assert (rep["status"], row["status"], row["rule"]) == ("partial", "partial", "async_unknown")
    assert sorted(row["async_unknown"]) == ["fusion-done", "fusion-start"]
    assert any("__triton_collective" in n and "pgle run" in n for n in row["notes"])
    line = "\n".join(pgle_lines(proc))
    assert "2 async of unknown kind missing" in line and "no collective missing" not in line


def test_on_jax_0_10_2_the_psum_is_a_plain_all_reduce(tmp_path):
    assert cases("0.10.2")["triton-psum-missing"]["checker_missing_names"] == ["all-reduce-start"]
    _, rep = verify(tmp_path, "0.10.2", "triton-psum-missing")
    (row,) = rep["modules"]
    assert (row["status"], row["rule"], row["collectives_missing"]) == (
        "partial", "collectives", ["all-reduce-start"])


@pytest.mark.parametrize("version", ("0.10.2",) + NEW)
def test_a_complete_profile_is_applied(tmp_path, version):
    proc, rep = verify(tmp_path, version, "triton-psum-good", "--require-applied")
    assert proc.returncode == 0 and rep["status"] == "applied", rep["reasons"]


@pytest.mark.parametrize("version", ("0.10.2",) + NEW)
def test_low_coverage_sol_rule_by_default_and_an_explicit_gate_applies(tmp_path, version):
    proc, rep = verify(tmp_path, version, "low-coverage", "--require-applied")
    (row,) = rep["modules"]
    assert proc.returncode == 0 and row["rule"] == "sol_fallback"
    assert row["coverage"] < 0.9 and row["collectives_missing"] == []
    assert "the speed-of-light rule decided 1 module" in pgle_lines(proc)[0]
    assert "assumed a Hopper/Blackwell GPU" in pgle_lines(proc)[0]
    proc, rep = verify(tmp_path, version, "low-coverage", "--require-applied",
                       "--min-coverage", "0.95")
    assert proc.returncode == 3
    assert (rep["status"], rep["modules"][0]["rule"]) == ("partial", "min_coverage")
