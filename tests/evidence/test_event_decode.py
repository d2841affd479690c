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
