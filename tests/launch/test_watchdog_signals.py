"""The watchdog never kills healthy work (issue 31): a job suspended (Ctrl-Z, SIGSTOP) for longer
than its bound finishes normally on resume, and its lease is refreshed at once; a quiet spell
under a report-only bound writes stacks and a line, and the workload goes on; processes that
left the workload's group (setsid) are stopped with it, and killed when pgle is killed.
Real `pgle run` processes, real signals, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from helpers.pgle_testing import pgle_env, report_of, run_pgle, write_profile
from helpers.processes import children, cmdline, gone, kill_all, start_pgle, state, wait_until

# Prints a tick every 0.2 s from its first line (a thread: jax's import is quiet), then exits 0
# after `seconds`: never 4 s without output unless it is stopped. After a stop (a gap in its
# clock) it stays quiet 1.5 s more, so that a watchdog that counted the stop stops it for sure.
TICKING = """
import sys, threading, time
def tick():
    last = time.monotonic()
    while True:
        time.sleep(0.2)
        if time.monotonic() - last > 2.0:
            time.sleep(1.5)
        last = time.monotonic()
        print("tick", flush=True)
threading.Thread(target=tick, daemon=True).start()
import jax, jax.numpy as jnp
print(jax.jit(lambda x: x + 1)(jnp.ones(3)), flush=True)
time.sleep(2.0)  # the harness writes its buffered events out (once a second) before the stop
open(sys.argv[1], "w").close()
time.sleep(float(sys.argv[2]))
print("done", flush=True)
"""


# How long each test keeps the job stopped: 1.5x the 4 s bound, so that a watchdog counting
# the stop would stop the workload (its ticks resume only 1.5 s after it; TICKING).
STOPPED_S = 6.0


def _ticking(project: Path, seconds: float) -> tuple[list[str], Path]:
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    (project / "ticking.py").write_text(TICKING)
    ready = project / "ready"
    return ["run", "--profile", str(project / "p.pb"), "--stall-timeout", "4",
            str(project / "ticking.py"), "--", str(ready), str(seconds)], ready


def _workload_of(pgle_pid: int) -> int:
    (pid,) = [c for c in children(pgle_pid) if any("harness.py" in a for a in cmdline(c))]
    return pid


def _lease(project: Path) -> Path:
    (folder,) = (project / ".pgle" / "runs").iterdir()
    return folder / "lease.json"


def test_ctrl_z_longer_than_the_bound_then_fg_finishes_normally(project):
    """Ctrl-Z stops pgle and the workload for 6 s, 1.5x the 4 s bound; after `fg` the run
    finishes with exit 0, and the lease was refreshed at the resume."""
    args, ready = _ticking(project, 3.0)
    proc = start_pgle(*args, cwd=project, env=pgle_env(), own_group=True)
    try:
        wait_until(ready.exists, "the workload's start", proc=proc)
        workload = _workload_of(proc.pid)
        os.killpg(proc.pid, signal.SIGTSTP)  # the terminal's Ctrl-Z: pgle's group
        wait_until(lambda: state(proc.pid) == "T" and state(workload) == "T", "both stopped")
        before = _lease(project).stat().st_mtime
        time.sleep(STOPPED_S)
        resumed = time.time()
        os.killpg(proc.pid, signal.SIGCONT)  # `fg`
        wait_until(lambda: _lease(project).stat().st_mtime >= resumed - 0.01,
                   "the lease refreshed at the resume", timeout=10)
        assert _lease(project).stat().st_mtime > before
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "no progress" not in text and b"done" in out


def test_sigstop_of_pgle_and_the_workload_longer_than_the_bound_is_no_stall(project):
    """`kill -STOP` of both process groups for 6 s (bound 4 s), then SIGCONT to pgle's group
    only: pgle passes it on, the run finishes with exit 0."""
    args, ready = _ticking(project, 3.0)
    proc = start_pgle(*args, cwd=project, env=pgle_env(), own_group=True)
    try:
        wait_until(ready.exists, "the workload's start", proc=proc)
        workload = _workload_of(proc.pid)
        os.killpg(workload, signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(STOPPED_S)
        os.killpg(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "no progress" not in text and b"done" in out


def test_a_stopped_workload_under_a_running_pgle_is_no_stall(project):
    """Only the workload is stopped (a debugger, `kill -STOP` of its group) for 6 s: pgle
    sees it stopped (/proc) and does not count that time."""
    args, ready = _ticking(project, 3.0)
    proc = start_pgle(*args, cwd=project, env=pgle_env())
    try:
        wait_until(ready.exists, "the workload's start", proc=proc)
        workload = _workload_of(proc.pid)
        os.killpg(workload, signal.SIGSTOP)
        time.sleep(STOPPED_S)
        os.killpg(workload, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")


QUIET = """
import time
import jax, jax.numpy as jnp
print(jax.jit(lambda x: x + 1)(jnp.ones(3)), flush=True)
time.sleep(5)  # the quiet spell (a checkpoint to slow storage): 2.5x the 2 s bound
print("saved", flush=True)
"""


def test_a_quiet_spell_under_a_report_only_bound_is_reported_and_not_stopped(project):
    """The default watchdog's behaviour, scaled down: `report:2s` reports after 2 s without
    progress (stacks in the run folder, one `pgle:` line, a warning in the report) and lets
    the workload finish: exit 0."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    (project / "quiet.py").write_text(QUIET)
    proc = run_pgle("run", "--profile", str(project / "p.pb"), "--stall-timeout", "report:2s",
                    "--json", str(project / "quiet.py"), cwd=project, timeout=180)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    # One line per quiet spell (a loaded machine may make jax's import one too).
    lines = [x for x in err.splitlines() if x.startswith("pgle: the workload made no progress")]
    assert [x for x in lines if "pgle lets it run" in x and "quiet.py:5" in x], err
    report = json.loads(proc.stdout)
    (run_dir,) = (project / ".pgle" / "runs").iterdir()
    dump = (run_dir / "stacks.txt").read_text()
    assert 'quiet.py", line 5' in dump, dump
    assert [w for w in report["warnings"] if "no progress for" in w and "stacks.txt" in w]


ESCAPING = """
import subprocess, sys, time
# A daemon in a session of its own whose parent (setsid -f) exits at once: in no group of
# pgle's, and init's child.
subprocess.run(["setsid", "-f", "sh", "-c", 'echo $$ > "$1"; exec sleep 300', "sh", sys.argv[1]],
               check=True)
print("started", flush=True)
time.sleep(300)
"""


def _escaping(project: Path) -> tuple[list[str], Path]:
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    pidfile = project / "daemon.pid"
    (project / "escaping.py").write_text(ESCAPING)
    return [str(project / "escaping.py"), "--", str(pidfile)], pidfile


def _daemon(pidfile: Path, proc: subprocess.Popen | None = None) -> int:
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip().isdigit(),
               "the daemon's pid", proc=proc)
    pid = int(pidfile.read_text())
    wait_until(lambda: "sleep" in " ".join(cmdline(pid)), "the daemon's exec")
    return pid


@pytest.mark.parametrize("how", ["stall", "sigterm", "sigkill"])
def test_a_process_that_left_the_group_is_stopped_with_the_workload(project, how):
    """A `setsid` daemon of the workload: the stall watchdog's stop, SIGTERM to pgle and
    `kill -9` of pgle each end it too (the mark in its environment finds it)."""
    script, pidfile = _escaping(project)
    bound = "3s" if how == "stall" else "off"
    env = pgle_env(PGLE_KILL_GRACE_S="2")
    proc = start_pgle("run", "--profile", str(project / "p.pb"), "--stall-timeout", bound,
                      *script, cwd=project, env=env)
    daemon = None
    try:
        daemon = _daemon(pidfile, proc)
        assert os.getpgid(daemon) == daemon  # a group (and session) of its own
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif how == "sigkill":
            proc.kill()
        proc.communicate(timeout=120)
        wait_until(lambda: gone(daemon), "the daemon's end", timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if daemon is not None:
            kill_all([daemon])
    assert proc.returncode == {"stall": 124, "sigterm": 143, "sigkill": -9}[how]


def test_a_daemon_of_a_workload_that_ends_by_itself_is_left_alone(project):
    """Without a stop, a daemon the workload started is its business, as without pgle."""
    pidfile = project / "daemon.pid"
    (project / "daemon.py").write_text(textwrap.dedent("""
        import subprocess, sys
        subprocess.run(["setsid", "-f", "sh", "-c", 'echo $$ > "$1"; exec sleep 300', "sh",
                        sys.argv[1]], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """))
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", str(project / "p.pb"), str(project / "daemon.py"),
                    "--", str(pidfile), cwd=project, timeout=120)
    daemon = _daemon(pidfile)
    try:
        time.sleep(1.0)
        assert not gone(daemon), proc.stderr.decode(errors="replace")
    finally:
        kill_all([daemon])
