"""The incremental events reader at its edges (issue 37): a line completed by a newline that
arrives alone, a line split by a block boundary right after its first byte, old `step_enter`
lines counted as steps (and lines of kinds nobody asked for never decoded), the last marked
step's time kept by default; and the compiled/cached rows of a run's executables where a
compile's seconds are unknown. Files written as the harness writes them."""

from __future__ import annotations

import json
from pathlib import Path

from pgle.evidence import compiles, event_tail
from pgle.evidence.event_kinds import Exit, Log
from pgle.evidence.event_tail import EventTail
from pgle.evidence.events import read_events


def line(kind: str, t: float, **fields) -> bytes:
    return (json.dumps({"kind": kind, "t": t, **fields}) + "\n").encode()


def test_a_newline_written_alone_completes_its_line(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(line("exit", 5.0, code=0)[:-1])
    tail = EventTail(path, (Exit,))
    assert list(tail.read()) == [] and tail.lines == 0
    with open(path, "ab") as f:
        f.write(b"\n")
    assert [e.t for e in tail.read()] == [5.0] and tail.lines == 1


def test_a_line_cut_by_a_block_boundary_after_its_first_byte_is_read_whole(tmp_path: Path):
    # the first read block ends with a newline and the next line's "{"
    pad = event_tail.BLOCK_BYTES - 1 - len(line("log", 1.0, message=""))
    first = line("log", 1.0, message="x" * pad)
    assert len(first) == event_tail.BLOCK_BYTES - 1
    path = tmp_path / "events.jsonl"
    path.write_bytes(first + line("log", 2.0, message="second"))
    tail = EventTail(path, (Log,))
    assert [(e.t, len(e.message)) for e in tail.read()] == [(1.0, pad), (2.0, 6)]
    assert tail.rejected == 0 and tail.lines == 2


def test_old_step_lines_are_steps_and_other_kinds_are_not_decoded(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(line("step_enter", 1.0, index=0, name="s", step_num=0)
                     + line("log", 1.5, message="a line nobody asked for")
                     + b'{"kind": "log", "t": "not a number"}\n'  # another kind: not decoded
                     + line("step_enter", 2.0, index=1, name="s", step_num=1)
                     + line("step_enter", 3.5, index=2, name="s", step_num=2)
                     + line("exit", 4.0, code=0))
    tail = EventTail(path, (Exit,))
    assert [e.kind for e in tail.read()] == ["exit"]
    assert (tail.steps, list(tail.step_times), tail.rejected, tail.lines) == (3, [3.5], 0, 6)


def test_a_compile_whose_seconds_are_unknown_counts_none(tmp_path: Path):
    # two threads compiling at once: jit_a compiled (its seconds not said), jit_b loaded
    def rec(kind: str, t: float, **fields) -> dict:
        return {"kind": kind, "t": t, **fields}

    cache = "/jax/compilation_cache/"
    rows = [
        rec("compile_begin", 1.0, module="jit_a", fdo=False, thread="1"),
        rec("compile_begin", 1.1, module="jit_b", fdo=False, thread="2"),
        rec("jax_event", 1.2, event=cache + "compile_requests_use_cache", thread="1"),
        rec("jax_event", 1.3, event=cache + "compile_requests_use_cache", thread="2"),
        rec("jax_event", 1.4, event=cache + "cache_misses", thread="1"),
        rec("jax_event", 1.5, event=cache + "cache_hits", thread="2"),
        rec("compile_end", 1.6, module="jit_a", ok=True, thread="1"),
        rec("jax_event", 1.65, event=cache + "cache_hits", thread="1"),  # after its end
        rec("compile_end", 1.7, module="jit_b", ok=True, thread="2"),
        rec("compile", 1.8, fun_name="a", seconds=None, thread="1"),
        rec("compile", 1.9, fun_name="b", seconds=0.25, thread="2"),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = compiles.executables(read_events(path))
    assert got == [
        {"module": "jit_a", "kind": "compiled", "cache": "written", "seconds": 0.0},
        {"module": "jit_b", "kind": "cached", "cache": "hit", "seconds": 0.25},
    ]
    unseen = [{"module": "jit_c", "kind": "compiled", "cache": "off", "seconds": None}]
    assert compiles.by_kind(got + unseen) == {"compiled": {"count": 2, "seconds": 0.0},
                                              "cached": {"count": 1, "seconds": 0.25}}
    assert compiles.label(got) == "mixed" and compiles.label(got, "jit_a") == "compiled"
    assert compiles.label([]) == "-" and compiles.label(got, "jit_z") == "-"


def test_a_line_of_exactly_the_longest_length_is_still_read(tmp_path: Path):
    # MAX_LINE_BYTES is the longest line read: one of exactly that length (64 whole read blocks
    # without a newline), whose newline comes in the next block, is an event.
    pad = event_tail.MAX_LINE_BYTES - len(line("log", 1.0, message="")) + 1
    long = line("log", 1.0, message="x" * pad)
    assert len(long) - 1 == event_tail.MAX_LINE_BYTES
    path = tmp_path / "events.jsonl"
    path.write_bytes(long + line("exit", 2.0, code=0))
    tail = EventTail(path, (Log, Exit))
    assert [(type(e).__name__, e.t) for e in tail.read()] == [("Log", 1.0), ("Exit", 2.0)]
    assert (tail.rejected, tail.lines) == (0, 2)
