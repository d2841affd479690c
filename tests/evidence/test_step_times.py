"""Step times leave out the time after step 0 (compilation) and after each profiled step, in
either form the steps come in (Step objects or the columns of a large run)."""

from __future__ import annotations

from array import array

from pgle.evidence.events import Step, Steps
from pgle.evidence.steps import step_times

T = [0.0, 10.0, 11.0, 12.5, 13.5, 15.0]  # step 0 compiles for 10 s


def test_step_zero_and_excluded_steps_are_left_out_in_both_forms():
    objects = [Step(i, "train", i, t) for i, t in enumerate(T)]
    columns = Steps(array("q", range(len(T))), array("d", T), array("q", [0] * len(T)), ["train"],
                    array("q", range(len(T))), {})
    for steps in (objects, columns):
        assert step_times(steps) == [1.0, 1.5, 1.0, 1.5]
        assert step_times(steps, exclude={2}) == [1.0, 1.0, 1.5]


def test_a_large_run_leaves_out_step_zero_as_a_small_one_does():
    # From 4096 steps the columns go through numpy (issue 25): the same times as the loop's,
    # step 0's compile left out whichever side of the cut the run falls.
    n = 5000
    t = [0.0] + [10.0 + k for k in range(n - 1)]  # step 0 compiles for 10 s, then 1 s a step
    columns = Steps(array("q", range(n)), array("d", t), array("q", [0] * n), ["train"],
                    array("q", range(n)), {})
    objects = [Step(i, "train", i, x) for i, x in enumerate(t)]
    assert step_times(columns) == step_times(objects) == [1.0] * (n - 2)
    assert step_times(columns, exclude={7, 8}) == step_times(objects, exclude={7, 8})
    assert len(step_times(columns, exclude={7, 8})) == n - 4


def test_an_excluded_index_beyond_float_precision_leaves_out_only_itself():
    # Indices are int64: an excluded index above 2**53 must not be rounded onto its neighbour
    # (as a float it would equal 2**53) in the numpy path of a large run.
    n, base = 5000, 1 << 53
    indices = [0] + [base - 10 + k for k in range(n - 1)]
    t = [0.0] + [10.0 + k for k in range(n - 1)]
    columns = Steps(array("q", indices), array("d", t), array("q", [0] * n), ["train"],
                    array("q", range(n)), {})
    objects = [Step(i, "train", k, x) for k, (i, x) in enumerate(zip(indices, t, strict=True))]
    exclude = {base + 1}
    assert step_times(columns, exclude) == step_times(objects, exclude) == [1.0] * (n - 3)
