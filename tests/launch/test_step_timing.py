"""Step times measure the work, not the dispatch (issue 33). Loops written as people write
them (tests/workloads/real/loop_timing.py: jax's mnist_classifier, a donated step, a 4-matmul
step synced once at the end, float(loss) logging, spmd_mnist's eval every N steps) time
themselves; pgle's median step time, from the same run, agrees with the loop's own within
10%. Before issue 33 it was the interval between the step's dispatches: 260x-2700x less.

An unsynced loop can time itself only over a synced segment (its wall time over its steps), so
the like-for-like figure is pgle's step times of the same steps, per segment (the steps that
started inside it, from the run's events), their median over segments against the loop's. Other
jobs load the test machine: a step's time varies by 2x within one run here, which the median of
per-step times (the report's) and the median of per-segment means feel differently; the report's
median is held to the loop's within 25%, and to being far above the dispatch rate."""

from __future__ import annotations

import json
import statistics

import pytest

from pgle.evidence.events import read_events
from pgle.evidence.jit_steps import execution_times, step_first

from helpers.pgle_testing import WORKLOADS, report_of, run_pgle, write_profile

LOOPS = WORKLOADS / "real" / "loop_timing.py"
TOLERANCE = 0.10
# Steps per form: the donated form's completions are known about once a synced epoch of 5
# steps (the rest donated before pgle could wait on them), so its median is over epochs; at
# 12 epochs one slow epoch beside the suite's other worker put it 14 % off (once in 15 full
# runs), at 24 the median holds.
STEPS = {"donated": "120"}


def _events(folder):
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [json.loads(ln) for ln in lines if ln.strip()]


def _per_segment(work, segments):
    """pgle's mean step time over the steps that started in each of the loop's segments."""
    timed = execution_times(work)
    out = []
    for t0, t1, *_ in segments:
        inside = [w for t, w in timed if t0 <= t <= t1]
        if inside:
            out.append(sum(inside) / len(inside))
    return out


def _run(tmp_path, form, *extra):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(LOOPS), "--",
                    "--form", form, "--oracle", "own.json", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    own = json.loads((tmp_path / "own.json").read_text())
    jit = next(r for r in _events(tmp_path / "r") if r["kind"] == "jit_functions")
    return report_of(proc), own, jit


@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    """`pgle run` of a loop form, once per module for each form and arguments (a run costs
    ~9 s of CPU, mostly jax's import and compiles): tests that read the same run share it.
    Returns (report, the loop's own timing, the jit_functions event, the run folder)."""
    done = {}

    def run(form, *extra):
        key = (form, *extra)
        if key not in done:
            folder = tmp_path_factory.mktemp(form)
            done[key] = (*_run(folder, form, *extra), folder / "r")
        return done[key]

    return run


@pytest.mark.parametrize("form,function", [
    ("mnist", "jit(update)"),
    ("donated", "jit(train_step)"),
    ("matmul", "jit(step)"),
    ("log", "jit(train_step)"),
    ("eval", "jit(update)"),
])
def test_a_step_time_is_the_loops_own_time_per_step(loops, form, function):
    report, own, jit, _ = loops(form, "--steps", STEPS.get(form, "60"))
    steps = report["steps"]
    assert steps["function"] == function and steps["step_time_source"] == "completion"
    theirs = own["median_s"]
    ours = statistics.median(_per_segment(jit["work"], own["segments"]))
    assert abs(ours / theirs - 1) <= TOLERANCE, (ours, theirs, jit["watch"])
    reported = report["step_times"]["median_s"]
    assert abs(reported / theirs - 1) <= 0.25, (reported, theirs)
    # Start to start (what pgle timed before) is the dispatch rate: far below the work.
    starts = jit["starts"]
    gaps = sorted(b - a for a, b in zip(starts[1:], starts[2:]))
    if form in ("matmul", "donated", "mnist", "eval"):
        assert gaps[len(gaps) // 2] < theirs / 3


def test_the_eval_that_absorbs_the_queue_is_not_the_step(loops):
    """jax's spmd_mnist: jit(accuracy), read with float() every 5 steps, waits for the queued
    train steps and so holds most host time; the rule ranks by work and finds jit(update), in
    the event, the module lists' order and the report alike (the eval form's run above)."""
    report, _, jit, folder = loops("eval", "--steps", "60")
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(accuracy)"]["seconds"] > rows["jit(update)"]["seconds"]  # by host time
    assert rows["jit(update)"]["work_s"] > 5 * rows["jit(accuracy)"]["work_s"]
    assert jit["step"] == "jit(update)" and jit["module"] == "jit_update"
    assert report["steps"]["function"] == "jit(update)"
    # The module lists (on a GPU, run's and report's) put the step's module first.
    events = read_events(folder / "events.jsonl")
    rows = step_first([{"module": "jit_accuracy"}, {"module": "jit_update"}], events)
    assert [r["module"] for r in rows] == ["jit_update", "jit_accuracy"]


def test_donated_outputs_are_timed_without_breaking_the_loop(loops):
    """Each call donates the previous call's output: most outputs are gone before pgle can wait
    on them (their completion unknown), the workload never sees an error, and the spans
    between the known completions still time every step (the donated form's run above)."""
    report, own, jit, _ = loops("donated", "--steps", STEPS["donated"])
    assert jit["watch"]["unknown"] > 0 and jit["watch"]["known"] >= 3
    assert report["step_times"]["count"] >= 20


def test_a_python_bound_loop_is_timed_by_its_throughput(tmp_path):
    """Each step builds its batch in Python and numpy (~5 ms), runs a tiny jitted step and
    logs float(loss): the step's device work is a small part of the loop's time per step.
    pgle's step time is the loop's throughput (completion to completion of the step's
    executions). Each completion is noted when the watcher's thread gets the GIL, which the
    loop's Python holds for up to the switch interval (5 ms): one step's time is that
    uncertain, a run of steps' is not (the errors cancel). So like for like: pgle's mean over
    each 10 steps against the loop's own over the same steps, their median within 10% (the
    median of single steps missed by 14% on a loaded CI machine, by 7-13% here with two CPU
    burners, while the 10-step median stayed within 1.2%); the report's median within 25%.
    The device work alone (what pgle reported before) is far below it, and still ranks the
    step."""
    report, own, jit = _run(tmp_path, "host", "--steps", "60")
    steps = report["steps"]
    assert steps["function"] == "jit(train_step)" and steps["step_time_source"] == "completion"
    assert "throughput" in steps["how"] and "switch interval" in steps["how"]
    segments = own["segments"]  # one per step here
    windows = [[segments[a][0], segments[a + 9][1], 10] for a in range(0, len(segments) - 9, 10)]
    theirs = [(t1 - t0) / k for t0, t1, k in windows]
    ratios = [o / t for o, t in zip(_per_segment(jit["work"], windows), theirs, strict=True)]
    assert len(ratios) >= 5 and abs(statistics.median(ratios) - 1) <= TOLERANCE, ratios
    reported = report["step_times"]["median_s"]
    assert abs(reported / statistics.median(own["per_step_s"]) - 1) <= 0.25, reported
    assert report["step_times"]["count"] >= 50
    work = statistics.median(row[1] for row in jit["work"] if row[1] is not None)
    assert work < statistics.median(theirs) / 3, (work, theirs)


def test_a_dispatch_bound_loop_is_timed_without_waiting_on_each_execution(tmp_path):
    """3,000 tiny steps (4 16x16 matmuls, one sync at the end): the host's dispatch is the
    bottleneck and the device keeps up, so each wake of the watcher's thread (its GIL
    hand-offs) would slow the loop (issue 33's bench_unsynced tiny case: 1.4x). The watcher
    waits on a few executions only and shares the time between two completions among the
    executions in it: most executions are not waited on (its `watch` tally), and the step time
    is still the loop's own time per step, within 10%, every execution but the compile's
    timed."""
    report, own, jit = _run(tmp_path, "matmul", "--steps", "3000", "--size", "16")
    steps = report["steps"]
    assert steps["function"] == "jit(step)" and steps["step_time_source"] == "completion"
    watch = jit["watch"]
    executions = next(f["executions"] for f in jit["functions"] if f["function"] == "jit(step)")
    assert executions == 3001
    assert watch["skipped"] > executions // 2 and watch["known"] < executions // 2, watch
    theirs = own["median_s"]
    ours = statistics.median(_per_segment(jit["work"], own["segments"]))
    assert abs(ours / theirs - 1) <= TOLERANCE, (ours, theirs, watch)
    assert report["step_times"]["count"] >= 0.9 * executions, (report["step_times"], watch)


def _light(jit, function):
    """How the step's executions were counted: (executions, starts kept, the most executions
    one work row holds). A light step (issue 33: its calls only count once the rule settled
    on it) keeps the starts of its sampled executions only, and its rows are spans."""
    executions = next(f["executions"] for f in jit["functions"] if f["function"] == function)
    return executions, len(jit["starts"]), max(row[5] for row in jit["work"])


def test_a_long_dispatch_bound_loop_only_counts_its_step_and_keeps_its_step_time(tmp_path):
    """20,000 tiny steps: once the rule settled on jit(step), its calls only count (no clock,
    no lock, no hand-over) and one in several is timed; the spans between the sampled
    executions' completions still time every step, within 10% of the loop's own time, and
    the count stays exact."""
    report, own, jit = _run(tmp_path, "matmul", "--steps", "20000", "--size", "16")
    assert report["steps"]["function"] == "jit(step)"
    executions, starts, widest = _light(jit, "jit(step)")
    assert executions == 20001
    # Light from the first half on (its starts are then samples, LIGHT_SAMPLE_S apart). Half,
    # not a tenth: the rule settles once 10 executions' completions are known, and the
    # watcher gets executions at a rate in time (WAKE_EVERY_S), so the executions before it
    # settles grow as the machine's load slows the watcher's thread: 2,162 of 20,001 starts
    # kept at load 4 on 2 cores, 2,903 and 3,738 with three other jobs beside.
    assert starts < executions // 2 and widest >= 20, (starts, widest, jit["watch"])
    assert jit["watch"]["known"] < executions // 20, jit["watch"]
    theirs = own["median_s"]
    ours = statistics.median(_per_segment(jit["work"], own["segments"]))
    assert abs(ours / theirs - 1) <= TOLERANCE, (ours, theirs, jit["watch"])
    assert report["step_times"]["count"] >= 0.9 * executions, report["step_times"]
    # The work the rule ranks by: a sampled span's time shared among all its executions (the
    # ones counted between two samples too), so its mean is about a step, not thousands.
    row = {f["function"]: f for f in jit["functions"]}["jit(step)"]
    each = row["work_s"] / row["work_known"]
    assert 0.5 <= each / theirs <= 2, (each, theirs, row)


def test_a_light_step_with_an_eval_every_n_steps_is_still_the_step(loops):
    """spmd_mnist's shape over 1,500 steps: jit(update) goes light; each eval hands the last
    light execution over first, so the eval's span holds its own work only and the rule keeps
    jit(update) (the eval absorbs the queue only as host time)."""
    report, own, jit, _ = loops("eval", "--steps", "1500", "--size", "32")
    assert jit["step"] == "jit(update)" and report["steps"]["function"] == "jit(update)"
    executions, starts, _ = _light(jit, "jit(update)")
    # Light at some point (some executions' starts not kept). When varies widely: 781, 891,
    # 1,381, 1,166, 856 and 927 starts kept of 1,500 in six runs on a quiet machine
    # (2026-11-29), so a bound at half failed about one run in two.
    assert executions == 1500 and starts < executions, (starts, jit["watch"])
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(accuracy)"]["executions"] == 300
    assert rows["jit(update)"]["work_s"] > 5 * rows["jit(accuracy)"]["work_s"]
    theirs = statistics.median(own["per_step_s"])
    assert abs(report["step_times"]["median_s"] / theirs - 1) <= 0.25, (report, theirs)


def test_a_function_that_becomes_the_step_late_goes_light_in_its_turn(tmp_path):
    """3,000 calls of a cheap jit(warmup) lead the count (it goes light first), then 3,000 of
    the 4-matmul jit(step): the rule turns to jit(step) once its work is the greater, warmup
    takes the full count again and jit(step) goes light; both counts stay exact and the
    step's loop is timed within 10% of its own. At 128x128 the step's work per call is so far
    above warmup's that the rule turns within its first ~250 calls under any load (at 64x64 it
    turned after 650-1,550 calls with four CPU burners: when depends on the load)."""
    report, own, jit = _run(tmp_path, "late", "--steps", "3000", "--size", "128")
    assert jit["step"] == "jit(step)" and report["steps"]["function"] == "jit(step)"
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(warmup)"]["executions"] == 3000
    executions, starts, widest = _light(jit, "jit(step)")
    assert executions == 3001
    assert starts < executions // 2 and widest >= 10, (starts, widest, jit["watch"])
    theirs = own["median_s"]
    ours = statistics.median(_per_segment(jit["work"], own["segments"]))
    assert abs(ours / theirs - 1) <= TOLERANCE, (ours, theirs, jit["watch"])
