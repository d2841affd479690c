"""The pieces of the pumps, called directly on real pipes and files (pgle.launch.pumps): the
log's writes (many pieces, after it closed or failed), pgle's own lines between the
workload's on a stream, a stream without a file descriptor, a terminal the user left
non-blocking (issue 37: mutants of these survived the tests that run whole launches)."""

from __future__ import annotations

import fcntl
import io
import os
import threading
import time

import pytest

from helpers.deadline import returns_within
from pgle.launch import streams
from pgle.launch.pumps import Log, Sink, write_all


def test_the_log_takes_many_pieces_in_one_write_and_nothing_once_closed(tmp_path):
    log = Log(tmp_path / "w.log")
    log.write([b"%d," % i for i in range(100)])  # more than writev's pieces at once
    log.write([bytearray(b"x"), memoryview(b"y\n")])
    log.close()
    log.write([b"after close\n"])
    log.close()  # twice: no error
    assert (tmp_path / "w.log").read_bytes() == b"".join(b"%d," % i for i in range(100)) + b"xy\n"
    assert log.error is None


def test_a_log_that_failed_takes_nothing_more(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(streams, "said", set())
    log = Log(tmp_path / "w.log")
    log.write([b"kept\n"])
    os.close(log.fd)
    log.fd = os.open(os.devnull.replace("null", "full"), os.O_WRONLY)
    log.write([b"lost\n"])
    assert log.error == "No space left on device (ENOSPC)"
    log.fd, full = os.open(tmp_path / "w.log", os.O_WRONLY | os.O_APPEND), log.fd
    os.close(full)
    log.write([b"never\n"])  # the first error ended it for good
    log.close()
    assert (tmp_path / "w.log").read_bytes() == b"kept\n"
    assert capfd.readouterr().err.count("pgle: warning: stopped writing") == 1


def test_pgles_line_waits_for_the_end_of_the_workloads_line():
    out, err = io.StringIO(), io.StringIO()
    sink, other = Sink.pair(out, err, "w.log")
    assert sink.behind is None and sink.out_fd is None  # no file descriptor: its methods
    sink.write(b"progress 10%")
    assert sink.line("pgle: a note") is True
    assert out.getvalue() == "progress 10%"  # not in the middle of the workload's line
    sink.write(memoryview(b" 20%\nnext "))
    assert out.getvalue() == "progress 10% 20%\npgle: a note\nnext "
    sink.line("pgle: second")
    sink.end()  # the stream ended mid-line: pgle's line on a line of its own
    assert out.getvalue() == "progress 10% 20%\npgle: a note\nnext \npgle: second\n"
    other.write(b"bad \xff byte\n")  # not UTF-8: replaced, never an error
    assert err.getvalue() == "bad \ufffd byte\n"
    err.seek(0)
    err.truncate()
    other.write(b"plain\n")
    other.line("pgle: at a line start")
    assert err.getvalue() == "plain\npgle: at a line start\n"


def test_a_stream_with_a_buffer_gets_bytes_and_one_that_fails_is_said_on_the_other(
        monkeypatch):
    monkeypatch.setattr(streams, "said", set())
    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="ascii")
    out, err = io.StringIO(), io.StringIO()
    sink, _ = Sink.pair(text, err, "w.log")
    sink.write(b"\xc3\xa9 bytes as they are\n")
    assert raw.getvalue() == b"\xc3\xa9 bytes as they are\n"

    class Broken(io.StringIO):
        def write(self, s):
            raise ValueError("I/O operation on closed file")

    broken, other = Sink.pair(Broken(), out, "w.log")
    broken.write(b"x\n")
    broken.write(b"y\n")
    assert broken.failed == "ValueError: I/O operation on closed file"
    assert out.getvalue() == (
        "pgle: warning: cannot write the workload's stdout to pgle's stdout (ValueError: I/O "
        "operation on closed file); the workload runs on, and its stdout goes to w.log only\n")
    assert broken.line("pgle: lost") is False and broken.note() is None  # said: no note


def test_a_terminal_left_non_blocking_is_waited_for(tmp_path):
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    got = bytearray()

    def slow_reader() -> None:
        while True:
            time.sleep(0.002)
            data = os.read(r, 1 << 14)
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=slow_reader, daemon=True)
    reader.start()
    data = bytes(range(256)) * (8 << 10)  # 2 MiB: far more than the pipe holds
    counted = []
    write_all(w, data, counted.append)
    os.close(w)
    reader.join(timeout=60)
    os.close(r)
    assert bytes(got) == data and sum(counted) == len(data) and len(counted) > 1


INFO = b"I1129 10:00:00.123456   4242 gpu_compiler.cc:100] Using PGLE profile from /p\n"


def _pump():
    from pgle.launch.pumps import Pump, hide_below

    r, w = os.pipe()
    os.close(w)
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    pump = Pump(r, sink, Log.__new__(Log), hide_below(1))
    os.close(r)
    return pump


def test_an_info_line_is_hidden_only_where_a_line_starts():
    p = _pump()
    assert p._visible(b"a\n" + INFO + b"b\n") == b"a\nb\n"
    assert p._visible(b"progress: ") == b"progress: "  # the line goes on in the next read
    assert p._visible(INFO) == INFO  # not at a line start: the program's own text, shown
    assert p._visible(b"x") == b"x" and p._visible(b"\n" + INFO) == b"\n"
    # A line cut by the read: held until it is whole, then hidden or shown.
    assert p._visible(INFO[:17]) == b"" and p._visible(INFO[17:]) == b""
    warning = INFO.replace(b"I1129", b"W1129")
    assert p._visible(warning[:17]) == b"" and p._visible(warning[17:]) == warning
    from pgle.launch.pumps import MAX_HELD_LINE

    long = INFO[:30] + b"x" * MAX_HELD_LINE  # never held past MAX_HELD_LINE
    assert p._visible(long) == long and p.pending == b""


def test_a_failure_is_said_once_per_process_and_noted_only_if_unsaid(monkeypatch, capfd):
    monkeypatch.setattr(streams, "said", set())

    class Broken(io.StringIO):
        def write(self, s):
            raise ValueError("gone")

    alone = Sink(Broken(), 1, "w.log")  # no other sink: pgle's own line, on stderr
    alone.write(b"x\n")
    assert capfd.readouterr().err == (
        "pgle: warning: cannot write the workload's stdout to pgle's stdout (ValueError: "
        "gone); the workload runs on, and its stdout goes to w.log only\n")
    assert alone.told and alone.note() is None
    first, _ = Sink.pair(None, io.StringIO(), "a.log")
    second, _ = Sink.pair(None, io.StringIO(), "b.log")
    assert first.told and second.told and second.note() is None  # said once: no note either


def test_the_terminal_writer_is_a_daemon_that_ends_after_its_drain():
    from pgle.launch.pumps import Behind

    r, w = os.pipe()
    behind = Behind(w)
    # A daemon: a writer stuck on a frozen terminal never keeps pgle from exiting.
    assert behind.thread.daemon and behind.thread.name == "pgle-terminal"
    with returns_within(10):  # a writer that never writes fails here instead of hanging
        behind.put(b"x")
        behind.drain()
    behind.thread.join(timeout=20)
    assert not behind.thread.is_alive() and os.read(r, 10) == b"x"
    os.close(r)
    os.close(w)


def test_pgles_line_ends_with_exactly_one_newline_and_never_fails_on_its_text():
    out = io.StringIO()
    sink, _ = Sink.pair(out, io.StringIO(), "w.log")
    assert sink.line("pgle: one\n") and sink.line("\npgle: two  ") and sink.line("pgle: XX\n")
    # A path with a byte that is not UTF-8 (os.fsdecode's surrogate): replaced, not an error.
    assert sink.line("pgle: see /tmp/\udcff.log")
    assert out.getvalue() == "pgle: one\n\npgle: two  \npgle: XX\npgle: see /tmp/?.log\n"


def test_a_closed_stream_and_a_failed_one_are_each_said_once_per_process(monkeypatch):
    """Saying a closed stdout does not silence a later failure of stdout (another reason), and
    each of the two is said once, however many launches see it."""
    monkeypatch.setattr(streams, "said", set())
    err1, err2 = io.StringIO(), io.StringIO()
    Sink.pair(None, err1, "a.log")
    Sink.pair(None, err2, "b.log")
    closed = "pgle: warning: pgle's stdout is closed; the workload's stdout goes to its log only"
    assert err1.getvalue() == f"{closed} (a.log)\n" and err2.getvalue() == ""

    class Broken(io.StringIO):
        def write(self, s):
            raise ValueError("gone")

    err3, err4 = io.StringIO(), io.StringIO()
    for err in (err3, err4):
        broken, _ = Sink.pair(Broken(), err, "c.log")
        broken.write(b"x\n")
    assert err3.getvalue() == (
        "pgle: warning: cannot write the workload's stdout to pgle's stdout (ValueError: "
        "gone); the workload runs on, and its stdout goes to c.log only\n")
    assert err4.getvalue() == ""


def test_a_log_line_start_is_held_only_while_it_is_shorter_than_the_limit():
    from pgle.launch.pumps import MAX_HELD_LINE

    p = _pump()
    at_limit = INFO[:30] + b"x" * (MAX_HELD_LINE - 30)  # exactly MAX_HELD_LINE: not held
    assert p._visible(at_limit) == at_limit and p.pending == b""
    p = _pump()
    late = b"y" * (MAX_HELD_LINE - 10) + b"\n" + INFO[:30]  # a short start, late in a chunk
    assert p._visible(late) == late[: MAX_HELD_LINE - 9] and p.pending == INFO[:30]


def test_caught_up_is_an_empty_pipe_and_a_closed_one_of_a_pump_that_ended(tmp_path):
    from pgle.launch.pumps import Pump

    r, w = os.pipe()
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    assert pump.caught_up()
    os.write(w, b"waiting in the pipe\n")
    assert not pump.caught_up()
    os.read(r, 100)
    assert pump.caught_up()
    os.close(r)
    os.close(w)
    assert not pump.is_alive() and pump.caught_up()  # nothing left to read: caught up


def test_only_a_terminal_that_holds_bytes_is_abandoned_and_only_once(tmp_path):
    from pgle.launch.pumps import Behind, Pump

    r, w = os.pipe()
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    assert not pump.abandon_stuck_terminal()  # no terminal: nothing to abandon
    pr, pw = os.pipe()
    sink.behind = Behind(pw)  # a terminal nobody reads (Ctrl-S)
    assert not pump.abandon_stuck_terminal()  # it holds nothing: not stuck
    with returns_within(10):  # the writer takes it at once: only the pipe is full
        sink.behind.put(b"z" * (1 << 20))  # far more than the pipe takes
    assert sink.behind.held > 0
    assert pump.abandon_stuck_terminal() and sink.behind.abandoned
    assert not pump.abandon_stuck_terminal()  # once
    os.close(pr)  # the writer's blocked write fails (EPIPE)
    with returns_within(10):
        sink.behind.drain()  # abandoned: returns at once, and the writer's thread may end
    sink.behind.thread.join(timeout=20)
    assert not sink.behind.thread.is_alive()
    # A terminal that went away (its write failed) holds nothing: it is no frozen terminal to
    # warn about (its failure is said once, by the sink).
    gr, gw = os.pipe()
    os.close(gr)
    sink.behind = Behind(gw)
    with returns_within(10):
        sink.behind.put(b"x" * 100)
    with returns_within(30), pytest.raises(BrokenPipeError):
        sink.behind.drain()
    assert not pump.abandon_stuck_terminal() and not sink.behind.abandoned
    for fd in (pw, r, w, gw):
        os.close(fd)


def test_the_log_appends_to_what_is_there_is_not_inherited_and_refuses_a_link(tmp_path):
    import stat

    from pgle.errors import PgleError

    path = tmp_path / "w.log"
    path.write_bytes(b"kept\n")
    log = Log(path)
    assert fcntl.fcntl(log.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # never the workload's
    log.write([b"added\n"])
    log.close()
    assert path.read_bytes() == b"kept\nadded\n"
    fresh = tmp_path / "fresh.log"
    umask = os.umask(0o022)
    try:
        Log(fresh).close()
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # 0o666 less the umask
    link = tmp_path / "link.log"
    link.symlink_to(tmp_path / "elsewhere.log")
    try:
        Log(link)
    except PgleError as e:
        assert e.message == f"cannot write the workload log {link}: Too many levels of symbolic links."
    else:
        raise AssertionError("a link at the log's name was followed")
    assert not (tmp_path / "elsewhere.log").exists()


def test_a_pipe_is_grown_to_pipe_size_and_a_file_is_not_a_pipe(tmp_path):
    from pgle.launch.pumps import _F_GETPIPE_SZ, PIPE_SIZE, grow_pipe

    r, w = os.pipe()
    try:
        assert grow_pipe(r) and fcntl.fcntl(r, _F_GETPIPE_SZ) == PIPE_SIZE
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "w") as f:
        assert not grow_pipe(f.fileno())


def test_drained_waits_while_bytes_move_and_gives_up_after_seconds_without(tmp_path):
    from pgle.launch.pumps import Pump, drained

    def pump() -> tuple[Pump, int]:
        r, w = os.pipe()
        sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
        p = Pump(r, sink, Log(tmp_path / "w.log"))
        p.start()
        return p, w

    assert drained([], 0.1)
    ended, w1 = pump()
    os.close(w1)
    assert drained([ended], 5)  # it reached the end of its stream
    held, w2 = pump()  # its stream stays open: nothing moves
    t0 = time.monotonic()
    assert not drained([held], 0.3)
    assert 0.3 <= time.monotonic() - t0 < 5
    # Bytes that keep moving are waited for, past `seconds`.
    stop = threading.Event()

    def trickle() -> None:
        for _ in range(8):
            os.write(w2, b"x\n")
            time.sleep(0.05)
        stop.set()  # before the close: the pump's end of stream follows it
        os.close(w2)

    writer = threading.Thread(target=trickle, daemon=True)
    writer.start()
    t0 = time.monotonic()
    assert drained([held], 2.0) and stop.is_set()  # 0.05 s apart: never 2 s without
    assert time.monotonic() - t0 >= 0.35
    writer.join(timeout=20)
    for p in (ended, held):
        os.close(p.fd)


def test_drained_counts_a_slow_terminals_bytes_as_progress(tmp_path):
    """The pump waits on a terminal that takes bytes slowly (its chunks do not move): the
    bytes the terminal takes are progress, and drained waits for them past `seconds`."""
    from pgle.launch.pumps import Behind, Pump, drained

    r, w = os.pipe()
    tr, tw = os.pipe()
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    sink.behind = Behind(tw)
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    pump.start()
    got = bytearray()

    def slow_terminal() -> None:
        while chunk := os.read(tr, 64 << 10):
            got.extend(chunk)
            time.sleep(0.02)

    reader = threading.Thread(target=slow_terminal, daemon=True)
    reader.start()
    data = b"y" * (8 << 20)

    def workload() -> None:
        write_all(w, data)
        os.close(w)

    writer = threading.Thread(target=workload, daemon=True)
    writer.start()
    with returns_within(60):
        assert drained([pump], 0.5)  # the pump waits on the terminal far longer than that
    writer.join(timeout=20)
    os.close(tw)
    reader.join(timeout=20)
    assert bytes(got) == data
    os.close(r)
    os.close(tr)


def test_a_stream_pgles_own_lines_failed_on_is_dropped_from_the_start(monkeypatch):
    """pgle's own stderr failed already (2>/dev/full): the workload's stderr is not tried on
    it; said once on stdout, between the workload's lines."""
    monkeypatch.setattr(streams, "said", set())
    monkeypatch.setattr(streams, "failed", {2: "No space left on device (ENOSPC)"})
    out, err = io.StringIO(), io.StringIO()
    o, e = Sink.pair(out, err, "w.log")
    assert e.failed == "No space left on device (ENOSPC)" and o.failed is None
    assert e.out_fd is None and e.behind is None
    e.write(b"never shown\n")
    assert err.getvalue() == ""
    assert out.getvalue() == (
        "pgle: warning: cannot write the workload's stderr to pgle's stderr (No space left on "
        "device (ENOSPC)); the workload runs on, and its stderr goes to w.log only\n")
    assert e.note() is None  # said: nothing for the report


def test_a_stream_with_a_descriptor_gets_pgles_earlier_lines_first(tmp_path):
    """A real file as pgle's stdout: what pgle printed to it before the launch (still in the
    text stream's buffer) comes before the workload's bytes, which go straight to the fd."""
    path = tmp_path / "out"
    with open(path, "w") as stream:
        stream.write("pgle: starting\n")  # buffered, not yet written
        sink, _ = Sink.pair(stream, io.StringIO(), "w.log")
        assert sink.out_fd == stream.fileno() and sink.behind is None
        sink.write(b"workload\n")
        assert path.read_bytes() == b"pgle: starting\nworkload\n"


def test_a_detached_pump_drains_its_stream_and_keeps_nothing(tmp_path):
    """pgle stopped waiting for the stream (a daemon holds it): what comes later is read, so
    the writer never blocks, but neither shown nor logged; a held line end is not written."""
    from pgle.launch.pumps import Pump

    r, w = os.pipe()
    out = io.StringIO()
    sink, _ = Sink.pair(out, io.StringIO(), "w.log")
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    os.write(w, b"before, no newline")
    pump.start()
    deadline = time.monotonic() + 20
    while pump.chunks < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pump.detached = True
    for _ in range(3):
        os.write(w, b"after\n" * 20000)  # more than the pipe holds: read, or the write blocks
    os.close(w)
    pump.join(timeout=20)
    assert not pump.is_alive() and pump.chunks >= 2
    assert out.getvalue() == "before, no newline"
    assert (tmp_path / "w.log").read_bytes() == b""  # the held start of a line: dropped too
    os.close(r)


def test_a_long_line_reaches_the_log_in_pieces_of_the_limit(tmp_path, monkeypatch):
    from pgle.launch import pumps

    monkeypatch.setattr(pumps, "MAX_HELD_LINE", 10)
    r, w = os.pipe()
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    pump = pumps.Pump(r, sink, Log(tmp_path / "w.log"))
    pump._to_log(bytearray(b"0123456789"), memoryview(b"0123456789"), 10)
    assert pump.held_bytes == 10 and (tmp_path / "w.log").read_bytes() == b""  # at the limit
    pump._to_log(bytearray(b"ab"), memoryview(b"ab"), 2)
    assert (tmp_path / "w.log").read_bytes() == b"0123456789ab"  # past 10: written as is
    assert pump.held == [] and pump.held_bytes == 0
    pump._to_log(bytearray(b"xyz"), memoryview(b"xyz"), 3)
    assert pump.held == [b"xyz"] and pump.held_bytes == 3
    pump._to_log(bytearray(b"z\nnext"), memoryview(b"z\nnext"), 6)
    assert (tmp_path / "w.log").read_bytes() == b"0123456789abxyzz\n"
    assert pump.held == [b"next"] and pump.held_bytes == 4
    os.close(r)
    os.close(w)


@pytest.mark.parametrize("terminal", [False, True])
def test_a_short_last_write_reaches_the_log_whole_and_alone(tmp_path, terminal):
    """A small read waits a moment for more (pumps.COALESCE_S); where the stream ends in that
    moment (a pipe's writer closed, a pseudo-terminal's side closed: EIO) what was read is
    handed on exactly, nothing of the pump's buffer with it."""
    from pgle.launch.pumps import COALESCE_BELOW_PIPE, COALESCE_BELOW_TERMINAL, Pump

    r, w = os.openpty() if terminal else os.pipe()
    os.write(w, b"last words, no newline")
    os.close(w)  # the workload exited: its end of the stream is closed
    out = io.StringIO()
    sink, _ = Sink.pair(out, io.StringIO(), "w.log")
    log = Log(tmp_path / "w.log")
    pump = Pump(r, sink, log,
                coalesce_below=COALESCE_BELOW_TERMINAL if terminal else COALESCE_BELOW_PIPE)
    pump.start()
    pump.join(timeout=20)
    assert not pump.is_alive()
    log.close()
    # The log ends the unfinished line (pgle's own lines then start on one of their own).
    assert (tmp_path / "w.log").read_bytes() == b"last words, no newline\n"
    assert out.getvalue() == "last words, no newline"
    os.close(r)


def test_a_write_cut_short_by_a_full_disk_is_the_logs_error(tmp_path, capfd, monkeypatch):
    """A disk with room for part of a write: writev takes what fits, the rest is tried and
    fails, and the log says it is incomplete; what it holds is the start of the output."""
    from helpers.smallfs import fill, small_filesystem

    monkeypatch.setattr(streams, "said", set())
    with small_filesystem(tmp_path / "fs", 128) as fs:
        log = Log(fs / "w.log")
        fill(fs, leave_bytes=8192)
        parts = [b"a" * (32 << 10), b"b" * (32 << 10)]  # more than the room left
        log.write(parts)
        log.close()
        kept = (fs / "w.log").read_bytes()
        assert 0 < len(kept) < sum(map(len, parts)), len(kept)  # a short write, not none
        assert kept == b"".join(parts)[: len(kept)]
        assert log.error == "No space left on device (ENOSPC)"
    assert capfd.readouterr().err.count("pgle: warning: stopped writing") == 1


def test_nothing_more_goes_to_a_stream_after_its_first_failure(monkeypatch):
    """A stream that failed once (a full disk, a reader that went away) gets none of what
    was to follow in the same write, pgle's waiting line included, even where it would take
    it again: its output continues in the log only, never with a hole in the middle."""
    monkeypatch.setattr(streams, "said", set())

    class FailsOnce(io.StringIO):
        failures = 0  # writes to fail from now on

        def write(self, s):
            if self.failures:
                self.failures -= 1
                raise OSError(5, "Input/output error")
            return super().write(s)

    flaky, err = FailsOnce(), io.StringIO()
    sink, _ = Sink.pair(flaky, err, "w.log")
    sink.write(b"progress 10%")
    sink.line("pgle: a note")  # waits for the end of the workload's line
    flaky.failures = 1
    sink.write(b" 20%\nnext, mid-line")  # its first part fails: the note and the rest never go
    assert sink.failed == "Input/output error (EIO)"
    assert flaky.getvalue() == "progress 10%"
    assert "cannot write the workload's stdout" in err.getvalue()


def test_a_line_is_in_the_log_as_soon_as_its_newline_is_read(tmp_path):
    """The log holds each complete line once its newline was read, also when the newline
    opens the next read (a `tail -f` of the log, or pgle reading it while the workload
    waits, sees the line, not only once the next one ends)."""
    from pgle.launch.pumps import Pump

    r, w = os.pipe()
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    pump.start()

    def read_by_pump(data: bytes, chunks: int) -> None:
        os.write(w, data)
        deadline = time.monotonic() + 20
        while pump.chunks < chunks:
            assert time.monotonic() < deadline
            time.sleep(0.005)

    read_by_pump(b"first line, its end not yet written", 1)
    assert (tmp_path / "w.log").read_bytes() == b""
    read_by_pump(b"\nsecond line, not ended", 2)
    assert (tmp_path / "w.log").read_bytes() == b"first line, its end not yet written\n"
    os.close(w)
    pump.join(timeout=20)
    assert (tmp_path / "w.log").read_bytes() == (
        b"first line, its end not yet written\nsecond line, not ended\n")
    os.close(r)


def test_pgles_waiting_lines_go_in_after_the_last_complete_line_of_a_chunk():
    """pgle's lines said mid-line wait, in order and each whole, through chunks without a
    newline, then go in after the last complete line of the chunk that ends one; an empty
    chunk (all of it lines `hide` kept from the terminal) changes nothing."""
    out = io.StringIO()
    sink, _ = Sink.pair(out, io.StringIO(), "w.log")
    sink.write(b"step 1\n")
    sink.write(b"")
    assert sink.line("pgle: at a line start") is True
    assert out.getvalue() == "step 1\npgle: at a line start\n"
    sink.write(b"progress")
    sink.line("pgle: first")
    sink.line("pgle: second")
    sink.write(b" 50%")  # still no newline: they wait
    assert out.getvalue().endswith("progress 50%")
    sink.write(b" 100%\nline 2\nline 3, mid-line")
    assert out.getvalue() == ("step 1\npgle: at a line start\nprogress 50% 100%\nline 2\n"
                              "pgle: first\npgle: second\nline 3, mid-line")


def test_a_failure_said_after_the_other_stream_ended_mid_line_is_shown(monkeypatch):
    """The workload's stdout ended without a final newline, then its stderr failed: the
    warning is said on stdout on a line of its own, not queued behind a line end that can
    no longer come (it was lost, and counted as told, so the report had no note either).
    pgle's lines waiting at the end go out whole and in order."""
    monkeypatch.setattr(streams, "said", set())

    class Broken(io.StringIO):
        def write(self, s):
            raise ValueError("I/O operation on closed file")

    out = io.StringIO()
    stdout, stderr = Sink.pair(out, Broken(), "w.log")
    stdout.write(b"last words")
    stdout.line("pgle: first")
    stdout.line("pgle: second")
    stdout.write(b", no newline")
    stdout.end()
    assert out.getvalue() == "last words, no newline\npgle: first\npgle: second\n"
    out.seek(0)
    out.truncate()
    stdout2, stderr2 = Sink.pair(out, Broken(), "w.log")
    stdout2.write(b"last words, no newline")
    stdout2.end()
    stderr2.write(b"an error line\n")
    assert out.getvalue() == (
        "last words, no newline\npgle: warning: cannot write the workload's stderr to pgle's "
        "stderr (ValueError: I/O operation on closed file); the workload runs on, and its "
        "stderr goes to w.log only\n")
    assert stderr2.told and stderr2.note() is None
    assert stdout2.line("pgle: later") and out.getvalue().endswith("only\npgle: later\n")


def test_a_terminal_that_went_away_by_the_end_is_the_sinks_failure(monkeypatch):
    """The terminal's writer failed on the workload's last bytes: the end of the stream
    finds the error, and the sink's failure names the system's reason."""
    from pgle.launch.pumps import Behind

    monkeypatch.setattr(streams, "said", set())
    r, w = os.pipe()
    os.close(r)  # the terminal went away
    sink, _ = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    sink.behind = Behind(w)
    sink.write(b"last line\n")
    with returns_within(30):
        sink.end()
    assert sink.failed == "Broken pipe (EPIPE)"
    os.close(w)


def test_a_log_whose_close_fails_is_incomplete(tmp_path):
    """An error that surfaces only at close (NFS writes back then) is the log's error, where
    none came before; an earlier error is kept."""
    log = Log(tmp_path / "w.log")
    log.write([b"a line\n"])
    os.close(log.fd)  # the close(2) pgle makes now fails (here: EBADF)
    log.close()
    assert log.error == "Bad file descriptor (EBADF)"
    earlier = Log(tmp_path / "x.log")
    earlier.error = "No space left on device (ENOSPC)"
    os.close(earlier.fd)
    earlier.close()
    assert earlier.error == "No space left on device (ENOSPC)"


def test_without_a_hide_the_log_lines_reach_the_terminal_as_they_are(tmp_path):
    """A stream pgle hides nothing of (stdout, or stderr with the user's own log level):
    XLA's log lines pass to the terminal unread, byte for byte, the last one unfinished too."""
    from pgle.launch.pumps import Pump

    lines = (b"I0000 00:00:1700000000.000000   12345 gpu_compiler.cc:1] an INFO line\n"
             b"plain output\n"
             b"W0000 00:00:1700000000.000000   12345 last.cc:2] a last line, unfinished")
    r, w = os.pipe()
    out = io.StringIO()
    sink, _ = Sink.pair(out, io.StringIO(), "w.log")
    pump = Pump(r, sink, Log(tmp_path / "w.log"))
    pump.start()
    os.write(w, lines)
    os.close(w)
    pump.join(timeout=20)
    assert not pump.is_alive()
    assert out.getvalue().encode() == lines
    os.close(r)


def test_a_pump_is_a_daemon_thread_named_after_its_stream(tmp_path):
    """A pump never keeps pgle alive (a daemon holding the workload's output open), and its
    name says which stream it reads in pgle's own stack dumps."""
    from pgle.launch.pumps import Pump

    r, w = os.pipe()
    sink, other = Sink.pair(io.StringIO(), io.StringIO(), "w.log")
    log = Log(tmp_path / "w.log")
    pumps = [Pump(r, sink, log), Pump(r, other, log)]
    assert [(p.daemon, p.name) for p in pumps] == [(True, "pgle-pump-stdout"),
                                                   (True, "pgle-pump-stderr")]
    os.close(r)
    os.close(w)
