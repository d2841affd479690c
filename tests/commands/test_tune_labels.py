"""tune's step line labels the runs "with the profile" only where some module applied it
(issue 33): on CPU XLA ignores a profile, so those runs ran the baseline's program; a tune.json
from before the `profile_applied` key keeps its old wording."""

from __future__ import annotations

from pgle.commands import arms

RUN = {"median_s": 0.0123}


def _median_line(times, profiled):
    return next(ln for ln in arms.step_time_lines(times, profiled=profiled)
                if ln.startswith("median step: "))


def test_runs_with_a_profile_no_module_applied_are_not_labelled_with_it():
    line = _median_line({"run": RUN, "profile_applied": False}, profiled=True)
    assert "with the profile" not in line
    assert "12.30 ms (run; no module applied the profile)" in line
    assert "12.30 ms (with the profile)" in _median_line(
        {"run": RUN, "profile_applied": True}, profiled=True)
    assert "12.30 ms (run)" in _median_line({"run": RUN, "profile_applied": False},
                                            profiled=False)
    assert "(with the profile)" in _median_line({"run": RUN}, profiled=True)  # older tune.json


def test_compare_step_times_says_whether_the_profile_applied(tmp_path):
    for platform, applied, expected in (("cpu", True, False), ("gpu", False, False),
                                        ("gpu", True, True)):
        times = arms.compare_step_times(tmp_path / "c", [tmp_path / "b"], [tmp_path / "r"],
                                        platform=platform, applied=applied)
        assert times["profile_applied"] is expected
