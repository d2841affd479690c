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
