"""Signals (issues 20 and 26): pgle acts for the workload's process group as a shell acts for
a job, and a signal it gets stops the whole command.

Real pgle processes and real signals; the workload (tests/workloads/signal_recorder.py) and a
child it starts in its own process group record each signal that reaches them. Every process
these tests start gets default dispositions first (helpers.processes), so that a test runner
started with SIGINT/SIGQUIT ignored (`pytest &` in a script) runs them the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.pgle_testing import REPO, WORKLOADS, pgle_env, write_profile
from helpers.processes import (
    children,
    cmdline,
    gone,
    kill_all,
    start_pgle,
    state,
    wait_until,
)

RECORDER = str(WORKLOADS / "signal_recorder.py")


class Job:
    """`pgle run` of the recorder, started and ready (both processes have their handlers)."""

    def __init__(self, project: Path, *, own_group: bool = False, setup: str = "", **env: str):
        write_profile(project / "p.pb", {"fusion.1": 1.0})
        self.dir = project / "signals"
        self.dir.mkdir()
        self.proc = start_pgle("run", "--profile", "p.pb", RECORDER, cwd=project,
                               env=pgle_env(SIGNAL_DIR=str(self.dir), **env),
                               own_group=own_group, setup=setup)
        ready = self.dir / "ready"
        wait_until(ready.exists, "the workload's handlers", proc=self.proc)
        self.workload, self.grandchild = map(int, ready.read_text().split())

    def got(self, role: str, sig: signal.Signals) -> bool:
        return (self.dir / f"{role}.{sig.name}").exists()

    def ticks(self, role: str) -> int:
        try:
            return int((self.dir / f"{role}.ticks").read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def finish(self) -> tuple[str, str]:
        (self.dir / "finish").touch()
        return self.end()

    def end(self) -> tuple[str, str]:
        out, err = self.proc.communicate(timeout=180)
        return out.decode(errors="replace"), err.decode(errors="replace")

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        kill_all([self.workload, self.grandchild])


@pytest.fixture
def jobs():
    started: list[Job] = []
    yield started
    for job in started:
        job.cleanup()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                                 signal.SIGUSR2], ids=lambda s: s.name)
def test_forwarded_signals_reach_the_whole_process_group(project, jobs, sig):
    """Each forwarded signal reaches the workload AND the child it started (the group, not
    only the direct child). SIGINT/SIGTERM/SIGHUP stop the command with 128+N although the
    workload caught them and exited 0; SIGUSR1/2 are passed on and the run goes on."""
    job = Job(project)
    jobs.append(job)
    os.kill(job.proc.pid, sig)
    if sig in (signal.SIGUSR1, signal.SIGUSR2):
        wait_until(lambda: job.got("workload", sig) and job.got("grandchild", sig),
                   f"{sig.name} in both processes", proc=job.proc)
        out, err = job.finish()
        assert job.proc.returncode == 0, err
        assert "workload finished" in out
        assert "interrupted" not in err
    else:
        out, err = job.end()
        assert job.proc.returncode == 128 + sig, err
        assert job.got("workload", sig), f"the workload never got {sig.name}"
        assert job.got("grandchild", sig), f"the workload's own child never got {sig.name}"
        lines = [line for line in err.splitlines() if "interrupted" in line]
        assert len(lines) == 1 and f"interrupted by {sig.name}" in lines[0], err
        assert "exited with code 0" in lines[0] and "workload.log" in lines[0]
    assert "Traceback" not in err


def test_a_workload_ignoring_sigterm_is_killed_after_the_grace_period(project, jobs):
    """jax ignores SIGTERM after jax.distributed.initialize(): pgle forwards it, waits the
    grace period (PGLE_KILL_GRACE_S, 1 s here), then kills the group and exits 143."""
    job = Job(project, IGNORE_SIGTERM="1", PGLE_KILL_GRACE_S="1")
    jobs.append(job)
    os.kill(job.proc.pid, signal.SIGTERM)
    out, err = job.end()  # without the SIGKILL this never returns (communicate times out)
    assert job.proc.returncode == 143, err
    wait_until(lambda: gone(job.workload) and gone(job.grandchild), "the group's end")
    assert not job.got("workload", signal.SIGTERM)  # it ignored it: only SIGKILL ended it
    assert any("killed it (SIGKILL" in line for line in pgle_lines_of(err)), err
    assert any("interrupted by SIGTERM" in line and "killed" in line
               for line in pgle_lines_of(err))


def test_ctrl_z_stops_the_workloads_group_with_pgle_and_fg_resumes_them(project, jobs):
    """The terminal sends SIGTSTP to the foreground job (pgle's process group, here started
    as its own as a shell does); the workload runs in a group of its own, so pgle stops it
    and then itself, and passes SIGCONT (`fg`, `bg`) on."""
    job = Job(project, own_group=True)
    jobs.append(job)
    pids = (job.proc.pid, job.workload, job.grandchild)
    os.killpg(job.proc.pid, signal.SIGTSTP)
    wait_until(lambda: all(state(p) == "T" for p in pids),
               "pgle, the workload and its child all stopped")
    ticks = (job.ticks("workload"), job.ticks("grandchild"))
    time.sleep(0.3)
    assert (job.ticks("workload"), job.ticks("grandchild")) == ticks, "a stopped process ran on"
    os.killpg(job.proc.pid, signal.SIGCONT)
    wait_until(lambda: job.ticks("workload") > ticks[0] and job.ticks("grandchild") > ticks[1],
               "the workload and its child resumed")
    out, err = job.finish()
    assert job.proc.returncode == 0, err
    assert "workload finished" in out and "grandchild finished" in out


def test_a_signal_pgle_was_started_ignoring_stays_ignored(project, jobs):
    """`nohup pgle run ...`: SIGHUP is ignored by pgle and by the workload, as by any program
    started under nohup; the run goes on to its end."""
    job = Job(project, setup="signal.signal(signal.SIGHUP, signal.SIG_IGN)")
    jobs.append(job)
    os.kill(job.proc.pid, signal.SIGHUP)
    time.sleep(0.5)
    assert job.proc.poll() is None
    out, err = job.finish()
    assert job.proc.returncode == 0, err
    assert not job.got("workload", signal.SIGHUP) and not job.got("grandchild", signal.SIGHUP)


def test_a_signal_while_the_workload_starts_is_forwarded_not_lost(project):
    """The start-up race (issue 26): pgle's handlers are in place before the child exists. The
    test freezes pgle's child between fork and exec (pgle then waits inside Popen), sends
    SIGTERM to pgle, and lets the child go on: pgle must forward it once the child exists and
    exit 143, not die of it as a process without a handler does."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "sleepy.py"
    script.write_text("import time\ntime.sleep(120)\n")
    for _ in range(40):
        proc = start_pgle("run", "--profile", "p.pb", str(script), cwd=project, env=pgle_env())
        child = None
        try:
            deadline = time.monotonic() + 120
            while child is None:
                kids = children(proc.pid)
                if kids:
                    child = kids[0]
                    os.kill(child, signal.SIGSTOP)
                    break
                assert proc.poll() is None and time.monotonic() < deadline, "pgle never forked"
            # Before its exec the child is a copy of pgle: the same command line.
            if cmdline(child) != cmdline(proc.pid):  # the exec came first: try again
                continue
            # Frozen before exec: pgle is inside Popen, no handler of the old kind yet.
            os.kill(proc.pid, signal.SIGTERM)
            time.sleep(0.2)
            os.kill(child, signal.SIGCONT)
            _, err = proc.communicate(timeout=180)
            text = err.decode(errors="replace")
            assert proc.returncode == 143, (proc.returncode, text)
            assert "interrupted by SIGTERM" in text and "Traceback" not in text, text
            wait_until(lambda: gone(child), "the workload's end")
            return
        finally:
            if child is not None and not gone(child):
                os.kill(child, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    pytest.fail("never caught pgle's child between fork and exec in 40 tries")


def test_ctrl_c_in_tune_phase_1_stops_tune_even_when_the_workload_exits_0(project):
    """A training loop that catches KeyboardInterrupt and exits 0 is common: Ctrl-C in phase 1
    must still stop tune (130), and no later phase may start."""
    starts = project / "starts"
    ready = project / "ready"
    script = project / "train.py"
    # Steps 2..6 are profiled before Ctrl-C, so phase 1 has what tune needs to go on (on
    # CPU: an empty profile, and tune runs phase 2 unprofiled); a later start ends at once.
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        import jax, jax.numpy as jnp
        first = not os.path.exists({str(starts)!r})
        with open({str(starts)!r}, "a") as f:
            f.write("start\\n")
        step = jax.jit(lambda x: x * 2 + 1)
        x = jnp.ones(8)
        for i in range(8):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = step(x).block_until_ready()
        if not first:
            sys.exit(0)
        try:
            open({str(ready)!r}, "w").close()
            time.sleep(120)
        except KeyboardInterrupt:
            print("interrupted: checkpoint saved", flush=True)
            sys.exit(0)
    """))
    proc = start_pgle("tune", str(script), cwd=project, env=pgle_env())
    try:
        wait_until(ready.exists, "phase 1's workload", proc=proc)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text
    assert b"checkpoint saved" in out  # the workload handled it and exited 0
    assert starts.read_text() == "start\n", "a later phase started after Ctrl-C"
    assert "phase 2" not in text and "Traceback" not in text, text
    assert [line for line in pgle_lines_of(text) if "interrupted by SIGINT (Ctrl-C)" in line], text


def test_signal_tests_do_not_depend_on_inherited_dispositions(project):
    """`pytest &` from a script starts the runner with SIGINT and SIGQUIT ignored; the signal
    tests must pass the same (they reset what they need in the processes they start)."""
    ignoring = ("import os, signal, sys\n"
                "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "signal.signal(signal.SIGQUIT, signal.SIG_IGN)\n"
                "os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[1:]])\n")
    # SIGINT to a workload on Python's own KeyboardInterrupt (installed only where SIGINT was
    # not ignored at its start), and SIGQUIT to pgle. (The recorder of this file's SIGINT
    # test sets its handlers itself, and its pgle is started by the same start_pgle.)
    ids = ["tests/launch/test_launch_contract.py::test_sigint_is_forwarded_and_exit_is_130",
           "tests/launch/test_reliability.py::test_killing_pgle_kills_the_workload_and_its_"
           "children[ctrl-backslash-run]"]
    proc = subprocess.run([sys.executable, "-c", ignoring, "-q", "-p", "no:cacheprovider", *ids],
                          cwd=REPO, capture_output=True, timeout=600)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0 and "2 passed" in out, out[-4000:]


def pgle_lines_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("pgle:")]

