"""`pgle run --profile P`: run the workload with a profile and prove XLA used it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pgle.atomic import check_writable_target
from pgle.commands.options import StoreOptions, VerdictOptions, Window
from pgle.errors import EXIT_NOT_VERIFIED, ProfileError
from pgle.evidence import compiles, jit_steps
from pgle.evidence.events import RunEvents, workload_exit_phrase
from pgle.evidence.steps import summarize
from pgle.evidence.xla_log import LogScanner
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.launch import childenv
from pgle.launch.execution import Execution
from pgle.launch.runfolder import DEFAULT_ROOT, RunFolder
from pgle.launch.workload import Workload
from pgle.phrases import plural
from pgle.profiles import files, manifest
from pgle.report import Report
from pgle.verdicts import checker, collectives, require, sync_converted
from pgle.verdicts.across_ranks import JobReports, combine_verdicts
from pgle.verdicts.origin import Origin, path_matcher
from pgle.verdicts.pgle_applied import Verdict, exit_code_for, judge, summary_lines
from pgle.xla import flag_table, versions

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the store is imported only by runs that use one
    from pgle.store.key import StoreKey


@dataclasses.dataclass(frozen=True)
class RunOptions:
    workload: Workload
    profile: str | None  # None: a plain run (tune on a backend without profiles)
    verdict: VerdictOptions = VerdictOptions()
    run_dir: str | None = None
    log: str | None = None
    profile_store: str | None = None  # where content-addressed copies (and store views) go
    command: str = "run"
    xla: tuple[tuple[str, str | None], ...] = ()  # more flags (tune: an arm's, e.g. SoL)
    store: StoreOptions | None = None  # --store: XLA reads this store's view instead
    env: tuple[tuple[str, str], ...] = ()  # variables set for the workload (tune: O1)
    # `--trace-window` (tune: the first run of each arm): keep a trace of this window, whose
    # steps are left out of the step times (the after-picture of `pgle report`).
    trace_window: Window | None = None


def request(opts: RunOptions) -> LayoutRequest:
    return LayoutRequest(
        run_dir=opts.run_dir,
        log=opts.log,
        inputs={"profile": opts.profile, "profile_store": opts.profile_store},
    )


def combine(opts: RunOptions, layout: RankLayout, job: JobReports) -> Report:
    report = combine_verdicts(job, require_applied=opts.verdict.require_applied)
    require.enforce(report, opts.verdict.require)
    return report


def prepare_profile(path: str, store: str | None) -> tuple[files.ProfileSource, Path]:
    """Validate the profile and hand XLA a content-addressed copy of it.

    XLA's compilation-cache key hashes the flag string, not the file: a profile
    regenerated at the same path would hit a stale executable. A path that
    names the content cannot.
    """
    source = files.load_profile_source(path)
    if source.is_empty():
        raise ProfileError(
            f"profile {path} is empty: XLA would have nothing to use.",
            hint="Collect it on an NVIDIA GPU (`pgle collect`); see `pgle inspect`.",
        )
    copy = files.content_addressed_copy(source, store or Path(DEFAULT_ROOT) / "profiles")
    return source, copy


def body(
    opts: RunOptions, layout: RankLayout, launch: Callable[..., Execution], environ: dict[str, str]
) -> Report:
    if layout.log:
        check_writable_target(layout.log, force=True, what="log")
    xla: dict[str, str | None] = dict(opts.xla)
    source = None
    view = None
    if opts.store is not None:
        view = store_view(opts.store, layout.inputs["profile_store"], environ)
        if view.path is not None:
            source = files.load_profile_source(view.path)
            xla[flag_table.PGLE_PROFILE_PATH] = str(view.path)
    elif opts.profile is not None:
        source, copy = prepare_profile(layout.input("profile"), layout.inputs["profile_store"])
        xla[flag_table.PGLE_PROFILE_PATH] = str(copy)
    if xla and versions.needs_lhs_flag(versions.jax_version()):
        xla[flag_table.LHS] = "true"
    child = childenv.build(environ, xla=xla, variables=dict(opts.env), info_log=True)
    man = manifest.read(manifest.manifest_path(source.path)) if source is not None else None
    drift_notes = manifest.drift(man, user_flags=child.user_flags) if man is not None else []
    for line in child.notices:
        log.info(line)
    for line in drift_notes:
        log.warning(f"{line} (instruction names follow the HLO: the profile may not fit)")
    run_folder = RunFolder.create(opts.command, layout.run_dir)
    log.info(f"running: {opts.workload.describe()} (run folder {run_folder.path})")
    window = opts.trace_window
    if window is not None:
        log.info(f"keeping a trace of {window.short()} (left out of the step times)")
    ex = launch(
        opts.workload,
        run_folder,
        child,
        log_copy=layout.log,
        profile_window=window.spec(run_folder.trace) if window is not None else None,
        step_name=window.step_name if window is not None else None,
    )
    report = finish_run(opts, ex, source, man, drift_notes)
    if view is not None:
        report_store(report, view, ex)
    return report


@dataclasses.dataclass
class StoreView:
    store: StoreOptions
    key: StoreKey
    path: Path | None  # None: the store holds nothing for the key
    served: dict


def store_view(store: StoreOptions, views_root: str | None, environ: dict[str, str]) -> StoreView:
    """The store's view for the key this environment's jax reports (pgle.store.key: XLA
    reads the directory at the first compile, before the harness reports the backend)."""
    from pgle.launch.probe import backend_info
    from pgle.store import serving
    from pgle.store.key import from_probe
    from pgle.store.store import ProfileStore

    key, why = from_probe(backend_info(environ))
    if key is None:
        raise ProfileError(f"--store: cannot tell which profiles to serve: {why}.")
    shared = ProfileStore(store.path)
    path, served = serving.prepare_view(
        shared, key, policy=store.policy, views_root=views_root or Path(DEFAULT_ROOT) / "profiles"
    )
    damaged = shared.damaged_warning()
    if damaged:
        log.warning(damaged)
    if path is None:
        log.info(f"store {store.path} holds no profile for {key.describe()}: running without one")
    else:
        log.info(
            f"store {store.path}: {plural(len(served), 'module profile')} for "
            f"{key.describe()} (view {path})"
        )
    return StoreView(store, key, path, served)


def report_store(report: Report, view: StoreView, ex: Execution) -> None:
    """Per module: which profile came from the store and how old it is; what it lacked."""
    from pgle.store import serving
    from pgle.store.key import from_events, mismatch

    actual, _ = from_events(ex.events)
    lookups = serving.mark_modules(report.modules, view.served)
    report.details["store"] = {
        "path": view.store.path,
        "policy": view.store.policy,
        "key": dataclasses.asdict(view.key),
        "view": str(view.path) if view.path else None,
        "view_modules": len(view.served),
        **lookups,
    }
    wrong = mismatch(view.key, actual)
    if wrong:
        report.warnings.append(f"--store: {wrong}: the profiles served may not fit this run.")
    report.summary += serving.summary_lines(
        report.modules, lookups, len(view.served), view.store.path, view.key
    )


def finish_run(
    opts: RunOptions, ex: Execution, source, man: dict | None, drift_notes: list[str]
) -> Report:
    level = ex.child.env.get("TF_CPP_MIN_LOG_LEVEL", "").strip()
    given = ex.child.flags.value(flag_table.PGLE_PROFILE_PATH)
    origin = Origin(
        compile_platforms=ex.events.compile_platforms,
        compile_threads=ex.events.compile_threads,
        profile_match=path_matcher(given, (str(source.path),) if source is not None else ())
        if given
        else None,
        profile_given=str(source.path) if source is not None else given,
    )
    made = compiles.executables(ex.events)  # compiled, or loaded from jax's cache
    verdict = judge(
        LogScanner().scan_file(ex.run.log),
        platform=ex.events.platform,
        min_coverage=opts.verdict.min_coverage,
        silence=checker.silence(
            _jax_of(ex.events),
            ex.child.flags.value(flag_table.ACCURACY_CHECKER),
            old_flag=ex.child.flags.value(flag_table.OLD_ACCURACY_CHECKER) in ("true", "1"),
        ),
        info_log_hidden=level not in ("", "0"),
        # `-- COMMAND` whose processes left no event: none imported jax under the harness.
        jax_imported=False
        if ex.spec.command_mode and not ex.events.lines
        else ex.events.jax_imported,
        command=ex.spec.command_mode,
        workload_modules=ex.events.workload_modules,
        origin=origin,
        sol_fallback=collectives.sol_fallback_expected(
            _jax_of(ex.events), ex.events.backend.device_kind if ex.events.backend else None
        ),
        # The executed HLO the harness kept: which async collectives XLA made
        # synchronous after scheduling, so that no profile can hold them.
        executed=sync_converted.load_executed(ex.events.modules),
        renamed=sync_converted.renames(_jax_of(ex.events)),
        device_kind=ex.events.backend.device_kind if ex.events.backend else None,
        loaded_from_cache=[r["module"] for r in made if r["kind"] == "cached"],
        compiled_anew=sum(1 for r in made if r["kind"] == "compiled"),
    )
    collectives.annotate_totals(verdict.modules, ex.events.modules)
    verdict.modules = jit_steps.step_first(verdict.modules, ex.events)
    if man is not None:
        # Now that the backend is known (the first check had the flags only).
        drift_notes = drift_notes + [
            d
            for d in manifest.drift(
                man, user_flags=ex.child.user_flags, backend=ex.events.backend_record
            )
            if d not in drift_notes
        ]
    report = verdict_report(opts.command, verdict, ex)
    dropped = ex.dropped_flags_reason()
    if dropped:
        # The verdict's own reasons (no 'Using PGLE profile' line) follow from this one.
        report.reasons.insert(0, dropped)
        report.summary.insert(0, dropped)
        seen = ex.events.xla_flags_seen
        report.details["effective_xla_flags"] = seen.effective if seen else None
    report.profile = None
    if source is not None:
        report.profile = source.to_dict()
        report.profile["given_to_xla"] = ex.child.flags.value(flag_table.PGLE_PROFILE_PATH)
    report.warnings += ex.child.warnings + drift_notes
    newer = versions.newer_than_verified(versions.jax_version())
    if newer:
        report.warnings.append(newer)
    if source is not None and source.kind == "directory":
        report.details["directory"] = directory_lookups(verdict, source)
    if ex.events.trace:
        report.trace_dir = str(ex.run.trace)
    steps = jit_steps.run_steps(ex.events)
    report.details["step_times"] = summarize(steps.times)
    report.details["steps"] = steps.to_dict()
    report.exit_code = exit_code_for(
        report.status,
        ex.exit_code,
        opts.verdict.require_applied,
        verdict.details.get("coverage_unknown", 0),
    )
    require.enforce(report, opts.verdict.require)
    if ex.exit_code != 0:
        report.summary.append(
            workload_exit_phrase(ex.exit_code, ex.events, command=ex.spec.command_mode)
        )
    elif report.exit_code == EXIT_NOT_VERIFIED and opts.verdict.require_applied:
        report.summary.append(
            require.require_applied_line(
                report.status, verdict.details.get("coverage_unknown") or 0
            )
        )
    return report


def _jax_of(events: RunEvents) -> tuple[int, ...] | None:
    """The jax version the workload imported (the harness's record), else the installed one."""
    return versions.parse_version(events.jax_version) or versions.jax_version()


def directory_lookups(verdict: Verdict, source) -> dict:
    """Which per-module files XLA found, which fingerprints it looked for in vain, which it
    never used."""
    found = sorted(
        {m["fingerprint"] for m in verdict.modules if m["fingerprint"] and m["profile_found"]}
    )
    missing = sorted(
        {m["fingerprint"] for m in verdict.modules if m["fingerprint"] and not m["profile_found"]}
    )
    unused = sorted(set(source.modules) - set(found) - set(missing))
    return {"found": found, "looked_up_missing": missing, "unused": unused}


def verdict_report(command: str, verdict: Verdict, ex: Execution) -> Report:
    report = ex.report(command, verdict.status, modules=verdict.modules, reasons=verdict.reasons)
    report.details["backend"] = ex.events.backend_record
    report.details.update(verdict.details)
    report.summary += summary_lines(verdict)
    return report
