"""The job verdict across ranks, in process (issue 37; pgle/verdicts/across_ranks.py): what
rank 0 makes of every rank's report of `pgle run` (each rank's rows judged from its own XLA log
by pgle.verdicts.pgle_applied, as the rank wrote them) and of `auto` / `prewarm` / `nsys`. The
job tests (tests/jobs) run the ranks in subprocesses, which mutmut does not map.
"""

from __future__ import annotations

import io

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.jax_log import ModuleFacts, RunFacts
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts import auto_pgle as ap
from pgle.verdicts.across_ranks import JobReports, ModuleRule, combine_modules, combine_verdicts
from pgle.verdicts.pgle_applied import judge

S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"


def _line(rank: int, sev: str, file: str, msg: str) -> str:
    return f"{rank}: {sev}0822 12:34:56.789012  7 {file}:538] {msg}"  # srun --label's prefix


def _module(rank: int, name: str, missing: tuple[str, ...] = (), missed: int = 0) -> list[str]:
    out = [_line(rank, "I", S, f"Found profile for module {name}, using profile guided latency "
                               "estimator"),
           _line(rank, "W", P, "Found 3 instructions from the profile.")]
    out += [_line(rank, "I", P, f"PGLE missed cost for: fusion.{i}") for i in range(missed)]
    if missing:
        out.append(_line(rank, "W", P, f"Missing {len(missing)} instructions from the profile."))
        out += [_line(rank, "W", P, f"  {n}") for n in missing]
    return out


def _rank_report(rank: int, *modules: tuple) -> dict:
    """A rank's `pgle run` report: its verdict from its own log, and what the run adds."""
    lines = [_line(rank, "I", S, "Using PGLE profile from /p.pb")]
    for m in modules:
        lines += _module(rank, *m)
    v = judge(LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode())))
    return {"command": "tune", "status": v.status, "modules": v.modules, "reasons": v.reasons,
            "profile": {"path": "/p.pb"}, "log_path": f"/job/rank{rank}/log",
            "workload_exit_code": 0, "step_times": {"median_ms": 10.0 + rank},
            "backend": {"platform": "gpu", "rank": rank}}


def _missed(n: int) -> str:
    return f"XLA's estimator found no cost for {n} instruction{'s' * (n > 1)} ('PGLE missed cost for')"


HEAD = ("1 of 2 modules applied the profile on every rank that reported (ranks 0-2), 1 partially "
        "(1 on some ranks only).")
JIT_B = "partial on ranks 0-1 (coverage down to 50%, 3 missing); no evidence for it on rank 2"


def test_the_job_verdict_of_pgle_run():
    reports = {0: _rank_report(0, ("jit_a",), ("jit_b", ("fusion.7",), 1)),
               1: _rank_report(1, ("jit_a",), ("jit_b", ("f.1", "f.2", "f.3"), 2)),
               2: _rank_report(2, ("jit_a",))}
    rep = combine_verdicts(JobReports("run", 3, reports), require_applied=True)
    assert (rep.command, rep.status, rep.exit_code) == ("tune", "partial", EXIT_NOT_VERIFIED)
    assert (rep.profile, rep.log_path, rep.workload_exit_code) == (
        {"path": "/p.pb"}, "/job/rank0/log", 0)
    assert rep.details == {"step_times": {0: {"median_ms": 10.0}, 1: {"median_ms": 11.0},
                                          2: {"median_ms": 12.0}},
                           "backend": {"platform": "gpu", "rank": 0}}
    assert rep.reasons == [HEAD, f"jit_b: {JIT_B}."]
    assert rep.summary == [
        f"job verdict: partial: {HEAD}",
        "  jit_a: applied on ranks 0-2",
        f"  jit_b: partial ({JIT_B}): {_missed(1)}",  # the row's first note
        "--require-applied: the job's status is partial, not applied",
    ]
    a, b = rep.modules
    assert (a["status"], a["rank"], a["ranks"], a["absent_ranks"], a["per_rank"]) == (
        "applied", None, {"applied": [0, 1, 2]}, [], [])
    assert (a["coverage"], a["instructions_missing"], a["notes"]) == (1.0, 0, [])
    # jit_b: rank 0's row (the first not applied), the worst figures of all ranks (rank 1's),
    # every rank's missing instructions and notes.
    assert (b["status"], b["rank"], b["ranks"], b["absent_ranks"]) == (
        "partial", None, {"partial": [0, 1]}, [2])
    assert (b["coverage"], b["instructions_missing"], b["rule"]) == (0.5, 3, "min_coverage")
    assert b["missing_instructions"] == ["fusion.7", "f.1", "f.2", "f.3"]
    assert b["notes"] == [_missed(1), _missed(2)]
    assert b["ranks_summary"] == JIT_B
    assert b["per_rank"] == [
        {"rank": 0, "status": "partial", "coverage": 0.75, "instructions_missing": 1},
        {"rank": 1, "status": "partial", "coverage": 0.5, "instructions_missing": 3}]
    # Without --require-applied: exit 0, no such line.
    rep = combine_verdicts(JobReports("run", 3, reports))
    assert rep.exit_code == 0 and rep.summary[-1] == f"  jit_b: partial ({JIT_B}): {_missed(1)}"


def test_one_coverage_on_the_ranks_is_said_as_is():
    reports = {0: _rank_report(0, ("jit_b", ("fusion.7",))), 1: _rank_report(1, ("jit_b",))}
    (row,) = combine_verdicts(JobReports("run", 2, reports)).modules
    assert row["ranks_summary"] == "partial on rank 0 (coverage 75%, 1 missing); applied on rank 1"


def test_every_rank_applied_and_one_not_at_all():
    reports = {r: _rank_report(r, ("jit_a",)) for r in (0, 1)}
    rep = combine_verdicts(JobReports("run", 2, reports), require_applied=True)
    assert (rep.status, rep.exit_code) == ("applied", 0)
    assert rep.reasons == ["1 of 1 module applied the profile on every rank that reported "
                           "(ranks 0-1)."]
    # A module on rank 1 only, not applied there (a missing profile file): counted apart.
    reports[1]["modules"] = reports[1]["modules"] + [
        dict(reports[1]["modules"][0], module="jit_c", status="not_applied", coverage=None)]
    rep = combine_verdicts(JobReports("run", 2, reports))
    assert rep.status == "partial"
    assert rep.reasons == [
        "1 of 2 modules applied the profile on every rank that reported (ranks 0-1), 1 not at "
        "all.", "jit_c: not_applied on rank 1; no evidence for it on rank 0."]
    assert rep.modules[1]["status"] == "not_applied"  # seen nowhere applied: not partial


def test_ranks_that_failed_or_judged_nothing():
    ok = _rank_report(2, ("jit_a",))
    errors = {0: {"status": "error", "reasons": ["boom"], "modules": []},
              1: {"status": "error", "reasons": ["boom", "only on 1"]}, 2: ok}
    rep = combine_verdicts(JobReports("run", 3, errors))
    assert (rep.command, rep.status) == ("run", "error")  # rank 0 named no command
    assert rep.reasons == ["ranks 0-1: boom", "rank 1: only on 1"]
    assert rep.summary == ["job verdict: error: ranks 0-1: boom",
                           "  jit_a: partial (applied on rank 2; no evidence for it on ranks 0-1)"]
    both = {0: {"status": "error", "reasons": ["boom"]}, 1: {"status": "error", "reasons": ["boom"]}}
    assert combine_verdicts(JobReports("run", 2, both)).reasons == ["boom"]
    cpu = {0: {"status": "not_applicable", "reasons": ["cpu"]},
           1: {"status": "not_applicable", "reasons": ["cpu", "more"]}}
    rep = combine_verdicts(JobReports("run", 2, cpu))
    assert (rep.status, rep.reasons, rep.summary) == (
        "not_applicable", ["cpu", "rank 1: more"], ["job verdict: not_applicable: cpu"])
    cpu[1]["status"] = "not_applied"
    assert combine_verdicts(JobReports("run", 2, cpu)).status == "not_applied"


AUTO = ModuleRule("optimized", ap.auto_status, "auto PGLE", "optimized", keep=("cache",))


def _auto_report(rank: int, *mods: ModuleFacts, command: str = "tune") -> dict:
    rows = [r.to_dict() for r in ap.auto_rows(RunFacts({m.module: m for m in mods}, observed=True), 2, "gpu")]
    return {"command": command, "modules": rows, "reasons": [], "backend": {"rank": rank}}


def test_the_job_verdict_of_auto_across_ranks():
    # jit_a: optimized on rank 0, not on rank 1 (partial); jit_b: not optimized where seen
    # (ranks 0-1, absent on 2): the status most ranks gave, never partial; jit_c: one rank
    # each of two causes: the lowest rank's; jit_d: the cause two ranks gave.
    few, empty = ModuleFacts("jit_c", profiled=1), ModuleFacts("jit_c", profiled=2, empty_profiles=2)
    reports = {
        0: _auto_report(0, ModuleFacts("jit_a", profiled=2, fdo_lengths=[50]),
                        ModuleFacts("jit_b", profiled=1), few, ModuleFacts("jit_d", profiled=1)),
        1: _auto_report(1, ModuleFacts("jit_a", profiled=2), ModuleFacts("jit_b", profiled=1),
                        empty, ModuleFacts("jit_d", profiled=2, empty_profiles=2)),
        2: _auto_report(2, ModuleFacts("jit_d", profiled=2, empty_profiles=2)),
    }
    rep = combine_modules(JobReports("auto", 3, reports), AUTO, False, ())
    assert (rep.command, rep.status, rep.exit_code) == ("tune", "partial", 0)
    rows = {m["module"]: m for m in rep.modules}
    a = rows["jit_a"]
    assert (a["status"], a["reason"], a["profile_bytes"], a["rank"]) == (
        "partial", "profiled 2 times but never executed again: auto PGLE recompiles on "
        "execution 3", None, None)  # rank 1's row: the rank it was not optimized on
    assert (rows["jit_b"]["status"], rows["jit_b"]["absent_ranks"]) == ("not_optimized", [2])
    assert (rows["jit_c"]["status"], rows["jit_c"]["ranks"]) == (
        "not_optimized", {"not_optimized": [0], "empty_profile": [1]})
    assert rows["jit_d"]["status"] == "empty_profile"
    # Each rank's own figures where the ranks disagree.
    assert rows["jit_d"]["per_rank"] == [
        {"rank": 0, "status": "not_optimized", "reason": "executed 1 time; auto PGLE needs 3 (2 "
         "profiled, then the recompile)"}] + [
        {"rank": r, "status": "empty_profile", "reason": "all 2 profiled executions gave an "
         f"empty profile: {ap.empty_profile_cause('gpu')}"} for r in (1, 2)]
    head = "0 of 4 modules optimized on every rank that reported (ranks 0-2); 4 on some ranks only"
    assert rep.reasons[0] == head + "."
    assert rep.summary[0] == f"auto PGLE: partial: {head}"
    # The module lines judge `ok` as the workflow's: jit_b and jit_c, executed once on the
    # rank whose row they keep and not optimized, share the one-shot line.
    # The rows keep the worst rank's figures: rank 0 executed jit_b, jit_c and jit_d once.
    assert rep.summary[-1] == (
        "  3 modules executed only once (not_optimized, empty_profile; one-shot code such as "
        "setup or eval, which auto PGLE never re-optimizes): jit_b, jit_c, jit_d")
    # A module optimized on every rank, one rank seeing two of them: mixed, not partial.
    same = {r: _auto_report(r, ModuleFacts("jit_a", profiled=2, fdo_lengths=[5]))
            for r in (0, 1)}
    rep = combine_modules(JobReports("auto", 2, same), AUTO, False, ())
    assert rep.reasons == ["1 of 1 modules optimized on every rank that reported (ranks 0-1)."]
    assert rep.summary[1:] == [
        "  jit_a: optimized on ranks 0-1 (recompiled with a 5-byte profile after 2 profiled "
        "executions)"]


NSYS = ModuleRule("loaded_optimized", ap.nsys_status, "nsys", "loaded PGLE-optimized")


def test_the_job_verdict_of_nsys_across_ranks():
    # Both modules loaded the PGLE-optimized executable an earlier prewarm wrote; the latest
    # prewarm saw each execute once. Loaded is the workflow's `ok`: no one-shot line.
    manifest = {"modules": {m: {"status": "not_optimized", "executions_seen": 1}
                            for m in ("jit_a", "jit_b")}}
    facts = RunFacts({m: ModuleFacts(m, pgle_loaded=True) for m in ("jit_a", "jit_b")},
                     observed=True)
    reports = {r: {"command": "nsys", "modules": ap.nsys_modules(facts, manifest)}
               for r in (0, 1)}
    rep = combine_modules(JobReports("nsys", 2, reports), NSYS, True, ())
    assert (rep.status, rep.exit_code) == ("loaded_optimized", 0)
    assert rep.summary == [
        "nsys: loaded_optimized: 2 of 2 modules loaded PGLE-optimized on every rank that "
        "reported (ranks 0-1)",
        "  jit_a, jit_b: loaded_optimized on ranks 0-1 (loaded its PGLE-optimized executable)"]


def test_a_coverage_without_a_missing_count_invents_none():
    # A rank's report whose rows give a coverage but no count (the count is optional in a
    # rank's report; pgle.jobs.rank_data): the line says the coverage alone.
    reports = {r: {"status": "partial", "modules": [
        {"module": "jit_a", "status": "partial", "coverage": 0.5, "instructions_missing": None}]}
        for r in (0, 1)}
    (row,) = combine_verdicts(JobReports("run", 2, reports)).modules
    assert row["ranks_summary"] == "partial on ranks 0-1 (coverage 50%)"
