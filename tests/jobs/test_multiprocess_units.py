"""The job driver (pgle.jobs.driver), the rank layout (pgle.jobs.layout) and the job verdicts
(pgle.verdicts.across_ranks), without a cluster: ranks simulated through PGLE_RANK /
PGLE_WORLD_SIZE and files written into a real job folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile
from pgle.cli import output as cli_output
from pgle.commands import collect_job as job_profile
from pgle.commands.collect import CollectOptions
from pgle.commands.nsys import parse_ranks, per_rank_options
from pgle.errors import BadInput
from pgle.jobs import driver
from pgle.jobs import folder as job
from pgle.jobs import layout
from pgle.jobs import ranks as jobrun
from pgle.jobs.layout import JobOptions, LayoutRequest, OutputRequest
from pgle.phrases import rank_ranges, ranks_phrase
from pgle.launch.workload import Workload
from pgle.report import Report
from pgle.verdicts.across_ranks import JobReports, aggregate_modules, combine_verdicts, judge_job


def env(rank: int, world: int = 2, **extra: str) -> dict[str, str]:
    return {"PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": str(world), "PGLE_JOB_ID": "j7", **extra}


def start(command, environ, job_dir=None, gather_timeout_s=None) -> driver.RankRun:
    """This process as one rank of a job, as pgle.jobs.driver.run starts it."""
    info = jobrun.detect(environ)
    job_opts = JobOptions(job_dir, gather_timeout_s)
    return driver.RankRun(command, info, layout.job_dir(info, job_opts), job_opts.gather_timeout_s)


def complete(rank_run, produce):
    """Run `produce(say)` as the workflow body (`say`: a notice, to pgle's logger); rank 0
    combines with run's verdict."""
    say = logging.getLogger("pgle.commands.run").info
    wf = driver.Workflow("run", lambda opts: LayoutRequest(),
                         lambda opts, lay, launch, environ: produce(say),
                         lambda opts, lay, job_reports: combine_verdicts(job_reports))
    return rank_run.run(wf, None, {})


def paths(environ, job_dir=None, **request):
    info = jobrun.detect(environ)
    return layout.resolve(LayoutRequest(**request), info,
                          layout.job_dir(info, JobOptions(job_dir)))


def mod(name, status, coverage=None, missing=None, fp=None):
    return {"module": name, "status": status, "coverage": coverage, "fingerprint": fp,
            "instructions_missing": missing, "missing_instructions": [], "notes": []}


def test_rank_ranges():
    assert rank_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert ranks_phrase([3]) == "rank 3" and ranks_phrase(range(4)) == "ranks 0-3"


def test_aggregate_per_module_across_ranks():
    rows = aggregate_modules({
        0: [mod("a", "applied", 1.0, 0), mod("b", "applied", 1.0, 0), mod("c", "applied", 1.0)],
        1: [mod("a", "partial", 0.25, 15), mod("b", "applied", 1.0, 0)],
        2: [mod("a", "applied", 1.0, 0), mod("b", "applied", 1.0, 0), mod("c", "applied", 1.0)],
    })
    a, b, c = rows
    assert (a["status"], a["ranks"], a["coverage"], a["instructions_missing"]) == \
        ("partial", {"applied": [0, 2], "partial": [1]}, 0.25, 15)
    assert a["ranks_summary"] == "applied on ranks 0, 2; partial on rank 1 (coverage 25%, 15 missing)"
    assert (b["status"], b["absent_ranks"]) == ("applied", [])
    # Applied wherever it was seen, but absent on rank 1: not applied on every rank.
    assert (c["status"], c["absent_ranks"]) == ("partial", [1])
    assert "no evidence for it on rank 1" in c["ranks_summary"]
    assert [r["rank"] for r in a["per_rank"]] == [0, 1, 2]


def test_aggregate_matches_recompiles_by_occurrence_and_fingerprint():
    rows = aggregate_modules({
        0: [mod("f", "applied"), mod("f", "not_applied"), mod(None, "applied", fp="a" * 32)],
        1: [mod("f", "applied"), mod("f", "not_applied"), mod(None, "applied", fp="a" * 32)],
    })
    assert [(r["module"], r["status"]) for r in rows] == \
        [("f", "applied"), ("f", "not_applied"), (None, "applied")]
    # Mixed statuses without the ok one: the most ranks' status.
    (row,) = aggregate_modules({0: [mod("g", "not_applied")], 1: [mod("g", "not_applied")],
                                2: [mod("g", "error")]})
    assert row["status"] == "not_applied"


def test_judge_job_statuses():
    st, modules, reasons = judge_job({0: [], 1: []}, {0: "not_applicable", 1: "not_applicable"},
                                     {0: ["backend cpu"], 1: ["backend cpu"]})
    assert (st, modules, reasons) == ("not_applicable", [], ["backend cpu"])
    st, _, reasons = judge_job({0: [mod("a", "applied")], 1: []}, {0: "applied", 1: "error"},
                               {1: ["XLA could not parse the profile"]})
    assert st == "error" and reasons == ["rank 1: XLA could not parse the profile"]
    st, _, reasons = judge_job({0: [mod("a", "applied")], 1: [mod("a", "applied")]},
                               {0: "applied", 1: "applied"}, {})
    assert st == "applied" and reasons[0].startswith("1 of 1 module applied the profile on every")


def _rank1_reports(jd: Path, status="partial", code=0, **details):
    info = jobrun.detect(env(1))
    job.mark_started(jd, info)
    job.mark_exit(jd, 1, code)
    rep = Report("run", status, workload_exit_code=code, modules=[mod("a", status, 0.5, 3)])
    rep.details.update(details)
    job.write_report(jd, 1, rep)


def test_rank_0_builds_the_job_report_and_writes_job_json(tmp_path):
    jr = start("run", env(0), job_dir=str(tmp_path / "job"), gather_timeout_s=5)
    _rank1_reports(jr.job_dir)
    out = complete(jr, lambda say: Report("run", "applied", workload_exit_code=0,
                                          modules=[mod("a", "applied", 1.0, 0)]))
    assert (out.status, out.exit_code) == ("partial", 0)
    assert out.modules[0]["ranks"] == {"applied": [0], "partial": [1]}
    assert json.loads((jr.job_dir / "job.json").read_text()) == json.loads(out.to_json())
    assert json.loads((jr.job_dir / "rank-0.json").read_text())["rank"]["rank"] == 0
    assert out.details["job"]["reported"] == [0, 1]


def test_a_rank_that_never_reports_makes_rank_0_exit_1(tmp_path):
    jr = start("run", env(0, world=3), job_dir=str(tmp_path / "job"), gather_timeout_s=0.3)
    _rank1_reports(jr.job_dir)
    out = complete(jr, lambda say: Report("run", "applied", workload_exit_code=0,
                                          modules=[mod("a", "applied", 1.0, 0)]))
    assert out.exit_code == 1
    assert out.details["job"]["missing"] == [{"rank": 2, "why": "never started"}]
    assert "rank 2 never reported: never started" in out.summary


def test_a_workload_failure_wins_and_names_the_first_failing_rank(tmp_path):
    jr = start("run", env(0), job_dir=str(tmp_path / "job"), gather_timeout_s=5)
    _rank1_reports(jr.job_dir, status="not_applied", code=7)
    out = complete(jr, lambda say: Report("run", "applied", workload_exit_code=0))
    assert (out.exit_code, out.workload_exit_code) == (7, 7)
    assert "rank 1 failed first, with exit code 7" in out.reasons[-1]


def test_rank_0_s_own_workload_failure_is_the_job_s(tmp_path):
    # Rank 0 builds the job report: its own workload's failure counts like any peer's.
    jr = start("run", env(0), job_dir=str(tmp_path / "job"), gather_timeout_s=5)
    _rank1_reports(jr.job_dir, status="applied")
    out = complete(jr, lambda say: Report("run", "applied", workload_exit_code=5,
                                          modules=[mod("a", "applied", 1.0, 0)]))
    assert (out.exit_code, out.workload_exit_code) == (5, 5)
    assert "rank 0 failed first, with exit code 5" in out.reasons[-1]


def test_a_pgle_error_on_a_rank_tells_its_peers_and_leaves_a_report(tmp_path):
    jr = start("run", env(1), job_dir=str(tmp_path / "job"), gather_timeout_s=5)

    def fail(say):
        raise BadInput("profile p.pb does not exist.")

    with pytest.raises(BadInput, match="^rank 1: profile p.pb does not exist."):
        complete(jr, fail)
    assert job.peer_failure(jr.job_dir, 0) == (1, 2)  # the others stop their workloads
    rep = json.loads((jr.job_dir / "rank-1.json").read_text())
    assert (rep["status"], rep["exit_code"], rep["pgle_error"]) == \
        ("error", 2, "profile p.pb does not exist.")



def test_pgle_failing_on_several_ranks_names_and_exits_with_the_lowest_rank_s_error(tmp_path):
    # Their workloads exited 0 (nothing in failed/), then pgle failed on ranks 3 and 2: the job
    # exits with rank order's first error and names it, whatever the others' codes.
    jr = start("run", env(0, world=4), job_dir=str(tmp_path / "job"), gather_timeout_s=5)
    for rank, code, status in ((1, 0, "applied"), (3, 4, "error"), (2, 2, "error")):
        job.mark_started(jr.job_dir, jobrun.detect(env(rank, world=4)))
        job.mark_exit(jr.job_dir, rank, 0)
        rep = Report("run", status, exit_code=code, workload_exit_code=0,
                     modules=[mod("a", "applied", 1.0, 0)])
        if code:
            rep.details["pgle_error"] = f"rank {rank}'s own error"
        job.write_report(jr.job_dir, rank, rep)
    out = complete(jr, lambda say: Report("run", "applied", workload_exit_code=0,
                                          modules=[mod("a", "applied", 1.0, 0)]))
    assert out.exit_code == 2
    assert "pgle failed on ranks 2-3 (rank 2: exit 2)" in out.summary, out.summary


def test_non_leaders_return_one_line_but_keep_the_full_report(tmp_path):
    jr = start("run", env(1), job_dir=str(tmp_path / "job"), gather_timeout_s=5)
    full = Report("run", "partial", warnings=["w"], summary=["verdict: partial", "  a: partial"],
                  modules=[mod("a", "partial", 0.5, 3)], workload_exit_code=0)

    def produce(say):
        say("running: ...")
        return full

    printed = []

    class Terminal(logging.Handler):  # what the CLI's handler would print
        def emit(self, record):
            printed.append(record.getMessage())

    logger = logging.getLogger("pgle")
    terminal = Terminal()
    logger.addHandler(terminal)
    logger.setLevel(logging.INFO)
    try:
        out = complete(jr, produce)
        assert terminal in logger.handlers  # the terminal again, once the rank's part is done
    finally:
        logger.removeHandler(terminal)
        logger.setLevel(logging.NOTSET)
    assert printed == []  # rank 1 prints nothing but its one line
    assert out.summary == [f"rank 1 of 2: partial (1 partial); exit 0; report "
                           f"{jr.job_dir / 'rank-1.json'}"]
    assert out.warnings == []
    data = json.loads(out.to_json())
    assert data["warnings"] == ["w"] and data["notices"] == ["running: ..."]
    assert data["summary"] == ["verdict: partial", "  a: partial"]


def test_paths_get_placeholders_and_shared_outputs_are_refused(tmp_path):
    jd = str(tmp_path / "job-%j-of-%n")
    jr = paths(env(1, world=4), jd)
    assert jr.job_dir.name == "job-j7-of-4"
    assert jr.run_dir == str(jr.job_dir / "rank-1")
    assert paths(env(1, world=4), jd, run_dir="runs/r{rank}").run_dir == "runs/r1"
    with pytest.raises(BadInput, match="--log x.log has no rank placeholder.*x-%r.log"):
        paths(env(1, world=4), jd, log="x.log")
    assert jobrun.literal("a%r{b}") == "a%%r{{b}}" and \
        paths(env(1, world=4), jd, inputs={"p": jobrun.literal("a%r{b}")}).inputs["p"] == "a%r{b}"
    single = paths({})
    assert single.job_dir is None and single.run_dir is None
    assert paths({}, log="x.log").log == "x.log"
    with pytest.raises(BadInput, match="negative"):
        JobOptions(gather_timeout=-1)
    assert cli_output.report_target("rep.json", env(1)) is None
    assert cli_output.report_target("rep-%r.json", env(1)) == "rep-1.json"
    assert cli_output.report_target("rep.json", env(0)) == "rep.json"
    assert cli_output.quiet_stdout_for_json(True, env(1)) and \
        not cli_output.quiet_stdout_for_json(True, env(0))


def test_collect_output_plans(tmp_path):
    def plan(rank, output, **kw):
        lay = paths(env(rank), str(tmp_path / "j"), output=OutputRequest(
            output, per_module=kw.get("per_module", False), only_rank=kw.get("only_rank")))
        return lay, lay.output

    jr, p = plan(1, "profile.pbtxt")
    assert (p.mode, p.rank_output, p.merged_output) == \
        ("merge", str(jr.job_dir / "profiles" / "rank-1.pbtxt"), "profile.pbtxt")
    assert plan(1, "p/rank%r.pb")[1].rank_output == "p/rank1.pb"
    _, p = plan(1, "profile.pb", only_rank=0)
    assert (p.mode, p.profiled, p.rank_output) == ("one_rank", False, None)
    jr, p = plan(0, "dir", per_module=True)
    assert p.rank_output == str(jr.job_dir / "profiles" / "rank-0") and p.merged_output == "dir"
    with pytest.raises(BadInput, match="--rank 2 is not a rank of this job"):
        plan(0, "profile.pb", only_rank=2)


def test_nsys_ranks_and_per_rank_reports():
    assert parse_ranks("0,8") == (0, 8) and parse_ranks("0-2,8") == (0, 1, 2, 8)
    with pytest.raises(BadInput):
        parse_ranks("x")
    assert per_rank_options(("-o", "r-%r", "-t", "cuda"), 3, 2) == ("-o", "r-3", "-t", "cuda")
    assert per_rank_options(("--output=r-{rank}",), 3, 2) == ("--output=r-3",)
    assert per_rank_options(("-o", "r-%q{SLURM_PROCID}"), 3, 2) == ("-o", "r-%q{SLURM_PROCID}")
    assert per_rank_options(("-o", "one"), 0, 1) == ("-o", "one")
    with pytest.raises(BadInput, match="would be written by all 2 profiled ranks"):
        per_rank_options(("-o", "one"), 0, 2)


def test_verify_of_a_labelled_log_names_the_ranks(project):
    lines = []
    for rank, (found, missing) in ((0, (40, 0)), (1, (5, 15)), (2, (40, 0))):
        pre = f"{rank}: 2026-11-22 04:33:12.000001: "
        lines += [f"{pre}I   4101 external/xla/xla/service/gpu/gpu_hlo_schedule.cc:538] "
                  "Using PGLE profile from /p.pb",
                  f"{pre}I   4101 external/xla/xla/service/gpu/gpu_hlo_schedule.cc:612] "
                  "Found profile for module jit_step, using profile guided latency estimator"]
        if missing:
            lines += [f"{pre}W   4101 external/xla/xla/service/gpu/"
                      f"profile_guided_latency_estimator.cc:301] Found {found} instructions from "
                      "the profile.",
                      f"{pre}W   4101 external/xla/xla/service/gpu/"
                      f"profile_guided_latency_estimator.cc:303] Missing {missing} instructions "
                      "from the profile."]
            lines += [f"{pre}W   4101 external/xla/xla/service/gpu/"
                      f"profile_guided_latency_estimator.cc:305]   fusion.{i}" for i in range(missing)]
    (project / "job.log").write_text("\n".join(lines) + "\n")
    # tsl-style prefixes: a jax before 0.7.2, without the SoL fallback (issue 22): the
    # coverage decides.
    proc = run_pgle("verify", "--json", "--require-applied", "--jax", "0.6.2", "job.log",
                    cwd=project)
    rep = report_of(proc)
    assert proc.returncode == 3 and rep["status"] == "partial"
    assert rep["ranks"] == [{"rank": 0, "status": "applied"}, {"rank": 1, "status": "partial"},
                            {"rank": 2, "status": "applied"}]
    (m,) = rep["modules"]
    assert m["ranks"] == {"applied": [0, 2], "partial": [1]} and m["coverage"] == 0.25
    assert "pgle:   jit_step: partial (applied on ranks 0, 2; partial on rank 1 (coverage 25%, " \
           "15 missing))" in pgle_lines(proc)


def test_bad_input_on_a_simulated_rank_is_one_line_and_marks_the_job(project):
    write_profile(project / "p.pb", {"fusion.0": 1.0})
    e = pgle_env(**env(1, PGLE_JOB_ID="j9"))
    proc = run_pgle("run", "--run-dir", "runs/x", "--profile", "p.pb",
                    str(WORKLOADS / "replay_xla_log.py"), cwd=project, env=e)
    assert proc.returncode == 2
    (line,) = pgle_lines(proc)
    assert line.startswith("pgle: error: rank 1: --run-dir runs/x has no rank placeholder")
    jd = project / ".pgle" / "jobs" / "j9"
    assert (jd / "failed" / "rank-1").is_file()
    proc = run_pgle("collect", "--rank", "5", str(WORKLOADS / "replay_xla_log.py"), cwd=project,
                    env=pgle_env(**env(0, PGLE_JOB_ID="j10")))
    assert proc.returncode == 2 and "--rank 5 is not a rank of this job" in proc.stderr.decode()


def test_rank_0_merges_per_module_directories(tmp_path):
    from pgle.profiles.files import Profile, load_profile_source, write_profile_directory

    jr = paths(env(0), str(tmp_path / "job"), output=OutputRequest(str(tmp_path / "merged"),
                                                                   per_module=True))
    fa, fb = "a" * 32, "b" * 32
    reports = {}
    for rank in (0, 1):
        mods = {fa: Profile(costs=[("fusion.0", 10.0 * (rank + 1))])}
        if rank == 0:
            mods[fb] = Profile(costs=[("fusion.9", 3.0)])
        d = write_profile_directory(mods, jr.job_dir / "profiles" / f"rank-{rank}")
        reports[rank] = {"status": "collected", "profile": {"path": str(d)},
                         "window": {"first_step": 2, "steps": 5},
                         "modules": [{"module": "jit_step", "fingerprint": fa, "status": "written"}]
                         + ([{"module": "jit_init", "fingerprint": fb, "status": "written"}]
                            if rank == 0 else [])}
    opts = CollectOptions(Workload(None, "m", ()), str(tmp_path / "merged"))
    out = job_profile.combine(opts, jr, JobReports("collect", 2, reports))
    assert out.status == "collected"
    merged = load_profile_source(tmp_path / "merged")
    assert dict(merged.modules[fa].costs) == {"fusion.0": 10.0}
    assert dict(merged.modules[fb].costs) == {"fusion.9": 3.0}
    rows = {m["module"]: m for m in out.modules}
    assert rows["jit_step"]["status"] == "written"
    assert (rows["jit_init"]["status"], rows["jit_init"]["absent_ranks"]) == ("partial", [1])
    assert json.loads((tmp_path / "merged" / "manifest.json").read_text())["merge"]["ranks"] == [0, 1]
