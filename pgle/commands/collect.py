"""`pgle collect`: profile a window of the workload and extract the PGLE profile."""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from pgle.atomic import check_writable_target
from pgle.commands.extract import (
    check_directory_target,
    diagnose_empty,
    extract,
    trace_bytes,
    trace_figures,
    window_never_opened,
    window_summary,
)
from pgle.commands.options import CollectOptions, StoreOptions
from pgle.errors import EXIT_ERROR, BadInput, Stalled
from pgle.evidence.event_kinds import (
    TraceError,
    TraceProbe,
    TraceStart,
    TraceStop,
    WindowWarning,
)
from pgle.evidence.events import workload_exit_phrase
from pgle.jobs.layout import LayoutRequest, OutputRequest, RankLayout
from pgle.launch import childenv
from pgle.launch.execution import Execution
from pgle.launch.runfolder import RunFolder
from pgle.phrases import plural
from pgle.profiles import files, jaxlib, manifest
from pgle.report import Report
from pgle.units import human_bytes
from pgle.verdicts.statuses import Collected
from pgle.xla import env, flag_table
from pgle.xla.flags import XlaFlags

log = logging.getLogger(__name__)

# XLA prints `Fingerprint before LHS for module <name>(<id>) = <hex>` at VLOG(1) of this file.
FINGERPRINT_VMODULE = "gpu_hlo_schedule"
FINGERPRINT_VLOG_LEVEL = 1
STATUS_NOT_PROFILED = Collected.NOT_PROFILED


def request(opts: CollectOptions) -> LayoutRequest:
    return LayoutRequest(
        run_dir=opts.run_dir,
        log=opts.log,
        output=OutputRequest(
            opts.output,
            per_module=opts.per_module,
            only_rank=opts.rank,
            default=opts.default_output,
        ),
    )


def preflight(
    opts: CollectOptions, output: str | None, log: str | None, environ: dict[str, str]
) -> None:
    """Everything that can be refused before a launch."""
    try:
        pgle_on = env.bool_env(environ, "JAX_ENABLE_PGLE")
    except env.NotABoolean as e:
        raise BadInput(
            f"JAX_ENABLE_PGLE={str(e)!r} is not a boolean: jax fails at import.", hint="Unset it."
        ) from None
    if pgle_on:
        # The same rule (pgle.xla.env, jax's own bool parsing) makes `pgle doctor` flag it.
        raise BadInput(
            "JAX_ENABLE_PGLE is on: auto PGLE's profiler session would collide with pgle's "
            "(ALREADY_EXISTS: Another profiling session active) and can kill the job.",
            hint="Unset JAX_ENABLE_PGLE for collect, or use `pgle auto`.",
        )
    if output is not None:
        check_output(opts, output)
    if log:
        check_writable_target(log, force=True, what="log")


def check_output(opts: CollectOptions, output: str) -> None:
    """Refuse an output before any work: a .pb/.pbtxt file (and its manifest) that would be
    overwritten without --force, or, with --per-module, anything but a new or empty directory."""
    if opts.per_module:
        check_directory_target(output, force=opts.force)
        return
    files.profile_format(output)
    check_writable_target(output, force=opts.force, what="profile")
    check_writable_target(manifest.manifest_path(output), force=opts.force, what="manifest")


def merge_vmodule(
    value: str | None, module: str = FINGERPRINT_VMODULE, level: int = FINGERPRINT_VLOG_LEVEL
) -> str:
    """`TF_CPP_VMODULE` with `module=level` added: the user's entries keep their order and text;
    their own entry for `module` stays when it is at least `level`, else its level is raised."""
    if not value or not value.strip():
        return f"{module}={level}"
    entries = value.split(",")
    found = False
    for i, entry in enumerate(entries):
        name, sep, lvl = entry.partition("=")
        if name.strip() != module:
            continue
        found = True
        try:
            if sep and int(lvl.strip()) >= level:
                continue
        except ValueError:
            pass
        entries[i] = f"{module}={level}"
    if not found:
        entries = [e for e in entries if e.strip()] + [f"{module}={level}"]
    return ",".join(entries)


def fingerprint_environment(environ: dict[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """The variables that make XLA log `Fingerprint before LHS for module <name>(<id>) = <hex>`:
    `TF_CPP_VMODULE` gets `gpu_hlo_schedule=1` (merged into the user's), and
    `TF_CPP_MIN_LOG_LEVEL=0` unless the user set it. Returns (environ, notices, warnings)."""
    environ = dict(environ)
    notices, warnings = [], []
    user = environ.get("TF_CPP_VMODULE")
    merged = merge_vmodule(user)
    if merged != user:
        environ["TF_CPP_VMODULE"] = merged
        notices.append(f"setting TF_CPP_VMODULE={merged} (XLA logs each module's fingerprint)")
    warning = childenv.ensure_info_log(
        environ,
        "'Fingerprint before LHS'",
        "modules whose fingerprint is not in the trace itself get no profile file",
    )
    if warning:
        warnings.append(warning)
    return environ, notices, warnings


def profiling_flags(environ: dict[str, str]) -> dict[str, str | None]:
    """The XLA flags collect adds; tune's baseline and profiled runs get the same, so its
    phases differ only in the profile."""
    if XlaFlags.parse(environ.get("XLA_FLAGS")).get(flag_table.COMMAND_BUFFER) is None:
        # Kernels inside CUDA graphs are invisible to the profiler; auto PGLE turns
        # command buffers off for its profiling compile too (jax >= 0.4.x).
        return {flag_table.COMMAND_BUFFER: ""}
    return {}


def body(
    opts: CollectOptions,
    layout: RankLayout,
    launch: Callable[..., Execution],
    environ: dict[str, str],
) -> Report:
    """Profile this process's window and extract its profile to where the layout says."""
    plan = layout.plan
    preflight(opts, plan.rank_output, layout.log, environ)
    if plan.merges_here:
        assert plan.merged_output is not None  # merges_here: mode merge, which has one
        check_output(opts, plan.merged_output)  # refuse now, not after the whole job ran
    run = RunFolder.create("collect", layout.run_dir)
    output = plan.rank_output or str(run.path / ("profiles" if opts.per_module else "profile.pb"))
    xla = profiling_flags(environ)
    notices: list[str] = []
    warnings: list[str] = []
    if opts.extraction.needs_fingerprints:
        environ, notices, warnings = fingerprint_environment(environ)
    child = childenv.build(environ, xla=xla)
    child.notices += notices
    child.warnings += warnings
    for line in child.notices:
        log.info(line)
    if not plan.profiled:
        log.info(
            f"running without the profiler (--rank {plan.only_rank}): "
            f"{opts.workload.describe()} (run folder {run.path})"
        )
        assert plan.only_rank is not None  # only --rank N leaves a process unprofiled
        return not_profiled_report(
            launch(opts.workload, run, child, log_copy=layout.log), plan.only_rank
        )
    log.info(f"collecting: {opts.workload.describe()} (run folder {run.path})")
    log.info(f"profiling window: {opts.window.describe()}")
    stall = None
    try:
        execution = launch(
            opts.workload,
            run,
            child,
            profile_window=opts.window.spec(run.trace),
            step_name=opts.window.step_name,
            log_copy=layout.log,
            progress=True,
        )
    except Stalled as e:
        # A stall after the window closed loses nothing that was collected.
        execution = e.execution  # type: ignore[assignment]
        if not isinstance(execution, Execution) or closed_window(execution) is None:
            raise
        stall = str(e)
    report = finish_collect(opts, execution, output, stall=stall)
    if opts.store is not None:
        add_to_store(opts.store, execution, report, layout)
    if not opts.extraction.keep_trace:
        drop_trace(execution, report)
    return report


def drop_trace(ex: Execution, report: Report) -> None:
    """--no-keep-trace: the trace (often gigabytes) goes once the profile is written. Only
    pgle's own trace: a trace the workload's own profiler wrote is the user's."""
    if report.exit_code != 0 or not ex.run.trace.is_dir():
        return  # nothing extracted: the trace is what is left to look at
    if ex.events.trace is not None and ex.events.trace.purpose == "script":
        log.info("--no-keep-trace: the trace is the workload's own (its profiler wrote it); kept")
        return
    size = trace_bytes(ex.run.trace)
    try:
        shutil.rmtree(ex.run.trace)
    except OSError as e:
        report.warnings.append(
            f"--no-keep-trace: could not delete {ex.run.trace}: {e.strerror or e}"
        )
        return
    report.details["trace_deleted"] = str(ex.run.trace)
    log.info(f"deleted the trace {ex.run.trace} ({human_bytes(size)}): --no-keep-trace")


def add_to_store(store: StoreOptions, ex: Execution, report: Report, layout: RankLayout) -> None:
    """`--store`: add the profile directory just written, module by module, under the key the
    run itself reported (pgle.store.key). In a job only rank 0 writes (the store's
    single-writer rule for gs://; one writer keeps local stores simple too)."""
    from pgle.store import serving
    from pgle.store.key import from_events
    from pgle.store.store import ProfileStore

    details = report.details.setdefault("store", {"path": store.path, "policy": store.policy})
    if not layout.writes_shared:
        details["skipped"] = f"rank {layout.rank}: only rank 0 adds to the store"
        return
    # The store exists after the first collect whatever it added: the recipe's next step,
    # `pgle run --store`, then serves what it holds (nothing yet) instead of failing.
    shared = ProfileStore(store.path, create=True)
    if report.status != Collected.COLLECTED:
        details["skipped"] = f"collect status {report.status}"
    else:
        key, why = from_events(ex.events)
        if key is None:
            details["skipped"] = why
    if details.get("skipped"):
        line = f"store {store.path}: nothing added ({details['skipped']})"
        details["summary"] = line
        report.summary.append(line)
        return
    assert key is not None and report.profile is not None  # collected: a profile was written
    source = files.load_profile_source(report.profile["path"])
    names = {m["fingerprint"]: m["module"] for m in report.modules if m.get("fingerprint")}
    rows = serving.add_profiles(
        shared,
        source.modules,
        key,
        policy=store.policy,
        source=f"pgle collect {ex.run.path}",
        names=names,
    )
    damaged = shared.damaged_warning()
    if damaged:
        report.warnings.append(damaged)
    details.update({"key": dataclasses.asdict(key), "modules": rows})
    by_fp = {r["fingerprint"]: r["status"] for r in rows}
    for row in report.modules:
        if row.get("fingerprint") in by_fp:
            row["store"] = by_fp[row["fingerprint"]]
    line = serving.count_line(rows, store.path, store.policy, key)
    details["summary"] = line
    report.summary.append(line)


def not_profiled_report(ex: Execution, only_rank: int) -> Report:
    report = ex.report("collect", STATUS_NOT_PROFILED, exit_code=ex.exit_code)
    report.details["backend"] = ex.events.backend_record
    report.reasons.append(f"--rank {only_rank}: only rank {only_rank} runs the profiler.")
    report.summary.append(f"ran without the profiler (--rank {only_rank})")
    return report


def closed_window(ex: Execution) -> Path | None:
    """The run folder of the trace the profiling window left, when the window closed cleanly:
    its trace_stop is recorded, with no profiler error after it, and the trace is on disk.
    Whatever the workload does afterwards (a segfault in cuptiFinalize at exit, seen on
    8xH100; a hang) cannot spoil it."""
    stop = ex.events.trace
    if not stop:
        return None
    errors_after = [r for r in ex.events.of(TraceError) if r.t >= stop.t]
    if errors_after:
        return None
    return trace_run_folder(ex, stop)


def trace_run_folder(ex: Execution, stop: TraceStop) -> Path | None:
    """Where the kept trace is: the workload's own (its profiler's folder), pgle's window's,
    or, for a command whose several Python processes each profiled their window, one folder
    pooling their traces (jaxlib's converter pools hosts' traces the same way)."""
    if stop.purpose == "script":
        return jaxlib.newest_run_folder(Path(stop.dir)) if stop.dir else None
    folders = [jaxlib.newest_run_folder(ex.run.trace)]
    folders += [
        jaxlib.newest_run_folder(Path(p["dir"]) / "trace")
        for p in ex.events.processes[1:]
        if p.get("dir")
    ]
    found = [f for f in folders if f is not None]
    if len(found) <= 1:
        return found[0] if found else None
    pooled = ex.run.path / "trace-pooled" / "plugins" / "profile" / found[0].name
    pooled.mkdir(parents=True, exist_ok=True)
    for i, folder in enumerate(found):
        for src in folder.glob("*.xplane.pb"):
            dest = pooled / f"p{i}-{src.name}"
            if not dest.exists():
                try:
                    os.link(src, dest)
                except OSError:
                    shutil.copyfile(src, dest)
    return pooled


def crash_reasons(ex: Execution, output: str) -> list[str]:
    """Why nothing was kept from a workload that failed before its window closed, and how to
    recover what the profiler left."""
    code = ex.exit_code
    first = workload_exit_phrase(code, ex.events, command=ex.spec.command_mode)
    if not ex.events.jax_imported:
        return [first + "; nothing was profiled."]
    started = ex.events.of(TraceStart)
    probes = ex.events.of(TraceProbe)
    if not started and probes and probes[-1].bytes is None and probes[-1].error is None:
        return [
            (
                f"{first} while the profiler traced step {probes[-1].step} alone, to size the "
                "window for --trace-max-bytes; nothing was profiled. --trace-max-bytes 0 "
                "skips that probe (one start_trace/stop_trace less)"
            )
        ]
    if not started:
        return [
            (
                f"{first} before the profiling window opened "
                f"({plural(len(ex.events.steps), 'step')} seen); nothing was profiled."
            )
        ]
    left = jaxlib.newest_run_folder(Path(started[-1].dir or ex.run.trace))
    if left is not None:
        return [
            (
                f"{first} inside the profiling window, so pgle did not convert the trace it "
                f"left in {left} (it may be incomplete). To recover it: "
                f"`pgle convert {shlex.quote(str(left))} {shlex.quote(output)} --log "
                f"{shlex.quote(str(ex.run.log))}` "
                f"(`pgle inspect` then shows what it holds)."
            )
        ]
    return [
        (
            f"{first} inside the profiling window, before the profiler wrote its trace (JAX "
            f"writes it at stop_trace): nothing can be recovered from {ex.run.trace}. Profile "
            "an earlier window (--steps START:COUNT), or fix the crash (its output: "
            f"{ex.run.log})."
        )
    ]


def finish_collect(
    opts: CollectOptions, ex: Execution, output: str, stall: str | None = None
) -> Report:
    """The report of a profiled run: the profile extracted from the window's trace, kept
    whenever the window closed cleanly (the workload's own exit code is pgle's then)."""
    report = ex.report("collect", Collected.FAILED, trace_dir=str(ex.run.trace))
    report.warnings += ex.child.warnings
    window_warnings = [r.message for r in ex.events.of(WindowWarning)]
    report.warnings += window_warnings
    report.reasons += window_warnings
    report.details["window"] = window_summary(ex)
    report.details["backend"] = ex.events.backend_record
    if ex.events.processes:
        report.details["processes"] = ex.events.processes
    dropped = ex.dropped_flags_reason()
    if dropped:
        report.warnings.append(dropped)
        report.reasons.append(dropped)
        # tune's "collect changed" line must not count a flag XLA never saw.
        seen = ex.events.xla_flags_seen
        report.details["flags_never_reached_xla"] = list(seen.missing or []) if seen else []
    failed_after = None
    if ex.exit_code != 0:
        kept = closed_window(ex)
        if kept is None:
            report.exit_code = ex.exit_code
            report.reasons += crash_reasons(ex, output)
            report.summary.append("collect failed: " + report.reasons[-1])
            return report
        failed_after = stall or workload_exit_phrase(
            ex.exit_code, ex.events, command=ex.spec.command_mode
        )
        report.details["after_window"] = {"exit_code": ex.exit_code, "what": failed_after}
    report = _extract_window(opts, ex, output, report)
    if failed_after is not None:
        # The profile (if any) is written; the command still fails as the workload did.
        report.exit_code = ex.exit_code
        outcome = "kept the profile" if report.status == Collected.COLLECTED else "nothing to keep"
        line = (
            f"{failed_after} after the profiling window closed cleanly: {outcome}; pgle exits "
            f"with the workload's code {ex.exit_code}"
        )
        report.reasons.append(line)
        report.summary.append(line)
    return report


def _extract_window(opts: CollectOptions, ex: Execution, output: str, report: Report) -> Report:
    stop = ex.events.trace
    script_trace = stop is not None and stop.purpose == "script"
    if stop is not None and script_trace:
        # The workload ran its own profiler (pgle's window gave way): convert its trace.
        report.details["window"]["script_trace"] = {"site": stop.site, "dir": stop.dir}
        report.warnings.append(
            f"the workload starts its own profiler at {stop.site}; the profile comes "
            f"from its trace in {stop.dir}"
        )
    run_folder = trace_run_folder(ex, stop) if stop else jaxlib.newest_run_folder(ex.run.trace)
    if run_folder is None:
        report.exit_code = EXIT_ERROR
        # A window that never opened is the cause whatever the backend: a CPU run writes a
        # trace too (an empty profile is another failure, diagnose_empty's).
        why = (
            [window_never_opened(ex)]
            if stop is None
            else [r for r in diagnose_empty(ex) if not r.startswith("backend ")]
        )
        why = why or ["the profiler wrote no trace"]
        report.reasons += why
        report.summary.append("collect failed: no trace was written: " + why[0])
        return report
    if script_trace:
        # `pgle view` opens pgle's own trace folder; the workload's profiler wrote elsewhere.
        log.info(f"the workload's own trace is in {run_folder}")
    elif opts.extraction.keep_trace:
        log.info(f"trace kept at {run_folder} (open it with `pgle view {ex.run.path}`)")
    if len(ex.events.processes) > 1:
        report.details["window"]["processes_pooled"] = len(ex.events.processes)
    trace_figures(ex, run_folder, report)
    return extract(opts, ex, run_folder, output, report)
