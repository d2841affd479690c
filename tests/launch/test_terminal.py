"""pgle on a terminal: the workload's streams are what they would be without pgle (issue 16).

Each test gives pgle real pseudo-terminals (`os.openpty`) as its stdout and/or stderr, the way
a shell in a terminal does, and runs `pgle run` as a whole process. Where pgle's stream is a
terminal, the workload's is one too (same size, line-buffered by Python, never forced
unbuffered); the bytes reach pgle's terminal unchanged and the run log keeps them.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from helpers.pgle_testing import WORKLOADS, pgle_env, write_profile
from pgle.launch.pumps import BEHIND_MAX

ECHO = str(WORKLOADS / "echo_env.py")
DEADLINE_S = 120  # generous: a loaded 2-core machine; the tests never wait this long when they pass


class Terminal:
    """A pseudo-terminal standing in for the user's: pgle gets `slave`, the test reads `master`.

    Output processing is off (as `stty -opost`) so the test sees exactly the bytes pgle wrote;
    everything read is kept in `data`."""

    def __init__(self, rows: int = 45, cols: int = 123):
        self.master, self.slave = os.openpty()
        attrs = termios.tcgetattr(self.slave)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        self.resize(rows, cols)
        self.data = b""
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def resize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def wait_for(self, needle: bytes, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while needle not in self.text():
            assert proc.poll() is None, f"pgle ended ({proc.returncode}) before {needle!r}: {self.text()!r}"
            assert time.monotonic() < deadline, f"{needle!r} never reached the terminal: {self.text()!r}"
            time.sleep(0.02)

    def text(self) -> bytes:
        with self.lock:
            return self.data

    def close_pgle_side(self) -> None:
        os.close(self.slave)

    def finish(self) -> bytes:
        self.reader.join(timeout=DEADLINE_S)
        os.close(self.master)
        return self.data


def start(project: Path, script: str, *, stdout, stderr, env: dict | None = None) -> subprocess.Popen:
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    env = {k: v for k, v in (env or pgle_env()).items() if k != "PYTHONUNBUFFERED"}
    return subprocess.Popen(
        [sys.executable, "-m", "pgle", "run", "--profile", "p.pb", "--run-dir", "run", script],
        cwd=project, env=env, stdout=stdout, stderr=stderr)


def echo_line(data: bytes) -> dict:
    line = next(l for l in data.split(b"\n") if l.startswith(b"ECHO "))
    return json.loads(line[5:])


def test_the_workload_gets_a_terminal_of_the_same_size_and_is_not_unbuffered(project):
    out, err = Terminal(rows=45, cols=123), Terminal(rows=45, cols=123)
    proc = start(project, ECHO, stdout=out.slave, stderr=err.slave)
    out.close_pgle_side()
    err.close_pgle_side()
    assert proc.wait(timeout=300) == 0
    shown = out.finish()
    err.finish()
    got = echo_line(shown)
    assert got["stdout_tty"] is True and got["stderr_tty"] is True
    assert got["size"] == [123, 45]
    assert got["unbuffered"] is None  # Python line-buffers a terminal by itself
    # The bytes pass unchanged (no \r added by the workload's pseudo-terminal), and the log
    # holds the same line.
    line = next(l for l in shown.split(b"\n") if l.startswith(b"ECHO "))
    assert not line.endswith(b"\r")
    log = (project / "run" / "workload.log").read_bytes()
    assert line + b"\n" in log


def test_only_the_streams_that_are_terminals_become_terminals(project):
    err = Terminal()
    proc = start(project, ECHO, stdout=subprocess.PIPE, stderr=err.slave)
    err.close_pgle_side()
    stdout, _ = proc.communicate(timeout=300)
    err.finish()
    assert proc.returncode == 0
    got = echo_line(stdout)
    assert got["stdout_tty"] is False and got["stderr_tty"] is True
    assert got["unbuffered"] is None and got["size"] is None


# The workload waits here for the test's GO_FILE (exit 3 past the deadline).
WAIT_FOR_GO = """
go = os.environ["GO_FILE"]
deadline = time.monotonic() + {deadline}
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.02)
"""

LIVE = """
import os, sys, time
print("ready, then 50%\\r", end="")  # a progress bar without a newline: line buffering
print("ready")                        # shows the line at its newline, no flush asked
sys.stderr.write("to stderr\\n")
""" + WAIT_FOR_GO + """
print("done")
"""


def test_output_shows_live_without_forcing_the_program_unbuffered(project):
    """The program prints a line and waits for the test to have seen it: through a pipe
    without PYTHONUNBUFFERED the line would sit in the program's buffer until it exits."""
    script = project / "live.py"
    script.write_text(LIVE.format(deadline=DEADLINE_S))
    go = project / "go"
    out, err = Terminal(), Terminal()
    proc = start(project, str(script), stdout=out.slave, stderr=err.slave,
                 env=pgle_env(GO_FILE=str(go)))
    out.close_pgle_side()
    err.close_pgle_side()
    out.wait_for(b"ready\n", proc)
    err.wait_for(b"to stderr\n", proc)
    go.touch()
    assert proc.wait(timeout=300) == 0
    shown = out.finish()
    err.finish()
    assert shown.startswith(b"ready, then 50%\rready\ndone\n")
    log = (project / "run" / "workload.log").read_bytes()
    assert b"ready, then 50%\rready\n" in log and b"to stderr\n" in log and b"done\n" in log


RESIZE = """
import os, signal, sys, time
def show(signum, frame):
    c, r = os.get_terminal_size(1)
    print(f"size {{c}}x{{r}}")
signal.signal(signal.SIGWINCH, show)
print("ready")
deadline = time.monotonic() + {deadline}
while time.monotonic() < deadline:
    time.sleep(0.02)
sys.exit(3)
"""


def test_a_resized_terminal_resizes_the_workloads_and_signals_are_kept(project):
    script = project / "resize.py"
    script.write_text(RESIZE.format(deadline=DEADLINE_S))
    out, err = Terminal(rows=24, cols=80), Terminal(rows=24, cols=80)
    proc = start(project, str(script), stdout=out.slave, stderr=err.slave)
    out.close_pgle_side()
    err.close_pgle_side()
    out.wait_for(b"ready\n", proc)
    # A terminal emulator resizes its terminal, and the kernel sends SIGWINCH to the
    # foreground process group (pgle's); the test's terminal is no one's controlling
    # terminal, so the test sends it itself.
    out.resize(30, 100)
    err.resize(30, 100)
    proc.send_signal(signal.SIGWINCH)
    out.wait_for(b"size 100x30\n", proc)
    proc.send_signal(signal.SIGTERM)  # forwarded to the workload, which dies of it
    assert proc.wait(timeout=300) == 128 + signal.SIGTERM
    out.finish()
    err.finish()


# More than the workload's pseudo-terminal holds many times over, and more than pgle lets the
# terminal fall behind (pumps.BEHIND_MAX): the terminal's writer thread must keep order, keep
# every byte, and make the pump wait rather than drop.
FLOOD = """
import sys
for i in range(80000):
    print(f"line {i:06d} " + "x" * 60)
print("END")
"""


def test_a_flood_of_lines_reaches_the_terminal_whole_and_in_order(project):
    script = project / "flood.py"
    script.write_text(FLOOD)
    out, err = Terminal(), Terminal()
    proc = start(project, str(script), stdout=out.slave, stderr=err.slave)
    out.close_pgle_side()
    err.close_pgle_side()
    assert proc.wait(timeout=300) == 0
    shown = out.finish()
    err.finish()
    expected = b"".join(b"line %06d " % i + b"x" * 60 + b"\n" for i in range(80000)) + b"END\n"
    assert shown.startswith(expected), shown[:200]
    # pgle's own lines (the verdict) come after the workload's last line, never inside it.
    assert b"pgle:" not in shown[: len(expected)]
    log = (project / "run" / "workload.log").read_bytes()
    assert expected in log


# ~11.7 MB: more than pgle can have read when it waits, so the last line cannot be in the log
# yet: the terminal's BEHIND_MAX (4 MiB), the chunk put over it and the one logged before the
# put waits (READ_SIZE, 1 MiB each), and the pipe (1 MiB). At 80,000 lines (5.8 MB) a loaded
# run read all of it in large chunks and the log held END.
FROZEN = """
for i in range(160000):  # more than the terminal may fall behind (pumps.BEHIND_MAX)
    print(f"after {i:06d} " + "y" * 60)
print("END")
"""


def test_a_frozen_terminal_that_goes_away_never_stops_the_workload(project):
    """Nobody reads the terminal (Ctrl-S, a stuck link): pgle falls BEHIND_MAX behind, then
    waits, as the workload would. Then the window closes (its master side is gone: writes fail
    with EIO): pgle says so once on stderr, the workload runs to its end, the log has every
    line."""
    script = project / "frozen.py"
    script.write_text(FROZEN)
    master, slave = os.openpty()  # never read
    proc = start(project, str(script), stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    log = project / "run" / "workload.log"
    # pgle waits once the terminal is BEHIND_MAX behind: the log stops growing past it (three
    # equal sizes, 0.5 s apart). The sizes seen go into the failure message: a miss says where
    # it stood (a CI run once timed out here, and the bare message said nothing).
    deadline, sizes = time.monotonic() + DEADLINE_S, [-1]
    while not (sizes[-1] >= BEHIND_MAX and sizes[-3:] == [sizes[-1]] * 3):
        assert proc.poll() is None, f"pgle ended ({proc.returncode}); log sizes {sizes[-20:]}"
        assert time.monotonic() < deadline, f"pgle never waited; log sizes {sizes[-20:]}"
        time.sleep(0.5)
        sizes.append(log.stat().st_size if log.exists() else -1)
    assert b"END" not in log.read_bytes()  # pgle waits for the terminal, with the workload
    os.close(master)  # the window is gone
    _, err = proc.communicate(timeout=DEADLINE_S)  # a pump left waiting on a dead writer hangs
    said = err.decode(errors="replace")
    warnings = [l for l in said.splitlines() if l.startswith("pgle: warning:") and "stdout" in l]
    assert len(warnings) == 1, said[-3000:]
    assert "Traceback" not in said
    text = log.read_text()
    assert "\nEND\n" in text and text.count("after ") == 160000


FROZEN_AT_END = """
for i in range(30000):  # ~2 MB: less than pgle holds for the terminal (pumps.BEHIND_MAX), so
    print(f"tail {i:06d} " + "z" * 60)  # the workload ends while the terminal has ~2 MB to show
print("END")
"""


def test_a_terminal_frozen_when_the_workload_exits_costs_the_grace_and_no_log_line(project):
    """The terminal stops taking bytes (Ctrl-S) and the workload ends with megabytes still to
    show: pgle waits PIPE_GRACE_S without progress, then says once that the rest is in the log
    only (not that a daemon holds the output), and exits with the workload's code; the log has
    every line (it never waits for the terminal). With more than BEHIND_MAX to show, the
    workload itself waits for the terminal, as without pgle (the frozen test above)."""
    from pgle.launch.launcher import PIPE_GRACE_S

    script = project / "frozen_end.py"
    script.write_text(FROZEN_AT_END)
    master, slave = os.openpty()  # never read until pgle ends
    try:
        proc = start(project, str(script), stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        _, err = proc.communicate(timeout=DEADLINE_S + PIPE_GRACE_S)
    finally:
        os.close(master)
    said = err.decode(errors="replace")
    assert proc.returncode == 0, said[-3000:]
    warnings = [l for l in said.splitlines() if "took none of the workload's stdout" in l]
    assert len(warnings) == 1 and "frozen_end" not in warnings[0], said[-3000:]
    assert "still holds its output" not in said and "Traceback" not in said, said[-3000:]
    text = (project / "run" / "workload.log").read_text()
    assert text.count("tail ") == 30000 and "\nEND\n" in text


class SlowTerminal(Terminal):
    """A terminal that reads every 10 ms (a pseudo-terminal read returns at most ~4 KiB: a few
    hundred KB/s, an ssh link, a loaded machine)."""

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 32 << 10)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk
            time.sleep(0.01)


def test_a_slow_terminal_gets_every_byte_after_the_workload_exits(project):
    """pgle holds up to BEHIND_MAX (4 MiB) for a slow terminal, so the workload exits while
    seconds of output are still to show: pgle waits as long as the terminal takes bytes, past
    PIPE_GRACE_S, and every line reaches it. (A fixed PIPE_GRACE_S after the exit cut the
    last megabytes and blamed a daemon; on a loaded machine the fast flood above lost ~900 KB
    that way.)"""
    from pgle.launch.launcher import PIPE_GRACE_S

    script = project / "flood.py"
    script.write_text(FLOOD)
    out = SlowTerminal()
    proc = start(project, str(script), stdout=out.slave, stderr=subprocess.PIPE)
    out.close_pgle_side()
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=DEADLINE_S * 2)
    shown = out.finish()
    expected = b"".join(b"line %06d " % i + b"x" * 60 + b"\n" for i in range(80000)) + b"END\n"
    assert shown.startswith(expected), (len(shown), len(expected), err.decode()[-3000:])
    assert b"still holds its output" not in err and b"took none" not in err, err[-2000:]
    assert time.monotonic() - t0 > PIPE_GRACE_S  # the case at hand: it outlasted the grace
