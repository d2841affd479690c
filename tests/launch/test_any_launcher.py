"""Any launcher (issue 23, case 6): a shell wrapper, `python -m pkg`, `python script.py`, a
torchrun-style launcher starting several workers. pgle starts the command as it is; its
harness travels by environment (a sitecustomize first on PYTHONPATH that chains to the one
it shadows) into every Python process below it that imports jax; several such processes are
a multi-process job, told apart by pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import step_records
from helpers.pgle_testing import TESTS, pgle_env, pgle_lines, report_of, run_pgle
from helpers.processes import gone, start_pgle

STEPS = """
import os, sys
import jax, jax.numpy as jnp

f = jax.jit(lambda x: jnp.tanh(x @ x) / 64)
x = jnp.ones((64, 64))
for i in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x)
x.block_until_ready()
print("steps done", sys.argv[1:], os.environ.get("USER_SITE_RAN"), flush=True)
"""


def _profile(project: Path) -> Path:
    path = project / "p.pbtxt"
    path.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    return path


def _wrapper(project: Path, name: str = "run.sh", executable: bool = True) -> Path:
    (project / "steps.py").write_text(STEPS)
    path = project / name
    path.write_text(f'#!/bin/bash\necho "wrapper got $*"\nexec {sys.executable} steps.py "$@"\n')
    if executable:
        path.chmod(0o755)
    return path


def _steps_seen(run_dir: str | Path) -> int:
    lines = step_records.old_lines(Path(run_dir, "events.jsonl"))
    return sum(r["kind"] == "step_enter" for r in lines)


def test_tune_runs_a_shell_wrapper_as_a_command(project):
    """`pgle tune run.sh -- args`: the wrapper runs under bash (it used to run as Python), and
    both phases reach the Python process it execs."""
    _wrapper(project)
    proc = run_pgle("tune", "--json", "run.sh", "--", "--tag", "x", cwd=project, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    err = proc.stderr.decode()
    assert err.count("wrapper got --tag x") == 2  # both phases
    assert err.count("steps done ['--tag', 'x']") == 2
    collect = report["phases"]["collect"]
    assert collect["window"]["steps_seen"] == 8 and collect["window"]["first_step"] == 2
    assert _steps_seen(report["phases"]["run"]["run_dir"]) == 8


def test_double_dash_commands_reach_the_python_below(project):
    """`-- bash run.sh`, `-- python -m pkg`, `-- python script.py`: the harness is in the
    Python process that imports jax, whichever way it was started, and the user's own
    sitecustomize (first on their PYTHONPATH, which pgle's shadows) still runs in each. (The
    script form, in-process: tests/launch/test_launch_contract.py, argv and sys.path[0].)"""
    _wrapper(project, executable=False)
    pkg = project / "trainpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(STEPS)
    user = project / "usersite"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    profile = _profile(project)
    for command in (["bash", "run.sh", "a"], [sys.executable, "-m", "trainpkg", "a"],
                    [sys.executable, "steps.py", "a"]):
        proc = run_pgle("run", "--profile", str(profile), "--json", "--", *command, cwd=project,
                        env=pgle_env(PYTHONPATH=str(user)))
        assert proc.returncode == 0, (command, proc.stderr.decode())
        report = report_of(proc)
        assert report["status"] == "not_applicable", command  # CPU: evidence, not a guess
        assert _steps_seen(report["run_dir"]) == 8, command
        assert "steps done ['a'] yes" in proc.stderr.decode() + proc.stdout.decode(), command
        spec = json.loads(Path(report["run_dir"], "spec.json").read_text())
        assert spec["workload"]["command"] == command


LAUNCHER = """
import subprocess, sys
workers = [subprocess.Popen([sys.executable, "worker.py", str(rank)]) for rank in range(2)]
sys.exit(max(w.wait() for w in workers))
"""


def test_a_launcher_with_two_workers_is_a_multi_process_job(project):
    """A torchrun-style launcher (Python, never imports jax) starts two workers that do: each
    is a process of the job with its own events and trace; collect pools their traces."""
    (project / "launch.py").write_text(LAUNCHER)
    (project / "worker.py").write_text(STEPS)
    env = pgle_env(PYTHONPATH=str(TESTS / "helpers" / "dist_collect_profile"))
    proc = run_pgle("collect", "-o", "p.pb", "--json", "--", sys.executable, "launch.py",
                    cwd=project, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    rows = report["processes"]
    assert len(rows) == 2 and len({r["pid"] for r in rows}) == 2
    assert all(r["steps"] == 8 and r["trace"] for r in rows)
    assert report["window"]["processes_pooled"] == 2
    run = Path(report["run_dir"])
    (other,) = (run / "procs").iterdir()
    assert (other / "events.jsonl").is_file() and list((other / "trace").rglob("*.xplane.pb"))
    pooled = list((run / "trace-pooled").rglob("*.xplane.pb"))
    assert len(pooled) == 2
    assert report["status"] == "collected" and (project / "p.pb").is_file()
    # The launcher itself (it never imported jax) has no harness: nothing of it in procs/.
    assert {r["argv"][0] for r in rows} == {"worker.py"}


def test_killing_pgle_kills_the_commands_python_processes(project):
    (project / "sleeper.py").write_text(
        "import os, sys, time, jax\n"
        "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "time.sleep(300)\n")
    wrapper = project / "wrap.sh"
    wrapper.write_text(f'#!/bin/bash\n{sys.executable} sleeper.py "$1"\necho never\n')
    wrapper.chmod(0o755)
    pid_file = project / "pid"
    pgle = start_pgle("run", "--profile", str(_profile(project)), "--", "bash", "wrap.sh",
                      str(pid_file), cwd=project, env=pgle_env(),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists():
            assert pgle.poll() is None and time.monotonic() < deadline, "never started"
            time.sleep(0.1)
        python = int(pid_file.read_text())
        os.kill(pgle.pid, signal.SIGKILL)
        pgle.wait(timeout=30)
        deadline = time.monotonic() + 20
        while not gone(python) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(python), "the command's Python process outlived pgle"
    finally:
        if pgle.poll() is None:
            pgle.kill()
        if pid_file.exists() and not gone(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_command_whose_python_never_imports_jax_is_named(project):
    proc = run_pgle("run", "--profile", str(_profile(project)), "--json", "--", "bash", "-c",
                    "exit 3", cwd=project)
    assert proc.returncode == 3
    report = report_of(proc)
    assert report["exit_code_from"] == "workload"
    assert any("no Python process of it imported jax" in s for s in report["summary"])
    assert any("exit" in line for line in pgle_lines(proc))
