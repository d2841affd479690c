"""Spawn the workload, pass its output through live, keep the log, forward signals.

The child's stdout and stderr reach pgle's own stdout and stderr byte for byte
as they arrive (progress bars included); complete lines of both also go to the
log file, so lines of the two streams never interleave mid-line there.

Each of the child's two streams is what it would be without pgle: where pgle's
own stdout (stderr) is a terminal, the child's is a pseudo-terminal of the same
size and modes (so Python line-buffers it and progress bars and colours behave
as on the terminal, without forcing the program unbuffered, which made a
program printing in lines several times slower; issue 16); elsewhere (a pipe, a
file, a batch log) it is a pipe, where the program block-buffers as it would.

The child runs in its own process group: a Ctrl-C reaches pgle, which forwards
it once to the whole group (as a shell would), waits, and exits 128+signal.

Nothing the log file does may stop the workload: a full disk or any other
write error ends the log (one warning line, `LaunchResult.log_error`) while
the output keeps reaching the terminal, so the child never blocks on a pipe
nobody drains. Output handling is linear in bytes whatever the line structure
(100 MB without a newline, `\r` progress bars).

If pgle itself dies (even by SIGKILL, which it cannot catch) the workload must
not live on holding the GPU: the child gets PR_SET_PDEATHSIG=SIGKILL until the
harness takes over, and the harness watches the read end of a pipe whose only
write end pgle holds (fd in PGLE_PARENT_FD): EOF means pgle is gone, and the
harness kills its whole process group, the workload's own children included.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Callable

from pgle.errors import PgleError

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
KILL_GRACE_S = 5.0  # after jax.distributed.initialize() SIGTERM is swallowed (XLA preemption notifier)
PARENT_FD_VAR = "PGLE_PARENT_FD"  # read by pgle/launch/harness.py
# A line longer than this goes to the log in pieces: whole lines keep stdout and
# stderr from interleaving mid-line, but must not make memory grow without bound.
MAX_HELD_LINE = 1 << 20
READ_SIZE = 65536
# On a pseudo-terminal a line-buffered program hands over one line per write; a pump that
# forwarded each at once woke, read and wrote twice per line, and on a busy machine took the
# CPU the program needed (`output_terminal_*` in docs/performance.md). After a small read
# the pump waits this long and takes what arrived meanwhile in one go: invisible on a terminal
# (a frame is ~16 ms), and a program writing fast is never held back (its reads are large).
COALESCE_S = 0.002
COALESCE_BELOW = 1024
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass
class LaunchResult:
    exit_code: int  # as a shell reports it: 128+N when killed by signal N
    signal: int | None  # the signal that ended the child, if any
    duration_s: float
    log_path: Path
    stopped_by_watchdog: bool = False
    log_error: str | None = None  # why the log stopped early (it is incomplete), e.g. a full disk


def shell_exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class _Log:
    """The log file, shared by both pumps; the first write error ends it for good."""

    def __init__(self, path: Path, warn: Callable[[str], None]):
        self.path, self.warn = path, warn
        self.lock = threading.Lock()
        self.error: str | None = None
        try:
            self.f = open(path, "ab", buffering=0)
        except OSError as e:
            raise PgleError(f"cannot write the workload log {path}: {e.strerror}.") from None

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.error is not None:
                return
            try:
                self.f.write(data)
            except OSError as e:
                self.error = f"{e.strerror or e} ({errno.errorcode.get(e.errno, e.errno)})"
                self.warn(f"pgle: warning: stopped writing {self.path}: {self.error}; the "
                          "workload's output still reaches this terminal, the log is incomplete\n")

    def close(self) -> None:
        try:
            self.f.close()
        except OSError as e:  # a full disk can surface only at close
            if self.error is None:
                self.error = f"{e.strerror or e}"


class _Pump(threading.Thread):
    """Copies one pipe to a terminal stream at once, and whole lines to the log.

    Only the new chunk is searched for a newline and held bytes are kept as a
    list, so the cost is linear in bytes even for output without newlines.
    """

    def __init__(self, fd: int, sink, log: _Log, hide: Callable[[bytes], bool] | None = None,
                 coalesce: bool = False):
        super().__init__(daemon=True)
        self.fd, self.sink, self.log = fd, sink, log
        self.coalesce = coalesce
        self.sink_fd = _fileno(sink)
        self.held: list[bytes] = []
        self.held_bytes = 0
        # `hide(line)`: a complete line that goes to the log only (XLA's INFO lines pgle
        # turned on); everything else reaches the terminal as before.
        self.hide = hide
        self.pending = b""  # the start of a line that may yet turn out to be hidden

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, READ_SIZE)
            except OSError:  # EIO: a pseudo-terminal whose other side closed
                break
            if not chunk:
                break
            if self.coalesce and len(chunk) < COALESCE_BELOW:
                chunk = self._gather(chunk)
            self._to_sink(chunk if self.hide is None else self._visible(chunk))
            cut = chunk.rfind(b"\n") + 1
            if cut:
                self.log.write(b"".join([*self.held, chunk[:cut]]))
                self.held, self.held_bytes = [], 0
                chunk = chunk[cut:]
            if chunk:
                self.held.append(chunk)
                self.held_bytes += len(chunk)
                if self.held_bytes > MAX_HELD_LINE:
                    self.log.write(b"".join(self.held))
                    self.held, self.held_bytes = [], 0
        if self.held:
            self.log.write(b"".join(self.held) + b"\n")
        if self.pending and not self.hide(self.pending):
            self._to_sink(self.pending)

    def _gather(self, chunk: bytes) -> bytes:
        time.sleep(COALESCE_S)
        parts, size = [chunk], len(chunk)
        while size < READ_SIZE and select.select([self.fd], [], [], 0)[0]:
            try:
                more = os.read(self.fd, READ_SIZE)
            except OSError:
                break  # EIO: the next read in run() sees it again and ends the pump
            if not more:
                break
            parts.append(more)
            size += len(more)
        return b"".join(parts)

    def _visible(self, chunk: bytes) -> bytes:
        data, self.pending = self.pending + chunk, b""
        lines = data.split(b"\n")
        last = lines.pop()
        out = [line + b"\n" for line in lines if not self.hide(line)]
        if last:
            if _LOG_START.match(last) and len(last) < MAX_HELD_LINE:
                self.pending = last  # maybe an INFO line cut by the read: wait for its end
            else:
                out.append(last)  # a progress bar (\r): at once
        return b"".join(out)

    def _to_sink(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self.sink_fd is not None:
            _write_all(self.sink_fd, chunk)
            return
        try:
            buffer = getattr(self.sink, "buffer", None)
            if buffer is not None:
                buffer.write(chunk)
                buffer.flush()
            else:
                self.sink.write(chunk.decode("utf-8", "replace"))
                self.sink.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the log or the workload


def _fileno(sink) -> int | None:
    """The file descriptor under `sink` (pgle's stdout/stderr), flushed: the pumps write each
    chunk to it with one os.write (no text or buffer layer per chunk). None for a stream
    without one (an in-memory stream): written through its own methods then."""
    try:
        fd = sink.fileno()
        sink.flush()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # a terminal the user left non-blocking: wait, lose nothing
            select.select([], [fd], [])
        except OSError:
            return  # a closed terminal must not stop the log or the workload


# The start of an XLA/absl log line (pgle.evidence.logscan has the full prefixes).
_LOG_START = re.compile(rb"^(?:\d+: )?(?:[IWEF]\d|\d{4}-\d\d-\d\d )")
SEVERITIES = "IWEF"


def hide_below(level: int) -> Callable[[bytes], bool]:
    """Hides XLA log lines less severe than TF_CPP_MIN_LOG_LEVEL `level` (1: INFO and VLOG)."""
    from pgle.evidence.logscan import parse_prefix

    def hide(line: bytes) -> bool:
        if not _LOG_START.match(line):
            return False
        parsed = parse_prefix(line)
        return parsed is not None and SEVERITIES.index(parsed.severity) < level

    return hide


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the thread that forked it ends (Linux only).

    The harness replaces this with its pipe watch (which also reaches the
    workload's own children); it covers the time before, and non-harness argv.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe watch alone


class _Channel:
    """Where one of the child's output streams goes: a pipe, or a pseudo-terminal when pgle's
    own stream (`fd`) is a terminal. `child_fd` is the child's end, `read_fd` pgle's."""

    def __init__(self, fd: int):
        self.terminal = _isatty(fd)
        if self.terminal:
            try:
                self.read_fd, self.child_fd = os.openpty()  # both non-inheritable
            except OSError:  # no pseudo-terminal left (ENOENT/EAGAIN): a pipe still works
                self.terminal = False
        if not self.terminal:
            self.read_fd, self.child_fd = os.pipe()
            return
        try:
            attrs = termios.tcgetattr(fd)
            # The user's terminal does the output processing (\n -> \r\n and the like) when
            # pgle writes the bytes to it, so the pseudo-terminal must pass them unchanged:
            # the log then holds what the program wrote.
            attrs[1] &= ~termios.OPOST
            termios.tcsetattr(self.child_fd, termios.TCSANOW, attrs)
        except termios.error:
            pass
        copy_window_size(fd, self.read_fd)

    def child_started(self) -> None:
        os.close(self.child_fd)  # the child's copy alone keeps it open: its exit is EOF (EIO)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def copy_window_size(terminal: int, pty: int) -> None:
    """The terminal's rows and columns onto the pseudo-terminal (set through its master)."""
    try:
        size = fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(pty, termios.TIOCSWINSZ, size)
    except OSError:
        pass


def _stderr_line(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class _ExitWatch:
    """Waits up to a timeout for the child's exit and notices it the moment it happens.

    `Popen.wait(timeout)` sleeps in steps of up to 50 ms between `waitpid` tries (CPython
    3.11's loop), which every run paid as wall time at exit; a pidfd (Linux >= 5.3) turns
    readable when the child exits, so `poll` on it returns at once. Without pidfd_open (older
    kernels, seccomp sandboxes), `Popen.wait(timeout)` as before."""

    def __init__(self, child: subprocess.Popen):
        self.child = child
        self.fd: int | None = None
        try:
            self.fd = os.pidfd_open(child.pid)
        except (AttributeError, OSError):
            return
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)

    def within(self, seconds: float) -> bool:
        """True once the child has exited (not yet reaped), waiting at most `seconds`."""
        if self.fd is None:
            try:
                self.child.wait(timeout=seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        # A signal handler (forwarded signals, SIGWINCH) runs during poll; PEP 475 resumes it.
        return bool(self.poller.poll(seconds * 1000))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def launch(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    *,
    cwd: str | None = None,
    watchdog: Callable[[], int | None] | None = None,
    poll_s: float = 0.5,
    terminal_level: int | None = None,
    progress: Callable[[], None] | None = None,
) -> LaunchResult:
    """Run `argv` to completion. `watchdog()` is polled; a non-None code stops the child;
    `progress()` is polled too (it rate-limits itself).
    `terminal_level`: XLA log lines below this TF_CPP_MIN_LOG_LEVEL go to the log only."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = _Log(log_path, _stderr_line)
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    # Only pgle holds the write end (os.pipe fds are not inheritable): its death is EOF there.
    watch_r, watch_w = os.pipe()
    env = {**env, PARENT_FD_VAR: str(watch_r)}
    out, err = _Channel(1), _Channel(2)
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out.child_fd,
                                 stderr=err.child_fd, pass_fds=(watch_r,),
                                 preexec_fn=_die_with_parent, **group)
    except OSError as e:
        log.close()
        os.close(watch_w)
        for fd in (out.read_fd, err.read_fd):
            os.close(fd)
        raise PgleError(f"cannot start {argv[0]}: {e.strerror}.") from None
    finally:
        os.close(watch_r)
        out.child_started()
        err.child_started()

    pumps = [
        _Pump(out.read_fd, sys.stdout, log, coalesce=out.terminal),
        _Pump(err.read_fd, sys.stderr, log,
              hide_below(terminal_level) if terminal_level else None, coalesce=err.terminal),
    ]
    for p in pumps:
        p.start()

    received: list[int] = []

    def forward(signum, frame):
        received.append(signum)
        _signal_group(child, signum)

    def resized(signum, frame):
        # The child's pseudo-terminal is no process's controlling terminal (the child runs in
        # its own process group), so the kernel signals nobody when its size changes: pgle
        # copies the new size and tells the workload, as the terminal would have.
        for fd, channel in ((1, out), (2, err)):
            if channel.terminal:
                copy_window_size(fd, channel.read_fd)
        _signal_group(child, signal.SIGWINCH)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED_SIGNALS:
            previous[sig] = signal.signal(sig, forward)
        if out.terminal or err.terminal:
            previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, resized)

    stopped = False
    watchdog_code = None
    exited = _ExitWatch(child)
    try:
        while True:
            if exited.within(poll_s):
                returncode = child.wait()
                break
            if progress is not None:
                progress()
            if watchdog is not None and not stopped:
                watchdog_code = watchdog()
                if watchdog_code is not None:
                    stopped = True
                    _terminate(child)
    finally:
        exited.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(watch_w)
    for p in pumps:
        # A grandchild that inherited the pipes may keep them open; don't hang on it.
        p.join(timeout=5.0)
    log.close()
    for fd in (out.read_fd, err.read_fd):
        os.close(fd)
    duration = time.monotonic() - start
    code = shell_exit_code(returncode)
    if stopped and watchdog_code is not None:
        code = watchdog_code
    return LaunchResult(code, -returncode if returncode < 0 else None, duration, log_path, stopped,
                        log.error)


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass


def _terminate(child: subprocess.Popen) -> None:
    _signal_group(child, signal.SIGTERM)
    try:
        child.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
