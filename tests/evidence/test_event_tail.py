"""The one incremental reader of a run's events (pgle.evidence.event_tail), on what the
harness's own writer makes (pgle.launch.harness: json.dumps for a record, its `edges` the step
records before it; pgle.evidence.step_file's records in steps.bin for the marked steps), both
files appended in pieces cut anywhere while it reads (the records first, as the harness does): it yields what the whole-file
reader (pgle.evidence.events) reads, typed, counts and times the steps; a half-written line
waits for the next read; a damaged or foreign line is no event, an overlong one is skipped."""

from __future__ import annotations

import array
import json
import random
from pathlib import Path

from pgle.evidence import event_tail, schema, step_file
from pgle.evidence.event_kinds import CompileBegin, Exit, Stacks, Start, TraceStart, TraceStop
from pgle.evidence.event_tail import EventTail
from pgle.evidence.events import read_events
T0 = 1_764_000_000_000_000_000  # time.time_ns() of the first step


def record(kind: str, t: float, **fields: object) -> str:
    return json.dumps({"kind": kind, "t": t, **fields}) + "\n"


BLOCK = array.array("q")


def steps(first: int, count: int) -> int:
    """Marked steps `first`.. as the harness holds them (an enter and an exit record each), into
    BLOCK; the records so far."""
    for i in range(first, first + count):
        BLOCK.extend((T0 + i * 1_000_000, i, i, 0))
        BLOCK.extend((-(T0 + i * 1_000_000 + 500_000), i, i, 0))
    return len(BLOCK) // step_file.FIELDS


def a_run() -> tuple[str, bytes]:
    """(events.jsonl, steps.bin)."""
    del BLOCK[:]
    text = "".join([
        record(schema.START, 1.0, pid=41, argv=["w.py"], python="3.11.7", ppid=1, edges=0),
        record(schema.STACKS, 1.1, file="/r/stacks.txt", signal=23, main_thread="0x7f", edges=0),
        record(schema.STEP_NAME, 1.2, id=0, name="train", edges=0),
        record(schema.COMPILE_BEGIN, 2.0, module="jit_step", fdo=True, thread=7,
               edges=steps(0, 300)),
        record(schema.LOG, 2.1, logger="jax", level="INFO", message="x" * 5000, edges=600),
        record(schema.TRACE_START, 3.0, dir="/r/trace", purpose="window", options=None,
               edges=steps(300, 200)),
        record(schema.TRACE_STOP, 4.0, dir="/r/trace", purpose="window", seconds=1.0,
               first_step=500, steps=5, edges=steps(500, 5)),
        record(schema.EXIT, 5.0, code=0, error=None, edges=1010),
    ])
    return text, step_file.HEADER + step_file.encode(BLOCK)


WATCHED = (Start, Stacks, CompileBegin, TraceStart, TraceStop, Exit)


def test_what_it_yields_across_any_cut_is_what_the_whole_file_reader_reads(tmp_path: Path):
    run, records = a_run()
    text = run.encode()
    path, side = tmp_path / "events.jsonl", tmp_path / "steps.bin"
    rng = random.Random(7)
    whole = None
    for trial in range(20):
        path.write_bytes(b"")
        side.write_bytes(b"")
        tail = EventTail(path, WATCHED, keep_steps=3)
        got, steps_at = [], {}
        cuts = sorted(rng.sample(range(1, len(text)), 30)) + [len(text)]
        done = 0
        for cut in cuts:
            # the records the lines up to the cut place themselves after, and some more: a
            # record cut short waits too
            last = text.rfind(b"\n", 0, cut) + 1
            edges = max((json.loads(x)["edges"] for x in text[:last].splitlines()), default=0)
            need = len(step_file.HEADER) + edges * step_file.RECORD_BYTES
            with open(side, "ab") as f:
                have = f.tell()
                f.write(records[have:max(have, rng.randint(need, need + 100))])
            with open(path, "ab") as f:
                f.write(text[done:cut])
            done = cut
            for event in tail.read():
                got.append(event)
                steps_at[event.kind] = tail.steps
            # a half-written line is not read yet: the reader stands at its start
            assert tail.offset == text.rfind(b"\n", 0, cut) + 1, trial
        with open(side, "ab") as f:
            f.write(records[f.tell():])
        list(tail.read())
        if whole is None:
            whole = read_events(path)
            assert whole.rejected == 0 and len(whole.steps) == 505
        assert got == [e for e in whole.records if isinstance(e, WATCHED)]
        assert tail.lines == text.count(b"\n") and tail.rejected == 0
        assert tail.steps == 505 and steps_at[schema.TRACE_START] == 500
        assert list(tail.step_times) == [s.t_enter for s in whole.steps[-3:]]


def test_damaged_foreign_and_overlong_lines(tmp_path: Path, monkeypatch):
    """A run folder is untrusted: a line of an asked kind with a field the harness never
    writes, or cut short, is counted as rejected, never yielded; a line in another layout is
    decoded (a step in it still counts); a line longer than MAX_LINE_BYTES is skipped whole
    without being held in memory, and the lines after it are read."""
    monkeypatch.setattr(event_tail, "BLOCK_BYTES", 64)
    monkeypatch.setattr(event_tail, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "events.jsonl"
    path.write_text(
        record(schema.EXIT, 1.0, code="zero")  # a field of the wrong type
        + '{"kind": "exit", "t": 2.0, "co\n'  # cut short
        + '{"t": 3.0, "kind": "exit", "code": 3}\n'  # another layout: decoded
        + '{"t": 3.5, "index": 9, "kind": "step_enter"}\n'  # a step, in another layout
        + '{"t": 3.7, "kind": "start", "pid": 2}\n'  # another layout, a kind not asked
        + record(schema.LOG, 4.0, message="y" * 500)  # not asked: never decoded
        + record(schema.START, 5.0, pid=1, argv=["w.py"], python="3", ppid=0) + "[1, 2]\n"
        + record(schema.EXIT, 6.0, code=1, message="z" * 5000)  # overlong: skipped
        + record(schema.EXIT, 7.0, code=2))
    tail = EventTail(path, (Exit,))
    got = list(tail.read())
    assert [(e.t, e.code) for e in got if isinstance(e, Exit)] == [(3.0, 3), (7.0, 2)]
    assert len(got) == 2
    assert tail.rejected == 4 and tail.lines == 9  # of 10: the overlong one is not read
    assert tail.steps == 1 and list(tail.step_times) == [3.5]
    assert tail.offset == path.stat().st_size and not tail._rest


def test_a_missing_file_is_no_events_yet(tmp_path: Path):
    tail = EventTail(tmp_path / "events.jsonl", (Exit,))
    assert list(tail.read()) == [] and tail.offset == 0
    (tmp_path / "events.jsonl").write_text(record(schema.EXIT, 1.0, code=0))
    assert [e.kind for e in tail.read()] == [schema.EXIT]
