"""Which jitted function is the step (pgle.launch.step_rule), on records as the harness writes
them: the most work among functions executed at least 3 times, host time where a candidate's
completion was never seen, ties to the most executions (issue 37: only `module_of` was called
in process)."""

from __future__ import annotations

from pgle.launch import step_rule
from pgle.launch.step_rule import MIN_EXECUTIONS, describe, module_of, pick, weight


def rec(name: str, executions: int, seconds: float = 0.0, work_s: float = 0.0,
        work_known: int = 0) -> dict:
    return {"function": name, "executions": executions, "seconds": seconds, "work_s": work_s,
            "work_known": work_known}


def test_weight_is_the_mean_known_work_times_the_executions():
    assert weight(rec("f", 10, work_s=2.0, work_known=4)) == 5.0
    assert weight(rec("f", 10, work_s=2.0, work_known=0)) == 0.0
    assert weight({"function": "f"}) == 0.0
    assert weight({"work_known": 2, "work_s": None, "executions": 3}) == 0.0
    assert weight({"work_known": 2, "work_s": 1.0, "executions": None}) == 0.0


def test_the_step_is_the_most_work_not_the_most_host_time():
    # spmd_mnist's shape (issue 33): the eval syncs and absorbs host time, the step does the work.
    train = rec("jit(train_step)", 100, seconds=1.0, work_s=90.0, work_known=99)
    accuracy = rec("jit(accuracy)", 10, seconds=50.0, work_s=1.0, work_known=9)
    assert pick([accuracy, train]) is train
    assert MIN_EXECUTIONS == 3
    twice = rec("jit(init)", MIN_EXECUTIONS - 1, seconds=99.0, work_s=99.0, work_known=1)
    assert pick([twice]) is None and pick([]) is None
    thrice = rec("jit(init)", MIN_EXECUTIONS, seconds=99.0, work_s=99.0, work_known=2)
    assert pick([twice, thrice]) is thrice
    assert pick([twice], min_executions=2) is twice


def test_without_every_completion_known_host_time_decides_and_ties_go_to_executions():
    seen = rec("jit(a)", 5, seconds=1.0, work_s=100.0, work_known=4)
    unseen = rec("jit(b)", 5, seconds=2.0)
    assert pick([seen, unseen]) is unseen
    assert pick([rec("x", 4, seconds=None), rec("y", 3, seconds=0.5)])["function"] == "y"
    same_host = [rec("few", 3, seconds=1.0), rec("many", 9, seconds=1.0)]
    assert pick(same_host)["function"] == "many"
    same_work = [rec("few", 4, work_s=4.0, work_known=4), rec("many", 8, work_s=1.0, work_known=2)]
    assert pick(same_work)["function"] == "many"  # both 4.0 of work
    assert pick([{"function": "n", "executions": None}], min_executions=0)["function"] == "n"
    assert pick([{"function": "n", "executions": None}], min_executions=1) is None


def test_module_names_and_the_rule_in_words():
    assert module_of("jit(train_step)") == "jit_train_step"
    assert module_of("pmap(my-step.v2)") == "pmap_my-step.v2"
    assert module_of("jit(MAX)") == "jit_MAX" and module_of("jit(f)__") == "jit_f"
    assert describe() == (
        "the jitted function executed at least 3 times whose executions' work (until their "
        "outputs were ready) adds up to the most")
    assert describe(False) == (
        "the jitted function executed at least 3 times that accounts for the most host time "
        "(the completion of its outputs was not seen)")
    assert step_rule.describe(by_work=True) == describe()


def test_work_ranks_only_when_every_candidates_completion_was_seen():
    """`by_work`: the harness's window and its `jit_functions` rule name the work rule only
    when each function of at least `min_executions` executions had a completion seen; a
    function under that minimum never counts (issue 37: called only inside the workload)."""
    seen = rec("jit(step)", 5, seconds=1.0, work_s=4.0, work_known=4)
    unseen = rec("jit(eval)", 5, seconds=2.0)
    setup = rec("jit(init)", MIN_EXECUTIONS - 1, seconds=9.0)  # too few: no candidate
    assert step_rule.by_work([seen, setup]) is True
    assert step_rule.by_work([seen, unseen]) is False
    assert step_rule.by_work([]) is True and step_rule.by_work([setup]) is True
    assert step_rule.by_work([seen, setup], min_executions=2) is False
    assert step_rule.by_work([seen, rec("jit(init)", 2, work_s=1.0, work_known=1)],
                             min_executions=2) is True
    # What the report says follows it: host time once a candidate's completion is unseen.
    assert describe(step_rule.by_work([seen, unseen])) == describe(False)
    assert pick([seen, unseen]) is unseen


def test_a_lead_is_clear_at_the_margin_among_the_candidates_only():
    """The window's first answer (harness.DECIDE_MARGIN): the busiest candidate by work at
    least `margin` times the next, among functions executed often enough; one alone is clear."""
    step = rec("jit(step)", 2, work_s=4.0, work_known=2)  # weight 4.0
    helper = rec("jit(helper)", 2, work_s=1.0, work_known=2)  # weight 1.0
    assert step_rule.clear([step, helper], 4.0, 2) and step_rule.clear([helper, step], 4.0, 2)
    assert not step_rule.clear([step, helper], 4.01, 2)  # just short of the margin
    assert not step_rule.clear([step, rec("jit(h2)", 2, work_s=1.5, work_known=2)], 4.0, 2)
    once = rec("jit(init)", 1, work_s=3.9, work_known=1)  # not a candidate at 2 executions
    assert step_rule.clear([step, once], 4.0, 2) and step_rule.clear([step], 4.0, 2)
    assert step_rule.clear([], 4.0, 2)
    # MIN_EXECUTIONS by default: the 2-execution step is no candidate there
    twin, step3 = rec("jit(twin)", 3, work_s=2.0, work_known=3), rec("jit(s)", 3, work_s=6.0,
                                                                     work_known=3)
    assert step_rule.clear([step, twin], 100.0)
    assert step_rule.clear([step3, twin], 3.0) and not step_rule.clear([step3, twin], 3.01)
    assert step_rule.candidates([step, once], 2) == [step]
    assert step_rule.candidates([step, once]) == []  # MIN_EXECUTIONS by default
