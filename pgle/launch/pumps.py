"""The workload's two output streams: passed on to pgle's own as they arrive, and kept in the
run log.

Each pump copies one of the child's pipes (or pseudo-terminals) to pgle's stdout or stderr (the
"sink") byte for byte, and complete lines to the log, so that lines of the two streams never
interleave mid-line there. Neither the sink nor the log may stop the workload:

- a sink that fails (`>/dev/full`, a reader that went away, a terminal that vanished) is said
  once, on the other stream, and dropped: the workload runs on, its output still reaches the
  log (pgle.launch.streams);
- a log that fails (a full disk) ends the log with one warning; the output keeps reaching the
  sink;
- a line never ends (a progress bar, 1 GiB without a newline): at most MAX_HELD_LINE bytes of
  it are held, then they go to the log in pieces.

Cost (issue 25): reads go into one reused buffer (no allocation per read), the pipe is made
large (the workload writes more before it waits for pgle, and pgle wakes less often), the
log gets each read with one `writev`, and the terminal filter (`hide`) does Python work only
on lines that look like a log line.
"""

from __future__ import annotations

import collections
import fcntl
import os
import re
import select
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeAlias

from pgle.errors import PgleError
from pgle.launch import streams

# What the pumps read into and pass on: their buffers, views of them, and pgle's own lines.
BytesLike: TypeAlias = bytes | bytearray | memoryview

# A line longer than this goes to the log in pieces: whole lines keep stdout and stderr from
# interleaving mid-line, but must not make memory grow without bound.
MAX_HELD_LINE = 1 << 20
READ_SIZE = 1 << 20
# Linux's default /proc/sys/fs/pipe-max-size: an unprivileged process may grow a pipe to it.
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_MAX_IOV = 64
# A program that writes each line on its own (a line-buffered pseudo-terminal, Python's
# logging, which flushes every record, `print(..., flush=True)`, PYTHONUNBUFFERED) hands over
# one line per write; a pump that forwarded each at once woke, read and wrote three times per
# line, and on a busy machine took the CPU the program needed (`output_*` rows in
# docs/performance.md). After a small read the pump waits COALESCE_S and takes what arrived
# meanwhile in one go: invisible on a terminal (a frame is ~16 ms), and a program writing fast
# is never held back: its reads are large (no wait), and a pipe holds PIPE_SIZE, far more than
# it can write in the wait. A pseudo-terminal holds only a few KiB: there the wait follows
# reads below COALESCE_BELOW_TERMINAL only.
COALESCE_S = 0.002
COALESCE_BELOW_TERMINAL = 1024
COALESCE_BELOW_PIPE = 64 << 10
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
# A terminal's bytes are written by a thread of their own (Behind), which may fall this far
# behind the pump before the pump waits for it.
BEHIND_MAX = 4 << 20


def grow_pipe(fd: int) -> bool:
    """Make the pipe under `fd` PIPE_SIZE bytes; False where the system's limits refuse it
    (pipe-max-size, pipe-user-pages-soft), and the pipe keeps its size."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
        return fcntl.fcntl(fd, _F_GETPIPE_SZ) >= PIPE_SIZE
    except OSError:
        return False


class Log:
    """The run log, shared by both pumps; the first write error ends it for good."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.error: str | None = None
        self.closed = False
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            self.fd = os.open(path, flags, 0o666)
        except OSError as e:
            raise PgleError(f"cannot write the workload log {path}: {e.strerror}.") from None

    def write(self, parts: Sequence[BytesLike]) -> None:
        """Append `parts` (bytes-like) in one writev; every byte or, after an error, none."""
        with self.lock:
            if self.error is not None or self.closed:
                return
            if len(parts) > _MAX_IOV:  # writev takes at most IOV_MAX (1024) pieces
                parts = [b"".join(parts)]
            try:
                total = sum(len(p) for p in parts)
                done = os.writev(self.fd, parts)
                if done < total:  # a short write (a signal, a nearly full disk): the rest
                    rest = b"".join(bytes(p) for p in parts)[done:]
                    while rest:
                        rest = rest[os.write(self.fd, rest) :]
            except OSError as e:
                self.error = streams.describe(e)
                streams.say(
                    f"pgle: warning: stopped writing {self.path}: {self.error}; the "
                    "workload's output still reaches this terminal, the log is incomplete"
                )

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                os.close(self.fd)
            except OSError as e:  # a full disk can surface only at close (NFS)
                if self.error is None:
                    self.error = streams.describe(e)


class Behind:
    """Writes one terminal's bytes from a thread of its own, in the order given.

    Why: on a terminal the bytes pass through a second pseudo-terminal, whose buffer holds a
    few KiB. A pump that wrote to the terminal itself stopped reading while the terminal took
    its bytes, so the workload's own pseudo-terminal filled and the workload waited: a
    program printing lines as fast as it could ran ~15% slower under pgle (issue 25,
    `output_terminal_program`). With this thread the pump goes on reading; it waits only when
    the terminal is BEHIND_MAX bytes behind (a terminal the user froze with Ctrl-S, a slow
    link), as the workload itself would. The first write error is kept and raised by the next
    `put` or by `drain`."""

    def __init__(self, fd: int):
        self.fd = fd
        self.cond = threading.Condition()
        self.chunks: collections.deque[bytes] = collections.deque()
        self.held = 0  # bytes given and not yet written
        self.written = 0  # bytes written: the terminal still takes them (pumps.drained)
        self.error: OSError | None = None
        self.ending = False
        self.abandoned = False  # pgle stopped waiting for this terminal (Behind.abandon)
        self.thread = threading.Thread(target=self._run, name="pgle-terminal", daemon=True)
        self.thread.start()

    def put(self, data: BytesLike) -> None:
        chunk = bytes(data)  # a copy: the pump reads into its buffer again
        with self.cond:
            while self.held >= BEHIND_MAX and self.error is None and not self.abandoned:
                self.cond.wait()
            if self.abandoned:
                return
            if self.error is not None:
                raise self.error
            self.chunks.append(chunk)
            self.held += len(chunk)
            self.cond.notify_all()

    def drain(self) -> None:
        """Everything given is written (or the error that stopped it is raised), or pgle
        abandoned the terminal. Waits on the count, not the thread: an abandoned thread may
        sit in a write to a frozen terminal for good."""
        with self.cond:
            self.ending = True
            self.cond.notify_all()
            while self.held and self.error is None and not self.abandoned:
                self.cond.wait()
            if self.error is not None and not self.abandoned:
                raise self.error

    def abandon(self) -> None:
        """The workload has exited and the terminal took nothing for PIPE_GRACE_S: what is
        queued is dropped, and from now on so is everything given (the run log has it)."""
        with self.cond:
            self.abandoned = True
            self.chunks.clear()
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.chunks and not self.ending:
                    self.cond.wait()
                if not self.chunks:
                    return
                chunk = self.chunks.popleft()
            try:
                write_all(self.fd, chunk, self._wrote)
            except OSError as e:
                with self.cond:
                    self.error = e
                    self.chunks.clear()
                    self.held = 0
                    self.cond.notify_all()
                return
            with self.cond:
                self.held -= len(chunk)
                self.cond.notify_all()

    def _wrote(self, n: int) -> None:
        # Per write, not per chunk: a chunk of a MiB takes a slow terminal many seconds,
        # all of them progress (pumps.drained).
        self.written += n


def write_all(fd: int, data: BytesLike, wrote: Callable[[int], None] | None = None) -> None:
    """Every byte of `data` to `fd`, waiting where the user left a terminal non-blocking;
    `wrote(n)` after each write."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:  # a terminal the user left non-blocking: wait
            select.select([], [fd], [])
            continue
        view = view[n:]
        if wrote is not None:
            wrote(n)


class Sink:
    """pgle's stdout or stderr as the workload's output reaches it: written with one
    os.write per chunk where it has a file descriptor, through its own methods where it has
    none (an in-memory stream), and dropped after its first failure. That failure is said
    once, on the other sink (`other`), between two of the workload's lines there."""

    def __init__(self, stream: IO[str] | None, fd: int, log_path: Path):
        self.fd = fd  # 1 or 2: which of pgle's streams this is
        self.name = streams.STREAM_NAMES[fd]
        self.stream = stream
        self.log_path = log_path
        self.failed: str | None = None
        self.told = False  # the user was told on a working stream
        self.other: Sink | None = None
        self.lock = threading.Lock()
        self.at_line_start = True
        self.queued: list[bytes] = []  # pgle's lines waiting for the end of the current line
        self.unsaid = False  # failed under the lock: to be said once it is released
        self.ended = False  # the workload's stream ended: no line end left to wait for
        self.out_fd: int | None = None
        self.behind: Behind | None = None  # a terminal's writer thread
        if stream is None or fd in streams.closed_at_start:
            self.failed = "closed"  # closed when pgle started: said by `start`
            return
        if fd in streams.failed:  # pgle's own lines failed on it already (2>/dev/full)
            self.failed = streams.failed[fd]
            return
        try:
            self.out_fd = stream.fileno()
            stream.flush()  # pgle's own earlier lines first
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            self.out_fd = None
        if self.out_fd is not None and os.isatty(self.out_fd):
            self.behind = Behind(self.out_fd)

    @staticmethod
    def pair(stdout: IO[str] | None, stderr: IO[str] | None, log_path: Path) -> tuple[Sink, Sink]:
        out, err = Sink(stdout, 1, log_path), Sink(stderr, 2, log_path)
        out.other, err.other = err, out
        for sink in (out, err):
            if sink.failed is not None:
                sink._say_failure()
        return out, err

    def write(self, data: BytesLike) -> None:
        if self.failed is not None or not data:
            return
        with self.lock:
            if not self.queued:
                self._put(data)
            else:  # pgle's lines go in after the last complete line of this chunk
                cut = bytes(data).rfind(b"\n") + 1
                if cut:
                    view = memoryview(data)
                    self._put(view[:cut])
                    self._put(b"".join(self.queued))
                    self.queued = []
                    self._put(view[cut:])
                else:
                    self._put(data)
            self.at_line_start = bytes(data[-1:]) == b"\n"
        self._after()

    def _after(self) -> None:
        # Never with self.lock held: the other sink may be saying its own failure here.
        if self.unsaid:
            self.unsaid = False
            self._say_failure()

    def end(self) -> None:
        """The stream ended: pgle's lines still waiting go out, on a line of their own, and
        the terminal's writer has written everything."""
        with self.lock:
            if self.queued and self.failed is None:
                self._put(b"\n" + b"".join(self.queued))
                self.at_line_start = True
            self.queued = []
            self.ended = True
        if self.behind is not None:
            try:
                self.behind.drain()
            except OSError as e:
                with self.lock:
                    self._failed(e)
        self._after()

    def line(self, text: str) -> bool:
        """One of pgle's lines on this stream, between the workload's lines. False if failed."""
        if self.failed is not None:
            return False
        data = (text.rstrip("\n") + "\n").encode("utf-8", "replace")
        with self.lock:
            if self.at_line_start:
                self._put(data)
            elif self.ended:  # after the workload's last line, unfinished: on one of its own
                self._put(b"\n" + data)
                self.at_line_start = True
            else:
                self.queued.append(data)
        self._after()
        return self.failed is None

    def _put(self, data: BytesLike) -> None:
        if self.failed is not None or not len(data):
            return
        try:
            if self.behind is not None:
                self.behind.put(data)
                return
            if self.out_fd is not None:
                write_all(self.out_fd, data)
                return
            buffer = getattr(self.stream, "buffer", None)
            if buffer is not None:
                buffer.write(bytes(data))
                buffer.flush()
            else:
                self.stream.write(bytes(data).decode("utf-8", "replace"))  # type: ignore[union-attr]
                self.stream.flush()  # type: ignore[union-attr]
        except Exception as e:
            self._failed(e)

    def _failed(self, e: Exception) -> None:
        """The first failure (under self.lock): said by the caller once it let go of it."""
        if self.failed is not None:
            return
        self.failed = streams.describe(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
        self.queued = []
        self.unsaid = True

    def _say_failure(self) -> None:
        if self.failed == "closed":
            text = (
                f"pgle: warning: pgle's {self.name} is closed; the workload's {self.name} "
                f"goes to its log only ({self.log_path})"
            )
        else:
            text = (
                f"pgle: warning: cannot write the workload's {self.name} to pgle's "
                f"{self.name} ({self.failed}); the workload runs on, and its {self.name} "
                f"goes to {self.log_path} only"
            )
        key = f"{self.failed == 'closed'}-{self.fd}"
        if key in streams.said:
            self.told = True
            return
        other = self.other
        if other is not None and other.failed is None:
            self.told = other.line(text)
        elif other is None:
            self.told = streams.say(text)
        if self.told:
            streams.said.add(key)

    def note(self) -> str | None:
        """For the report, where no stream took the line: why this stream's output reached
        the log only (said once either way)."""
        if self.failed is None or self.told:
            return None
        if self.failed == "closed":
            return (
                f"pgle's {self.name} was closed, so the workload's {self.name} is only in "
                f"its log {self.log_path}"
            )
        return (
            f"pgle could not write the workload's {self.name} ({self.failed}); it is "
            f"complete in its log {self.log_path}"
        )


class Pump(threading.Thread):
    """Copies one pipe to a sink at once, and whole lines to the log.

    Only the new chunk is searched for a newline and held bytes are kept as a list, so the
    cost is linear in bytes whatever the line structure."""

    def __init__(
        self,
        fd: int,
        sink: Sink,
        log: Log,
        hide: Callable[[bytes], bool] | None = None,
        coalesce_below: int = 0,
    ):
        super().__init__(daemon=True, name=f"pgle-pump-{sink.name}")
        self.fd, self.sink, self.log = fd, sink, log
        self.coalesce_below = coalesce_below  # a read smaller than this waits for more
        self.held: list[bytes] = []
        self.held_bytes = 0
        # `hide(line)`: a complete line that goes to the log only (XLA's INFO lines pgle
        # turned on); everything else reaches the sink as before.
        self.hide = hide
        self.pending = b""  # the start of a line that may yet turn out to be hidden
        self.mid_line = False  # the last chunk ended inside a line (not held in `pending`)
        self.detached = False  # pgle stopped waiting for this stream: drain it, keep nothing
        self.last_read = 0.0  # time.monotonic() of the last bytes read (the stall watchdog)
        self.chunks = 0  # chunks handled so far

    def caught_up(self, settle_s: float = 0.02) -> bool:
        """Nothing waits in the pipe and nothing is being handled: what the workload wrote
        before now is in the log (but an unfinished line)."""
        import fcntl
        import struct
        import termios

        before = self.chunks
        try:
            waiting = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4))[0]
        except OSError:
            return not self.is_alive()
        if waiting:
            return False
        time.sleep(settle_s)
        return self.chunks == before

    def progress(self) -> tuple[int, int]:
        """Chunks read and bytes the terminal took: both still for a pump that waits."""
        behind = self.sink.behind
        return self.chunks, behind.written if behind is not None else 0

    def abandon_stuck_terminal(self) -> bool:
        """Where the pump waits on a terminal that has not taken what it was given, stop
        waiting for it (Behind.abandon): whether it did."""
        behind = self.sink.behind
        if behind is None or not behind.held or behind.abandoned:
            return False
        behind.abandon()
        return True

    def run(self) -> None:
        buf = bytearray(READ_SIZE)
        view = memoryview(buf)
        while True:
            try:
                n = os.readv(self.fd, [buf])
            except OSError:  # EIO: a pseudo-terminal whose other side closed
                break
            if not n:
                break
            self.last_read = time.monotonic()
            if n < self.coalesce_below:
                n = self._gather(buf, n)
            if self.detached:
                self.chunks += 1
                continue
            chunk = view[:n]
            # The log first: a terminal that takes the bytes slowly (or not at all: Ctrl-S)
            # makes sink.write wait, and the log must not wait with it.
            self._to_log(buf, chunk, n)
            self.sink.write(chunk if self.hide is None else self._visible(bytes(chunk)))
            self.chunks += 1
        if self.detached:
            return
        if self.held:
            self.log.write([*self.held, b"\n"])
        if self.pending and self.hide is not None and not self.hide(self.pending):
            self.sink.write(self.pending)
        self.sink.end()

    def _to_log(self, buf: bytearray, chunk: memoryview, n: int) -> None:
        cut = buf.rfind(b"\n", 0, n) + 1
        if cut:
            self.log.write([*self.held, chunk[:cut]])
            self.held, self.held_bytes = [], 0
        if cut < n:
            self.held.append(bytes(chunk[cut:]))  # a copy: buf is read into again
            self.held_bytes += n - cut
            if self.held_bytes > MAX_HELD_LINE:
                self.log.write(self.held)
                self.held, self.held_bytes = [], 0

    def _gather(self, buf: bytearray, n: int) -> int:
        time.sleep(COALESCE_S)
        with memoryview(buf) as view:
            while n < len(buf) and select.select([self.fd], [], [], 0)[0]:
                try:
                    more = os.readv(self.fd, [view[n:]])
                except OSError:
                    break  # EIO: the next read in run() sees it again and ends the pump
                if not more:
                    break
                n += more
        return n

    def _visible(self, chunk: bytes) -> bytes:
        """`chunk` less the complete lines `hide` hides. Only lines that look like a log line
        (a C-level search finds them) cost Python work; a chunk without one passes as is."""
        data = self.pending + chunk if self.pending else chunk
        first = 1 if self.mid_line and not self.pending else 0  # data[0] starts no line
        self.pending = b""
        self.mid_line = not data.endswith(b"\n")
        out: list[bytes] = []
        pos = 0
        for m in _LOG_LINE.finditer(data, first):
            start = m.start()
            end = data.find(b"\n", start)
            if end < 0:
                if len(data) - start < MAX_HELD_LINE:
                    out.append(data[pos:start])
                    self.pending = data[start:]  # maybe an INFO line cut by the read
                    self.mid_line = False
                    pos = len(data)
                break
            if self.hide is not None and self.hide(data[start:end]):
                out.append(data[pos:start])
                pos = end + 1
        if pos == 0:
            return data
        out.append(data[pos:])
        return b"".join(out)


# The start of an XLA/absl log line (pgle.evidence.logscan has the full prefixes), at the start
# of any line of a chunk.
_LOG_START = rb"(?:\d+: )?(?:[IWEF]\d|\d{4}-\d\d-\d\d )"
_LOG_LINE = re.compile(rb"(?m)^" + _LOG_START)
SEVERITIES = "IWEF"


def hide_below(level: int) -> Callable[[bytes], bool]:
    """Hides XLA log lines less severe than TF_CPP_MIN_LOG_LEVEL `level` (1: INFO and VLOG).

    Lines logged from Python (absl-py writes the same prefix, with a `.py` file) are the
    program's own: TF_CPP_MIN_LOG_LEVEL never hid them, so neither does pgle."""
    from pgle.evidence.logscan import parse_prefix

    def hide(line: bytes) -> bool:
        parsed = parse_prefix(line)
        return (
            parsed is not None
            and SEVERITIES.index(parsed.severity) < level
            and not parsed.file.endswith(".py")
        )

    return hide


def drained(pumps: list[Pump], seconds: float) -> bool:
    """Wait for every pump to reach the end of its stream and hand its terminal all it read,
    as long as bytes move: False once `seconds` passed in which none was read or shown. A
    slow terminal (a loaded machine, an ssh link) is waited for, as the workload would have
    waited for it; a fixed deadline once cut the last ~900 KB of a fast printer's output."""
    mark, since = None, time.monotonic()
    while True:
        alive = [p for p in pumps if p.is_alive()]
        if not alive:
            return True
        now = [p.progress() for p in alive]
        if now != mark:
            mark, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return False
        alive[0].join(timeout=0.05)
