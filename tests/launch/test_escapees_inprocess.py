"""The workload's processes that left its group (pgle.launch.escapees), in pgle's own process on
real child processes (issue 37: only whole launches reached it): the mark finds exactly the
processes started with this launch's token, in any session or group; the watcher kills them
when pgle dies before `done()` and leaves them alone after it; the stopping signals pgle
forwards reach them, the others do not.

Every process signalled here is one this test started and marked with a token of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.deadline import returns_within
from helpers.signals import IN_PROCESS, recorded_lines
from pgle.launch import escapees, launcher

pytestmark = IN_PROCESS

SLEEPER = "import time; time.sleep(60)"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The processes a test starts: each killed and reaped at its end (only these)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=20)


def _start(started: list[subprocess.Popen[bytes]], token: str | None, **kw) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != escapees.TOKEN_VAR}
    if token is not None:
        env[escapees.TOKEN_VAR] = token
    env.update(kw.pop("extra_env", {}))
    p = subprocess.Popen([sys.executable, "-c", kw.pop("code", SLEEPER)], env=env,
                         stdin=subprocess.DEVNULL, **kw)
    started.append(p)
    return _execed(p)


def _execed(p: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """`p` once it runs its program: Popen may return while the exec is under way, when
    /proc/PID shows an empty command line and not yet the new environment."""
    deadline = time.monotonic() + 20
    while not Path(f"/proc/{p.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, f"{p.args} never started"
        time.sleep(0.005)
    return p


def test_a_token_is_128_random_bits_in_hex():
    tokens = {escapees.new_token() for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)


def test_the_mark_finds_the_processes_of_this_token_in_any_session(started):
    token = escapees.new_token()
    own_session = _start(started, token, start_new_session=True)
    in_group = _start(started, token, process_group=0)
    _start(started, escapees.new_token(), start_new_session=True)  # another launch's
    _start(started, None)  # not marked at all
    # A token that only starts like this one's is another one.
    _start(started, token + "0", start_new_session=True)
    assert sorted(escapees.marked(token)) == sorted([own_session.pid, in_group.pid])
    assert escapees.marked(escapees.new_token()) == []


def test_outside_group_leaves_out_the_workloads_group_only(started):
    token = escapees.new_token()
    leader = _start(started, token, process_group=0)
    member = _start(started, token, process_group=leader.pid)  # started after: a larger pid
    daemon = _start(started, token, start_new_session=True)
    assert member.pid > leader.pid and daemon.pid > member.pid
    assert escapees.marked(token, outside_group=leader.pid) == [daemon.pid]
    assert sorted(escapees.marked(token)) == sorted([leader.pid, member.pid, daemon.pid])


def test_the_mark_looks_past_the_processes_of_other_users(started):
    """On a shared machine other users' processes come first in /proc too: each is passed
    over (its environment is not this user's to read), and the marked one after it found."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    token = escapees.new_token()
    foreign = _start(started, token, user=65534, group=65534, start_new_session=True)
    assert os.stat(f"/proc/{foreign.pid}").st_uid == 65534
    mine = _start(started, token, start_new_session=True)
    if mine.pid < foreign.pid:
        pytest.skip("the pids wrapped around: /proc lists the other user's process later")
    assert escapees.marked(token) == [mine.pid]
    assert foreign.poll() is None  # passed over for its owner, not because it was gone


def test_a_token_past_the_environment_read_limit_is_not_seen(started):
    """At most _ENVIRON_LIMIT bytes of a process's environment are read (one string may hold
    128 KiB: nine of them put the token past 1 MiB)."""
    token = escapees.new_token()
    padding = {f"PAD{i}": "x" * (120 << 10) for i in range(9)}
    env = {**padding, escapees.TOKEN_VAR: token}
    far = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env, start_new_session=True)
    started.append(_execed(far))
    near = _start(started, token, start_new_session=True)
    environ = Path(f"/proc/{far.pid}/environ").read_bytes()
    assert environ.index(token.encode()) > escapees._ENVIRON_LIMIT
    assert escapees.marked(token) == [near.pid]


def test_signal_all_reaches_the_living_past_one_that_is_gone(started):
    gone = _start(started, None)
    gone.kill()
    gone.wait(timeout=20)
    alive = _start(started, None)
    escapees.signal_all([gone.pid, alive.pid], signal.SIGTERM)
    assert alive.wait(timeout=20) == -signal.SIGTERM


def _proc_fds(pid: int) -> dict[int, str]:
    return {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}


def test_the_watcher_is_a_bare_process_of_its_own_session_and_done_lets_it_go(started):
    token = escapees.new_token()
    marked = _start(started, token, start_new_session=True)
    watcher = escapees.Watcher(token)
    proc = watcher.proc
    assert proc is not None and watcher.write_fd is not None
    try:
        _execed(proc)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[:4] == [sys.executable.encode(), b"-I", b"-S", b"-c"]
        read_fd = int(cmdline[5])
        assert cmdline[6] == token.encode()
        assert Path(f"/proc/{proc.pid}/environ").read_bytes() == b""  # nothing of the user's
        assert os.getsid(proc.pid) == proc.pid  # Ctrl-C of the terminal is not for it
        fds = _proc_fds(proc.pid)
        assert [fds[0], fds[1], fds[2]] == [os.devnull] * 3
        assert fds[read_fd].startswith("pipe:")
    finally:
        watcher.done()
    assert proc.returncode == 0  # "done": it exited without killing anything
    assert watcher.proc is None and watcher.write_fd is None
    watcher.done()  # twice: nothing more to do
    time.sleep(0.1)
    assert marked.poll() is None


def test_the_watcher_kills_the_marked_processes_when_pgle_dies(started):
    token = escapees.new_token()
    marked = _start(started, token, start_new_session=True)
    other = _start(started, escapees.new_token(), start_new_session=True)
    watcher = escapees.Watcher(token)
    assert watcher.proc is not None and watcher.write_fd is not None
    os.close(watcher.write_fd)  # as the kernel does for a pgle killed by SIGKILL
    watcher.write_fd = None
    assert marked.wait(timeout=20) == -signal.SIGKILL
    assert watcher.proc.wait(timeout=20) == 0
    assert other.poll() is None  # another launch's processes are not this watcher's


def test_done_waits_for_a_stuck_watcher_five_seconds_at_most(started):
    watcher = escapees.Watcher(escapees.new_token())
    proc = watcher.proc
    assert proc is not None
    started.append(proc)  # killed and reaped at the end
    os.kill(proc.pid, signal.SIGSTOP)  # it cannot read "done" now
    t0 = time.monotonic()
    with returns_within(30):
        watcher.done()
    waited = time.monotonic() - t0
    assert 5 <= waited < 5.9 and proc.returncode is None
    assert watcher.proc is None and watcher.write_fd is None


def test_a_watcher_that_cannot_start_is_none_and_leaks_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "gone" / "python"))
    before = sorted(os.listdir("/proc/self/fd"))
    watcher = escapees.Watcher(escapees.new_token())
    assert watcher.proc is None and watcher.write_fd is None
    watcher.done()
    assert sorted(os.listdir("/proc/self/fd")) == before  # both ends of its pipe closed


# The workload starts a process of its own session that records the signals it gets; the
# workload itself records them too.
RECORDING_DAEMON = """
import os, signal, subprocess, sys, time
got = sys.argv[1]
DAEMON = '''
import signal, sys, time
got = sys.argv[1]
def record(signum, frame):
    with open(got + ".daemon", "a") as f:
        f.write(signal.Signals(signum).name + "\\\\n")
    if signum != signal.SIGUSR1:
        sys.exit(0)
for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, record)
open(got + ".daemon-ready", "w").close()
t = time.monotonic()
while time.monotonic() - t < 30:
    time.sleep(0.01)
'''
subprocess.Popen([sys.executable, "-c", DAEMON, got], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def record(signum, frame):
    with open(got + ".workload", "a") as f:
        f.write(signal.Signals(signum).name + "\\n")
    if signum != signal.SIGUSR1:
        time.sleep(0.5)  # a second one meanwhile would be recorded too
        sys.exit(0)
for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, record)
open(got + ".ready", "w").close()
t = time.monotonic()
while time.monotonic() - t < 30:
    time.sleep(0.01)
"""



@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopping_signal_reaches_the_daemon_and_sigusr1_does_not(tmp_path, stop):
    """pgle's handler, called as the kernel calls it: SIGUSR1 goes to the workload's group
    only; a stopping signal reaches the process that left the group too, at once (the grace
    before the SIGKILL of what outlived the workload is short here: a signal lost on the way
    shows as a daemon that got nothing)."""
    got = tmp_path / "got"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env[launcher.KILL_GRACE_VAR] = "3"
    running = launcher.Running([sys.executable, "-c", RECORDING_DAEMON, str(got)], env,
                               tmp_path / "w.log", cwd=None, terminal_level=None)
    handlers = running.signals
    try:
        deadline = time.monotonic() + 20
        while not (Path(f"{got}.ready").exists() and Path(f"{got}.daemon-ready").exists()):
            assert time.monotonic() < deadline, "the workload or its daemon never started"
            time.sleep(0.01)
        handlers.forward(signal.SIGUSR1, None)
        assert recorded_lines(Path(f"{got}.workload"), 1) == ["SIGUSR1"]
        handlers.forward(stop, None)
        with returns_within(40):
            res = running.wait(poll_s=0.05)
    finally:
        running.signals.restore()
    name = signal.Signals(stop).name
    assert res.interrupted == stop and not res.killed
    # Once: the workload's group got it, and the workload is no escapee to get it again.
    assert recorded_lines(Path(f"{got}.workload"), 2) == ["SIGUSR1", name]
    # SIGUSR1 never reached the daemon: its first signal is the stopping one.
    assert recorded_lines(Path(f"{got}.daemon"), 1) == [name]


# The workload starts a daemon that ignores the stopping signals, says its pid, then waits.
STUBBORN_DAEMON = """
import os, signal, subprocess, sys, time
DAEMON = '''
import signal, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
time.sleep(30)
'''
d = subprocess.Popen([sys.executable, "-c", DAEMON], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.3)  # its handlers are set
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(d.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(30)
"""


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def test_a_daemon_ignoring_ctrl_c_is_killed_once_the_grace_is_over(tmp_path):
    """Ctrl-C stops the command: the workload ends, its daemon ignores the signal; pgle gives
    it the grace period, then SIGKILL, before it returns."""
    pid_file = tmp_path / "daemon.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env[launcher.KILL_GRACE_VAR] = "1"
    running = launcher.Running([sys.executable, "-c", STUBBORN_DAEMON, str(pid_file)], env,
                               tmp_path / "w.log", cwd=None, terminal_level=None)
    daemon = None
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists():
            assert time.monotonic() < deadline, "the workload never started its daemon"
            time.sleep(0.01)
        daemon = int(pid_file.read_text())
        t0 = time.monotonic()
        running.signals.forward(signal.SIGINT, None)
        with returns_within(40):
            res = running.wait(poll_s=0.05)
        assert res.interrupted == signal.SIGINT
        assert 1 <= time.monotonic() - t0 < 4  # the grace (1 s), then SIGKILL
        deadline = time.monotonic() + 5  # SIGKILL sent: gone in a moment
        while not _gone(daemon) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _gone(daemon)
    finally:
        running.signals.restore()
        if daemon is not None and not _gone(daemon):
            os.kill(daemon, signal.SIGKILL)  # a process of this test's launch, marked


# The workload starts a daemon that takes 0.3 s to end on a stopping signal, then waits.
SLOW_DAEMON = """
import os, signal, subprocess, sys, time
DAEMON = '''
import signal, sys, time
signal.signal(signal.SIGINT, lambda *a: (time.sleep(0.3), sys.exit(0)))
open(sys.argv[1], "w").close()
time.sleep(30)
'''
subprocess.Popen([sys.executable, "-c", DAEMON, sys.argv[1]], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(30)
"""


def test_the_command_ends_as_soon_as_its_daemon_did_within_the_grace(tmp_path):
    """Ctrl-C: the workload ends at once, its daemon 0.3 s later; pgle, which gives such a
    process the grace period (30 s here), returns a moment after it ended, not at the
    grace's end nor a second later."""
    ready = tmp_path / "daemon-ready"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env[launcher.KILL_GRACE_VAR] = "30"
    running = launcher.Running([sys.executable, "-c", SLOW_DAEMON, str(ready)], env,
                               tmp_path / "w.log", cwd=None, terminal_level=None)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline, "the workload never started its daemon"
            time.sleep(0.01)
        t0 = time.monotonic()
        running.signals.forward(signal.SIGINT, None)  # as the kernel calls it
        with returns_within(40):
            res = running.wait(poll_s=0.05)
        took = time.monotonic() - t0
    finally:
        running.signals.restore()
    assert res.interrupted == signal.SIGINT and not res.killed
    assert 0.3 <= took < 1.0, took
