"""`pgle collect`: profile a window of the workload and extract the PGLE profile."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from pgle.atomic import check_writable_target, replace_directory_atomic
from pgle.commands.options import (DEFAULT_STAT, PER_MODULE_FORMAT, Extraction, StoreOptions,
                                   Window)
from pgle.errors import BadInput, EXIT_ERROR
from pgle.evidence.xla_log import LogScanner
from pgle.jobs.layout import LayoutRequest, OutputRequest, RankLayout
from pgle.evidence import schema
from pgle.launch import childenv
from pgle.launch.execution import Execution
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.phrases import plural
from pgle.profiles import files
from pgle.profiles import jaxlib
from pgle.profiles import manifest
from pgle.report import Report
from pgle.verdicts.pgle_applied import GPU_PLATFORMS
from pgle.xla import env
from pgle.xla import flag_table
from pgle.xla.flags import XlaFlags

log = logging.getLogger(__name__)

# XLA prints `Fingerprint before LHS for module <name>(<id>) = <hex>` at VLOG(1) of this file.
FINGERPRINT_VMODULE = "gpu_hlo_schedule"
FINGERPRINT_VLOG_LEVEL = 1
STATUS_NOT_PROFILED = "not_profiled"
DEFAULT_PERCENTILE = 90  # of the merge of the ranks' profiles, as JAX auto PGLE aggregates


@dataclasses.dataclass(frozen=True)
class CollectOptions:
    workload: Workload
    output: str | None  # None: inside the run folder (or `default_output`)
    window: Window = Window()
    extraction: Extraction = Extraction()
    force: bool = False
    allow_empty: bool = False
    run_dir: str | None = None
    log: str | None = None
    # Multi-process jobs (pgle/commands/collect_job.py): profile one rank only, and the
    # percentile of rank 0's merge of the ranks' profiles.
    rank: int | None = None
    merge_percentile: int = DEFAULT_PERCENTILE
    default_output: str | None = None  # one process without -o: here (tune: its run folder)
    store: StoreOptions | None = None  # --store: add each module's profile to it

    def __post_init__(self):
        if not 0 <= self.merge_percentile <= 100:
            raise BadInput(f"merge percentile {self.merge_percentile} is outside 0..100.")
        if self.store is not None and not self.extraction.per_module:
            raise BadInput("--store keeps per-module profiles (keyed by fingerprint): add "
                           "--per-module.")

    @property
    def per_module(self) -> bool:
        return self.extraction.per_module


def request(opts: CollectOptions) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.run_dir, log=opts.log, output=OutputRequest(
        opts.output, per_module=opts.per_module, only_rank=opts.rank,
        default=opts.default_output))


def preflight(opts: CollectOptions, output: str | None, log: str | None,
              environ: dict[str, str]) -> None:
    """Everything that can be refused before a launch."""
    try:
        pgle_on = env.bool_env(environ, "JAX_ENABLE_PGLE")
    except env.NotABoolean as e:
        raise BadInput(f"JAX_ENABLE_PGLE={str(e)!r} is not a boolean: jax fails at import.",
                       hint="Unset it.") from None
    if pgle_on:
        # The same rule (pgle.xla.env, jax's own bool parsing) makes `pgle doctor` flag it.
        raise BadInput(
            "JAX_ENABLE_PGLE is on: auto PGLE's profiler session would collide with pgle's "
            "(ALREADY_EXISTS: Another profiling session active) and can kill the job.",
            hint="Unset JAX_ENABLE_PGLE for collect, or use `pgle auto`.")
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


def check_directory_target(path: str, *, force: bool) -> Path:
    """`-o` with --per-module: a new or empty directory; a non-empty one only with --force,
    and only when it holds nothing but a profile directory's files (never the user's work)."""
    p = Path(path)
    name = str(path).rstrip("/" + os.sep)
    if os.path.splitext(name)[1] in files.EXTENSIONS and not p.is_dir():
        raise BadInput(f"--per-module writes a directory of <fingerprint>.pbtxt files, but "
                       f"-o {path} names a single profile file.",
                       hint="Give a directory, e.g. -o profiles/, or drop --per-module.")
    if p.exists() and not p.is_dir():
        raise BadInput(f"-o {path} exists and is not a directory; --per-module writes a "
                       "directory of <fingerprint>.pbtxt files.", hint="Choose another -o.")
    return files.check_directory_output(p, force=force)


def merge_vmodule(value: str | None, module: str = FINGERPRINT_VMODULE,
                  level: int = FINGERPRINT_VLOG_LEVEL) -> str:
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
        environ, "'Fingerprint before LHS'",
        "modules whose fingerprint is not in the trace itself get no profile file")
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


def body(opts: CollectOptions, layout: RankLayout, launch: Callable[..., Execution],
         environ: dict[str, str]) -> Report:
    """Profile this process's window and extract its profile to where the layout says."""
    plan = layout.output
    preflight(opts, plan.rank_output, layout.log, environ)
    if plan.merges_here:
        check_output(opts, plan.merged_output)  # refuse now, not after the whole job ran
    run = RunFolder.create("collect", layout.run_dir)
    output = plan.rank_output or str(run.path / ("profiles" if opts.per_module else "profile.pb"))
    xla = profiling_flags(environ)
    notices, warnings = [], []
    if opts.extraction.needs_fingerprints:
        environ, notices, warnings = fingerprint_environment(environ)
    child = childenv.build(environ, xla=xla)
    child.notices += notices
    child.warnings += warnings
    for line in child.notices:
        log.info(line)
    if not plan.profiled:
        log.info(f"running without the profiler (--rank {plan.only_rank}): "
               f"{opts.workload.describe()} (run folder {run.path})")
        return not_profiled_report(launch(opts.workload, run, child, log_copy=layout.log),
                                   plan.only_rank)
    log.info(f"collecting: {opts.workload.describe()} (run folder {run.path})")
    log.info(f"profiling window: {opts.window.describe()}")
    execution = launch(opts.workload, run, child, profile_window=opts.window.spec(run.trace),
                       step_name=opts.window.step_name, log_copy=layout.log, progress=True)
    report = finish_collect(opts, execution, output)
    if opts.store is not None:
        add_to_store(opts.store, execution, report, layout)
    if not opts.extraction.keep_trace:
        drop_trace(execution, report)
    return report


def drop_trace(ex: Execution, report: Report) -> None:
    """--keep-trace no: the trace (often gigabytes) goes once the profile is written. Only
    pgle's own trace: a trace the workload's own profiler wrote is the user's."""
    if report.exit_code != 0 or not ex.run.trace.is_dir():
        return  # nothing extracted: the trace is what is left to look at
    if (ex.events.trace or {}).get("purpose") == "script":
        log.info("--keep-trace no: the trace is the workload's own (its profiler wrote it); kept")
        return
    size = trace_bytes(ex.run.trace)
    try:
        shutil.rmtree(ex.run.trace)
    except OSError as e:
        report.warnings.append(f"--keep-trace no: could not delete {ex.run.trace}: "
                               f"{e.strerror or e}")
        return
    report.details["trace_deleted"] = str(ex.run.trace)
    log.info(f"deleted the trace {ex.run.trace} ({size / 1e6:.0f} MB): --keep-trace no")


def add_to_store(store: StoreOptions, ex: Execution, report: Report, layout: RankLayout) -> None:
    """`--store`: add the profile directory just written, module by module, under the key the
    run itself reported (pgle.store.key). In a job only rank 0 writes (the store's
    single-writer rule for gs://; one writer keeps local stores simple too)."""
    from pgle.store.key import from_events
    from pgle.store import serving
    from pgle.store.store import ProfileStore

    details = report.details.setdefault("store", {"path": store.path, "policy": store.policy})
    if report.status != "collected":
        details["skipped"] = f"nothing to add: collect status {report.status}"
        report.summary.append(f"store {store.path}: nothing added ({details['skipped']})")
        return
    if not layout.writes_shared:
        details["skipped"] = f"rank {layout.rank}: only rank 0 adds to the store"
        return
    key, why = from_events(ex.events)
    if key is None:
        details["skipped"] = why
        report.warnings.append(f"--store: nothing added: {why}")
        return
    source = files.load_profile_source(report.profile["path"])
    names = {m["fingerprint"]: m["module"] for m in report.modules if m.get("fingerprint")}
    shared = ProfileStore(store.path, create=True)
    rows = serving.add_profiles(shared, source.modules, key, policy=store.policy,
                                source=f"pgle collect {ex.run.path}", names=names)
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
    report = Report("collect", STATUS_NOT_PROFILED, log_path=str(ex.run.log),
                    run_dir=str(ex.run.path), workload_exit_code=ex.exit_code,
                    exit_code=ex.exit_code)
    report.details["backend"] = ex.events.backend
    report.reasons.append(f"--rank {only_rank}: only rank {only_rank} runs the profiler.")
    report.summary.append(f"ran without the profiler (--rank {only_rank})")
    return report


def finish_collect(opts: CollectOptions, ex: Execution, output: str) -> Report:
    report = Report("collect", "failed", log_path=str(ex.run.log), run_dir=str(ex.run.path),
                    trace_dir=str(ex.run.trace), workload_exit_code=ex.exit_code)
    report.warnings += ex.child.warnings
    window_warnings = [r.get("message", "") for r in ex.events.records
                       if r.get("kind") == schema.WINDOW_WARNING]
    report.warnings += window_warnings
    report.reasons += window_warnings
    report.details["window"] = window_summary(ex)
    report.details["backend"] = ex.events.backend
    dropped = ex.dropped_flags_reason()
    if dropped:
        report.warnings.append(dropped)
        report.reasons.append(dropped)
    if ex.exit_code != 0:
        report.exit_code = ex.exit_code
        report.reasons.append(f"the workload exited with code {ex.exit_code}; no profile written.")
        report.summary.append(f"collect failed: the workload exited with code {ex.exit_code}")
        return report
    stop = ex.events.trace or {}
    script_trace = stop.get("purpose") == "script"
    if script_trace:
        # The workload ran its own profiler (pgle's window gave way): convert its trace.
        report.details["window"]["script_trace"] = {"site": stop.get("site"), "dir": stop.get("dir")}
        report.warnings.append(
            f"the workload starts its own profiler at {stop.get('site')}; the profile comes "
            f"from its trace in {stop.get('dir')}")
    run_folder = jaxlib.newest_run_folder(Path(stop["dir"]) if script_trace else ex.run.trace)
    if run_folder is None:
        report.exit_code = EXIT_ERROR
        report.reasons += diagnose_empty(ex) or ["the profiler wrote no trace."]
        report.summary.append("collect failed: no trace was written; " + report.reasons[0])
        return report
    log.info(f"trace kept at {run_folder} (open it with `pgle view {ex.run.path}`)")
    size = trace_bytes(run_folder)
    report.details["window"]["trace_bytes"] = size
    if size >= LONG_CONVERSION_BYTES:
        log.info(f"converting the trace ({size / 1e6:.0f} MB); this can take a while")
    if opts.per_module:
        return finish_per_module(opts, ex, run_folder, output, report)
    fmt = files.profile_format(output)
    converter = None
    if opts.extraction.converter != "pgle" and not jaxlib.has_gpu_plane(run_folder):
        # No GPU plane: nothing to convert (jaxlib's conversion of a CPU trace only costs time
        # and memory, 9 GB for a 621 MB trace, to give an empty profile). pgle's converter
        # reads the planes itself and reports what it found.
        report.details["conversion"] = (f"skipped: the trace holds no GPU plane (backend "
                                        f"{ex.events.platform}): no instruction timings")
        prof = files.Profile()
        payload = files.encode_profile(prof, fmt)
    elif opts.extraction.converter == "pgle":
        conv, converter = _convert_with_pgle(opts, ex, run_folder, per_module=False)
        report.warnings += conv.warnings
        prof = conv.profiles[""]
        payload = files.encode_profile(prof, fmt)
    else:
        t0 = time.monotonic()
        data = jaxlib.convert_with_jaxlib(run_folder)
        if size >= LONG_CONVERSION_BYTES:
            log.info(f"converted the trace in {time.monotonic() - t0:.0f} s")
        prof = files.parse_profile(data, "binary", str(run_folder))
        payload = data if fmt == "binary" else files.encode_profile(prof, fmt)
    sha = hashlib.sha256(payload).hexdigest()
    report.profile = {"path": str(Path(output).absolute()), "sha256": sha,
                      "instructions": prof.instruction_count, "latencies": prof.latency_count,
                      "format": fmt, "converter": opts.extraction.converter or "jaxlib"}
    if converter is not None:
        report.details["converter"] = converter
        report.details["window"]["steps_window"] = converter["steps_window"]
    if prof.is_empty():
        report.reasons += diagnose_empty(ex)
        if not opts.allow_empty:
            report.status = "empty"
            report.exit_code = EXIT_ERROR
            report.profile["path"] = None
            report.summary.append("collect failed: the profile is empty: " + "; ".join(report.reasons))
            report.summary.append("pass --allow-empty to write it anyway")
            return report
        report.warnings.append("the profile is empty (written because of --allow-empty): "
                               + "; ".join(report.reasons))
    window = report.details["window"]
    man = manifest.build(
        workload_argv=list(opts.workload.argv()), user_flags=ex.child.user_flags,
        child_flags=ex.child.flags, environment=childenv.relevant(ex.child.env),
        backend=ex.events.backend, window=window, profile=report.profile,
        trace_dir=str(run_folder), converter=converter,
        effective_flags=(ex.events.xla_flags_seen or {}).get("effective"))
    man_path = manifest.manifest_path(output)
    # Both or neither: a profile without its manifest (full disk) would pass for a good one.
    files.write_profile(payload, output, force=opts.force,
                          companions={man_path: manifest.text(man).encode("utf-8")})
    report.details["manifest"] = str(man_path)
    report.status = "empty" if prof.is_empty() else "collected"
    report.summary.append(
        f"wrote {output}: {prof.instruction_count} instructions, {prof.latency_count} latencies"
        f" (sha256 {sha[:12]}), manifest {man_path}")
    return report


# --- pgle's converter: per module, steady-state window ------------------------------------------


def steps_window(events, mode: str | None = None) -> dict | None:
    """The steady-state window of a step-window trace, in Unix-epoch nanoseconds: from the
    first profiled step's entry (earlier work, warm-up and compilation included, lies outside)
    to the trace stop (the harness waits for the devices before stopping, so the last step's
    device work is inside). None for a time window (`mode` 'time') or a whole-run trace: all
    of it counts."""
    stop = events.trace
    if mode == "time" or not stop or stop.get("purpose") != "window" \
            or stop.get("first_step") is None:
        return None
    first = next((s for s in events.steps if s.index == stop["first_step"]), None)
    if first is None or stop.get("t") is None:
        return None
    start_ns, end_ns = int(first.t_enter * 1e9), int(stop["t"] * 1e9)
    if end_ns < start_ns:
        return None
    return {"start_ns": start_ns, "end_ns": end_ns, "first_step": stop["first_step"],
            "steps": stop.get("steps"),
            "rule": "first profiled step's entry to the trace stop (events.jsonl)"}


def _convert_with_pgle(opts: CollectOptions, ex: Execution, run_folder: Path, *,
                       per_module: bool):
    """pgle's converter on the kept trace, with the run's log and its steady-state window."""
    from pgle.profiles.convert import convert_trace_detailed

    window = steps_window(ex.events, ex.spec.profile.mode if ex.spec.profile else None)
    conv = convert_trace_detailed(
        run_folder, per_module=per_module, stat=opts.extraction.stat or DEFAULT_STAT, log_path=ex.run.log,
        steps_window=(window["start_ns"], window["end_ns"]) if window else None,
        qualify=opts.extraction.qualify and not per_module)
    summary = {
        "name": "pgle", "per_module": per_module, "stat": conv.stat,
        "qualify": bool(opts.extraction.qualify and not per_module),
        "steps_window": window, "log": str(ex.run.log),
        "xplane_files": [os.path.basename(f) for f in conv.xplane_files],
        "device_planes": conv.device_planes, "events_used": conv.events_used,
        "events_outside_window": conv.events_outside_window,
    }
    return conv, summary


def _log_fingerprint_count(log: Path) -> int:
    from pgle.profiles.convert import read_log_fingerprints

    try:
        return len(read_log_fingerprints(log)[0])
    except BadInput:
        return 0


def finish_per_module(opts: CollectOptions, ex: Execution, run_folder: Path, output: str,
                      report: Report) -> Report:
    """The kept trace -> a directory of `<fingerprint>.pb|.pbtxt` (what XLA reads as is) plus
    `manifest.json`; same empty-profile rules as a single file."""
    # Text by default: every jax (0.4.34-0.10.2) looks up <fp>.pbtxt before <fp>.pb, and with
    # only .pb files jax >= 0.6.2 logs an ERROR "PGLE profile file does not exist:
    # <dir>/<fp>.pbtxt" per module first (tests/data/xla_gpu/README.md).
    fmt = opts.extraction.fmt or PER_MODULE_FORMAT
    conv, converter = _convert_with_pgle(opts, ex, run_folder, per_module=True)
    log_fps = _log_fingerprint_count(ex.run.log)
    without = [m for m in conv.modules if not m.fingerprint]
    converter["fingerprints"] = {
        "log_lines": log_fps,
        "modules": len(conv.modules),
        "with_fingerprint": len(conv.modules) - len(without),
        "sources": sorted({m.fingerprint_source for m in conv.modules if m.fingerprint_source}),
    }
    report.details["converter"] = converter
    report.details["window"]["steps_window"] = converter["steps_window"]
    # The converter's own advice for modules without a fingerprint (rerun with TF_CPP_VMODULE)
    # does not fit here: this run had it. Say which modules and why instead.
    report.warnings += [w for w in conv.warnings if "has no fingerprint" not in w]
    if without:
        names = ", ".join(m.label for m in without[:10]) + (", ..." if len(without) > 10 else "")
        why = ("the log holds no 'Fingerprint before LHS' line" if log_fps == 0 else
               "neither the trace's HLO protos nor the log name their fingerprint")
        report.warnings.append(f"no profile file for {plural(len(without), 'module')}: {names} "
                               f"({why}).")
    suffix = files.SUFFIX[fmt]
    written = {fp: f"{fp}{suffix}" for fp in conv.profiles}
    report.modules = [
        {**row, "status": "written" if row["file"] else "no fingerprint"}
        for row in manifest.module_rows(conv.modules, written)]

    empty = not conv.profiles or all(p.is_empty() for p in conv.profiles.values())
    if empty:
        reasons = diagnose_empty(ex)
        if conv.modules and len(without) == len(conv.modules):
            reasons.append("no module in the trace has a fingerprint "
                           f"({plural(len(conv.modules), 'module')}), so none gets a file")
        elif conv.device_planes and conv.events_used == 0 and conv.events_outside_window:
            reasons.append(f"all {conv.events_outside_window} device events lie outside the "
                           "profiled steps")
        if log_fps == 0 and not conv.modules:
            reasons.append("no module fingerprint was found (the log holds no 'Fingerprint "
                           "before LHS' line)")
        report.reasons += reasons or ["the trace holds no device events of any module"]
        report.profile = {"path": str(Path(output).absolute()), "kind": "directory",
                          "format": fmt, "instructions": 0, "latencies": 0, "modules": {},
                          "files": [], "sha256": None, "converter": "pgle"}
        if not opts.allow_empty:
            report.status = "empty"
            report.exit_code = EXIT_ERROR
            report.profile["path"] = None
            report.summary.append("collect failed: the per-module profile is empty: "
                                  + "; ".join(report.reasons))
            report.summary.append("pass --allow-empty to write it anyway")
            return report
        report.warnings.append("the profile is empty (an empty directory written because of "
                               "--allow-empty): " + "; ".join(report.reasons))
        check_directory_target(output, force=opts.force)
        target = _write_empty_directory(output, force=opts.force)
        man_path = manifest.manifest_path(target)
        manifest.write(man_path, _per_module_manifest(opts, ex, report, converter, run_folder))
        report.details["manifest"] = str(man_path)
        report.status = "empty"
        report.summary.append(f"wrote {output}: no module profile (empty directory), "
                              f"manifest {man_path}")
        return report

    check_directory_target(output, force=opts.force)  # again: the run took a while
    target = files.write_profile_directory(conv.profiles, output, fmt=fmt, force=opts.force)
    # Read back exactly as XLA (and `pgle run --profile DIR`) will: <32-hex>.pb|.pbtxt files.
    source = files.load_profile_source(target)
    report.profile = {
        **source.to_dict(),
        "format": fmt, "converter": "pgle", "stat": conv.stat,
        "instructions": source.instruction_count, "latencies": source.latency_count,
    }
    report.profile.pop("ignored", None)
    man_path = manifest.manifest_path(target)
    manifest.write(man_path, _per_module_manifest(opts, ex, report, converter, run_folder))
    report.details["manifest"] = str(man_path)
    report.status = "collected"
    window = converter["steps_window"]
    where = (f"steps {window['first_step']}..{window['first_step'] + (window['steps'] or 1) - 1}"
             if window else "the whole trace")
    report.summary.append(
        f"wrote {output}: {plural(len(source.modules), 'module profile')}, "
        f"{source.instruction_count} instructions (stat {conv.stat}, {where}), manifest {man_path}")
    for row in report.modules[:20]:
        fp = row["fingerprint"] or "-"
        report.summary.append(
            f"  {row['module']}: {row['status']}, fingerprint {fp}"
            + (f" ({row['fingerprint_source']})" if row["fingerprint_source"] else "")
            + f", {row['instruction_count']} instructions, {row['event_count']} events")
    if len(report.modules) > 20:
        report.summary.append(f"  ... {len(report.modules) - 20} more (see --json)")
    return report


def _per_module_manifest(opts: CollectOptions, ex: Execution, report: Report, converter: dict,
                         run_folder: Path) -> dict:
    rows = [{k: v for k, v in m.items() if k != "status"} for m in report.modules]
    return manifest.build(
        workload_argv=list(opts.workload.argv()), user_flags=ex.child.user_flags,
        child_flags=ex.child.flags, environment=childenv.relevant(ex.child.env),
        backend=ex.events.backend, window=report.details["window"], profile=report.profile,
        trace_dir=str(run_folder), converter=converter, modules=rows,
        effective_flags=(ex.events.xla_flags_seen or {}).get("effective"))


def _write_empty_directory(output: str, *, force: bool) -> Path:
    """An empty profile directory (for --allow-empty), swapped in atomically like
    `profile.write_profile_directory` does; its manifest is written next."""
    path = Path(os.path.abspath(output))
    if path.is_dir() and any(path.iterdir()) and not force:
        raise BadInput(f"profile directory {path} already exists and is not empty.",
                       hint="Pass --force to replace it.")
    if path.is_dir() and not any(path.iterdir()):
        return path
    return replace_directory_atomic(path, lambda tmp: None)


LONG_CONVERSION_BYTES = 100 << 20  # say the size before converting a trace this big


def trace_bytes(run_folder: Path) -> int:
    total = 0
    for path in Path(run_folder).rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            pass
    return total


def window_summary(ex: Execution) -> dict:
    stop = ex.events.trace
    extra = {}
    if stop and stop.get("purpose") == "executions":
        extra = {"function": stop.get("function"), "first_execution": stop.get("first_execution"),
                 "executions": stop.get("executions")}
    return {**extra,
        "mode": ex.spec.profile.mode if ex.spec.profile else None,
        "first_step": stop.get("first_step") if stop else None,
        "steps": stop.get("steps") if stop else None,
        "seconds": round(stop["seconds"], 3) if stop and stop.get("seconds") is not None else None,
        "steps_seen": len(ex.events.steps),
        "trace_errors": ex.events.trace_errors,
        "purpose": stop.get("purpose") if stop else None,
        "stop_reason": stop.get("reason") if stop else None,
    }


def diagnose_empty(ex: Execution) -> list[str]:
    """Why a profile came out empty, most likely cause first."""
    reasons = []
    platform = ex.events.platform
    if platform and platform.lower() not in GPU_PLATFORMS:
        reasons.append(f"backend {platform}: XLA records instruction timings only on NVIDIA GPUs")
    elif platform is None:
        reasons.append("the workload never compiled anything with JAX")
    evidence = LogScanner().scan_file(ex.run.log)
    if evidence.cupti_contention or ex.child.env.get("NSYS_PROFILING_SESSION_ID"):
        reasons.append("CUPTI is held by another tool (Nsight Systems, DCGM: "
                       "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS); stop it while collecting")
    stop = ex.events.trace
    if stop is None:
        reasons.append("the profiling window never opened: the run ended before its first step "
                       f"({plural(len(ex.events.steps), 'step')} seen)")
    elif stop.get("steps") == 0:
        reasons.append("the profiling window saw no step")
    cb = ex.child.flags.get(flag_table.COMMAND_BUFFER)
    if cb is not None and cb.value not in ("", None) and platform in GPU_PLATFORMS:
        reasons.append(f"command buffers are on ({cb.raw}): kernels inside CUDA graphs are "
                       "invisible to the profiler; set --xla_gpu_enable_command_buffer=''")
    reasons += [f"profiler error: {e}" for e in ex.events.trace_errors]
    return reasons
