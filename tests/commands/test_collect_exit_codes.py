"""`collect` and `tune` exit with the workload's own code when it fails (README "Exit codes"):
a job script's `|| retry` or SLURM's requeue reads it. Real JAX on CPU, real subprocesses."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers.pgle_testing import report_of, run_pgle

SCRIPT = """\
import sys
import jax
import jax.numpy as jnp

fail_at, code = int(sys.argv[1]), int(sys.argv[2])
step = jax.jit(lambda x: x * 2 + 1)
x = jnp.ones(8)
for i in range(10):
    if i == fail_at:
        sys.exit(code)
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = step(x).block_until_ready()
"""


def test_collect_failing_after_the_window_keeps_the_profile_and_exits_with_the_workloads_code(project):
    # --no-keep-trace: the trace of a failed run stays (it is what is left to look at).
    (project / "train.py").write_text(SCRIPT)
    proc = run_pgle("collect", "-o", "p.pb", "--json", "--no-keep-trace", sys.executable,
                    "train.py", "8", "7", cwd=project)
    assert proc.returncode == 7, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    assert report["exit_code"] == 7 and report["after_window"]["exit_code"] == 7
    assert "pgle exits with the workload's code 7" in proc.stderr.decode()
    assert "trace_deleted" not in report
    assert (Path(report["run_dir"]) / "trace").is_dir()


def test_collect_failing_before_the_window_closed_exits_with_the_workloads_code(project):
    (project / "train.py").write_text(SCRIPT)
    proc = run_pgle("collect", "-o", "p.pb", "--json", sys.executable, "train.py", "1", "5",
                    cwd=project)
    assert proc.returncode == 5, proc.stderr.decode()[-3000:]
    assert report_of(proc)["exit_code"] == 5 and not (project / "p.pb").exists()


def test_tune_whose_first_phase_fails_exits_with_the_workloads_code(project):
    (project / "train.py").write_text(SCRIPT)
    proc = run_pgle("tune", "-o", "p.pb", sys.executable, "train.py", "1", "6", cwd=project)
    assert proc.returncode == 6, proc.stderr.decode()[-3000:]
