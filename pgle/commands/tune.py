"""`pgle tune`: collect, then run with the profile; one verdict, with the step times of both."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from pgle.commands.collect import CollectOptions
from pgle.commands.options import VerdictOptions
from pgle.commands.run import RunOptions
from pgle.evidence.events import read_events
from pgle.evidence.steps import step_times, summarize
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.jobs.ranks import literal
from pgle.launch.runfolder import RunFolder
from pgle.report import Report
from pgle.store.store import is_remote
from pgle.verdicts.pgle_applied import GPU_PLATFORMS

# Phase(name, workflow, options, run_root) -> result with .own (this process's report) and
# .job (the phase's job report, the same on every rank); given by pgle.jobs.driver.
Phase = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    collect: CollectOptions
    verdict: VerdictOptions = VerdictOptions()
    html_report: str | None = None  # `--report X.html`: pgle report's page of this tune run

    def __post_init__(self):
        if self.html_report:  # refuse before an hour-long run, not after it
            from pgle.atomic import check_writable_target
            check_writable_target(self.html_report, force=self.collect.force, what="report")


def request(opts: TuneOptions) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.collect.run_dir)


def body(opts: TuneOptions, layout: RankLayout, phase: Phase, notify: Callable[[str], None],
         environ: dict[str, str], *, collect_workflow, run_workflow) -> Report:
    """Both phases, one report. In a job each phase is a job of its own
    (`<job_dir>/collect/`, `<job_dir>/run/`): rank 0 merges the ranks' profiles after phase 1,
    and every rank decides phase 2 from that same phase-1 job report."""
    top = RunFolder.create("tune", layout.run_dir)
    copts = dataclasses.replace(opts.collect, run_dir=None, default_output=literal(
        top.path / ("profiles" if opts.collect.per_module else "profile.pb")))
    notify("phase 1/2: collect")
    first = phase("collect", collect_workflow, copts, str(top.path / "collect"))
    job_first = first.job
    report = Report("tune", job_first.get("status"), run_dir=str(top.path),
                    log_path=job_first.get("log_path"), trace_dir=job_first.get("trace_dir"),
                    workload_exit_code=job_first.get("workload_exit_code"))
    report.details["phases"] = {"collect": job_first}
    report.warnings += job_first.get("warnings") or []
    if (job_first.get("store") or {}).get("summary"):
        notify(job_first["store"]["summary"])  # what phase 1 added to the store
    platform = (job_first.get("backend") or {}).get("platform")
    gpu = platform is not None and platform.lower() in GPU_PLATFORMS
    usable = ("collected", "partial") if job_first.get("mode") == "merge" else ("collected",)
    if job_first.get("workload_exit_code") not in (0, None) or (
            job_first.get("status") not in usable and (gpu or job_first.get("status") != "empty")):
        report.status = "error"
        report.exit_code = job_first.get("exit_code") or 1
        report.reasons = job_first.get("reasons") or []
        report.summary += job_first.get("summary") or []
        return report
    profile_path = None
    if job_first.get("status") in usable:
        # Per-rank profiles (-o with %r): each rank runs with its own; else the job's profile.
        profile_path = copts.output if job_first.get("mode") == "per_rank" else \
            literal(job_first["profile"]["path"])
    store = opts.collect.store
    if store is not None and (is_remote(store.path) or os.path.isdir(store.path)):
        # The run phase serves what the store now holds: this collect's modules and others.
        notify(f"phase 2/2: run with the store {store.path}")
        run_opts = RunOptions(copts.workload, None, verdict=opts.verdict,
                              store=dataclasses.replace(store, serve=True))
    else:
        if profile_path is None:
            notify(f"phase 2/2: run without a profile: backend {platform} records none")
        else:
            shown = copts.output if job_first.get("mode") == "per_rank" else job_first["profile"]["path"]
            notify(f"phase 2/2: run with {shown}")
        run_opts = RunOptions(copts.workload, profile_path, verdict=opts.verdict)
    second = phase("run", run_workflow, run_opts, str(top.path / "run")).own
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
    if opts.html_report:
        from pgle.commands.report import ReportOptions, report as analyse

        page = analyse(ReportOptions([str(top.path)], opts.html_report, force=True))
        report.details["analysis"] = page.details["analysis"]
        report.summary += page.summary
    return report


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
