"""`pgle auto`: real JAX on CPU in real subprocesses.

On CPU the collected profile is empty; tests that need JAX to recompile with a
profile load tests/helpers/pgle_cpu_profile through PYTHONPATH (test-only).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO, TESTS, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle
from pgle.commands import auto_env
from pgle.errors import BadInput
from pgle.launch.workload import Workload

FGH = str(WORKLOADS / "auto_fgh.py")
HELPER = str(TESTS / "helpers" / "pgle_cpu_profile")


def helper_env(**extra: str) -> dict[str, str]:
    return pgle_env(PYTHONPATH=HELPER, **extra)


def modules_of(rep: dict) -> dict[str, dict]:
    return {m["module"]: m for m in rep["modules"]}


def test_auto_verdict_per_module(project: Path):
    proc = run_pgle("auto", "--runs", "2", "--percentile", "100", "--require", "jit_f", "--json",
                    FGH, "--", "--f", "3", "--g", "1", "--h", "0", cwd=project, env=helper_env())
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    # With --json the workload's stdout moves to stderr; stdout holds only the report.
    assert b"auto_fgh done 3 1 0" in proc.stderr
    rep = report_of(proc)
    assert rep["command"] == "auto" and rep["status"] == "optimized"
    mods = modules_of(rep)
    f, g = mods["jit_f"], mods["jit_g"]
    assert f["status"] == "optimized" and f["profiled_executions"] == 2 and f["profile_bytes"] == 21
    assert g["status"] == "not_optimized" and g["profiled_executions"] == 1
    assert "needs 3" in g["reason"] and "lower --runs" in g["fix"]
    assert "jit_h" not in mods
    assert Path(rep["log_path"]).exists()


def test_auto_require_all_is_not_verified(project: Path):
    proc = run_pgle("auto", "--runs", "1", "--require-all", FGH, "--", "--f", "2", "--g", "1",
                    "--h", "0", cwd=project, env=helper_env())
    assert proc.returncode == 3, proc.stderr.decode()[-2000:]
    lines = pgle_lines(proc)
    assert any("jit_f: optimized" in l for l in lines)
    assert any(l.startswith("pgle: not verified:") and "jit_g is not_optimized" in l for l in lines)


def test_auto_on_cpu_without_helper_is_empty_profile(project: Path):
    proc = run_pgle("auto", "--runs", "2", "--percentile", "50", "--json", FGH, "--", "--f", "3",
                    "--g", "0", "--h", "0", cwd=project, env=pgle_env())
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    rep = report_of(proc)
    f = modules_of(rep)["jit_f"]
    assert rep["status"] == "empty_profile"
    assert f["status"] == "empty_profile" and f["empty_profiles"] == 2
    assert "backend is cpu" in f["reason"]
    assert rep["empty_traces"] >= 2  # JAX's RuntimeWarning, once per profiled execution


def test_workload_exit_code_propagates(project: Path):
    proc = run_pgle("auto", "--runs", "1", FGH, "--", "--f", "1", "--g", "0", "--h", "0",
                    "--exit", "7", cwd=project, env=helper_env())
    assert proc.returncode == 7
    assert "pgle: the workload exited with code 7" in pgle_lines(proc)


def test_bad_parameters_fail_before_launch(project: Path):
    proc = run_pgle("auto", "--percentile", "120", FGH, cwd=project)
    assert proc.returncode == 2 and not (project / ".pgle").exists()
    assert pgle_lines(proc)[0].startswith("pgle: error: --percentile 120 is outside 0..100")
    proc = run_pgle("auto", "--runs", "0", FGH, cwd=project)
    assert proc.returncode == 2 and "at least 1" in proc.stderr.decode()


def test_degenerate_percentile_and_aot_warnings(tmp_path: Path):
    assert auto_env.percentile_index(2, 90) == 0 and auto_env.percentile_index(3, 90) == 1
    (w,) = auto_env.check_pgle_params(2, 90)
    assert "picks the fastest" in w and "--runs 3" in w
    assert auto_env.check_pgle_params(3, 90) == [] and auto_env.check_pgle_params(2, 100) == []
    assert auto_env.check_pgle_params(1, 90) == []
    with pytest.raises(BadInput):
        auto_env.check_pgle_params(3, -1)
    script = tmp_path / "aot.py"
    script.write_text("import jax\nf = jax.jit(g)\n# x.compile()\nexe = f.lower(x).compile()\n")
    sites = auto_env.aot_sites(Workload(str(script), None, ()))
    assert sites == ["aot.py:4: exe = f.lower(x).compile()"]
    script.write_text("import jax\nf = jax.jit(g)\n")
    assert auto_env.aot_sites(Workload(str(script), None, ())) == []


@pytest.mark.parametrize("command", ["auto", "prewarm", "nsys", "cache"])
def test_help_does_not_import_jax(command: str):
    code = ("import sys\nfrom pgle.cli.main import cli\n"
            f"try:\n    cli([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'jax' not in sys.modules, 'jax imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=pgle_env(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Usage: " in proc.stdout


MANY = """
import jax, jax.numpy as jnp

def a_init(x): return x + 1
def b_init(x): return x * 2
def e1_eval(x): return jnp.sin(x)
def e2_eval(x): return jnp.cos(x)
def zstep(x): return jnp.tanh(x) @ x.T

x = jnp.ones((8, 8))
for fn, n in ((a_init, 1), (b_init, 1), (e1_eval, 2), (e2_eval, 2), (zstep, 5)):
    f = jax.jit(fn)
    for _ in range(n):
        f(x).block_until_ready()
"""


def test_module_lines_most_executed_first_one_shots_collapsed_reasons_grouped(project: Path):
    """Issue 13 case 5: the train step leads (not the alphabet), modules executed once share one
    line without "run more steps", identical reasons are said once; the JSON rows stay."""
    script = project / "many.py"
    script.write_text(MANY)
    # One run for both: with --json the lines stay on stderr, the rows go to stdout.
    proc = run_pgle("auto", "--runs", "2", "--percentile", "100", "--json", str(script),
                    cwd=project, env=helper_env())
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    lines = [l for l in pgle_lines(proc) if l.startswith("pgle:   ")]
    assert lines[0].startswith("pgle:   jit_zstep: optimized"), lines
    assert lines[1].startswith("pgle:   jit_e1_eval, jit_e2_eval: not_optimized (profiled 2 times")
    # jnp.ones adds jax's own one-shot modules (jit_broadcast_in_dim, ...) to the two of the script.
    assert re.match(r"pgle:   \d+ modules executed only once \(not_optimized;", lines[2]), lines[2]
    assert "jit_a_init, jit_b_init" in lines[2] and "run more steps" not in lines[2]
    assert len(lines) == 3
    rep = report_of(proc)
    assert {"jit_a_init", "jit_b_init", "jit_e1_eval", "jit_e2_eval", "jit_zstep"} <= {
        m["module"] for m in rep["modules"]}
    assert all("profiled_executions" in m and "reason" in m for m in rep["modules"])


SLOW_AUTO = """
import time
import jax, jax.numpy as jnp
f = jax.jit(lambda x: x * 2)
x = jnp.ones(4)
for i in range(3):
    f(x).block_until_ready()
    time.sleep(6)
"""


def test_auto_prints_plain_running_lines(project):
    """Issue 13 case 7: a launch without a profiling window (auto, prewarm) still says how long
    the workload has run and what auto PGLE profiled, in plain `pgle:` lines."""
    script = project / "slow_auto.py"
    script.write_text(SLOW_AUTO)
    proc = run_pgle("auto", str(script), cwd=project)
    lines = [l for l in pgle_lines(proc) if "workload running for" in l]
    assert lines, pgle_lines(proc)
    assert len(lines) <= 2  # about 18 s: one line every 10 s, not one per poll
    assert "\r" not in proc.stderr.decode()
