"""pgle's standard streams closed at start (pgle.launch.streams.reserve_standard_fds), in
process on the real descriptors 0-2: each closed one gets /dev/null, inheritable (the workload
gets it too), remembered, and a Python stream where Python found none; nothing open is
touched (issue 37: only `pgle ... <&-` subprocesses reached it)."""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

from pgle.launch import streams


@contextlib.contextmanager
def _closed(*fds: int):
    saved = {fd: os.dup(fd) for fd in fds}
    try:
        for fd in fds:
            os.close(fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.mark.parametrize("fd", [0, 1, 2])
def test_a_closed_standard_fd_gets_dev_null_and_a_python_stream(fd, monkeypatch):
    name = streams.STREAM_NAMES[fd]
    monkeypatch.setattr(streams, "closed_at_start", set())
    monkeypatch.setattr(sys, name, None)  # Python found it closed at start-up
    others = {o: _target(o) for o in (0, 1, 2) if o != fd}
    with _closed(fd):
        reserved = streams.reserve_standard_fds()
        stream = getattr(sys, name)
        assert reserved == {fd} and _target(fd) == os.devnull and os.get_inheritable(fd)
        assert stream.fileno() == fd and stream.mode == ("r" if fd == 0 else "w")
        assert stream.errors == "backslashreplace"
        assert {o: _target(o) for o in others} == others  # the open ones untouched
        assert streams.reserve_standard_fds() == {fd}  # idempotent
        stream.close()  # closefd=False: the descriptor stays
        assert _target(fd) == os.devnull


def test_a_python_stream_that_exists_is_kept(monkeypatch):
    monkeypatch.setattr(streams, "closed_at_start", set())
    mine = sys.stdin
    with _closed(0):
        assert streams.reserve_standard_fds() == {0}
        assert sys.stdin is mine and _target(0) == os.devnull
    assert not streams.usable(0)


def test_dev_null_lands_on_the_closed_fd_even_with_a_lower_one_free(monkeypatch):
    """fd 0 reserved earlier and closed since (a library caller's code): fd 1 closed now gets
    /dev/null at 1, not at the lowest free descriptor, 0, which stays as it is."""
    monkeypatch.setattr(streams, "closed_at_start", {0})
    with _closed(0, 1):
        assert streams.reserve_standard_fds() == {0, 1}
        assert _target(1) == os.devnull
        with pytest.raises(OSError):
            os.fstat(0)


def test_a_line_longer_than_the_pipe_is_written_whole_and_undecodable_text_replaced():
    import threading

    r, w = os.pipe()
    got = bytearray()

    def read() -> None:
        while chunk := os.read(r, 1 << 14):
            got.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    line = "x" * 300_000 + "\udcff\n"  # past a pipe's 64 KiB, and a lone surrogate
    assert streams.write_line(w, line)
    os.close(w)
    reader.join(timeout=20)
    os.close(r)
    assert bytes(got) == b"x" * 300_000 + b"?\n"
