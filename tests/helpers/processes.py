"""Starting pgle the way a shell does, and looking at processes through /proc (Linux).

Every process a signal test starts gets the default disposition and an unblocked mask for the
signals the test sends (`start_pgle`): a test runner started from a script with `cmd &`
inherits SIGINT and SIGQUIT ignored, and the test must not depend on it (issue 26)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

TEST_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGTSTP, signal.SIGCONT, signal.SIGPIPE)


# Started instead of a preexec_fn (which makes subprocess fork a process that may hold jax's
# threads): a small Python resets the signals, runs the test's `setup` code, and execs pgle.
_EXEC = """
import os, signal, sys
for sig in {signals}:
    signal.signal(sig, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signals})
exec(sys.argv[1])
os.execv(sys.executable, [sys.executable, "-m", "pgle", *sys.argv[2:]])
""".format(signals=tuple(int(s) for s in TEST_SIGNALS))


def start_pgle(*args: str, cwd: Path, env: dict[str, str], own_group: bool = False,
               setup: str = "", **popen) -> subprocess.Popen:
    """`python -m pgle ARGS` with default signal dispositions, after `setup` (Python code run
    in pgle's process just before: close an fd, ignore a signal, ...); `own_group`: in a
    process group of its own, as a shell with job control starts a job (the terminal's
    signals go to it)."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-c", _EXEC, setup, *args], cwd=cwd, env=env,
                            process_group=0 if own_group else None, **popen)


def state(pid: int) -> str | None:
    """The process's state letter (R, S, T for stopped, Z, ...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def gone(pid: int) -> bool:
    return state(pid) in (None, "Z", "X")


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return []


def wait_until(predicate: Callable[[], bool], what: str, *, proc: subprocess.Popen | None = None,
               timeout: float = 120.0) -> None:
    """Poll until `predicate()`; fail naming `what` (and pgle's stderr if it ended early)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise AssertionError(f"pgle ended ({proc.returncode}) before {what}: {err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def kill_all(pids) -> None:
    for pid in pids:
        if not gone(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# Linux folds a process's address-space high-water mark into ru_maxrss at exec, and a forked
# child's address space is a copy of the parent's: every process the test runner starts reports
# at least the runner's own size. A small Python in between runs the command, whose ru_maxrss
# then starts from that small Python's size.
_PEAK = """
import json, os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"status": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss}, f)
"""


def peak_rss(argv: list[str], report: Path, **popen) -> subprocess.Popen:
    """Start `argv`; once it ended, `report` holds its exit status and peak RSS (KiB)."""
    return subprocess.Popen([sys.executable, "-c", _PEAK, str(report), *argv], **popen)
