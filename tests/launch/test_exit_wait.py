"""How the launcher waits for the workload's exit: through a pidfd where the kernel has
pidfd_open (the exit is noticed at once), else `Popen.wait(timeout)` as before. Both paths
are run on real child processes; the fallback by removing `os.pidfd_open`, as on a kernel
older than 5.3 or under a seccomp profile that refuses it."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from helpers.deadline import returns_within
from pgle.launch import launcher


@pytest.fixture(params=["pidfd", "no_pidfd"])
def wait_path(request, monkeypatch):
    if request.param == "pidfd":
        if not hasattr(os, "pidfd_open"):
            pytest.skip("this Python has no os.pidfd_open")
    else:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    return request.param


def _launch(tmp_path, code: str, **kw) -> launcher.LaunchResult:
    # A wall-clock bound: a launcher that never notices the exit fails here, not at the
    # mutation run's CPU limit (a timeout, not a failure).
    with returns_within(30):
        return launcher.launch([sys.executable, "-c", code], dict(os.environ),
                               tmp_path / "w.log", poll_s=0.05, **kw)


def test_exit_code_and_output_come_through(tmp_path, wait_path, capfd):
    res = _launch(tmp_path, "import sys; print('line one'); sys.exit(7)")
    assert res.exit_code == 7 and res.signal is None
    assert "line one" in capfd.readouterr().out
    assert "line one" in (tmp_path / "w.log").read_text()


def test_a_signal_that_ends_the_workload_is_reported(tmp_path, wait_path):
    res = _launch(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert res.signal == signal.SIGTERM and res.exit_code == 128 + signal.SIGTERM


def test_the_watchdog_is_still_polled_while_the_workload_runs(tmp_path, wait_path):
    polls = []

    def watchdog():
        polls.append(1)
        return 5 if len(polls) >= 3 else None

    # 20 s: a mutant that loses the watchdog ends the test in 20 s, not 2 min (issue 37).
    res = _launch(tmp_path, "import time; time.sleep(20)", watchdog=watchdog)
    assert res.stopped_by_watchdog and res.exit_code == 5
    assert len(polls) >= 3


def test_the_watchdog_is_polled_every_poll_s(tmp_path, wait_path):
    """`poll_s` sets how often the watchdog is asked (how soon a peer's failure stops a
    job's rank): at 0.05 s four polls come well within a second; at the default 0.5 s they
    take 1.5 s."""
    import time

    polls: list[float] = []

    def watchdog():
        polls.append(time.monotonic())
        return 5 if len(polls) >= 4 else None

    res = _launch(tmp_path, "import time; time.sleep(20)", watchdog=watchdog)
    assert res.stopped_by_watchdog and res.exit_code == 5
    assert polls[-1] - polls[0] < 1.0, [b - a for a, b in zip(polls, polls[1:], strict=False)]


def test_a_clean_exit_has_no_signal_and_the_launch_leaves_no_descriptor(tmp_path, wait_path):
    """Exit 0: no signal; the log's folders are made as needed; every descriptor the launch
    opened (the streams' read ends, the exit watch, the log) is closed once it returns."""
    before = set(os.listdir("/proc/self/fd"))
    with returns_within(30):
        res = launcher.launch([sys.executable, "-c", "print('done')"], dict(os.environ),
                              tmp_path / "a" / "b" / "w.log", poll_s=0.05)
    assert res.exit_code == 0 and res.signal is None
    assert res.killed is False and res.stopped_by_watchdog is False  # bools, as typed
    assert (tmp_path / "a" / "b" / "w.log").read_text() == "done\n"
    assert set(os.listdir("/proc/self/fd")) == before
