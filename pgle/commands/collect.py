"""`pgle collect`: profile a window of the workload and extract the PGLE profile."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

from pgle.launch import childenv
from pgle.xla import flag_table
from pgle.profiles import manifest
from pgle.profiles import files as profile
from pgle.profiles import jaxlib as trace
from pgle.atomic import check_writable_target, replace_directory_atomic
from pgle.errors import BadInput, EXIT_ERROR
from pgle.evidence.events import read_events
from pgle.launch.execution import Execution
from pgle.jobs.driver import DEFAULT_GATHER_TIMEOUT_S, JobRun
from pgle.launch.launcher import LaunchResult
from pgle.report import Report
from pgle.launch.runfolder import RunFolder
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import GPU_PLATFORMS
from pgle.launch.workload import Workload
from pgle.xla.flags import XlaFlags

CONVERTERS = ("jaxlib", "pgle")
FORMATS = (profile.BINARY, profile.TEXT)
DEFAULT_STAT = "median"
# XLA prints `Fingerprint before LHS for module <name>(<id>) = <hex>` at VLOG(1) of this file.
FINGERPRINT_VMODULE = "gpu_hlo_schedule"
FINGERPRINT_VLOG_LEVEL = 1
# Where collect keeps the child's environment, so a finished run folder can be re-extracted.
CHILD_ENV_FILE = "child_env.json"


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
    # Per-module collection: a directory of <fingerprint>.pb|.pbtxt files from pgle's converter.
    per_module: bool = False
    stat: str | None = None  # pgle's converter: median (default) | mean | min | max | pNN
    fmt: str | None = None  # per-module file format: binary (default) | text
    converter: str | None = None  # single file: jaxlib (default) | pgle
    qualify: bool = False  # pgle's single-file converter: <fingerprint>::name for every entry
    # Multi-process jobs (pgle/commands/collect_job.py): profile one rank only, the shared job folder,
    # rank 0's wait for the ranks' reports, the percentile of the merge of the ranks' profiles.
    rank: int | None = None
    job_dir: str | None = None
    gather_timeout: float | None = DEFAULT_GATHER_TIMEOUT_S
    merge_percentile: int = 90

    @property
    def uses_pgle_converter(self) -> bool:
        return self.per_module or self.converter == "pgle"

    @property
    def needs_fingerprints(self) -> bool:
        """The run must log XLA's `Fingerprint before LHS` lines."""
        return self.per_module or (self.converter == "pgle" and self.qualify)


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
    check_extraction_options(opts)
    if opts.output is not None:
        check_output(opts, opts.output)
    if opts.log:
        check_writable_target(opts.log, force=True, what="log")


def check_output(opts: CollectOptions, output: str) -> None:
    """Refuse an output before any work: a .pb/.pbtxt file (and its manifest) that would be
    overwritten without --force, or, with --per-module, anything but a new or empty directory."""
    if opts.per_module:
        check_directory_target(output, force=opts.force)
        return
    profile.profile_format(output)
    check_writable_target(output, force=opts.force, what="profile")
    check_writable_target(manifest.manifest_path(output), force=opts.force, what="manifest")


def check_extraction_options(opts: CollectOptions) -> None:
    """The options that choose how the trace becomes a profile, checked together."""
    from pgle.profiles.convert import parse_stat

    if opts.converter is not None and opts.converter not in CONVERTERS:
        raise BadInput(f"unknown converter '{opts.converter}': use jaxlib or pgle.")
    if opts.per_module and opts.converter == "jaxlib":
        raise BadInput("--per-module needs pgle's converter: jaxlib's pools every module into "
                       "one file.", hint="Drop --converter jaxlib.")
    if opts.stat is not None:
        if not opts.uses_pgle_converter:
            raise BadInput("--stat applies to pgle's converter: jaxlib's always takes the mean.",
                           hint="Add --per-module or --converter pgle.")
        parse_stat(opts.stat)
    if opts.qualify and opts.per_module:
        raise BadInput("--qualify is for a single file: a per-module directory already keeps "
                       "each module apart.")
    if opts.qualify and opts.converter != "pgle":
        raise BadInput("--qualify needs pgle's converter.", hint="Add --converter pgle.")
    if opts.fmt is not None:
        if opts.fmt not in FORMATS:
            raise BadInput(f"unknown format '{opts.fmt}': use binary or text.")
        if not opts.per_module:
            raise BadInput("--format applies to --per-module directories: a single profile's "
                           "format follows its extension (.pb binary, .pbtxt text).")


def check_directory_target(path: str, *, force: bool) -> Path:
    """`-o` with --per-module: a new or empty directory; a non-empty one only with --force,
    and only when it holds nothing but a profile directory's files (never the user's work)."""
    p = Path(path)
    name = str(path).rstrip("/" + os.sep)
    if os.path.splitext(name)[1] in profile.EXTENSIONS and not p.is_dir():
        raise BadInput(f"--per-module writes a directory of <fingerprint>.pb files, but -o {path} "
                       "names a single profile file.",
                       hint="Give a directory, e.g. -o profiles/, or drop --per-module.")
    if p.exists() and not p.is_dir():
        raise BadInput(f"-o {path} exists and is not a directory; --per-module writes a "
                       "directory of <fingerprint>.pb files.", hint="Choose another -o.")
    if p.is_dir():
        entries = sorted(e.name for e in p.iterdir())
        if entries and not force:
            raise BadInput(f"profile directory {path} already exists and is not empty.",
                           hint="Pass --force to replace it, or choose another -o.")
        foreign = [e for e in entries if not _profile_directory_entry(p / e)]
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise BadInput(f"{path} holds files that are not part of a profile directory "
                           f"({shown}); --force replaces only a directory of <fingerprint>.pb|"
                           ".pbtxt files and its manifest.json.", hint="Choose another -o.")
    check_writable_target(p, force=True, what="profile directory")
    return p


def _profile_directory_entry(path: Path) -> bool:
    if path.is_dir() or path.is_symlink():
        return False
    return path.name == "manifest.json" or profile.fingerprint_file_name(path.name) is not None


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


def collect(opts: CollectOptions, notify: Callable[[str], None] = lambda s: None,
            environ: dict[str, str] | None = None, job: JobRun | None = None) -> Report:
    """One process: the profile. One rank of a multi-process job: this rank's profile (see
    pgle/commands/collect_job.py for where it goes); rank 0 returns the job's report, with the merged
    profile. `job`: a phase of an enclosing job (tune)."""

    from pgle.commands import collect_job as job_profile

    environ = dict(os.environ if environ is None else environ)
    jr = job or JobRun.start("collect", environ, job_dir=opts.job_dir,
                             gather_timeout_s=opts.gather_timeout)
    say = jr.notifier(notify)

    def combine(jr_, reports, missing):
        return job_profile.combine(
            jr_, reports, missing, plan=job_profile.plan(opts.output, jr_, per_module=opts.per_module,
                                                         only_rank=opts.rank),
            force=opts.force, allow_empty=opts.allow_empty, percentile=opts.merge_percentile)

    return jr.complete(lambda: collect_rank(opts, jr, say, environ), combine)


def collect_rank(opts: CollectOptions, jr: JobRun, notify: Callable[[str], None],
                 environ: dict[str, str]) -> Report:
    from pgle.commands import collect_job as job_profile

    plan = job_profile.plan(opts.output, jr, per_module=opts.per_module, only_rank=opts.rank)
    log = jr.per_rank_path(opts.log, "--log")
    ropts = dataclasses.replace(opts, output=plan.rank_output, log=log)
    preflight(ropts, environ)
    if plan.merged_output is not None and jr.leader:
        check_output(opts, plan.merged_output)  # refuse now, not after the whole job ran
    run = RunFolder.create("collect", jr.run_dir(opts.run_dir))
    window = window_spec(opts, run.trace)
    output = plan.rank_output or str(run.path / ("profiles" if opts.per_module else "profile.pb"))
    user = childenv.xla_flags.XlaFlags.parse(environ.get("XLA_FLAGS"))
    xla = {}
    if user.get(flag_table.COMMAND_BUFFER) is None:
        # Kernels inside CUDA graphs are invisible to the profiler; auto PGLE turns
        # command buffers off for its profiling compile too (jax >= 0.4.x).
        xla[flag_table.COMMAND_BUFFER] = ""
    notices, warnings = [], []
    if opts.needs_fingerprints:
        environ, notices, warnings = fingerprint_environment(environ)
    child = childenv.build(environ, xla=xla)
    child.notices += notices
    child.warnings += warnings
    save_child_env(run, child)
    for line in child.notices:
        notify(line)
    if not plan.profiled:
        notify(f"running without the profiler (--rank {plan.only_rank}): "
               f"{opts.workload.describe()} (run folder {run.path})")
        execution = jr.execute(opts.workload, run, child, log_copy=log)
        return job_profile.not_profiled_report(jr, execution, plan.only_rank)
    notify(f"collecting: {opts.workload.describe()} (run folder {run.path})")
    execution = jr.execute(opts.workload, run, child, profile_window=window,
                           step_name=opts.step_name, log_copy=log)
    return finish_collect(ropts, execution, output, notify)


def finish_collect(opts: CollectOptions, ex: Execution, output: str,
                   notify: Callable[[str], None]) -> Report:
    report = Report("collect", "failed", log_path=str(ex.run.log), run_dir=str(ex.run.path),
                    trace_dir=str(ex.run.trace), workload_exit_code=ex.exit_code)
    report.warnings += ex.child.warnings
    window_warnings = [r["message"] for r in ex.events.of_kind("window_warning")]
    report.warnings += window_warnings
    report.reasons += window_warnings
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
    if opts.per_module:
        return finish_per_module(opts, ex, run_folder, output, report, notify)
    fmt = profile.profile_format(output)
    converter = None
    if opts.converter == "pgle":
        conv, converter = _convert_with_pgle(opts, ex, run_folder, per_module=False)
        report.warnings += conv.warnings
        prof = conv.profiles[""]
        payload = profile.encode_profile(prof, fmt)
    else:
        data = trace.convert_with_jaxlib(run_folder)
        prof = profile.parse_profile(data, "binary", str(run_folder))
        payload = data if fmt == "binary" else profile.encode_profile(prof, fmt)
    sha = hashlib.sha256(payload).hexdigest()
    report.profile = {"path": str(Path(output).absolute()), "sha256": sha,
                      "instructions": prof.instruction_count, "latencies": prof.latency_count,
                      "format": fmt, "converter": opts.converter or "jaxlib"}
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
        trace_dir=str(run_folder), converter=converter)
    man_path = manifest.manifest_path(output)
    # Both or neither: a profile without its manifest (full disk) would pass for a good one.
    profile.write_profile(payload, output, force=opts.force,
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

    window = steps_window(ex.events, _spec_mode(ex))
    conv = convert_trace_detailed(
        run_folder, per_module=per_module, stat=opts.stat or DEFAULT_STAT, log_path=ex.run.log,
        steps_window=(window["start_ns"], window["end_ns"]) if window else None,
        qualify=opts.qualify and not per_module)
    summary = {
        "name": "pgle", "per_module": per_module, "stat": conv.stat,
        "qualify": bool(opts.qualify and not per_module),
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
                      report: Report, notify: Callable[[str], None]) -> Report:
    """The kept trace -> a directory of `<fingerprint>.pb|.pbtxt` (what XLA reads as is) plus
    `manifest.json`; same empty-profile rules as a single file."""
    fmt = opts.fmt or profile.BINARY
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
        report.warnings.append(f"{len(without)} module(s) get no profile file: {names} ({why}).")
    suffix = profile.SUFFIX[fmt]
    written = {fp: f"{fp}{suffix}" for fp in conv.profiles}
    report.modules = [
        {**row, "status": "written" if row["file"] else "no fingerprint"}
        for row in manifest.module_rows(conv.modules, written)]

    empty = not conv.profiles or all(p.is_empty() for p in conv.profiles.values())
    if empty:
        reasons = diagnose_empty(ex)
        if conv.modules and len(without) == len(conv.modules):
            reasons.append(f"none of the {len(conv.modules)} module(s) in the trace has a "
                           "fingerprint, so none gets a file")
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
    target = profile.write_profile_directory(conv.profiles, output, fmt=fmt, force=opts.force)
    # Read back exactly as XLA (and `pgle run --profile DIR`) will: <32-hex>.pb|.pbtxt files.
    source = profile.load_profile_source(target)
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
        f"wrote {output}: {len(source.modules)} module profile(s), "
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
        trace_dir=str(run_folder), converter=converter, modules=rows)


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


# --- a finished run folder ----------------------------------------------------------------------


def save_child_env(run: RunFolder, child: childenv.ChildEnv) -> None:
    """What the manifest needs from the child's environment, kept in the run folder."""
    data = {"user_xla_flags": child.user_flags.render(), "xla_flags": child.flags.render(),
            "environment": childenv.relevant(child.env), "warnings": child.warnings}
    (run.path / CHILD_ENV_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def execution_from_run_folder(run_dir: str | Path) -> Execution:
    """The `Execution` a finished collect run left in its run folder (`workload.log`,
    `events.jsonl`, `trace/`, `child_env.json`), to extract its profile again."""
    path = Path(run_dir)
    if not path.is_dir():
        raise BadInput(f"run folder {run_dir} does not exist.")
    run = RunFolder(path.resolve())
    events = read_events(run.events)
    if not events.records:
        raise BadInput(f"run folder {run_dir} holds no events.jsonl from a pgle run.")
    code = (events.exit or {}).get("code")
    result = LaunchResult(exit_code=0 if code is None else int(code), signal=None,
                          duration_s=0.0, log_path=run.log)
    try:
        saved = json.loads((run.path / CHILD_ENV_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    child = childenv.ChildEnv(
        env=dict(saved.get("environment") or {}),
        user_flags=XlaFlags.parse(saved.get("user_xla_flags") or ""),
        flags=XlaFlags.parse(saved.get("xla_flags") or ""),
        notices=[], warnings=list(saved.get("warnings") or []))
    return Execution(run, result, events, child)


def finish_run_folder(opts: CollectOptions, run_dir: str | Path,
                      notify: Callable[[str], None] = lambda s: None) -> Report:
    """Extract the profile of a finished collect run folder, exactly as `collect` does after
    the run: same options (`per_module`, `stat`, `fmt`, `converter`, ...), same output rules."""
    check_extraction_options(opts)
    ex = execution_from_run_folder(run_dir)
    output = opts.output or str(ex.run.path / ("profiles" if opts.per_module else "profile.pb"))
    check_output(opts, output)
    return finish_collect(opts, ex, output, notify)


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
