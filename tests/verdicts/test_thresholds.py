"""The edges of the verdict's rules: coverage exactly at --min-coverage, the workload's own exit
code, ranks that had nothing to apply, the checker versions, the cap on missing names. Each pins
a rule the README states (found by the mutation run, tests/mutants)."""

from __future__ import annotations

from helpers.pgle_testing import report_of, run_pgle, write_profile

from pgle.verdicts.across_ranks import MAX_MISSING_NAMES, aggregate_modules, judge_job
from pgle.verdicts.checker import silence
from pgle.verdicts.collectives import RULE_CONVERTED, decide
from pgle.verdicts.pgle_applied import (
    EXIT_NOT_VERIFIED,
    SILENCE_FULL,
    SILENCE_OFF,
    SILENCE_UNKNOWN,
    exit_code_for,
)
from pgle.verdicts.sync_converted import Split

FP = "0123456789abcdef0123456789abcdef"


def absl(sev: str, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  7 {file}:538] {msg}"


def checker_log(profile: str, found: int, missing: list[str]) -> str:
    s, p = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
    lines = [absl("I", s, f"Using PGLE profile from {profile}"),
             absl("I", s, "Found profile for module jit_step, using profile guided latency estimator"),
             absl("W", p, f"Found {found} instructions from the profile."),
             absl("W", p, f"Missing {len(missing)} instructions from the profile.")]
    lines += [absl("W", p, f"  {n}") for n in missing]
    return "\n".join(lines) + "\n"


def test_coverage_exactly_at_min_coverage_is_applied(project):
    # 9 found, 1 missing: coverage 0.9 == the default --min-coverage (README: ">= --min-coverage").
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    (project / "run.log").write_text(checker_log(f"{project}/p.pb", 9, ["fusion.9"]))
    proc = run_pgle("verify", "run.log", "--profile", "p.pb", "--require-applied", "--json",
                    cwd=project)
    report = report_of(proc)
    assert report["modules"][0]["coverage"] == 0.9, report
    assert proc.returncode == 0 and report["status"] == "applied", proc.stderr.decode()
    # Just below it is partial, and --require-applied fails with its documented code.
    proc = run_pgle("verify", "run.log", "--profile", "p.pb", "--require-applied",
                    "--min-coverage", "0.91", "--json", cwd=project)
    assert proc.returncode == EXIT_NOT_VERIFIED and report_of(proc)["status"] == "partial"


def test_decide_at_and_just_below_the_threshold():
    at = decide(9, 1, [], coverage=0.9, min_coverage=0.9, sol_fallback=False)
    assert (at.status, at.rule) == ("applied", "min_coverage")
    below = decide(89, 11, [], coverage=0.89, min_coverage=0.9, sol_fallback=False)
    assert below.status == "partial"
    assert decide(4, 1, [], coverage=0.8, min_coverage=0.85, sol_fallback=False).status == "partial"


def test_exit_code_is_the_workloads_own_then_require_applied():
    assert exit_code_for("applied", 7, require_applied=True) == 7
    assert exit_code_for("partial", 143, require_applied=False) == 143
    assert exit_code_for("partial", 0, require_applied=True) == EXIT_NOT_VERIFIED
    assert exit_code_for("partial", 0, require_applied=False) == 0
    # A module whose coverage the checker cannot vouch for fails --require-applied too.
    assert exit_code_for("applied", 0, require_applied=True, coverage_unknown=1) == EXIT_NOT_VERIFIED
    assert exit_code_for("applied", 0, require_applied=True) == 0


def mod(name: str, status: str, coverage: float | None = None, missing: list[str] | None = None):
    return {"module": name, "status": status, "coverage": coverage, "fingerprint": None,
            "instructions_missing": len(missing or []), "missing_instructions": missing or [],
            "notes": []}


def test_not_applicable_ranks_are_not_absent():
    # Rank 1 ran on CPU (nothing to apply): rank 0's module is applied on every rank that could.
    status, modules, _ = judge_job({0: [mod("a", "applied", 1.0)], 1: []},
                                   {0: "applied", 1: "not_applicable"}, {1: ["backend cpu"]})
    assert status == "applied", modules
    assert modules[0]["absent_ranks"] == []
    # A rank that should have reported and did not is absent.
    status, modules, _ = judge_job({0: [mod("a", "applied", 1.0)], 1: []},
                                   {0: "applied", 1: "applied"}, {})
    assert modules[0]["absent_ranks"] == [1] and status != "applied"


def test_a_job_with_nothing_applied_is_not_applicable_only_if_every_rank_is():
    status, _, _ = judge_job({0: [], 1: []}, {0: "not_applicable", 1: "not_applied"},
                             {0: ["backend cpu"], 1: ["no profile read"]})
    assert status == "not_applied"
    status, _, _ = judge_job({0: [], 1: []}, {0: "not_applicable", 1: "not_applicable"}, {})
    assert status == "not_applicable"


def test_missing_names_across_ranks_stop_at_the_cap():
    names0 = [f"fusion.{i}" for i in range(40)]
    names1 = [f"fusion.{i}" for i in range(40, 80)]
    rows = aggregate_modules({0: [mod("a", "partial", 0.5, names0)],
                              1: [mod("a", "partial", 0.5, names1)]}, ok="applied", expected=[0, 1])
    assert MAX_MISSING_NAMES == 50
    assert rows[0]["missing_instructions"] == (names0 + names1)[:MAX_MISSING_NAMES]


def test_checker_silence_by_version_and_level():
    assert silence((0, 5, 1), None) == SILENCE_FULL  # the first jax whose WARN checker prints
    assert silence((0, 5, 0), None) == SILENCE_UNKNOWN
    assert silence((0, 5, 0), "ERROR") == SILENCE_FULL
    assert silence((0, 5, 0), "PGLE_STRICTNESS_LEVEL_ERROR") == SILENCE_FULL
    assert silence((0, 6, 0), "OFF") == SILENCE_OFF
    assert silence((0, 4, 35), None) == SILENCE_OFF
    assert silence((0, 4, 35), None, old_flag=True) == SILENCE_FULL


def test_checker_warnings_without_any_info_line_mean_the_info_log_was_hidden(project):
    # TF_CPP_MIN_LOG_LEVEL=1 hides XLA's INFO lines (which modules read the profile) but not the
    # checker's WARNING block: an error saying so, never "no profile read".
    full = checker_log(f"{project}/p.pb", 9, ["fusion.9"]).splitlines()
    (project / "run.log").write_text("\n".join(line for line in full if line.startswith("W")) + "\n")
    proc = run_pgle("verify", "run.log", "--json", cwd=project)
    report = report_of(proc)
    assert report["status"] == "error", report
    assert any("INFO log is hidden" in r and "accuracy checker ran on 1 module" in r
               for r in report["reasons"]), report["reasons"]


def test_a_module_missing_only_collectives_xla_made_synchronous_is_applied_by_that_rule():
    # Nothing a profile can hold is missing: applied by the converted rule (whatever
    # --min-coverage or the speed-of-light fallback say), coverage counting what a profile holds.
    sync = Split(converted=[("all-reduce-start.1", "all-reduce.1")], by="hlo")
    for sol in (False, True):
        d = decide(10, 1, ["all-reduce-start.1"], coverage=10 / 11, min_coverage=0.95,
                   sol_fallback=sol, sync=sync)
        assert (d.status, d.rule, d.coverage) == ("applied", RULE_CONVERTED, 1.0), d
