"""What `run_steps` tells `tune`, `run` and `pgle report` about a run's steps (issue 37): the
step times, the sentence saying how they were measured (pinned whole: users read it), which
steps were left out (the compile, the profiled ones), the step function and its module; for
each way a run can mark, time or miss its steps. Each run folder is written as the harness
writes it: events.jsonl lines, the marked steps' edges in steps.bin
(pgle.launch.harness `Events`)."""

from __future__ import annotations

import array
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pgle.evidence import step_file
from pgle.evidence.events import RunEvents, read_events
from pgle.evidence.jit_steps import RunSteps, _trace_span, execution_times, run_steps
from pgle.launch import step_rule

T0 = 1_764_000_000  # time.time() of the run's start, in seconds
NS = 1_000_000_000
FN, MOD = "jit(train_step)", "jit_train_step"
RULE = step_rule.describe(True)
COMPLETION = (
    "each step's time is from the completion of the previous step's work to that of its own "
    "(the outputs of the last jitted call inside its marker ready; "
)
START_TO_START = "each step's time is start to start of its marker ("
ASYNC = (
    ": with asynchronous dispatch a marker can close long before its work is done, so a loop "
    "that never waits on its steps shows how fast the host enqueues them)"
)
EXECUTIONS = (
    "each step's time is from the completion of the previous execution's outputs to that of its "
    "own (the loop's throughput: other jitted calls and Python included), shared equally among "
    "executions that completed together; a completion is noted when pgle's thread gets the GIL, "
    "up to the switch interval (5 ms by default) late while the loop runs Python: one step's "
    "time is that uncertain, a run of steps' is not"
)


def a_run(
    folder: Path,
    events: list[dict[str, Any]],
    steps: list[float] = (),  # type: ignore[assignment]
    name: str | None = "train",
) -> RunEvents:
    """A run folder: `events` (kind, t in seconds after T0, fields) as events.jsonl lines, and
    marked steps 0.. entered at `steps` (seconds after T0), left 1 ms later, named `name` (None:
    no step_name event, as for a name id none defined)."""
    lines = [{"kind": "start", "t": float(T0), "pid": 4242, "edges": 0}]
    if steps and name is not None:
        lines.append({"kind": "step_name", "t": float(T0), "id": 0, "name": name, "edges": 0})
    lines += [{**e, "t": T0 + e["t"]} for e in events]
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    if steps:
        fd = step_file.open_for_append(str(folder / step_file.NAME))
        edges = array.array("q")
        for i, t in enumerate(steps):
            enter = T0 * NS + round(t * NS)
            edges.extend([enter, i, i, 0, -(enter + 1_000_000), i, 0, 0])
        step_file.os.write(fd, step_file.encode(edges))
        step_file.os.close(fd)
    return read_events(folder / "events.jsonl")


def jit_functions(t: float = 100.0, **fields: Any) -> dict[str, Any]:
    """The harness's `jit_functions` event (written at exit) for the step function FN."""
    return {"kind": "jit_functions", "t": t, "step": FN, "module": MOD, **fields}


def completions(index, done_s, compiles, at_end, watch, t=99.0) -> dict[str, Any]:
    """The harness's `step_completions` event: completions in ns since the epoch."""
    return {"kind": "step_completions", "t": t, "index": index,
            "done_ns": [T0 * NS + round(d * NS) for d in done_s], "compiles": compiles,
            "at_end": at_end, "watch": watch}


def check(got: RunSteps, times: list[float], **fields: Any) -> None:
    """The whole RunSteps: its times to rounding, every other field exactly."""
    assert got.times == pytest.approx(times, abs=1e-6)
    assert dataclasses.replace(got, times=[]) == RunSteps([], **fields)


# -- marked steps ---------------------------------------------------------------------------


def test_marked_steps_timed_by_their_completions_leave_out_the_profiled_ones(tmp_path: Path):
    # steps 0..7 (step 0 compiles); pgle's trace window kept steps 3 and 4: the spans that
    # touch them (2-3, 3-4, 4-5) are left out, 3 of the 7 intervals
    done = [10.0, 11.1, 12.3, 13.6, 15.0, 16.5, 18.1, 19.8]
    watch = {"ready_at_end": 2, "waited": 5, "unknown": 1, "no_array": 1, "skipped": 0}
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 12.4, "purpose": "window"},
        {"kind": "trace_stop", "t": 15.1, "purpose": "window", "first_step": 3, "steps": 2},
        completions(list(range(8)), done, [1] * 8, [0] * 8, watch),
        jit_functions(work=[], starts=[]),
    ], steps=[0.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0])
    check(run_steps(ev), [1.1, 1.2, 1.6, 1.7], source="markers", function=FN, module=MOD,
          how="StepTraceAnnotation steps named 'train'; " + COMPLETION + "2 ready by the "
          "marker's end, 5 after it, 1 donated before they could be waited on, 1 with no jax "
          "array among the outputs)", excluded=3, time_source="completion")


def test_a_loop_that_syncs_keeps_its_spread_where_one_step_in_several_is_checked(
    tmp_path: Path,
):
    # Unnamed steps, no jitted-function record, no trace: nothing left out. pgle checked steps
    # 0, 2, 4 and 6, each ready by its marker's end: 2's span is shared among steps 1-2 by
    # their marker times (1 s and 2 s), 4's among 3-4 (1 s, 1.5 s); 6's equally (step 6 has no
    # next marker to time it by). Step 4 noted twice: its earlier completion counts.
    starts = [0.0, 10.0, 11.0, 13.0, 14.0, 15.5, 17.0]
    ev = a_run(tmp_path, [
        completions([0, 2, 4, 4, 6], [10.0, 13.0, 15.6, 15.5, 18.5], [1] * 5, [1] * 5,
                    {"ready_at_end": 4, "waited": 1}),
    ], steps=starts, name=None)
    check(run_steps(ev), [1.0, 2.0, 1.0, 1.5, 1.5, 1.5], source="markers", function=None,
          module=None, how="StepTraceAnnotation steps; " + COMPLETION + "4 ready by the "
          "marker's end, 1 after it)", excluded=0, time_source="completion")


def test_a_completion_noted_late_is_brought_forward_to_the_next_step_s(tmp_path: Path):
    # Work completes in dispatch order: step 2, noted twice, both after step 3's completion
    # (the watcher's thread late), completed by 3's. Steps 1-2 share 0-2's span, 4-6 3-6's.
    ev = a_run(tmp_path, [
        # the last step noted twice too: its earlier note counts
        completions([0, 2, 2, 3, 6, 7, 7], [10.0, 13.6, 14.0, 13.5, 20.0, 21.4, 21.0], [1] * 7,
                    [0] * 7, {"ready_at_end": 0, "waited": 6}),
    ], steps=[0.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0])
    check(run_steps(ev), [1.75, 1.75, 0.0, 6.5 / 3, 6.5 / 3, 6.5 / 3, 1.0], source="markers",
          function=None, module=None, how="StepTraceAnnotation steps named 'train'; "
          + COMPLETION + "0 ready by the marker's end, 6 after it)", excluded=0,
          time_source="completion")


def test_completions_of_an_older_harness_or_of_uneven_lists_are_read(tmp_path: Path):
    # No `at_end` (a harness before it): none ready by its marker's end, so a span is shared
    # equally, whatever the marker times; lists of uneven lengths (a foreign run folder) are
    # read as far as all of them go
    done = completions([0, 2, 4, 5], [10.0, 13.0, 15.0, 99.0], [1, 1, 1], [], None)
    del done["at_end"]
    ev = a_run(tmp_path, [done], steps=[0.0, 10.0, 11.0, 13.0, 14.0])
    check(run_steps(ev), [1.5, 1.5, 1.0, 1.0], source="markers", function=None, module=None,
          how="StepTraceAnnotation steps named 'train'; " + COMPLETION + "0 ready by the "
          "marker's end, 0 after it)", excluded=0, time_source="completion")


def test_two_markers_entered_at_one_instant_share_their_span_equally(tmp_path: Path):
    # steps 1 and 2 entered in the same nanosecond: no marker time to share 0-2's span by
    ev = a_run(tmp_path, [
        completions([0, 2], [10.0, 13.0], [1, 1], [1, 1], {"ready_at_end": 2, "waited": 0}),
    ], steps=[0.0, 10.0, 10.0, 12.0])
    assert run_steps(ev).times == pytest.approx([1.5, 1.5], abs=1e-6)


def test_a_recompile_between_two_marked_completions_leaves_that_span_out(tmp_path: Path):
    ev = a_run(tmp_path, [
        # no watcher tally (none written): its counts are 0
        completions([0, 1, 2, 3], [10.0, 11.0, 14.0, 15.5], [1, 1, 2, 2], [0] * 4, None),
    ], steps=[0.0, 10.0, 11.0, 14.0])
    check(run_steps(ev), [1.0, 1.5], source="markers", function=None, module=None,
          how="StepTraceAnnotation steps named 'train'; " + COMPLETION + "0 ready by the "
          "marker's end, 0 after it)", excluded=1, time_source="completion")


def test_marked_steps_of_a_pgle_before_completion_timing_are_timed_start_to_start(
    tmp_path: Path,
):
    # The jit_functions record without `work`: a pgle before issue 33. Step 2 was profiled.
    ev = a_run(tmp_path, [
        {"kind": "trace_stop", "t": 12.5, "purpose": "window", "first_step": 2, "steps": 1},
        jit_functions(starts=[10.0, 11.0, 12.0]),
    ], steps=[0.0, 10.0, 11.5, 12.5, 14.0])
    check(run_steps(ev), [1.5, 1.5], source="markers", function=FN, module=MOD,
          how="StepTraceAnnotation steps named 'train'; " + START_TO_START + "this run's "
          "events predate completion timing (pgle < issue 33)" + ASYNC, excluded=2,
          time_source="markers")


def test_one_marked_step_and_no_jitted_call_gives_no_times_and_says_why(tmp_path: Path):
    ev = a_run(tmp_path, [], steps=[0.0], name="epoch")
    check(run_steps(ev), [], source="markers", function=None, module=None,
          how="StepTraceAnnotation steps named 'epoch'; " + START_TO_START + "pgle saw no "
          "counted jitted call inside the markers" + ASYNC, excluded=0, time_source="markers")


def test_marked_steps_with_too_few_completions_are_timed_start_to_start(tmp_path: Path):
    ev = a_run(tmp_path, [
        completions([0], [10.0], [1], [0],
                    {"ready_at_end": 0, "waited": 1, "unknown": 0, "no_array": 2}),
    ], steps=[0.0, 10.0, 12.0, 13.0])
    check(run_steps(ev), [2.0, 1.0], source="markers", function=None, module=None,
          how="StepTraceAnnotation steps named 'train'; " + START_TO_START + "pgle saw the "
          "outputs of too few marked steps complete (0 ready by the marker's end, 1 after it, "
          "2 with no jax array among the outputs)" + ASYNC, excluded=1, time_source="markers")


# -- no markers: the executions of the step function -----------------------------------------


NO_STEPS = "the workload marks no steps and no jitted function executed at least 3 times"


def test_no_markers_and_no_step_function_give_no_steps(tmp_path: Path):
    got = run_steps(a_run(tmp_path, []))
    check(got, [], source=None, how=NO_STEPS)
    assert got.to_dict() == {"source": None, "function": None, "module": None, "how": NO_STEPS,
                             "step_time_source": None, "count": 0, "excluded": 0}
    # the harness found jitted functions, none executed often enough to be the step
    ev = a_run(tmp_path, [jit_functions(step=None, module=None, functions=[
        {"function": "jit(init)", "module": "jit_init", "executions": 1}], starts=[], work=[])])
    check(run_steps(ev), [], source=None, how=NO_STEPS)


def test_executions_of_a_pgle_before_completion_timing_give_no_step_times(tmp_path: Path):
    # no `work` (pgle < issue 33) and no `rule`: the executions counted are the function's
    # own row's (6), not its sampled starts (5)
    ev = a_run(tmp_path, [jit_functions(
        functions=[{"function": "jit(eval_step)", "module": "jit_eval_step", "executions": 3},
                   {"function": FN, "module": MOD, "executions": 6}],
        starts=[10.0, 11.0, 12.0, 13.0, 14.0])])
    check(run_steps(ev), [], source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 6 executions of {FN}, the busiest jitted "
          "function; no step times: this run's events predate completion timing (pgle < issue "
          "33), and the gap between two executions' starts is only how fast the host "
          "dispatches", excluded=5)


def test_executions_none_seen_complete_give_no_step_times(tmp_path: Path):
    # `work` empty: no completion seen; no functions list, so the executions are its starts
    ev = a_run(tmp_path, [jit_functions(starts=[10.0, 11.0, 12.0, 13.0], work=[], rule=RULE)])
    check(run_steps(ev), [], source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 4 executions of {FN}, {RULE}; no step "
          "times: pgle saw none of its executions complete (outputs that are no jax arrays, or "
          "donated to a later call before they could be waited on), and the gap between two "
          "executions' starts is only how fast the host dispatches", excluded=4)


def _row(n: int, done: float, compiles: int, k: int = 1) -> list[float]:
    """A `work` row as the harness writes it: [start, work each, completion, last number,
    compiles, executions], times in the events' clock."""
    return [T0 + n - 0.25, 0.01, T0 + done, n, compiles, k]


# Completions (s after T0) of executions 1..14 of the step function; execution 1 compiled,
# 9 recompiled; 11-12 and 13-14 are spans (a light step's) that all completed at 18.1.
E1_WORK = [
    _row(1, 10.0, 1), _row(2, 10.5, 1), _row(3, 11.1, 1), _row(4, 11.8, 1), _row(5, 12.6, 1),
    _row(6, 13.5, 1), _row(7, 14.3, 1), _row(8, 15.2, 1), _row(9, 16.0, 2), _row(10, 16.7, 2),
    _row(12, 18.1, 2, 2), _row(14, 18.1, 2, 2),
    _row(14, 19.0, 2, 0),  # a row of no executions: none the harness writes; not read
]
E1_TIMES = [0.5, 0.6, 0.9, 0.7, 0.35, 0.35, 0.35, 0.35]


def test_executions_timed_completion_to_completion_leave_out_the_trace_and_compiles(
    tmp_path: Path,
):
    # pgle's execution trace from 11.8 (execution 4's completion) to 13.5 (6's): the
    # intervals ending at or after its start and starting at or before its stop are left
    # out (3-4 .. 6-7), as is 8-9 (a recompile); execution 1's is the compile
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 11.8, "purpose": "executions"},
        {"kind": "log", "t": 12.0, "logger": "jax._src.compiler", "level": "DEBUG",
         "message": "Not writing persistent cache entry since process_id != 0", "thread": "7"},
        {"kind": "trace_stop", "t": 13.5, "purpose": "executions", "function": FN,
         "first_execution": 4, "executions": 3},
        jit_functions(functions=[{"function": FN, "module": MOD, "executions": 14}],
                      starts=[T0 + n - 0.25 for n in range(1, 15)], work=E1_WORK, rule=RULE),
    ])
    got = run_steps(ev)
    how = f"no step markers: the steps are the 14 executions of {FN}, {RULE}; " + EXECUTIONS
    check(got, E1_TIMES, source="executions", function=FN, module=MOD, how=how, excluded=6,
          time_source="completion")
    # what run.json and tune.json show of it
    assert got.to_dict() == {"source": "executions", "function": FN, "module": MOD, "how": how,
                             "step_time_source": "completion", "count": 8, "excluded": 6}


def test_a_light_step_s_sampled_starts_leave_none_out_below_zero(tmp_path: Path):
    # The step function's own row is not among the functions listed: its executions are
    # counted by its starts, which a light step samples (3 here, for 12 timed): none left out
    ev = a_run(tmp_path, [jit_functions(
        functions=[{"function": "jit(eval_step)", "module": "jit_eval_step", "executions": 3}],
        starts=[T0 + 0.75, T0 + 5.75, T0 + 10.75], work=E1_WORK, rule=RULE)])
    check(run_steps(ev), [0.5, 0.6, 0.7, 0.8, 0.9, 0.8, 0.9, 0.7] + [0.35] * 4,
          source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 3 executions of {FN}, {RULE}; " + EXECUTIONS,
          excluded=0, time_source="completion")


def test_execution_times_name_each_execution_start(tmp_path: Path):
    got = execution_times(E1_WORK, (T0 + 11.8, T0 + 13.5))
    assert [t for _, t in got] == pytest.approx(E1_TIMES, abs=1e-6)
    starts = [T0 + n - 0.25 for n in (2, 3, 8, 10)] + [T0 + 11.75] * 2 + [T0 + 13.75] * 2
    assert [s for s, _ in got] == starts  # a span's executions share its one start


def test_a_trace_still_running_at_exit_leaves_out_every_later_execution(tmp_path: Path):
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 11.5, "purpose": "executions"},
        jit_functions(functions=[{"function": FN, "module": MOD, "executions": 14}],
                      starts=[], work=E1_WORK, rule=RULE),
    ])
    check(run_steps(ev), [0.5, 0.6], source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 14 executions of {FN}, {RULE}; "
          + EXECUTIONS, excluded=12, time_source="completion")


PREDATE_THROUGHPUT = (
    "each step's time is its device work until its outputs were ready (this run's events "
    "predate throughput timing: a loop's Python and other calls left out)"
)


def test_executions_of_a_pgle_before_throughput_timing_are_their_device_work(tmp_path: Path):
    # rows [start, seconds of work]; the workload's own start_trace/stop_trace (from 12.0 to
    # 14.0; the harness's `script` trace_stop once the trace is written) leaves out the
    # executions started in it, its ends included; a row cut short is skipped
    work = [[T0 + 10.0, 0.2], [T0 + 11.0, 0.3], [T0 + 12.0, 9.0], [T0 + 13.0, 9.0],
            [T0 + 14.0, 9.0], [T0 + 15.0], [T0 + 15.5, 0.25], [T0 + 16.0, 0.4]]
    ev = a_run(tmp_path, [
        {"kind": "script_trace", "t": 12.0, "call": "start", "site": "train.py:40"},
        {"kind": "script_trace", "t": 14.0, "call": "stop", "site": "train.py:44"},
        {"kind": "trace_stop", "t": 15.7, "purpose": "script", "site": "train.py:40"},
        jit_functions(functions=[{"function": FN, "module": MOD, "executions": 9}],
                      starts=[], work=work),
    ])
    # 9 executions: 4 timed, 3 in the trace, 2 more (the compile, the row cut short)
    check(run_steps(ev), [0.2, 0.3, 0.25, 0.4], source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 9 executions of {FN}, the busiest jitted "
          "function; " + PREDATE_THROUGHPUT, excluded=5, time_source="completion")


def test_a_trace_stopped_in_the_clock_tick_it_started_is_closed_by_that_stop(tmp_path: Path):
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 12.0, "purpose": "executions"},
        {"kind": "trace_stop", "t": 12.0, "purpose": "executions"},
        {"kind": "trace_stop", "t": 15.0, "purpose": "executions"},
    ])
    assert _trace_span(ev) == (T0 + 12.0, T0 + 12.0)


def test_every_execution_of_an_old_run_with_a_row_is_a_step_or_in_the_trace(tmp_path: Path):
    # rows [start, seconds of work] for each of the 4 executions, the third in the trace
    work = [[T0 + 10.0, 0.2], [T0 + 11.0, 0.3], [T0 + 12.5, 9.0], [T0 + 14.0, 0.25]]
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 12.0, "purpose": "executions"},
        {"kind": "trace_stop", "t": 13.0, "purpose": "executions"},
        jit_functions(functions=[{"function": FN, "module": MOD, "executions": 4}],
                      starts=[], work=work),
    ])
    check(run_steps(ev), [0.2, 0.3, 0.25], source="executions", function=FN, module=MOD,
          how=f"no step markers: the steps are the 4 executions of {FN}, the busiest jitted "
          "function; " + PREDATE_THROUGHPUT, excluded=1, time_source="completion")


def test_a_function_recompiled_at_every_call_has_no_step_times(tmp_path: Path):
    # Every interval between two completions holds a compile (a new shape at each call), or
    # touches the trace: one execution's device work is no time per step (issue 33), and the
    # run is no older pgle's (its rows carry completions)
    no_times = (
        f"no step markers: the steps are the 6 executions of {FN}, {RULE}; no step times: "
        "each interval between the completions of two of its executions held a compile or "
        "touched the kept trace (a function recompiled at every call, or too few executions "
        "outside the profiler's window), and one execution's device work alone is not the "
        "loop's time per step"
    )
    recompiled = [_row(1, 10.0, 1), _row(2, 10.5, 2), _row(3, 11.5, 3), _row(6, 13.0, 4, 3)]
    ev = a_run(tmp_path, [jit_functions(
        functions=[{"function": FN, "module": MOD, "executions": 6}], starts=[],
        work=recompiled, rule=RULE)])
    check(run_steps(ev), [], source="executions", function=FN, module=MOD, how=no_times,
          excluded=6)
    # the same in rows of five (one execution each: a pgle before spans)
    ev = a_run(tmp_path, [jit_functions(
        functions=[{"function": FN, "module": MOD, "executions": 6}], starts=[],
        work=[_row(n, 9.0 + n, n)[:5] for n in range(1, 7)], rule=RULE)])
    check(run_steps(ev), [], source="executions", function=FN, module=MOD, how=no_times,
          excluded=6)
    # 6 executions, the trace over all but the first: no interval is left
    traced = [_row(1, 10.0, 1), _row(6, 13.0, 1, 5)]
    ev = a_run(tmp_path, [
        {"kind": "trace_start", "t": 10.5, "purpose": "executions"},
        {"kind": "trace_stop", "t": 12.0, "purpose": "executions"},
        jit_functions(functions=[{"function": FN, "module": MOD, "executions": 6}], starts=[],
                      work=traced, rule=RULE)])
    check(run_steps(ev), [], source="executions", function=FN, module=MOD, how=no_times,
          excluded=6)
