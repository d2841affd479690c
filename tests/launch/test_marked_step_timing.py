"""Marked steps are timed by completion too (issue 33). A `jax.profiler.StepTraceAnnotation`
closes when the host leaves it; in a loop that never waits on its steps that is long before
the device finishes, and start to start of the markers is how fast the host enqueues. A step's
time is the interval between the completions of the work dispatched inside consecutive
markers (the harness's `step_completions` event). The loops of
tests/workloads/real/loop_timing.py, run with --marked, time themselves: the oracle.

Like tests/launch/test_step_timing.py: an unsynced loop times itself only over a synced
segment, so pgle's figure for a segment is its throughput there (the completions around the
segment's steps); the report's median over steps is held to 25% (the machine is shared: one
step's time varies by 2x within a run), and to being far above the markers' dispatch rate."""

from __future__ import annotations

import json
import statistics

import pytest

from pgle.evidence.event_kinds import StepCompletions
from pgle.evidence.events import read_events
from pgle.evidence.jit_steps import completion_times, run_steps
from pgle.evidence.steps import step_times

from helpers import step_records
from helpers.pgle_testing import WORKLOADS, report_of, run_pgle, write_profile

LOOPS = WORKLOADS / "real" / "loop_timing.py"
TOLERANCE = 0.10


def _run(tmp_path, form, *extra):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(LOOPS), "--",
                    "--form", form, "--marked", "--oracle", "own.json", *extra, cwd=tmp_path,
                    timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    own = json.loads((tmp_path / "own.json").read_text())
    events = read_events(tmp_path / "r" / "events.jsonl")
    done = events.of(StepCompletions)
    assert len(done) == 1
    return report_of(proc), own, events, done[0]


def _known(done):
    """(index, completion in seconds) of the marked steps whose completion pgle saw."""
    return sorted((i, t / 1e9) for i, t in zip(done.index, done.done_ns))


def _per_segment(done, segments):
    """pgle's time per step over each of the loop's segments whose edges pgle saw complete:
    from the completion of the marked step before the segment's first to that of its last
    (the loop numbers its segments' steps), over its steps. Like for like: the same steps on
    both sides, so only the completions' stamps differ (a donated loop's completions are
    mostly unknown, and a window between other known completions straddled segments whose
    pace differed by 2x on a loaded machine: 12% off, once). The median: mnist's first
    segment also holds the eval's compile, which runs after its previous step.
    Returns pgle's / the loop's time per step, one ratio per such segment."""
    known = dict(_known(done))
    out = []
    for t0, t1, steps, last in segments:
        first = last - steps + 1
        if first - 1 in known and last in known:
            out.append((known[last] - known[first - 1]) / (t1 - t0))
    return out


@pytest.mark.parametrize("form", ["matmul", "donated", "mnist", "log"])
def test_an_unsynced_marked_loop_is_timed_by_completion(tmp_path, form):
    report, own, events, done = _run(tmp_path, form, "--steps", "60")
    steps = report["steps"]
    assert steps["source"] == "markers" and steps["step_time_source"] == "completion"
    assert "completion of the previous step's work" in steps["how"]
    ratios = _per_segment(done, own["segments"])
    assert ratios and abs(statistics.median(ratios) - 1) <= TOLERANCE, (ratios, done.watch)
    theirs = own["median_s"]
    reported = report["step_times"]["median_s"]
    assert abs(reported / theirs - 1) <= 0.25, (reported, theirs, done.watch)
    # Start to start of the markers (what pgle timed before) is the host's dispatch rate.
    markers = statistics.median(step_times(events.steps))
    if form in ("matmul", "donated", "mnist"):
        assert markers < theirs / 3, (markers, theirs)


def test_a_marked_loop_that_syncs_each_step_keeps_its_times(tmp_path):
    """Each step waits on its result inside its marker: the outputs are ready by the marker's
    end, taken then, with no thread woken (after 32 such steps in a row, one step in 8 is
    checked); the times are what start to start of the markers gave before, and the loop's
    own per-step times."""
    report, own, events, done = _run(tmp_path, "synced", "--steps", "60")
    steps = report["steps"]
    assert steps["step_time_source"] == "completion"
    assert done.watch == {"ready_at_end": 32 + 29 // 8, "waited": 0, "unknown": 0,
                          "no_array": 0, "skipped": 0}
    assert report["step_times"]["count"] >= 50
    reported = report["step_times"]["median_s"]
    markers = statistics.median(step_times(events.steps))
    assert abs(reported / markers - 1) <= TOLERANCE, (reported, markers)
    assert abs(reported / own["median_s"] - 1) <= TOLERANCE, (reported, own["median_s"])


NO_JIT_INSIDE = """
import jax, jax.numpy as jnp
f = jax.jit(lambda a: jnp.tanh(a @ a))
a = jnp.ones((64, 64))
for i in range(12):
    a = f(a)  # dispatched before the marker: no counted call inside it
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        a.block_until_ready()
"""


def test_markers_without_a_jitted_call_inside_say_so(tmp_path):
    (tmp_path / "w.py").write_text(NO_JIT_INSIDE)
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", "w.py",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    steps = report_of(proc)["steps"]
    assert steps["step_time_source"] == "markers"
    assert "start to start of its marker" in steps["how"]
    assert "no counted jitted call inside the markers" in steps["how"]
    assert report_of(proc)["step_times"]["count"] == 10
    # A run folder written before issue 33 (no completions, no work in jit_functions): its
    # markers are still timed start to start, and `how` says why.
    old = []
    for record in step_records.old_lines(tmp_path / "r" / "events.jsonl"):
        if record["kind"] == "jit_functions":
            record.pop("work", None)
            record.pop("watch", None)
        old.append(json.dumps(record))
    (tmp_path / "old.jsonl").write_text("\n".join(old) + "\n")
    steps = run_steps(read_events(tmp_path / "old.jsonl"))
    assert steps.time_source == "markers" and "predate completion timing" in steps.how


def _done(index, done_ms, compiles, at_end=None):
    return StepCompletions(t=0.0, index=index, done_ns=[int(t * 1e6) for t in done_ms],
                           compiles=compiles, at_end=at_end)


def test_completion_times_share_spans_and_leave_out_compiles_and_the_trace():
    # steps 0..6 complete 10 ms apart; step 3's completion unseen; a compile before step 6
    done = _done([0, 1, 2, 4, 5, 6], [0, 10, 20, 40, 50, 60], [1, 1, 1, 1, 1, 2])
    times = completion_times(done, set())
    assert times == pytest.approx([0.01, 0.01, 0.01, 0.01, 0.01])  # steps 1, 2, 3+4, 5
    # profiled steps 2..3: the spans touching them (1->2, 2->4) and following them are out
    assert completion_times(done, {2, 3}) == pytest.approx([0.01, 0.01])
    # a completion the watcher noted late (step 1 after step 2's): brought forward
    late = _done([0, 1, 2, 3], [0, 25, 20, 30], [1, 1, 1, 1])
    assert completion_times(late, set()) == pytest.approx([0.02, 0.0, 0.01])
    # A loop that syncs, checked every few steps (both ends ready by their marker's end):
    # the span is shared as the markers' start-to-start times were, its total kept.
    sampled = _done([0, 4], [0, 100], [1, 1], [1, 1])
    starts = {0: 0.0, 1: 0.010, 2: 0.040, 3: 0.050, 4: 0.090, 5: 0.110}
    assert completion_times(sampled, set(), starts) == pytest.approx([0.03, 0.01, 0.04, 0.02])
    # ... but equally where an end was waited on (the markers are dispatch times there)
    waited = _done([0, 4], [0, 100], [1, 1], [1, 0])
    assert completion_times(waited, set(), starts) == pytest.approx([0.025] * 4)
