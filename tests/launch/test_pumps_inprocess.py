"""The workload's output and signals as the supervisor handles them in pgle's own process (the
mutation run maps mutants only to tests that reach the code in the test process; the same
rules are checked through `python -m pgle` in test_streams.py and test_signals.py): XLA's INFO
lines pgle turned on reach the log only, a stream that fails or was closed is said once and
the log keeps everything, a failing log is one warning, and the stopping signals reach the
workload, a SIGTERM it ignores ending in SIGKILL after the grace (issue 37)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.deadline import returns_within
from pgle.launch import launcher, streams

from helpers.signals import IN_PROCESS

pytestmark = IN_PROCESS



@pytest.fixture(autouse=True)
def _fresh_said(monkeypatch):
    # Each failure is said once per process: each test is a process of its own here.
    monkeypatch.setattr(streams, "said", set())


def _launch(tmp_path: Path, code: str, log: Path | None = None, **kw) -> launcher.LaunchResult:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env.update(kw.pop("env", {}))
    # A wall-clock bound: a launcher that never notices the exit fails here, not at the
    # mutation run's CPU limit (a timeout, not a failure).
    with returns_within(30):
        return launcher.launch([sys.executable, "-c", code], env, log or tmp_path / "w.log",
                               poll_s=0.05, **kw)


INFO = "I1129 10:00:00.123456   4242 gpu_compiler.cc:100] Using PGLE profile from /p.pbtxt\n"
RANKED_INFO = "3: I1129 10:00:00.123456   4242 gpu_compiler.cc:101] ranked info\n"
OLD_INFO = "2026-11-29 10:00:00.123456: I gpu_hlo_schedule.cc:5] old tsl info\n"
WARNING = "W1129 10:00:00.123456   4242 gpu_compiler.cc:102] a warning\n"
PY_INFO = "I1129 10:00:00.123456   4242 train.py:7] the program's own absl line\n"
SPLIT_A, SPLIT_B = "I1129 10:00:00.1", "23456   4242 gpu_compiler.cc:103] cut by the read\n"
TAIL = "W1129 10:00:00.123456   4242 gpu_compiler.cc:104] no newline"


def test_xla_info_lines_pgle_turned_on_reach_the_log_only(tmp_path, capfd):
    """terminal_level 1 (pgle, not the user, lowered TF_CPP_MIN_LOG_LEVEL): INFO lines of XLA
    are hidden from the terminal in every prefix form, even one cut across two reads;
    warnings, the program's own absl lines and plain text pass."""
    parts = ["plain text\n", INFO, WARNING, RANKED_INFO, PY_INFO, OLD_INFO, SPLIT_A]
    code = (f"import os, time\nfor p in {parts!r}:\n    os.write(2, p.encode())\n"
            f"time.sleep(0.3)\nos.write(2, {SPLIT_B!r}.encode())\n"
            f"os.write(2, b'after\\n' + {TAIL!r}.encode())\n")
    res = _launch(tmp_path, code, terminal_level=1)
    assert res.exit_code == 0
    err = capfd.readouterr().err
    assert err == "plain text\n" + WARNING + PY_INFO + "after\n" + TAIL
    log = (tmp_path / "w.log").read_text()
    assert log == "".join(parts) + SPLIT_B + "after\n" + TAIL + "\n"


def test_without_a_level_every_line_reaches_the_terminal(tmp_path, capfd):
    res = _launch(tmp_path, f"import os; os.write(2, {INFO!r}.encode())")
    assert res.exit_code == 0 and capfd.readouterr().err == INFO


def test_a_stdout_that_fails_is_said_once_and_the_log_keeps_everything(tmp_path, capfd,
                                                                       monkeypatch):
    full = open(os.devnull.replace("null", "full"), "w")  # noqa: SIM115  closed below
    monkeypatch.setattr(sys, "stdout", full)
    try:
        res = _launch(tmp_path, "for i in range(2000): print('line', i, flush=True)")
    finally:
        full.close()
    assert res.exit_code == 0
    log_lines = (tmp_path / "w.log").read_text().splitlines()
    assert log_lines == [f"line {i}" for i in range(2000)]
    err = capfd.readouterr().err
    log = tmp_path / "w.log"
    assert err == (
        "pgle: warning: cannot write the workload's stdout to pgle's stdout (No space left on "
        f"device (ENOSPC)); the workload runs on, and its stdout goes to {log} only\n")
    assert res.stream_notes == []  # said on stderr: nothing left for the report


def test_closed_streams_are_said_or_noted_for_the_report(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(streams, "closed_at_start", {1})
    res = _launch(tmp_path, "print('to the log'); import sys; print('e', file=sys.stderr)")
    log = tmp_path / "w.log"
    assert res.exit_code == 0 and res.stream_notes == []
    out, err = capfd.readouterr()
    assert out == ""
    assert err == (f"pgle: warning: pgle's stdout is closed; the workload's stdout goes to its "
                   f"log only ({log})\ne\n")
    # Neither stream works: nothing could say it, the report notes both.
    other = tmp_path / "both"
    other.mkdir()
    monkeypatch.setattr(streams, "closed_at_start", {1, 2})
    monkeypatch.setattr(streams, "said", set())
    res = _launch(other, "print('x')")
    log = other / "w.log"
    assert res.stream_notes == [
        f"pgle's stdout was closed, so the workload's stdout is only in its log {log}",
        f"pgle's stderr was closed, so the workload's stderr is only in its log {log}",
    ]
    assert capfd.readouterr() == ("", "")
    assert log.read_text() == "x\n"


def test_a_log_that_fails_is_one_warning_and_the_output_still_shows(tmp_path, capfd):
    full = Path(os.devnull.replace("null", "full"))
    res = _launch(tmp_path, "for i in range(50): print('shown', i, flush=True)", log=full)
    assert res.exit_code == 0
    assert res.log_error == "No space left on device (ENOSPC)"
    out, err = capfd.readouterr()
    assert out.splitlines() == [f"shown {i}" for i in range(50)]
    assert err == (f"pgle: warning: stopped writing {full}: No space left on device (ENOSPC); "
                   "the workload's output still reaches this terminal, the log is incomplete\n")


def _signal_pgle_when_ready(ready: Path, signum: int) -> threading.Thread:
    def send() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signum)  # pgle's own process, as a user's Ctrl-C or `kill` would

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def _ready_code(ready: Path, setup: str = "") -> str:
    return (f"import os, time\n{setup}\n"
            f"open({str(ready)!r} + '.tmp', 'w').close(); "
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\n"
            "time.sleep(12)\n")  # ends by itself if a mutant loses the signal


def test_ctrl_c_reaches_the_workload_and_stops_the_command(tmp_path):
    ready = tmp_path / "ready"
    before = signal.getsignal(signal.SIGINT)
    helper = _signal_pgle_when_ready(ready, signal.SIGINT)
    t0 = time.monotonic()
    res = _launch(tmp_path, _ready_code(ready))
    helper.join(timeout=60)
    assert time.monotonic() - t0 < 10  # the signal ended it, not the workload's 12 s
    assert res.interrupted == signal.SIGINT and not res.killed
    assert res.exit_code == 128 + signal.SIGINT and res.signal == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is before  # pgle's handler is gone again


def test_a_workload_ignoring_sigterm_is_killed_after_the_grace(tmp_path, capfd):
    ready = tmp_path / "ready"
    helper = _signal_pgle_when_ready(ready, signal.SIGTERM)
    t0 = time.monotonic()
    res = _launch(tmp_path, _ready_code(ready, "import signal; signal.signal(signal.SIGTERM, "
                                               "signal.SIG_IGN)"),
                  env={launcher.KILL_GRACE_VAR: "0.5"})
    helper.join(timeout=60)
    assert time.monotonic() - t0 < 10  # the signal ended it, not the workload's 12 s
    assert res.killed and res.interrupted == signal.SIGTERM
    assert res.exit_code == 128 + signal.SIGKILL and res.signal == signal.SIGKILL
    assert capfd.readouterr().err == (
        "pgle: the workload was still running 0.5 s after SIGTERM: killed it (SIGKILL, its "
        "process group too; PGLE_KILL_GRACE_S sets the grace period)\n")


def test_pgles_own_line_goes_to_whichever_stream_still_works(monkeypatch, capfd):
    import errno

    assert streams.say("pgle: on stderr") and capfd.readouterr() == ("", "pgle: on stderr\n")
    monkeypatch.setattr(streams, "failed", {2: "No space left on device (ENOSPC)"})
    assert streams.say("pgle: on stdout\n") and capfd.readouterr() == ("pgle: on stdout\n", "")
    monkeypatch.setattr(streams, "closed_at_start", {1})
    assert not streams.say("pgle: nowhere") and capfd.readouterr() == ("", "")
    assert not streams.usable(1) and not streams.usable(2) and streams.usable(0)
    assert streams.describe(OSError(errno.ENOSPC, "No space left on device")) == (
        "No space left on device (ENOSPC)")
    assert streams.describe(OSError(0, "odd")) == "odd"
    r, w = os.pipe()
    os.close(r)
    assert not streams.write_line(w, "lost\n")  # EPIPE (Python ignores SIGPIPE): False
    os.close(w)


def test_a_daemon_holding_the_streams_delays_the_end_by_the_grace_at_most(tmp_path, capfd):
    """The workload exits, a process it started keeps its stdout open: pgle waits
    PIPE_GRACE_S for the streams to end, then says so and returns; what the workload wrote is
    whole in the log."""
    pid_file = tmp_path / "daemon.pid"
    code = ("import subprocess, sys\n"
            "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
            "start_new_session=True)\n"
            f"open({str(pid_file)!r}, 'w').write(str(d.pid))\n"
            "print('before exit', flush=True)\n")
    try:
        res = _launch(tmp_path, code)
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert res.exit_code == 0
    assert launcher.PIPE_GRACE_S <= res.duration_s < launcher.PIPE_GRACE_S + 10
    log = tmp_path / "w.log"
    assert log.read_text() == "before exit\n"
    out, err = capfd.readouterr()
    assert out == "before exit\n"
    assert err == (
        "pgle: warning: the workload exited, but a process it started still holds its output "
        f"open; pgle stopped waiting after 5 s: what that process prints from now on is "
        f"neither shown nor kept in {log}\n")


def test_a_slow_terminal_gets_every_byte_in_order(tmp_path):
    """The terminal's writer thread (pumps.Behind) on a real pipe read slowly: the pump
    waits once BEHIND_MAX bytes are queued, and every byte arrives, in order."""
    from pgle.launch.pumps import BEHIND_MAX, Behind

    r, w = os.pipe()
    got = bytearray()

    def slow_reader() -> None:
        while True:
            time.sleep(0.001)
            data = os.read(r, 1 << 16)
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=slow_reader, daemon=True)
    reader.start()
    behind = Behind(w)
    chunks = [bytes([i % 251]) * (256 << 10) for i in range(40)]  # 10 MiB
    most = 0
    with returns_within(30):  # a writer that never catches up fails here
        for c in chunks:
            behind.put(c)
            most = max(most, behind.held)
        behind.drain()
    assert behind.written == sum(len(c) for c in chunks) and behind.held == 0
    assert most <= BEHIND_MAX + len(chunks[0])  # it waited: never far behind
    os.close(w)
    reader.join(timeout=60)
    os.close(r)
    assert bytes(got) == b"".join(chunks)


def test_a_terminal_that_goes_away_is_an_error_and_one_that_freezes_is_abandoned(tmp_path):
    from pgle.launch.pumps import BEHIND_MAX, Behind

    r, w = os.pipe()
    os.close(r)
    gone = Behind(w)
    with returns_within(10):
        gone.put(b"x")
    with returns_within(30), pytest.raises(BrokenPipeError):
        gone.drain()
    with returns_within(30), pytest.raises(BrokenPipeError):
        gone.put(b"y")
    os.close(w)
    # A reader that never reads (Ctrl-S): abandoning it frees the pump and drops the rest.
    r, w = os.pipe()
    frozen = Behind(w)
    for _ in range(BEHIND_MAX // (64 << 10) + 2):
        threading.Thread(target=frozen.put, args=(b"z" * (64 << 10),), daemon=True).start()
    deadline = time.monotonic() + 60
    while frozen.held < BEHIND_MAX and time.monotonic() < deadline:
        time.sleep(0.01)
    assert frozen.held >= BEHIND_MAX
    frozen.abandon()
    with returns_within(30):
        frozen.drain()  # returns at once: abandoned
        frozen.put(b"dropped")
    assert frozen.abandoned and not frozen.chunks
    os.close(r)
    os.close(w)


def test_on_a_terminal_the_workload_gets_a_terminal_of_its_size(tmp_path, monkeypatch):
    """pgle's stdout a terminal (a real pseudo-terminal here, 33 x 111): the workload's stdout
    is one too, of the same size, so it line-buffers and draws as it would; its bytes reach
    the user's terminal, whose own output processing turns \\n into \\r\\n, while the log
    holds exactly what the program wrote (its pseudo-terminal passes bytes unchanged)."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    got = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: every slave end closed
                return
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    saved = os.dup(1)
    terminal = open(1, "w", closefd=False)  # noqa: SIM115  pgle's stdout, fd 1
    monkeypatch.setattr(sys, "stdout", terminal)
    code = ("import os, sys\nprint(os.isatty(1), os.isatty(2), tuple(os.get_terminal_size(1)))\n"
            "print('a')\nsys.stdout.write('b')\n")
    try:
        os.dup2(slave, 1)
        res = _launch(tmp_path, code)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(slave)
    reader.join(timeout=60)
    os.close(master)
    assert res.exit_code == 0
    assert (tmp_path / "w.log").read_bytes() == b"True False (111, 33)\na\nb\n"
    assert bytes(got) == b"True False (111, 33)\r\na\r\nb"


def test_a_line_shows_at_once_while_the_workload_waits(tmp_path, monkeypatch):
    """Output is live: a line the workload printed reaches pgle's stdout (a pipe here) while
    the workload still runs and waits, not once it writes again or exits."""
    go = tmp_path / "go"
    r, w = os.pipe()
    out = os.fdopen(w, "w")
    monkeypatch.setattr(sys, "stdout", out)
    code = (f"import os, time\nprint('first', flush=True)\nt = time.monotonic()\n"
            f"while not os.path.exists({str(go)!r}) and time.monotonic() - t < 20:\n"
            "    time.sleep(0.01)\nprint('second', flush=True)\n")
    result: list[launcher.LaunchResult] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}

    def run() -> None:  # not the main thread: no signal handlers, no SIGALRM bound
        result.append(launcher.launch([sys.executable, "-c", code], env, tmp_path / "w.log",
                                      poll_s=0.05))

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    seen = b""
    deadline = time.monotonic() + 15
    while b"first\n" not in seen and time.monotonic() < deadline:
        ready, _, _ = __import__("select").select([r], [], [], 0.1)
        if ready:
            seen += os.read(r, 1 << 16)
    go.touch()  # only now may the workload go on
    runner.join(timeout=60)
    out.close()
    rest = b""
    while chunk := os.read(r, 1 << 16):
        rest += chunk
    os.close(r)
    assert seen == b"first\n", seen  # shown while the workload waited
    assert rest == b"second\n" and result and result[0].exit_code == 0
