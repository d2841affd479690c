"""`pgle tune`: collect, then run with the profile; one verdict, with the step times of both.

Phase 1 collects the profile (the profiler on, command buffers off: the only phase that
changes the user's setup). Then the arms run (pgle.commands.arms): plain tune alternates
baseline runs (no profile) and runs with the profile, `--repeat` each, with the user's own
flags; `--compare default,o1,pgle,o1+pgle` runs each named arm instead, alternating. The first
run of each arm keeps a short trace (the collect window), whose steps are left out of the
timing: the before/after picture of `pgle report`. tune.json in the tune folder holds what
was compared, so `pgle report` shows the same numbers.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pgle.atomic import write_text_atomic
from pgle.commands import arms
from pgle.commands.arms import Arm
from pgle.commands.collect import CollectOptions, profiling_flags
from pgle.commands.options import VerdictOptions
from pgle.commands.run import RunOptions
from pgle.errors import PgleError
from pgle.jobs.driver import PhaseResult, Workflow
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.jobs.ranks import literal
from pgle.launch.runfolder import RunFolder
from pgle.report import Report
from pgle.store.store import is_remote
from pgle.verdicts.pgle_applied import GPU_PLATFORMS

log = logging.getLogger(__name__)

# Phase(name, workflow, options, run_root) -> .own (this process's report) and .job (the
# phase's job report, the same on every rank); given by pgle.jobs.driver.
Phase = Callable[[str, Workflow, Any, str], PhaseResult]
APPLIED = ("applied", "partial")


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    collect: CollectOptions
    verdict: VerdictOptions = dataclasses.field(default_factory=VerdictOptions)
    html_report: str | None = None  # `--report X.html`: pgle report's page of this tune run
    repeat: int = 3  # runs of each arm (alternating), for a spread
    compare: tuple[Arm, ...] = ()  # `--compare`: the arms; () is plain tune (default vs pgle)
    predict: bool = False  # `--predict`: pgle estimate's ratio beside each measured one

    def __post_init__(self) -> None:
        from pgle.errors import BadInput

        if self.repeat < 1:
            raise BadInput(f"--repeat {self.repeat}: at least 1 run per phase.")
        if self.predict and not self.compare:
            raise BadInput(
                "--predict needs --compare: it predicts each compared arm's ratio "
                "(e.g. --compare default,o1,sol,pgle --predict)."
            )
        if self.html_report:  # refuse before an hour-long run, not after it
            from pgle.atomic import check_writable_target

            check_writable_target(self.html_report, force=self.collect.force, what="report")


def request(opts: TuneOptions) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.collect.run_dir)


@dataclasses.dataclass
class ArmRuns:
    arm: Arm
    folders: list[Path] = dataclasses.field(default_factory=list)
    reports: list[Report] = dataclasses.field(default_factory=list)
    profile: str | None = None  # what XLA was given (None: no profile)


@dataclasses.dataclass(frozen=True)
class CollectPhase:
    """Phase 1 as tune reads it: the collect job's report (the same on every rank), read once.
    `job` is that report as it was written: what `to_dict` gives the tune report's
    `phases.collect`, unchanged."""

    job: Mapping[str, Any]
    status: str
    exit_code: int
    workload_exit_code: int | None
    mode: str | None  # merge | per_rank (a job's profiles), None in one process
    platform: str | None  # the backend the workload ran on
    profile: Mapping[str, Any] | None  # the report's profile record
    profile_written: str | None  # where the job's profile is (`profile.path`)
    log_path: str | None
    trace_dir: str | None
    store_summary: str | None  # what phase 1 added to the store
    warnings: tuple[str, ...]
    reasons: tuple[str, ...]
    summary: tuple[str, ...]

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> CollectPhase:
        profile = job.get("profile")
        return cls(
            job=job,
            status=str(job.get("status") or "error"),
            exit_code=job.get("exit_code") or 1,
            workload_exit_code=job.get("workload_exit_code"),
            mode=job.get("mode"),
            platform=(job.get("backend") or {}).get("platform"),
            profile=profile,
            profile_written=(profile or {}).get("path"),
            log_path=job.get("log_path"),
            trace_dir=job.get("trace_dir"),
            store_summary=(job.get("store") or {}).get("summary"),
            warnings=tuple(job.get("warnings") or ()),
            reasons=tuple(job.get("reasons") or ()),
            summary=tuple(job.get("summary") or ()),
        )

    @property
    def gpu(self) -> bool:
        return self.platform is not None and self.platform.lower() in GPU_PLATFORMS

    @property
    def made_profile(self) -> bool:
        """A profile the later phases can use: collected (a merged job's partial one too)."""
        return self.status in (("collected", "partial") if self.mode == "merge" else ("collected",))

    @property
    def failed(self) -> bool:
        """The workload failed, or no profile where one was due (an empty one is expected
        only off a GPU)."""
        return self.workload_exit_code not in (0, None) or (
            not self.made_profile and (self.gpu or self.status != "empty")
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.job)


def body(
    opts: TuneOptions,
    layout: RankLayout,
    phase: Phase,
    environ: dict[str, str],
    *,
    collect_workflow: Workflow,
    run_workflow: Workflow,
) -> Report:
    """Collect, then the arms, one report. In a job each phase is a job of its own
    (`<job_dir>/collect/`, `<job_dir>/run/`, ...): rank 0 merges the ranks' profiles after
    phase 1, and every rank decides the later phases from that same phase-1 job report."""
    top = RunFolder.create("tune", layout.run_dir)
    copts = dataclasses.replace(
        opts.collect,
        run_dir=None,
        default_output=literal(
            top.path / ("profiles" if opts.collect.per_module else "profile.pb")
        ),
    )
    log.info("phase 1: collect")
    first = CollectPhase.from_job(
        phase("collect", collect_workflow, copts, str(top.path / "collect")).job
    )
    report = Report(
        "tune",
        first.status,
        run_dir=str(top.path),
        log_path=first.log_path,
        trace_dir=first.trace_dir,
        workload_exit_code=first.workload_exit_code,
    )
    report.details["phases"] = {"collect": first.to_dict()}
    report.warnings += list(first.warnings)
    if first.store_summary:
        log.info(first.store_summary)  # what phase 1 added to the store
    platform, gpu = first.platform, first.gpu
    if first.failed:
        report.status = "error"
        report.exit_code = first.exit_code
        report.reasons = list(first.reasons)
        report.summary += list(first.summary)
        return report
    profile_path = None
    if first.made_profile:
        # Per-rank profiles (-o with %r): each rank runs with its own; else the job's profile.
        profile_path = (
            copts.output if first.mode == "per_rank" else literal(first.profile_written or "")
        )
    never = set(first.job.get("flags_never_reached_xla") or ())
    changed = arms.collect_changes(
        {k: v for k, v in profiling_flags(environ).items() if k not in never}
    )
    report.details["collect_changed"] = changed
    store = opts.collect.store
    serve = store is not None and (is_remote(store.path) or os.path.isdir(store.path))
    shown = None
    if serve and store is not None:
        # The runs with a profile serve what the store now holds: this collect's modules and others.
        shown = f"the store {store.path}"
    elif profile_path is not None:
        shown = copts.output if first.mode == "per_rank" else first.profile_written
    has_profile = serve or profile_path is not None

    def options(arm: Arm, traced: bool) -> RunOptions:
        # Only what the arm's name says differs from the user's own setup (no collect flags).
        with_profile = arm.pgle and has_profile
        return RunOptions(
            copts.workload,
            profile_path if with_profile and not serve else None,
            verdict=opts.verdict,
            xla=tuple(arm.xla.items()),
            env=tuple(arm.variables.items()),
            store=dataclasses.replace(store, serve=True)
            if with_profile and serve and store is not None
            else None,
            trace_window=copts.window if traced else None,
        )

    plain = not opts.compare
    predicted = None
    if opts.predict:
        from pgle.commands.compare import predict

        log.info("predicting each arm with pgle estimate (XLA:GPU deviceless, on CPU)")
        backend = first.job.get("backend") or {}
        predicted = predict(
            opts.compare,
            workload=copts.workload,
            profile=profile_path if gpu and first.mode != "per_rank" else None,
            device_kind=backend.get("device_kind") if gpu else None,
            device_count=backend.get("device_count"),
            run_dir=top.path / "predict",
            in_job=layout.job_dir is not None,
        )
        from pgle.commands.compare import predicted_line

        log.info(predicted_line(predicted))
    runs: list[ArmRuns] = []
    stopped = None
    if plain and not (gpu and has_profile):
        # No profile can apply here (no GPU, or none was made): one run, no baseline.
        arm = arms.PLAIN[1]
        if has_profile:
            log.info(f"phase 2/2: run with {shown}")
        else:
            log.info(f"phase 2/2: run without a profile: backend {platform} records none")
        own = phase("run", run_workflow, options(arm, True), str(top.path / "run")).own
        runs = [ArmRuns(arm, [top.path / "run"], [own], shown if has_profile else None)]
    else:
        plan = arms.PLAIN if plain else opts.compare
        runs = [ArmRuns(a, profile=shown if a.pgle and has_profile else None) for a in plan]
        if not plain:
            log.info(
                "arms: "
                + "; ".join(f"{a.name}: {a.describe()}" for a in plan)
                + (
                    ""
                    if has_profile
                    else f" (backend {platform} records no profile: the pgle arms run without one)"
                )
            )
        total = len(plan) * opts.repeat
        k = 0
        # Alternating, so that drift (thermal, other jobs) falls on every arm alike.
        for i in range(opts.repeat):
            for entry in runs:
                k += 1
                name = entry.arm.folder(plain, i)
                tag = f" {i + 1}/{opts.repeat}" if opts.repeat > 1 else ""
                if plain:
                    log.info(
                        f"phase {2 if entry.arm.name == 'default' else 3}/3: "
                        + (
                            f"baseline run{tag} (no profile, your flags)"
                            if entry.arm.name == "default"
                            else f"run with {shown}{tag}"
                        )
                    )
                else:
                    log.info(f"run {k}/{total}: arm {entry.arm.name}{tag}")
                own = phase(
                    name, run_workflow, options(entry.arm, i == 0), str(top.path / name)
                ).own
                entry.folders.append(top.path / name)
                entry.reports.append(own)
                if own.workload_exit_code not in (0, None):
                    stopped = own
                    break
            if stopped is not None:
                break
    # The verdict: of the first run with a profile (else the last run of any arm).
    lead = next((e for e in runs if e.arm.pgle and e.reports), None) or next(
        e for e in reversed(runs) if e.reports
    )
    second = stopped or lead.reports[0]
    report.details["phases"]["run"] = second.to_dict()
    report.status = second.status
    report.modules = second.modules
    report.profile = dict(first.profile) if first.profile is not None else None
    report.log_path = second.log_path
    report.workload_exit_code = second.workload_exit_code
    report.exit_code = second.exit_code
    report.reasons = second.reasons
    report.warnings += [w for w in second.warnings if w not in report.warnings]
    if profile_path is None and not serve:
        report.reasons.append("phase 1 could not produce a profile: " + "; ".join(first.reasons))
    report.summary += second.summary
    applied = report.status in APPLIED
    if plain:
        base = next((e for e in runs if e.arm.name == "default"), None)
        withp = next((e for e in runs if e.arm.pgle), None)
        report.details["step_times"] = times = arms.compare_step_times(
            top.path / "collect",
            base.folders if base else [],
            withp.folders if withp else [],
            platform=platform,
            applied=applied,
        )
        # Off a GPU no profile applies (a store's serve included): the run is a plain run.
        report.summary += arms.step_time_lines(times, profiled=has_profile and gpu)
    else:
        from pgle.commands.compare import table, table_lines

        report.details["compare"] = table(runs, platform=platform, predicted=predicted)
        report.details["step_times"] = {
            "arms": {r["arm"]: r["step_time"] for r in report.details["compare"]["arms"]},
            "steps": report.details["compare"]["steps"],
            "caveat": report.details["compare"]["caveat"],
        }
        report.summary += table_lines(report.details["compare"])
        if predicted is not None and store is not None and layout.writes_shared:
            _keep_calibration(report, first, store.path)
    report.summary.append("collect changed: " + "; ".join(changed))
    write_tune_json(top.path, opts, runs, report, platform, changed)
    if opts.html_report:
        import pgle.commands.report  # `report` is this function's Report

        page = pgle.commands.report.report(
            pgle.commands.report.ReportOptions([str(top.path)], opts.html_report, force=True)
        )
        report.details["analysis"] = page.details["analysis"]
        report.summary += page.summary[-1:]  # "report written to ..."
    return report


def write_tune_json(
    top: Path,
    opts: TuneOptions,
    runs: list[ArmRuns],
    report: Report,
    platform: str | None,
    changed: list[str],
) -> None:
    """What tune compared, for `pgle report` (which shows the same verdict and numbers)."""
    import json

    doc = {
        "plain": not opts.compare,
        "platform": platform,
        "repeat": opts.repeat,
        "collect": {"folder": "collect", "changed": changed},
        "arms": [
            {
                "name": e.arm.name,
                "describe": e.arm.describe(),
                "pgle": e.arm.pgle,
                "xla": e.arm.xla,
                "variables": e.arm.variables,
                "profile": e.profile,
                "folders": [f.name for f in e.folders],
                "statuses": [r.status for r in e.reports],
            }
            for e in runs
        ],
        "verdict": {
            "status": report.status,
            "reasons": report.reasons,
            "exit_code": report.exit_code,
        },
        "step_times": report.details.get("step_times"),
        "compare": report.details.get("compare"),
        "modules": report.modules,
    }
    write_text_atomic(top / arms.TUNE_JSON, json.dumps(doc, indent=1, default=str) + "\n")


def _keep_calibration(report: Report, first: CollectPhase, store_path: str) -> None:
    """`--predict --store`: next to the step module's entry that this collect added, the
    predicted and measured ratio of every arm (pgle.store.calibration), so predictions can be
    checked per platform. Nothing when this collect stored no entry for the step module."""
    from pgle.store.calibration import Calibration
    from pgle.store.store import ProfileStore
    from pgle.version import __version__

    t = report.details["compare"]
    pred = t.get("predicted") or {}
    module = (t.get("steps") or {}).get("module") or pred.get("step_module")
    stored = (first.job.get("store") or {}).get("modules") or []
    row = next((r for r in stored if r.get("entry") and r.get("module") == module), None)
    key = (first.job.get("store") or {}).get("key") or {}
    if row is None or pred.get("why"):
        return
    now = Calibration.now()
    records = [
        Calibration(
            arm=r["arm"],
            predicted_ratio=r.get("predicted_ratio"),
            measured_ratio=r.get("ratio"),
            target=str(pred.get("target") or ""),
            device_kind=str(key.get("device_kind") or ""),
            device_count=int(key.get("device_count") or 0),
            jax=str(key.get("jax") or ""),
            pgle=__version__,
            created=now,
        )
        for r in t["arms"]
        if r.get("predicted_ratio") is not None or r.get("ratio") is not None
    ]
    try:
        ProfileStore(store_path).add_calibration(row["fingerprint"], row["entry"], records)
    except PgleError as e:
        report.warnings.append(f"the store kept no predicted/measured ratios: {e}")
        return
    report.details["compare"]["calibration"] = {
        "fingerprint": row["fingerprint"],
        "entry": row["entry"],
        "arms": len(records),
    }
