"""The `jit_functions` work rows as spans (issue 33): a light step's executions between two
sampled ones are one row [start, work each, completion, last number, compiles, executions];
rows of five (one execution each, pgle before spans) are still read, to the same times."""

from __future__ import annotations

import json

from pgle.evidence.events import read_events
from pgle.evidence.jit_steps import execution_times, run_steps


def _five(done_by_number, compiles=0):
    """Old-format rows, one execution each: [start, work, completion, number, compiles]."""
    return [[float(n), 0.001, d, n, compiles] for n, d in done_by_number.items()]


def test_spans_and_old_rows_give_the_same_step_times():
    # executions 2..4 completed together at 10.0, 5..10 at 10.6, 11 at 10.7
    done = {2: 10.0, 3: 10.0, 4: 10.0, 5: 10.6, 6: 10.6, 7: 10.6, 8: 10.6, 9: 10.6,
            10: 10.6, 11: 10.7}
    old = execution_times(_five(done))
    spans = [[2.0, 0.001, 10.0, 4, 0, 3], [5.0, 0.001, 10.6, 10, 0, 6],
             [11.0, 0.001, 10.7, 11, 0, 1]]
    new = execution_times(spans)
    assert [round(t, 9) for _, t in old] == [round(t, 9) for _, t in new]
    assert [round(t, 9) for _, t in new] == [0.1] * 6 + [0.1]  # 0.6 s over 6, then 0.1 s


def test_a_span_after_a_gap_or_a_compile_is_left_out():
    spans = [[2.0, 0.001, 10.0, 4, 0, 3], [6.0, 0.001, 10.6, 10, 0, 5],  # 5 has no row
             [11.0, 0.001, 10.7, 11, 1, 1], [12.0, 0.001, 10.9, 14, 1, 3]]  # 11: a compile
    times = [round(t, 9) for _, t in execution_times(spans)]
    assert times == [round(0.2 / 3, 9)] * 3  # only 12..14, from 11's completion


def _run_folder(tmp_path, work):
    rows = [
        {"kind": "start", "t": 1.0, "pid": 1},
        {"kind": "jit_functions", "t": 20.0, "step": "jit(step)", "module": "jit_step",
         "functions": [{"function": "jit(step)", "module": "jit_step", "executions": 11,
                        "seconds": 0.5, "work_s": 0.5, "work_known": 10}],
         "starts": [float(n) for n in range(1, 12)], "work": work,
         "watch": {"known": 3, "unknown": 0, "no_array": 0, "skipped": 7}},
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_events(path)


def test_an_old_run_folder_is_read_as_before(tmp_path):
    done = {n: 10.0 + 0.1 * (n - 1) for n in range(2, 12)}
    old = run_steps(_run_folder(tmp_path, _five(done)))
    spans = run_steps(_run_folder(tmp_path, [[2.0, 0.001, 10.1, 2, 0, 1],
                                             [3.0, 0.001, 11.0, 11, 0, 9]]))
    assert old.time_source == spans.time_source == "completion"
    assert len(old.times) == len(spans.times) == 9
    assert abs(sum(old.times) - sum(spans.times)) < 1e-9


def test_a_span_of_unknown_work_is_where_the_next_ones_time_starts(tmp_path):
    """A loop of 16 sub-millisecond steps on a fast machine: the compile's execution, the
    next (another function's compile before it) and then one held span of the other 14 (the
    CI failure of stop 49). The unknown spans' completions still start the next interval."""
    work = [[1.0, None, 1.08, 1, 9, 1], [1.09, None, 1.10, 2, 11, 1],
            [1.11, 8.7e-05, 1.114, 16, 11, 14]]
    times = [round(t, 9) for _, t in execution_times(work)]
    assert times == [round(0.014 / 14, 9)] * 14
    steps = run_steps(_run_folder(tmp_path, work))
    assert steps.time_source == "completion" and len(steps.times) == 14
    # Without the unknown rows (as the harness wrote them before): nothing to start from.
    assert execution_times(work[2:]) == []


def test_work_rows_with_holes_are_skipped_not_raised_on(tmp_path):
    """Rows from another user's run folder: a null where a number must be is no row."""
    work = [[1.0, None, 1.1, 1, 0, 1], [None, 0.1, 1.2, 2, 0, 1], [1.2, 0.1, None, 3, 0, 1],
            [1.3, 0.1, 1.4, None, 0, 1], [1.4, 0.1, 1.5, 5, None, 1], [1.5, 0.1, 1.6, 6, 0, None],
            [1.6, 0.1, 1.7, 7, 0, 0], [1.7, 0.1, 1.8, 2, 0, 1]]
    # Of these only executions 1 and 2 (the last row) are rows: one interval, 0.7 s.
    assert [round(t, 9) for _, t in execution_times(work)] == [0.7]
    steps = run_steps(_run_folder(tmp_path, [[None, None], [1.0, None]] + work))
    assert steps.times == [execution_times(work)[0][1]]
    # json reads NaN and Infinity as numbers: no row either (int() of them raises).
    odd = [[1.0, None, 1.1, 1, 0, 1], [1.1, 0.1, float("inf"), 2, 0, 1],
           [1.2, 0.1, 1.3, float("nan"), 0, 1], [1.3, 0.1, 1.4, 4, 0, float("inf")],
           [1.4, 0.1, 1.5, 2, 0, 1]]
    assert [round(t, 9) for _, t in execution_times(odd)] == [0.4]
    assert len(run_steps(_run_folder(tmp_path, odd)).times) == 1
    # A pgle before completion timing wrote [start, seconds]: a null in either is no step.
    old = run_steps(_run_folder(tmp_path, [[1.0, None], [None, 0.2], [3.0, 0.1],
                                           [4.0, float("nan")], [float("inf"), 0.1]]))
    assert old.times == [0.1]
