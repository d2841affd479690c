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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_one_line_per_period_with_the_time_run_and_the_window_s_own_steps(tmp_path, caplog,
                                                                         monkeypatch):
    clock = _Clock()
    monkeypatch.setattr("pgle.launch.progress.time", clock)
    caplog.set_level(logging.INFO, logger="pgle")
    events = tmp_path / "events.jsonl"
    events.write_text(event(schema.STEP_ENTER, name="s", step_num=0, index=0)
                      + event(schema.STEP_ENTER, name="s", step_num=1, index=1)
                      + event(schema.PGLE_PROFILED, module="m", index=0, runs=1,
                              profile_bytes=10))
    progress = WindowProgress(events, every=10.0)
    clock.now += 9.9
    progress()
    assert lines(caplog) == []  # not before the first period
    clock.now += 0.2
    progress()
    assert lines(caplog) == ["workload running for 10 s; the profiling window has not opened yet"]
    clock.now += 5
    progress()
    assert len(lines(caplog)) == 1  # at most one line per period
    with events.open("a") as f:
        f.write(event(schema.TRACE_START, dir="t", purpose="window"))
    clock.now += 5
    progress()  # the poll that sees it open: 0 s, no step entered since
    assert lines(caplog)[-1] == "profiling window open for 0 s (workload running for 20 s)"
    with events.open("a") as f:
        for i in range(2, 5):
            f.write(event(schema.STEP_ENTER, name="s", step_num=i, index=i))
        # A second trace starting does not move the window's opening.
        f.write(event(schema.TRACE_START, dir="t2", purpose="executions"))
    clock.now += 12
    progress()
    assert lines(caplog)[-1] == (
        "profiling window open for 12 s, 3 steps entered (workload running for 32 s)")
    with events.open("a") as f:
        f.write(event(schema.TRACE_STOP, dir="t", purpose="window"))
    clock.now += 12
    progress()
    assert len(lines(caplog)) == 3  # the window's end is the command's to report


def test_without_a_window_the_line_says_what_ran(tmp_path, caplog, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr("pgle.launch.progress.time", clock)
    caplog.set_level(logging.INFO, logger="pgle")
    events = tmp_path / "events.jsonl"
    events.write_text("")
    progress = WindowProgress(events, every=10.0, window=False)
    clock.now += 12
    progress()
    assert lines(caplog) == ["workload running for 12 s"]
    with events.open("a") as f:
        for i in range(2):
            f.write(event(schema.PGLE_PROFILED, module="m", index=i, runs=1, profile_bytes=10))
    clock.now += 10
    progress()
    assert lines(caplog)[-1] == "workload running for 22 s: 2 executions profiled by auto PGLE"
