"""`pgle tune`: collect, then run with the profile; one verdict, with the step times of both."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from pgle.commands.collect import CollectOptions, profiling_flags
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
    repeat: int = 3  # baseline and profiled runs each (alternating), for a spread

    def __post_init__(self):
        if self.repeat < 1:
            from pgle.errors import BadInput
            raise BadInput(f"--repeat {self.repeat}: at least 1 run per phase.")
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
    notify("phase 1: collect")
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
    # Every later run gets collect's flags too (command buffers off unless the user chose):
    # the baseline and the profiled runs differ only in the profile.
    same = tuple(profiling_flags(environ).items())
    baselines, runs = [], []
    store = opts.collect.store
    serve = store is not None and (is_remote(store.path) or os.path.isdir(store.path))
    if serve:
        # The profiled runs serve what the store now holds: this collect's modules and others.
        shown = f"the store {store.path}"
        profiled = RunOptions(copts.workload, None, verdict=opts.verdict, xla=same,
                              store=dataclasses.replace(store, serve=True))
    elif profile_path is not None:
        shown = copts.output if job_first.get("mode") == "per_rank" else \
            job_first["profile"]["path"]
        profiled = RunOptions(copts.workload, profile_path, verdict=opts.verdict, xla=same)
    if not gpu or (profile_path is None and not serve):
        # No profile can apply here (no GPU): one run, and no baseline to compare it with.
        if serve or profile_path is not None:
            notify(f"phase 2/2: run with {shown}")
        else:
            notify(f"phase 2/2: run without a profile: backend {platform} records none")
            profiled = RunOptions(copts.workload, None, verdict=opts.verdict, xla=same)
        second = phase("run", run_workflow, profiled, str(top.path / "run")).own
        runs.append(top.path / "run")
    else:
        second = None
        # Alternating, so that drift (thermal, other jobs) falls on both sides alike.
        for i in range(opts.repeat):
            tag = f" {i + 1}/{opts.repeat}" if opts.repeat > 1 else ""
            notify(f"phase 2/3: baseline run{tag} (no profile, the same flags)")
            name = "baseline" if i == 0 else f"baseline-{i + 1}"
            base = phase(name, run_workflow,
                         RunOptions(copts.workload, None, verdict=opts.verdict, xla=same),
                         str(top.path / name)).own
            if base.workload_exit_code not in (0, None):
                second = base
                break
            baselines.append(top.path / name)
            notify(f"phase 3/3: run with {shown}{tag}")
            name = "run" if i == 0 else f"run-{i + 1}"
            own = phase(name, run_workflow, profiled, str(top.path / name)).own
            second = second or own
            runs.append(top.path / name)
            if own.workload_exit_code not in (0, None):
                second = own
                break
    report.details["phases"]["run"] = second.to_dict()
    report.status = second.status
    report.modules = second.modules
    report.profile = job_first.get("profile")
    report.log_path = second.log_path
    report.workload_exit_code = second.workload_exit_code
    report.exit_code = second.exit_code
    report.reasons = second.reasons
    report.warnings += [w for w in second.warnings if w not in report.warnings]
    if profile_path is None:
        report.reasons.append("phase 1 could not produce a profile: "
                              + "; ".join(job_first.get("reasons") or []))
    report.details["step_times"] = times = compare_step_times(
        job_first, top.path / "collect", baselines, runs, platform=platform)
    report.summary += second.summary
    report.summary += step_time_lines(times, profiled=profile_path is not None or serve)
    if opts.html_report:
        from pgle.commands.report import ReportOptions, report as analyse

        page = analyse(ReportOptions([str(top.path)], opts.html_report, force=True))
        report.details["analysis"] = page.details["analysis"]
        report.summary += page.summary
    return report


MIN_STEPS = 5  # per side: fewer step times give no ratio worth printing


def _phase_times(folder, exclude: set[int] = frozenset()) -> tuple[list[float], bool]:
    """(step times, whether the run had an events file) of one run folder."""
    path = os.path.join(folder, "events.jsonl")
    if not os.path.exists(path):
        return [], False
    return step_times(read_events(path).steps, exclude), True


def compare_step_times(first: dict, collect_dir, baseline_dirs, run_dirs, *,
                       platform: str | None) -> dict:
    """Median and spread per phase (from the run folders' events), and the ratio of the
    profiled runs over the baseline runs with a seeded bootstrap interval. collect's own steps
    are shown (its profiled steps left out) but never enter the ratio: its run had the
    profiler on. No ratio on a backend without profiles or from too few steps (`caveat`)."""
    from pgle.analysis.throughput import ratio_interval

    window = first.get("window") or {}
    excluded = set()
    if window.get("first_step") is not None and window.get("steps"):
        excluded = set(range(window["first_step"], window["first_step"] + window["steps"]))
    collect, _ = _phase_times(collect_dir, excluded)
    before = [t for d in baseline_dirs for t in _phase_times(d)[0]]
    after = [t for d in run_dirs for t in _phase_times(d)[0]]
    out = {"collect": summarize(collect), "baseline": summarize(before), "run": summarize(after),
           "runs": {"baseline": len(baseline_dirs), "run": len(run_dirs)},
           "ratio": None, "interval": None, "caveat": None}
    gpu = platform is not None and platform.lower() in GPU_PLATFORMS
    if not collect and not after:
        out["caveat"] = ("the workload marks no steps (jax.profiler.StepTraceAnnotation), so "
                         "there are no step times to compare")
    elif not gpu:
        out["caveat"] = (f"no step-time ratio: backend {platform} applies no profile, so both "
                         "phases ran the same program (and collect's ran with the profiler on)")
    elif not baseline_dirs:
        out["caveat"] = "no step-time ratio: there was no profile to run with"
    elif len(before) < MIN_STEPS or len(after) < MIN_STEPS:
        out["caveat"] = (f"no step-time ratio: {len(before)} baseline and {len(after)} profiled "
                         f"step time(s), fewer than {MIN_STEPS} each; run more steps or "
                         "--repeat more")
    else:
        ci = ratio_interval(before, after)
        out["ratio"], out["interval"] = ci["ratio"], ci
    return out


def step_time_lines(times: dict, *, profiled: bool) -> list[str]:
    def ms(side):
        return f"{times[side]['median_s'] * 1e3:.2f} ms" if times.get(side) else "-"

    if times.get("ratio") is not None:
        ci = times["interval"]
        noise = "beyond run-to-run noise" if ci["beyond_noise"] else "within run-to-run noise"
        return [f"median step: {ms('baseline')} without the profile, {ms('run')} with it "
                f"(ratio {ci['ratio']:.3f}, {ci['confidence']:.0%} interval {ci['low']:.3f}.."
                f"{ci['high']:.3f}, {noise}; {times['runs']['run']} run(s) each)"]
    lines = []
    if times.get("run") or times.get("collect"):
        lines.append(f"median step: {ms('collect')} (collect, profiled steps left out), "
                     f"{ms('run')} ({'with the profile' if profiled else 'run'})")
    if times.get("caveat"):
        lines.append(times["caveat"])
    return lines
