"""The harness's StepCompletions in process, on real jax (CPU): a marked step's output not ready
by its marker's end is handed to the completion watcher's thread (`pending`), which notes when
it became ready (`waited`); while the steps it reaches have completed already, the thread is
woken at most once every WAKE_EVERY_NS, the steps in between left out (issue 33). What a user
reads from it is the `step_completions` event's rows and counts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from helpers.pgle_testing import REPO, pgle_env, pythonpath
from pgle.evidence import schema
from pgle.launch import harness

WAKE = harness.WAKE_EVERY_NS


def _donated() -> Any:
    """A jax array donated to a later call: waiting on it raises (INVALID_ARGUMENT)."""
    x = jnp.ones((8,)) + 1.0
    jax.jit(lambda a: a * 2.0, donate_argnums=0)(x)
    assert x.is_deleted()
    return x


def _not_ready(f: Any, x: Any) -> Any:
    """An output of `f(x)` (tens of ms of work on CPU) not ready yet as its call returned."""
    for _ in range(20):
        out = f(x)
        if not out.is_ready():
            return out
        out.block_until_ready()
    raise AssertionError("every call was complete as it returned")


def _reached(watcher: harness.CompletionWatcher) -> None:
    """Until the watcher's thread has reached everything handed over and is idle again."""
    assert watcher.catch_up(10.0) is True
    deadline = time.monotonic() + 10.0
    while watcher.busy:
        assert time.monotonic() < deadline, "the watcher stayed busy"
        time.sleep(0.001)


def test_a_step_without_an_array_or_with_a_deleted_one_is_counted_not_waited_on() -> None:
    counter = harness.JitCounter()
    steps = counter.steps
    now = time.time_ns()
    for i in range(2):
        steps.pending(i, now, None, False)  # no jax array among its outputs
    for i in range(2, 5):
        steps.pending(i, now, jnp.ones((4,)), None)  # deleted inside the step
    assert (steps.no_array, steps.unknown, steps.waited_on, steps.skipped) == (2, 3, 0, 0)
    assert counter.watcher.thread is None  # nothing handed over


def test_steps_are_handed_over_while_behind_and_once_a_wake_while_the_device_keeps_up() -> None:
    """The watcher is behind (its last step was donated before it was reached): every step is
    handed over. Once a step it reaches had completed in time, the next is handed over only
    WAKE_EVERY_NS after the last one handed over while keeping up (strictly after), the steps
    in between counted as skipped. (The steps' ends are in the future: each one the watcher
    waits on completed "in time", whether it was ready or not.)"""
    counter = harness.JitCounter()
    counter.compiles = 7
    steps, watcher = counter.steps, counter.watcher
    ready = jnp.ones((4,)) + 1.0
    ready.block_until_ready()
    f = jax.jit(lambda x: jnp.tanh(x @ x) @ x)
    x = jnp.ones((1500, 1500)) / 1500
    f(x).block_until_ready()  # compiled
    start = time.time_ns()
    t = start + 10**12
    plan = [  # (index, end, leaf): each reached before the next is pending
        (0, t, _donated()),  # behind (not keeping up yet): handed over, then unknown
        (1, t + 1, lambda: _not_ready(f, x)),  # behind: handed over whatever the last wake
        (2, t + 2, ready),  # keeping up, no wake yet: handed over, a wake at t + 2
        (3, t + 2 + WAKE, ready),  # exactly WAKE_EVERY_NS after it: skipped
        (4, t + 3 + WAKE, lambda: _not_ready(f, x)),  # past it: handed over, wake t + 3 + WAKE
        (5, t + 4 + WAKE, ready),  # 1 ns after that wake: skipped
    ]
    for index, end, leaf in plan:
        steps.pending(index, end, leaf() if callable(leaf) else leaf, False)
        _reached(watcher)
    assert (steps.unknown, steps.skipped, steps.waited_on, steps.no_array) == (1, 2, 3, 0)
    assert steps.keeps_up is True
    rows = steps.rows.tolist()
    assert rows[0::4] == [1, 2, 4]
    assert rows[2::4] == [7, 7, 7] and rows[3::4] == [0, 0, 0]
    assert all(start <= done <= time.time_ns() for done in rows[1::4]), rows
    watcher.finish(10.0)
    # a watcher no longer on (after finish) takes no step
    steps.pending(6, t + 5 * WAKE, ready, False)
    assert steps.rows.tolist() == rows and steps.skipped == 2


def test_waited_notes_the_completion_and_whether_the_device_keeps_up() -> None:
    """Called in the watcher's thread: a row (index, done, compiles, 0); keeps_up when the
    output had completed before the wait, or completed within WAKE_EVERY_NS of its step's end."""
    steps = harness.JitCounter().steps
    ready = jnp.ones((4,)) + 1.0
    ready.block_until_ready()
    before = time.time_ns()
    steps.waited(3, 2, ready, before - 10**9)  # ready long after its step's end: ready
    assert steps.keeps_up is True
    (index, done, compiles, at_end) = steps.rows.tolist()
    assert (index, compiles, at_end) == (3, 2) + (0,) and before <= done <= time.time_ns()

    steps.waited(4, 2, _donated(), before)
    steps.waited(5, 2, _donated(), before)
    assert steps.keeps_up is False and steps.unknown == 2 and len(steps.rows) == 4

    f = jax.jit(lambda x: jnp.tanh(x @ x) @ x)
    x = jnp.ones((1500, 1500)) / 1500
    f(x).block_until_ready()  # compiled
    # completed "before" its step's end
    steps.waited(6, 3, _not_ready(f, x), time.time_ns() + 10**12)
    assert steps.keeps_up is True
    # completed 1 s after its step's end
    steps.waited(7, 3, _not_ready(f, x), time.time_ns() - 10**9)
    assert steps.keeps_up is False
    assert steps.waited_on == 3 and steps.rows.tolist()[0::4] == [3, 6, 7]
    assert steps.rows.tolist()[3::4] == [0, 0, 0]


FORKED = textwrap.dedent("""
    import os, time
    import jax.numpy as jnp
    from pgle.launch import harness
    counter = harness.JitCounter()
    x = jnp.ones((4,)) + 1.0
    x.block_until_ready()
    counter.steps.pending(0, time.time_ns(), x, False)  # the watcher's thread starts
    assert counter.watcher.catch_up(30.0)
    pid = os.fork()
    if pid == 0:  # no watcher thread here: nothing is handed over, nothing waited for
        os._exit(0 if counter.watcher.on is False and not counter.watcher.catch_up(60.0)
                 else 1)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), "parent", counter.watcher.on)
""")


def test_a_forked_childs_watcher_is_off(tmp_path: Path) -> None:
    """A process the workload forks (a data loader's worker) has the watcher but not its
    thread: it is off there, so no step is queued for a thread that is not there and nothing
    waits for one; the parent's stays on."""
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                          env=pgle_env(PYTHONPATH=pythonpath(str(REPO))),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["child", "0", "parent", "True"], proc.stdout


def _completions(counter: harness.JitCounter, tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / f"events-{len(list(tmp_path.iterdir()))}.jsonl"  # a new file each time
    events = harness.Events(str(path))
    counter.steps.record(events)
    events.close()
    return [r for r in map(json.loads, path.read_text().splitlines())
            if r["kind"] == schema.STEP_COMPLETIONS]


def test_the_record_says_how_each_step_was_seen_even_with_no_completion(tmp_path: Path) -> None:
    """No marked step: no record. Steps whose outputs held no array only: a record of none
    completed that says so (the step times then say why they have none). A step waited on:
    its row (index, done, compiles, 0: not ready by its marker's end)."""
    assert _completions(harness.JitCounter(), tmp_path) == []
    counter = harness.JitCounter()
    for i in range(3):
        counter.steps.pending(i, time.time_ns(), None, False)
    (record,) = _completions(counter, tmp_path)
    assert (record["index"], record["done_ns"], record["compiles"], record["at_end"]) == (
        [], [], [], [])
    assert record["watch"] == {"ready_at_end": 0, "waited": 0, "unknown": 0, "no_array": 3,
                               "skipped": 0}
    counter = harness.JitCounter()
    before = time.time_ns()
    counter.steps.waited(7, 2, jnp.ones((4,)), before)
    (record,) = _completions(counter, tmp_path)
    assert (record["index"], record["compiles"], record["at_end"]) == ([7], [2], [0])
    assert record["done_ns"][0] >= before
    assert record["watch"]["waited"] == 1 and record["watch"]["ready_at_end"] == 0
