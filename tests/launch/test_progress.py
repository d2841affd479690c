"""The progress lines of a long launch (pgle.launch.progress), read from a real events file as
the harness writes it: one clock for both ends of the window, counted nouns."""

from __future__ import annotations

import json
import logging

from pgle.evidence import schema
from pgle.launch.progress import WindowProgress


def event(kind: str, **fields: object) -> str:
    return json.dumps({"kind": kind, "t": 0.0, **fields}) + "\n"


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pgle.launch.progress"]


def test_a_window_seen_opening_is_open_for_0_s_never_minus_0(tmp_path, caplog):
    events = tmp_path / "events.jsonl"
    events.write_text(event(schema.START, pid=1, argv=[], python="3"))
    caplog.set_level(logging.INFO, logger="pgle")
    progress = WindowProgress(events, every=0.0)
    progress()
    with events.open("a") as f:
        f.write(event(schema.TRACE_START, dir="t", purpose="window"))
        f.write(event(schema.STEP_ENTER, name="train", step_num=2, index=2))
    progress()  # the poll that sees the window open
    first, second = lines(caplog)
    assert first.endswith("the profiling window has not opened yet")
    assert second.startswith("profiling window open for 0 s, 1 step entered"), second


def test_counts_are_words(tmp_path, caplog):
    events = tmp_path / "events.jsonl"
    events.write_text(event(schema.STEP_ENTER, name="s", step_num=0, index=0)
                      + event(schema.PGLE_PROFILED, module="m", index=0, runs=1,
                              profile_bytes=10)
                      + event(schema.STEP_ENTER, name="s", step_num=1, index=1))
    caplog.set_level(logging.INFO, logger="pgle")
    WindowProgress(events, every=0.0, window=False)()
    [line] = lines(caplog)
    assert line.endswith(": 2 steps, 1 execution profiled by auto PGLE"), line
