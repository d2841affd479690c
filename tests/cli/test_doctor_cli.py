"""`pgle flags explain`, and `--help` never importing jax, as a user runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.pgle_testing import REPO, pgle_env, pgle_lines, report_of, run_pgle


def test_explain_prints_meaning_default_and_versions(tmp_path):
    proc = run_pgle("flags", "explain",
                    "--xla_gpu_enable_latency_hiding_scheduler=true "
                    "--xla_gpu_all_reduce_combine_threshold_bytes=1048576 --xla_mine=1",
                    cwd=tmp_path)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "--xla_gpu_enable_latency_hiding_scheduler=true  [ok]" in out
    assert "default: '31457287'" in out and "256" in out  # the guide's wrong default, named
    assert "--xla_mine=1  [unknown]" in out and "--probe" in out
    assert pgle_lines(proc) == ["pgle: 3 flags: 0 errors, 0 warnings, 1 not in pgle's table"]


def test_explain_defaults_to_the_environment_and_fails_on_removed_flags(tmp_path):
    env = pgle_env(XLA_FLAGS="--xla_gpu_lhs_enable_gpu_async_tracker=true --xla_dump_to=/tmp/d "
                             "stop --xla_gpu_graph_level=1")
    proc = run_pgle("flags", "explain", "--json", cwd=tmp_path, env=env)
    report = report_of(proc)
    assert proc.returncode == 1 and report["status"] == "error"
    assert [(f["name"], f["status"]) for f in report["flags"]] == [
        ("xla_gpu_lhs_enable_gpu_async_tracker", "error"), ("xla_dump_to", "ok")]
    assert "delete the flag" in report["flags"][0]["message"]
    assert report["ignored_tail"] == "stop --xla_gpu_graph_level=1"
    assert any("'stop'" in w for w in report["warnings"])
    assert report["reasons"] == [f"--xla_gpu_lhs_enable_gpu_async_tracker=true: "
                                 f"{report['flags'][0]['message']}"]


def test_explain_probe_asks_jaxlib(tmp_path):
    proc = run_pgle("flags", "explain", "--probe", "--json",
                    "--xla_mine=1 --xla_gpu_triton_gemm_any=false", cwd=tmp_path)
    report = report_of(proc)
    assert proc.returncode == 1
    assert [(f["name"], f["status"]) for f in report["flags"]] == [
        ("xla_mine", "error"), ("xla_gpu_triton_gemm_any", "ok")]
    assert "rejected by jaxlib" in report["flags"][0]["message"]
    assert report["probe"]["accepted"] is False


def test_explain_unreadable_flag_file_is_bad_input(tmp_path):
    proc = run_pgle("flags", "explain", str(tmp_path / "no-such-file"), cwd=tmp_path)
    assert proc.returncode == 2
    [line] = pgle_lines(proc)
    assert line.startswith("pgle: error: XLA_FLAGS=") and "Traceback" not in proc.stderr.decode()


def test_explain_nothing(tmp_path):
    proc = run_pgle("flags", "explain", "", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.decode().strip() == "no flags"


@pytest.mark.parametrize("args", [["--help"], ["doctor", "--help"], ["flags", "explain", "--help"],
                                  ["view", "--help"]])
def test_help_never_imports_jax(args):
    code = ("import sys\nfrom pgle.cli.main import cli\n"
            "try:\n    cli(args=sys.argv[1:], prog_name='pgle')\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('jax', 'jaxlib', 'xprof') if m in sys.modules]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout
