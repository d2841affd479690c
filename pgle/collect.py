"""`pgle collect`: profile a window of the workload and extract the PGLE profile."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Callable

from pgle import childenv, flag_table, manifest, profile, trace
from pgle.atomic import check_writable_target
from pgle.errors import BadInput, EXIT_ERROR
from pgle.execution import Execution, execute
from pgle.report import Report
from pgle.runfolder import RunFolder
from pgle.verdict import GPU_PLATFORMS, LogScanner
from pgle.workload import Workload


@dataclasses.dataclass
class CollectOptions:
    workload: Workload
    output: str | None
    steps: tuple[int, int] | None = None  # (start, count)
    step_name: str | None = None
    delay: float | None = None
    duration: float | None = None
    force: bool = False
    allow_empty: bool = False
    run_dir: str | None = None
    log: str | None = None


def parse_steps(text: str) -> tuple[int, int]:
    """'10:5' -> (10, 5): profile 5 steps starting at step 10 (0-based)."""
    start, sep, count = text.partition(":")
    try:
        s, c = int(start), int(count)
    except ValueError:
        raise BadInput(f"--steps {text!r} is not START:COUNT (e.g. 10:5).") from None
    if not sep or s < 0 or c < 1:
        raise BadInput(f"--steps {text!r} is not START:COUNT with START >= 0 and COUNT >= 1.")
    return s, c


def window_spec(opts: CollectOptions, trace_dir: Path) -> dict:
    if opts.steps and (opts.delay is not None or opts.duration is not None):
        raise BadInput("--steps and --delay/--duration exclude each other: pick one window.")
    if opts.steps:
        start, count = opts.steps
        return {"mode": "steps", "start": start, "count": count, "step_name": opts.step_name,
                "dir": str(trace_dir)}
    if opts.delay is not None or opts.duration is not None:
        if (opts.delay or 0) < 0 or (opts.duration is not None and opts.duration <= 0):
            raise BadInput("--delay must be >= 0 and --duration > 0 seconds.")
        return {"mode": "time", "delay": opts.delay or 0.0, "duration": opts.duration,
                "step_name": opts.step_name, "dir": str(trace_dir)}
    # Steps 2..6 if the script marks steps, else the whole run.
    return {"mode": "auto", "step_name": opts.step_name, "dir": str(trace_dir)}


def preflight(opts: CollectOptions, environ: dict[str, str]) -> None:
    """Everything that can be refused before a launch."""
    if _truthy(environ.get("JAX_ENABLE_PGLE")):
        raise BadInput(
            "JAX_ENABLE_PGLE is on: auto PGLE's profiler session would collide with pgle's "
            "(ALREADY_EXISTS: Another profiling session active) and can kill the job.",
            hint="Unset JAX_ENABLE_PGLE for collect, or use `pgle auto`.")
    if opts.output is not None:
        profile.profile_format(opts.output)
        check_writable_target(opts.output, force=opts.force, what="profile")
        check_writable_target(manifest.manifest_path(opts.output), force=opts.force,
                              what="manifest")
    if opts.log:
        check_writable_target(opts.log, force=True, what="log")


def collect(opts: CollectOptions, notify: Callable[[str], None] = lambda s: None,
            environ: dict[str, str] | None = None) -> Report:
    environ = dict(os.environ if environ is None else environ)
    preflight(opts, environ)
    run = RunFolder.create("collect", opts.run_dir)
    window = window_spec(opts, run.trace)
    output = opts.output or str(run.path / "profile.pb")
    user = childenv.xla_flags.XlaFlags.parse(environ.get("XLA_FLAGS"))
    xla = {}
    if user.get(flag_table.COMMAND_BUFFER) is None:
        # Kernels inside CUDA graphs are invisible to the profiler; auto PGLE turns
        # command buffers off for its profiling compile too (jax >= 0.4.x).
        xla[flag_table.COMMAND_BUFFER] = ""
    child = childenv.build(environ, xla=xla)
    for line in child.notices:
        notify(line)
    notify(f"collecting: {opts.workload.describe()} (run folder {run.path})")
    execution = execute(opts.workload, run, child, profile_window=window,
                        step_name=opts.step_name, log_copy=opts.log)
    return finish_collect(opts, execution, output, notify)


def finish_collect(opts: CollectOptions, ex: Execution, output: str,
                   notify: Callable[[str], None]) -> Report:
    report = Report("collect", "failed", log_path=str(ex.run.log), run_dir=str(ex.run.path),
                    trace_dir=str(ex.run.trace), workload_exit_code=ex.exit_code)
    report.warnings += ex.child.warnings
    report.details["window"] = window_summary(ex)
    report.details["backend"] = ex.events.backend
    if ex.exit_code != 0:
        report.exit_code = ex.exit_code
        report.reasons.append(f"the workload exited with code {ex.exit_code}; no profile written.")
        report.summary.append(f"collect failed: the workload exited with code {ex.exit_code}")
        return report
    run_folder = trace.newest_run_folder(ex.run.trace)
    if run_folder is None:
        report.exit_code = EXIT_ERROR
        report.reasons += diagnose_empty(ex) or ["the profiler wrote no trace."]
        report.summary.append("collect failed: no trace was written; " + report.reasons[0])
        return report
    notify(f"trace kept at {run_folder} (open it with `pgle view {ex.run.path}`)")
    data = trace.convert_with_jaxlib(run_folder)
    prof = profile.parse_profile(data, "binary", str(run_folder))
    fmt = profile.profile_format(output)
    payload = data if fmt == "binary" else profile.encode_profile(prof, fmt)
    sha = hashlib.sha256(payload).hexdigest()
    report.profile = {"path": str(Path(output).absolute()), "sha256": sha,
                      "instructions": prof.instruction_count, "latencies": prof.latency_count,
                      "format": fmt}
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
    profile.write_profile(payload, output, force=opts.force)
    window = report.details["window"]
    man = manifest.build(
        workload_argv=list(opts.workload.argv()), user_flags=ex.child.user_flags,
        child_flags=ex.child.flags, environment=childenv.relevant(ex.child.env),
        backend=ex.events.backend, window=window, profile=report.profile,
        trace_dir=str(run_folder))
    man_path = manifest.manifest_path(output)
    manifest.write(man_path, man)
    report.details["manifest"] = str(man_path)
    report.status = "empty" if prof.is_empty() else "collected"
    report.summary.append(
        f"wrote {output}: {prof.instruction_count} instructions, {prof.latency_count} latencies"
        f" (sha256 {sha[:12]}), manifest {man_path}")
    return report


def window_summary(ex: Execution) -> dict:
    stop = ex.events.trace
    return {
        "mode": _spec_mode(ex),
        "first_step": stop.get("first_step") if stop else None,
        "steps": stop.get("steps") if stop else None,
        "seconds": round(stop["seconds"], 3) if stop and stop.get("seconds") is not None else None,
        "steps_seen": len(ex.events.steps),
        "trace_errors": ex.events.trace_errors,
    }


def _spec_mode(ex: Execution) -> str | None:
    import json

    try:
        return (json.loads(ex.run.spec.read_text()).get("profile") or {}).get("mode")
    except (OSError, ValueError):
        return None


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
                       f"({len(ex.events.steps)} step(s) seen)")
    elif stop.get("steps") == 0:
        reasons.append("the profiling window saw no step")
    cb = ex.child.flags.get(flag_table.COMMAND_BUFFER)
    if cb is not None and cb.value not in ("", None) and platform in GPU_PLATFORMS:
        reasons.append(f"command buffers are on ({cb.raw}): kernels inside CUDA graphs are "
                       "invisible to the profiler; set --xla_gpu_enable_command_buffer=''")
    reasons += [f"profiler error: {e}" for e in ex.events.trace_errors]
    return reasons


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")
