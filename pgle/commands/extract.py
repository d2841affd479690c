"""`pgle collect`'s extraction: the kept trace -> the PGLE profile.

One file (jaxlib's converter, the mean over everything profiled; or pgle's, `--stat` over the
profiled steps only) or a directory of `<fingerprint>.pb|.pbtxt` files (`--per-module`), each
with its manifest (both or neither); and, when the profile comes out empty, why (most likely
cause first). The run itself (window, launch, crashes, the store) is pgle.commands.collect's.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgle.atomic import replace_directory_atomic
from pgle.commands.options import DEFAULT_STAT, PER_MODULE_FORMAT
from pgle.errors import EXIT_ERROR, BadInput, ProfileError, exists_error
from pgle.evidence.event_kinds import TraceProbe, TraceStart
from pgle.evidence.events import RunEvents
from pgle.evidence.xla_log import LogScanner
from pgle.launch import childenv
from pgle.launch.execution import Execution
from pgle.phrases import all_of, plural
from pgle.profiles import files, jaxlib, manifest
from pgle.profiles.trace_contents import TraceContents, read_contents
from pgle.profiles.xspace_file import find_xplane_files
from pgle.report import Report
from pgle.units import human_bytes
from pgle.verdicts.pgle_applied import GPU_PLATFORMS
from pgle.verdicts.statuses import Collected, Written
from pgle.xla import flag_table

if TYPE_CHECKING:
    from pgle.commands.options import CollectOptions

log = logging.getLogger(__name__)

LONG_CONVERSION_BYTES = 100 << 20  # say the size before converting a trace this big


def extract(
    opts: CollectOptions, ex: Execution, run_folder: Path, output: str, report: Report
) -> Report:
    """The trace in `run_folder` -> the profile at `output` (and its manifest), into `report`."""
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
        report.details["conversion"] = (
            f"skipped: the trace holds no GPU plane (backend "
            f"{ex.events.platform}): no instruction timings"
        )
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
    report.profile = {
        "path": str(Path(output).absolute()),
        "sha256": sha,
        "instructions": prof.instruction_count,
        "latencies": prof.latency_count,
        "format": fmt,
        "converter": opts.extraction.converter or "jaxlib",
    }
    if converter is not None:
        report.details["converter"] = converter
        report.details["window"]["steps_window"] = converter["steps_window"]
    if prof.is_empty():
        report.reasons += diagnose_empty(ex)
        if not opts.allow_empty:
            return _refused_empty(report, "the profile")
        report.warnings.append(
            "the profile is empty (written because of --allow-empty): " + "; ".join(report.reasons)
        )
    man = _manifest(opts, ex, report, converter, run_folder)
    man_path = manifest.manifest_path(output)
    # Both or neither: a profile without its manifest (full disk) would pass for a good one.
    files.write_profile(
        payload, output, force=opts.force, companions={man_path: manifest.text(man).encode("utf-8")}
    )
    report.details["manifest"] = str(man_path)
    report.status = Collected.EMPTY if prof.is_empty() else Collected.COLLECTED
    report.summary.append(
        f"wrote {output}: {plural(prof.instruction_count, 'instruction')}, "
        f"{plural(prof.latency_count, 'latency')}"
        f" (sha256 {sha[:12]}), manifest {man_path}"
    )
    return report


def _refused_empty(report: Report, what: str) -> Report:
    """An empty profile without --allow-empty: nothing written, exit 1, the diagnosis said."""
    report.status = Collected.EMPTY
    report.exit_code = EXIT_ERROR
    assert report.profile is not None
    report.profile["path"] = None
    report.summary.append(f"collect failed: {what} is empty: " + "; ".join(report.reasons))
    report.summary.append("pass --allow-empty to write it anyway")
    return report


def check_directory_target(path: str, *, force: bool) -> Path:
    """`-o` with --per-module: a new or empty directory; a non-empty one only with --force,
    and only when it holds nothing but a profile directory's files (never the user's work)."""
    p = Path(path)
    name = str(path).rstrip("/" + os.sep)
    if os.path.splitext(name)[1] in files.EXTENSIONS and not p.is_dir():
        raise BadInput(
            f"--per-module writes a directory of <fingerprint>.pbtxt files, but "
            f"-o {path} names a single profile file.",
            hint="Give a directory, e.g. -o profiles/, or drop --per-module.",
        )
    if p.exists() and not p.is_dir():
        raise BadInput(
            f"-o {path} exists and is not a directory; --per-module writes a "
            "directory of <fingerprint>.pbtxt files.",
            hint="Choose another -o.",
        )
    return files.check_directory_output(p, force=force)


def steps_window(events: RunEvents, mode: str | None = None) -> dict[str, Any] | None:
    """The steady-state window of a step-window trace, in Unix-epoch nanoseconds: from the
    first profiled step's entry (earlier work, warm-up and compilation included, lies outside)
    to the trace stop (the harness waits for the devices before stopping, so the last step's
    device work is inside). None for a time window (`mode` 'time') or a whole-run trace: all
    of it counts."""
    stop = events.trace
    if mode == "time" or not stop or stop.purpose != "window" or stop.first_step is None:
        return None
    first = next((s for s in events.steps if s.index == stop.first_step), None)
    if first is None:
        return None
    start_ns, end_ns = int(first.t_enter * 1e9), int(stop.t * 1e9)
    if end_ns < start_ns:
        return None
    return {
        "start_ns": start_ns,
        "end_ns": end_ns,
        "first_step": stop.first_step,
        "steps": stop.steps,
        "rule": "first profiled step's entry to the trace stop (events.jsonl)",
    }


def _convert_with_pgle(opts: CollectOptions, ex: Execution, run_folder: Path, *, per_module: bool):
    """pgle's converter on the kept trace, with the run's log and its steady-state window."""
    from pgle.profiles.convert import convert_trace_detailed

    window = steps_window(ex.events, ex.spec.profile.mode if ex.spec.profile else None)
    conv = convert_trace_detailed(
        run_folder,
        per_module=per_module,
        stat=opts.extraction.stat or DEFAULT_STAT,
        log_path=ex.run.log,
        steps_window=(window["start_ns"], window["end_ns"]) if window else None,
        qualify=opts.extraction.qualify and not per_module,
    )
    summary = {
        "name": "pgle",
        "per_module": per_module,
        "stat": conv.stat,
        "qualify": bool(opts.extraction.qualify and not per_module),
        "steps_window": window,
        "log": str(ex.run.log),
        "xplane_files": [os.path.basename(f) for f in conv.xplane_files],
        "device_planes": conv.device_planes,
        "events_used": conv.events_used,
        "events_outside_window": conv.events_outside_window,
    }
    return conv, summary


def _log_fingerprint_count(log: Path) -> int:
    from pgle.profiles.convert import read_log_fingerprints

    try:
        return len(read_log_fingerprints(log)[0])
    except BadInput:
        return 0


def finish_per_module(
    opts: CollectOptions, ex: Execution, run_folder: Path, output: str, report: Report
) -> Report:
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
        why = (
            "the log holds no 'Fingerprint before LHS' line"
            if log_fps == 0
            else "neither the trace's HLO protos nor the log name their fingerprint"
        )
        report.warnings.append(
            f"no profile file for {plural(len(without), 'module')}: {names} ({why})."
        )
    suffix = files.SUFFIX[fmt]
    written = {fp: f"{fp}{suffix}" for fp in conv.profiles}
    report.modules = [
        {**row, "status": Written.WRITTEN if row["file"] else Written.NO_FINGERPRINT}
        for row in manifest.module_rows(conv.modules, written)
    ]

    empty = not conv.profiles or all(p.is_empty() for p in conv.profiles.values())
    if empty:
        reasons = diagnose_empty(ex)
        if conv.modules and len(without) == len(conv.modules):
            reasons.append(
                "no module in the trace has a fingerprint "
                f"({plural(len(conv.modules), 'module')}), so none gets a file"
            )
        elif conv.device_planes and conv.events_used == 0 and conv.events_outside_window:
            reasons.append(
                f"{all_of(conv.events_outside_window, 'device event')} "
                "lie outside the profiled steps"
            )
        if log_fps == 0 and not conv.modules:
            reasons.append(
                "no module fingerprint was found (the log holds no 'Fingerprint before LHS' line)"
            )
        report.reasons += reasons or ["the trace holds no device events of any module"]
        report.profile = {
            "path": str(Path(output).absolute()),
            "kind": "directory",
            "format": fmt,
            "instructions": 0,
            "latencies": 0,
            "modules": {},
            "files": [],
            "sha256": None,
            "converter": "pgle",
        }
        if not opts.allow_empty:
            return _refused_empty(report, "the per-module profile")
        report.warnings.append(
            "the profile is empty (an empty directory written because of "
            "--allow-empty): " + "; ".join(report.reasons)
        )
        check_directory_target(output, force=opts.force)
        target = _write_empty_directory(output, force=opts.force)
        man_path = manifest.manifest_path(target)
        manifest.write(
            man_path, _manifest(opts, ex, report, converter, run_folder, per_module=True)
        )
        report.details["manifest"] = str(man_path)
        report.status = Collected.EMPTY
        report.summary.append(
            f"wrote {output}: no module profile (empty directory), manifest {man_path}"
        )
        return report

    check_directory_target(output, force=opts.force)  # again: the run took a while
    target = files.write_profile_directory(conv.profiles, output, fmt=fmt, force=opts.force)
    # Read back exactly as XLA (and `pgle run --profile DIR`) will: <32-hex>.pb|.pbtxt files.
    source = files.load_profile_source(target)
    report.profile = {
        **source.to_dict(),
        "format": fmt,
        "converter": "pgle",
        "stat": conv.stat,
        "instructions": source.instruction_count,
        "latencies": source.latency_count,
    }
    report.profile.pop("ignored", None)
    man_path = manifest.manifest_path(target)
    manifest.write(man_path, _manifest(opts, ex, report, converter, run_folder, per_module=True))
    report.details["manifest"] = str(man_path)
    report.status = Collected.COLLECTED
    window = converter["steps_window"]
    where = (
        f"steps {window['first_step']}..{window['first_step'] + (window['steps'] or 1) - 1}"
        if window
        else "the whole trace"
    )
    report.summary.append(
        f"wrote {output}: {plural(len(source.modules), 'module profile')}, "
        f"{plural(source.instruction_count, 'instruction')} (stat {conv.stat}, {where}), "
        f"manifest {man_path}"
    )
    for row in report.modules[:20]:
        fp = row["fingerprint"] or "-"
        report.summary.append(
            f"  {row['module']}: {row['status']}, fingerprint {fp}"
            + (f" ({row['fingerprint_source']})" if row["fingerprint_source"] else "")
            + f", {plural(row['instruction_count'], 'instruction')}, "
            + plural(row["event_count"], "event")
        )
    if len(report.modules) > 20:
        report.summary.append(f"  ... {len(report.modules) - 20} more (see --json)")
    return report


def _manifest(
    opts: CollectOptions,
    ex: Execution,
    report: Report,
    converter: dict | None,
    run_folder: Path,
    per_module: bool = False,
) -> dict:
    rows = [{k: v for k, v in m.items() if k != "status"} for m in report.modules]
    return manifest.build(
        workload_argv=list(opts.workload.argv()),
        user_flags=ex.child.user_flags,
        child_flags=ex.child.flags,
        environment=childenv.relevant(ex.child.env),
        backend=ex.events.backend_record,
        window=report.details["window"],
        profile=report.profile,
        trace_dir=str(run_folder),
        converter=converter,
        modules=rows if per_module else None,
        effective_flags=ex.events.xla_flags_seen.effective if ex.events.xla_flags_seen else None,
    )


def _write_empty_directory(output: str, *, force: bool) -> Path:
    """An empty profile directory (for --allow-empty), swapped in atomically like
    `files.write_profile_directory` does; its manifest is written next."""
    path = Path(os.path.abspath(output))
    if path.is_dir() and any(path.iterdir()) and not force:
        raise exists_error(f"profile directory {path} already exists and is not empty.")
    if path.is_dir() and not any(path.iterdir()):
        return path
    return replace_directory_atomic(path, lambda tmp: None)


def trace_bytes(run_folder: Path) -> int:
    total = 0
    for path in Path(run_folder).rglob("*"):
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def trace_figures(ex: Execution, run_folder: Path, report: Report) -> None:
    """The trace's size, its export time and what the profiler was asked for, into the report
    (`window.trace`); a warning where the trace shows that an option did not take (issue 36:
    jax.profiler ignores some settings without a word, jax #39938)."""
    stop = ex.events.trace
    starts = [r for r in ex.events.of(TraceStart) if r.purpose in ("window", "executions")]
    record = starts[-1].options if starts and stop and stop.purpose != "script" else None
    probes = ex.events.of(TraceProbe)
    try:
        xplanes = find_xplane_files(run_folder)
    except ProfileError:  # no xplane.pb: the extraction says so
        xplanes = []
    contents = read_contents(xplanes)
    spec = ex.spec.profile
    figures: dict[str, Any] = {
        "bytes": contents.bytes,
        "files": contents.files,
        "stop_trace_seconds": (
            round(stop.stop_trace_seconds, 6)
            if stop and stop.stop_trace_seconds is not None
            else None
        ),
        "detail": record.get("detail") if record else None,
        "options": record.get("asked") if record else None,
        "options_ignored": record.get("ignored") if record else None,
        "options_why": record.get("why") if record else None,
        "max_bytes": spec.max_bytes if spec else None,
        "probe": (
            {k: v for k, v in probes[-1].to_dict().items() if k not in ("kind", "t")}
            if probes
            else None
        ),
        "contents": contents.to_dict(),
    }
    report.details["window"]["trace"] = figures
    took = figures["stop_trace_seconds"]
    what = (
        "jax.profiler's defaults"
        if not record or not record.get("asked")
        else "pgle's profiler options: no Python tracer, host annotations only"
    )
    log.info(
        f"the trace: {human_bytes(contents.bytes)}"
        + (f", written by stop_trace in {took:.2f} s" if took is not None else "")
        + (f" ({what})" if record else "")
    )
    report.warnings += option_warnings((record or {}).get("asked") or {}, contents, run_folder)


def option_warnings(
    asked: dict[str, Any], contents: TraceContents, run_folder: Path | str
) -> list[str]:
    """What the written trace shows of the options pgle asked for (`asked`: the profiler
    options that were set), as warnings: an option that did not take, a trace lost to
    protobuf's size limit."""
    warnings = []
    if asked.get("python_tracer_level") == 0 and contents.python_event_kinds:
        warnings.append(
            f"the JAX profiler was asked for no Python tracer (python_tracer_level=0) but the "
            f"trace holds {plural(contents.python_event_kinds, 'kind')} of Python-call events: "
            "the option did not take, so the trace is bigger and its export slower than pgle "
            "asked"
        )
    written = contents.files > contents.empty_files
    if asked.get("host_tracer_level") and written and not contents.host_event_kinds:
        warnings.append(
            "the JAX profiler was asked for host events (host_tracer_level="
            f"{asked['host_tracer_level']}) but the trace holds none: `pgle report` sees "
            "no step in it"
        )
    if contents.empty_files:
        warnings.append(
            f"{plural(contents.empty_files, 'trace file')} of {run_folder} "
            f"{'is' if contents.empty_files == 1 else 'are'} empty: the profiler writes an "
            "XSpace of 2 GiB or more as 0 bytes (protobuf's limit); profile fewer steps "
            "(--steps, --trace-max-bytes)"
        )
    return warnings


def window_summary(ex: Execution) -> dict:
    stop = ex.events.trace
    extra = {}
    if stop and stop.purpose == "executions":
        extra = {
            "function": stop.function,
            "first_execution": stop.first_execution,
            "executions": stop.executions,
        }
    return {
        **extra,
        "mode": ex.spec.profile.mode if ex.spec.profile else None,
        "first_step": stop.first_step if stop else None,
        "steps": stop.steps if stop else None,
        "seconds": round(stop.seconds, 3) if stop and stop.seconds is not None else None,
        "steps_seen": len(ex.events.steps),
        "trace_errors": ex.events.trace_errors,
        "purpose": stop.purpose if stop else None,
        "stop_reason": stop.reason if stop else None,
    }


def window_never_opened(ex: Execution) -> str:
    """Why no trace exists, in the terms of the window that was asked for."""
    spec = ex.spec.profile
    if spec is not None and spec.mode == "time":
        return (
            "the profiling window never opened: the run ended before "
            f"--delay {spec.delay or 0:g} s had passed (a shorter --delay, or a longer run)"
        )
    return (
        "the profiling window never opened: the run ended before its first step "
        f"({plural(len(ex.events.steps), 'step')} seen)"
    )


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
        reasons.append(
            "CUPTI is held by another tool (Nsight Systems, DCGM: "
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS); stop it while collecting"
        )
    stop = ex.events.trace
    if stop is None:
        reasons.append(window_never_opened(ex))
    elif stop.steps == 0:
        reasons.append("the profiling window saw no step")
    cb = ex.child.flags.get(flag_table.COMMAND_BUFFER)
    if cb is not None and cb.value not in ("", None) and platform in GPU_PLATFORMS:
        reasons.append(
            f"command buffers are on ({cb.raw}): kernels inside CUDA graphs are "
            "invisible to the profiler; set --xla_gpu_enable_command_buffer=''"
        )
    reasons += [f"profiler error: {e}" for e in ex.events.trace_errors]
    return reasons
