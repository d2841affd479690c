"""`--require MODULE` in process (pgle.verdicts.require): the rule the subprocess tests of
tests/verdicts/test_thresholds.py pin end to end, here where the mutation run (mutmut, whose
trampolines see only in-process calls; docs/development.md) can see it: each required glob's
modules applied or exit 3 with the reasons, the other modules never deciding, an exit code
already set (the workload's own) kept."""

from __future__ import annotations

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.report import Report
from pgle.verdicts.require import enforce, failures

MODULES = [
    {"module": "jit_train_step", "status": "applied"},
    {"module": "jit_eval_step", "status": "not_applied"},
    {"module": None, "fingerprint": "ab" * 16, "status": "partial"},
    {"module": None, "ordinal": 3, "status": "applied"},
]


def _report(code: int = 0) -> Report:
    return Report(command="run", status="applied", exit_code=code, modules=[dict(m) for m in MODULES])


def test_required_modules_that_applied_pass_whatever_the_others_did():
    assert failures(MODULES, ["jit_train*"]) == []
    assert failures(MODULES, ["unnamed module #3"]) == []  # the name the summary shows
    report = _report()
    enforce(report, ["jit_train_step"])
    assert report.exit_code == 0 and report.reasons == []
    assert report.summary == ["--require: jit_train_step: applied"]


def test_a_required_module_not_applied_fails_with_its_status():
    assert failures(MODULES, ["jit_*"]) == ["jit_eval_step is not_applied"]
    assert failures(MODULES, ["ab*"]) == [f"{'ab' * 16} is partial"]
    report = _report()
    enforce(report, ["jit_*", "nothing_*"])
    assert report.exit_code == EXIT_NOT_VERIFIED
    assert report.reasons == ["--require: jit_eval_step is not_applied",
                              "--require: no module matches --require nothing_*"]
    assert report.summary == [("--require: not verified: jit_eval_step is not_applied; "
                               "no module matches --require nothing_*")]


def test_a_glob_matching_nothing_fails():
    assert failures(MODULES, ["jit_missing"]) == ["no module matches --require jit_missing"]


def test_the_workloads_own_exit_code_stays_and_no_require_changes_nothing():
    report = _report(code=7)
    enforce(report, ["jit_eval_step"])
    assert report.exit_code == 7 and report.reasons == ["--require: jit_eval_step is not_applied"]
    report = _report()
    enforce(report, [])
    assert report.exit_code == 0 and report.summary == [] and report.reasons == []


def test_a_failing_module_is_named_once_across_globs():
    assert failures(MODULES, ["jit_eval*", "*eval_step"]) == ["jit_eval_step is not_applied"]


def test_every_glob_is_named_when_all_applied_and_earlier_reasons_stay():
    report = _report()
    enforce(report, ["jit_train*", "unnamed module #3"])
    assert report.summary == ["--require: jit_train*, unnamed module #3: applied"]
    report = _report()
    report.reasons = ["an earlier reason"]
    enforce(report, ["jit_eval_step"])
    assert report.reasons == ["an earlier reason", "--require: jit_eval_step is not_applied"]
