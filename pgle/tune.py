"""`pgle tune`: collect, then run with the profile; one verdict, with the step times of both."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from pgle.collect import CollectOptions, collect
from pgle.report import Report
from pgle.run import RunOptions, run
from pgle.runfolder import RunFolder
from pgle.steps import step_times, summarize
from pgle.events import read_events
from pgle.verdict import GPU_PLATFORMS


@dataclasses.dataclass
class TuneOptions:
    collect: CollectOptions
    require_applied: bool = False
    min_coverage: float = 0.9


def tune(opts: TuneOptions, notify: Callable[[str], None] = lambda s: None,
         environ: dict[str, str] | None = None) -> Report:
    environ = dict(os.environ if environ is None else environ)
    top = RunFolder.create("tune", opts.collect.run_dir)
    copts = dataclasses.replace(opts.collect, run_dir=str(top.path / "collect"))
    if copts.output is None:
        copts.output = str(top.path / ("profiles" if copts.per_module else "profile.pb"))
    notify("phase 1/2: collect")
    first = collect(copts, notify, environ)
    report = Report("tune", first.status, run_dir=str(top.path), log_path=first.log_path,
                    trace_dir=first.trace_dir, workload_exit_code=first.workload_exit_code)
    report.details["phases"] = {"collect": first.to_dict()}
    report.warnings += first.warnings
    platform = (first.details.get("backend") or {}).get("platform")
    gpu = platform is not None and platform.lower() in GPU_PLATFORMS
    if first.workload_exit_code not in (0, None) or (first.status != "collected" and
                                                     (gpu or first.status != "empty")):
        report.status = "error"
        report.exit_code = first.exit_code
        report.reasons = first.reasons
        report.summary += first.summary
        return report
    profile_path = copts.output if first.status == "collected" else None
    if profile_path is None:
        notify(f"phase 2/2: run without a profile: backend {platform} records none")
    else:
        notify(f"phase 2/2: run with {profile_path}")
    second = run(RunOptions(copts.workload, profile_path, require_applied=opts.require_applied,
                            min_coverage=opts.min_coverage, run_dir=str(top.path / "run"),
                            log=None), notify, environ, command="run")
    report.details["phases"]["run"] = second.to_dict()
    report.status = second.status
    report.modules = second.modules
    report.profile = first.profile
    report.log_path = second.log_path
    report.workload_exit_code = second.workload_exit_code
    report.exit_code = second.exit_code
    report.reasons = second.reasons
    report.warnings += second.warnings
    if profile_path is None:
        report.reasons.append(f"phase 1 could not produce a profile: {'; '.join(first.reasons)}")
    report.details["step_times"] = times = compare_step_times(first, second)
    report.summary += second.summary
    if times.get("ratio") is not None:
        report.summary.append(
            f"median step: {times['collect']['median_s'] * 1e3:.2f} ms without the profile, "
            f"{times['run']['median_s'] * 1e3:.2f} ms with it (ratio {times['ratio']:.3f})"
            if profile_path else
            f"median step: {times['collect']['median_s'] * 1e3:.2f} ms (collect), "
            f"{times['run']['median_s'] * 1e3:.2f} ms (run), ratio {times['ratio']:.3f}")
    return report


def compare_step_times(first: Report, second: Report) -> dict:
    """Median and spread per phase; the collect phase leaves out its profiled steps."""
    window = first.details.get("window") or {}
    excluded = set()
    if window.get("first_step") is not None and window.get("steps"):
        excluded = set(range(window["first_step"], window["first_step"] + window["steps"]))
    out = {}
    for name, rep in (("collect", first), ("run", second)):
        events = read_events(os.path.join(rep.run_dir, "events.jsonl")) if rep.run_dir else None
        out[name] = summarize(step_times(events.steps, excluded if name == "collect" else set())) \
            if events else None
    if out.get("collect") and out.get("run"):
        out["ratio"] = out["run"]["median_s"] / out["collect"]["median_s"]
    else:
        out["ratio"] = None
    return out
