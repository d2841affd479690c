"""An events line holding bytes that are not UTF-8 (a log message the workload printed in
another encoding, kept by the harness as it came): the line is still an event, its bad bytes
read as U+FFFD (issue 37's survivors of pgle.evidence.event_kinds.decode), by the reader after
the run and by the incremental one."""

from __future__ import annotations

from pathlib import Path

from pgle.evidence.event_kinds import Log, decode
from pgle.evidence.event_tail import EventTail
from pgle.evidence.events import read_events

LINE = b'{"kind": "log", "t": 2.5, "message": "caf\xe9 \xff\xfe ok"}'


def test_bytes_that_are_not_utf8_are_replaced_not_refused():
    assert decode(LINE) == {"kind": "log", "t": 2.5, "message": "caf\ufffd \ufffd\ufffd ok"}


def test_the_readers_keep_such_a_line(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(LINE + b"\n" + b'{"kind": "log", "t": 3.0, "message": "next"}\n')
    assert [(r.t, r.message) for r in read_events(path).records if isinstance(r, Log)] == [
        (2.5, "caf\ufffd \ufffd\ufffd ok"), (3.0, "next")]
    tail = EventTail(path, (Log,))
    assert [e.message for e in tail.read()] == ["caf\ufffd \ufffd\ufffd ok", "next"]
    assert tail.rejected == 0


def test_a_last_line_without_its_newline_at_any_block_boundary(tmp_path: Path, monkeypatch):
    # A run killed mid-write leaves its last line without a newline; it is read whatever the
    # file's size modulo the read block (a block boundary one byte before the end included).
    from pgle.evidence import events

    monkeypatch.setattr(events, "BLOCK_BYTES", 64)
    first = b'{"kind": "log", "t": 1.0, "message": "a"}\n'
    for pad in range(64):
        last = b'{"kind": "log", "t": 2.0, "message": "' + b"x" * pad + b'"}'
        path = tmp_path / "events.jsonl"
        path.write_bytes(first + last)
        got = [r.message for r in read_events(path).records if isinstance(r, Log)]
        assert got == ["a", "x" * pad], pad


def test_trace_errors_script_traces_and_a_bad_step_file_are_kept(tmp_path: Path, caplog):
    import logging

    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"kind": "trace_error", "t": 1.0, "error": "profiler busy"}\n'
                     b'{"kind": "script_trace", "t": 2.0, "call": "start", "site": "w.py:3"}\n')
    (tmp_path / "steps.bin").write_bytes(b"NOTSTEPS" + bytes(8))
    with caplog.at_level(logging.WARNING, logger="pgle.evidence.events"):
        ev = read_events(path)
    assert ev.trace_errors == ["profiler busy"]
    assert [(s.call, s.site) for s in ev.script_traces] == [("start", "w.py:3")]
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("pgle.evidence.events", f"{tmp_path / 'steps.bin'} is not a pgle step file; its steps are not read")]


def test_the_events_file_is_read_in_blocks_not_whole(tmp_path: Path, monkeypatch):
    # 5 MB of lines that keep nothing (step exits): read in 64 KiB blocks, the reader's peak
    # memory stays far below the file's size (issue 25: never the whole file at once).
    import tracemalloc

    from pgle.evidence import events

    monkeypatch.setattr(events, "BLOCK_BYTES", 64 << 10)
    pad = "x" * 1000
    path = tmp_path / "events.jsonl"
    with open(path, "w") as f:
        for k in range(5000):
            f.write(f'{{"kind": "step_exit", "t": {k}.5, "index": {k}, "pad": "{pad}"}}\n')
        f.write('{"kind": "log", "t": 9999.0, "message": "last"}\n')
    assert path.stat().st_size > 5_000_000
    tracemalloc.start()
    try:
        ev = read_events(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.message for r in ev.records if isinstance(r, Log)] == ["last"]
    assert ev.lines == 5001
    assert peak < 1_500_000, peak
