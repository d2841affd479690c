"""`pgle tune`: collect, then run with the profile; one verdict, with the step times of both."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from pgle.commands.collect import CollectOptions, collect
from pgle.jobs.driver import JobRun, QuietReport, literal
from pgle.report import Report
from pgle.commands.run import RunOptions, run
from pgle.launch.runfolder import RunFolder
from pgle.evidence.steps import step_times, summarize
from pgle.evidence.events import read_events
from pgle.verdicts.pgle_applied import GPU_PLATFORMS


@dataclasses.dataclass
class TuneOptions:
    collect: CollectOptions  # its job_dir / gather_timeout serve the whole tune job
    require_applied: bool = False
    min_coverage: float = 0.9
    html_report: str | None = None  # `--report X.html`: pgle report's page of this tune run


def tune(opts: TuneOptions, notify: Callable[[str], None] = lambda s: None,
         environ: dict[str, str] | None = None) -> Report:
    """One process: both phases, one report. One rank of a multi-process job: each phase is a
    job of its own (`<job_dir>/collect/`, `<job_dir>/run/`); rank 0 merges the ranks' profiles
    after phase 1, every rank reads rank 0's phase-1 job report to decide the same way, and
    rank 0 returns the job's report."""
    environ = dict(os.environ if environ is None else environ)
    if opts.html_report:  # refuse before an hour-long run, not after it
        from pgle.atomic import check_writable_target
        check_writable_target(opts.html_report, force=opts.collect.force, what="report")
    jr = JobRun.start("tune", environ, job_dir=opts.collect.job_dir,
                      gather_timeout_s=opts.collect.gather_timeout)
    say = jr.notifier(notify)
    top = RunFolder.create("tune", jr.run_dir(opts.collect.run_dir))
    copts = dataclasses.replace(opts.collect, run_dir=None)
    if copts.output is None and not jr.multiprocess:
        copts.output = literal(top.path / ("profiles" if copts.per_module else "profile.pb"))
    say("phase 1/2: collect")
    collect_job = jr.phase("collect", top.path / "collect")
    first = collect(copts, notify, environ, job=collect_job)
    job_first = first.to_dict() if jr.leader or not jr.multiprocess else \
        collect_job.wait_for_job_report()
    report = Report("tune", job_first.get("status"), run_dir=str(top.path),
                    log_path=job_first.get("log_path"), trace_dir=job_first.get("trace_dir"),
                    workload_exit_code=job_first.get("workload_exit_code"))
    report.details["phases"] = {"collect": job_first}
    report.warnings += job_first.get("warnings") or []
    platform = (job_first.get("backend") or {}).get("platform")
    gpu = platform is not None and platform.lower() in GPU_PLATFORMS
    usable = ("collected", "partial") if job_first.get("mode") == "merge" else ("collected",)
    if job_first.get("workload_exit_code") not in (0, None) or (
            job_first.get("status") not in usable and (gpu or job_first.get("status") != "empty")):
        report.status = "error"
        report.exit_code = job_first.get("exit_code") or 1
        report.reasons = job_first.get("reasons") or []
        report.summary += job_first.get("summary") or []
        return _rank_view(jr, report, first)
    profile_path = None
    if job_first.get("status") in usable:
        # Per-rank profiles (-o with %r): each rank runs with its own; else the job's profile.
        profile_path = copts.output if job_first.get("mode") == "per_rank" else \
            literal(job_first["profile"]["path"])
    if profile_path is None:
        say(f"phase 2/2: run without a profile: backend {platform} records none")
    else:
        say(f"phase 2/2: run with {jr.path(profile_path)}")
    second = run(RunOptions(copts.workload, profile_path, require_applied=opts.require_applied,
                            min_coverage=opts.min_coverage, log=None),
                 notify, environ, command="run", job=jr.phase("run", top.path / "run"))
    if jr.multiprocess and not jr.leader:
        return _rank_view(jr, report, second)
    report.details["phases"]["run"] = second.to_dict()
    report.status = second.status
    report.modules = second.modules
    report.profile = job_first.get("profile")
    report.log_path = second.log_path
    report.workload_exit_code = second.workload_exit_code
    report.exit_code = second.exit_code
    report.reasons = second.reasons
    report.warnings += second.warnings
    if profile_path is None:
        report.reasons.append("phase 1 could not produce a profile: "
                              + "; ".join(job_first.get("reasons") or []))
    report.details["step_times"] = times = compare_step_times(
        job_first, top.path / "collect", top.path / "run")
    report.summary += second.summary
    if times.get("ratio") is not None:
        report.summary.append(
            f"median step: {times['collect']['median_s'] * 1e3:.2f} ms without the profile, "
            f"{times['run']['median_s'] * 1e3:.2f} ms with it (ratio {times['ratio']:.3f})"
            if profile_path else
            f"median step: {times['collect']['median_s'] * 1e3:.2f} ms (collect), "
            f"{times['run']['median_s'] * 1e3:.2f} ms (run), ratio {times['ratio']:.3f}")
    if jr.multiprocess:
        report.details["job"] = {"dir": str(jr.job_dir), "world_size": jr.world_size,
                                 "phases": {"collect": str(jr.job_dir / "collect"),
                                            "run": str(jr.job_dir / "run")}}
        report.summary.append(f"step times are rank 0's; every rank's are in {jr.job_dir}/run/")
    if opts.html_report:
        from pgle.commands.report import ReportOptions, report as analyse

        page = analyse(ReportOptions([str(top.path)], opts.html_report, force=True))
        report.details["analysis"] = page.details["analysis"]
        report.summary += page.summary
    return report


def _rank_view(jr: JobRun, report: Report, phase: Report) -> Report:
    """A rank other than 0 prints one line: its own last phase's."""
    if not jr.multiprocess or jr.leader:
        return report
    line = phase.summary[0] if phase.summary else f"rank {jr.rank}: {phase.status}"
    code = report.exit_code if report.status == "error" else phase.exit_code
    quiet = QuietReport.of(phase, f"tune: {line}")
    quiet.exit_code = code
    quiet.full = {**(quiet.full or {}), "command": "tune", "exit_code": code}
    return quiet


def compare_step_times(first: dict, collect_dir, run_dir) -> dict:
    """Median and spread per phase (from the run folders' events); the collect phase leaves out
    its profiled steps."""
    window = first.get("window") or {}
    excluded = set()
    if window.get("first_step") is not None and window.get("steps"):
        excluded = set(range(window["first_step"], window["first_step"] + window["steps"]))
    out = {}
    for name, folder in (("collect", collect_dir), ("run", run_dir)):
        path = os.path.join(folder, "events.jsonl")
        events = read_events(path) if os.path.exists(path) else None
        out[name] = summarize(step_times(events.steps, excluded if name == "collect" else set())) \
            if events else None
    if out.get("collect") and out.get("run"):
        out["ratio"] = out["run"]["median_s"] / out["collect"]["median_s"]
    else:
        out["ratio"] = None
    return out
