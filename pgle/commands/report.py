"""`pgle report RUN_FOLDER...`: what PGLE bought, and why, in one HTML page and one JSON report.

Input: a `pgle tune` run folder (its `collect/` phase ran without the profile, its `run/`
phase with it), or two run folders given as WITHOUT WITH, or one run folder alone. Each phase
contributes what it kept: step events (`events.jsonl`), XLA's per-module FLOPs and memory and
the scheduled HLO of modules with async ops (recorded by the harness), and a kept trace
(`trace/`) for exposed communication and the trace diagnostics. A section that cannot be
filled says why.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pgle.analysis import diagnostics, memory, overlap, schedule, throughput
from pgle.analysis.timeline import TraceFile, find_xplane_files
from pgle.errors import BadInput, EXIT_OK
from pgle.evidence.events import RunEvents, read_events
from pgle.evidence.steps import step_times
from pgle.report import Report

GPU_PLATFORMS = ("gpu", "cuda", "rocm")


@dataclasses.dataclass
class ReportOptions:
    run_dirs: list[str]
    output: str | None = None  # the HTML page
    force: bool = False
    dtype: str = "bf16"


def resolve_phases(run_dirs: list[str]) -> list[tuple[str, Path]]:
    """[(label, folder)]: 'without profile' / 'with profile' where that is known."""
    if not run_dirs:
        raise BadInput("no run folder given.", hint="Pass a .pgle/runs/<stamp>-tune-<pid>/ folder.")
    if len(run_dirs) > 2:
        raise BadInput(f"{len(run_dirs)} run folders given; pass one tune run folder, or two "
                       "run folders (without the profile, then with it).")
    folders = []
    for d in run_dirs:
        p = Path(d)
        if not p.is_dir():
            raise BadInput(f"run folder {d} does not exist or is not a directory.")
        folders.append(p)
    if len(folders) == 1:
        p = folders[0]
        if (p / "collect" / "events.jsonl").exists() and (p / "run" / "events.jsonl").exists():
            return [("without profile", p / "collect"), (_run_label(p / "run"), p / "run")]
        if not (p / "events.jsonl").exists():
            raise BadInput(f"{p} is not a pgle run folder (no events.jsonl, and no collect/ and "
                           "run/ phases).", hint="Pass a folder under .pgle/runs/.")
        return [(p.name, p)]
    for p in folders:
        if not (p / "events.jsonl").exists():
            raise BadInput(f"{p} is not a pgle run folder (no events.jsonl).",
                           hint="Pass folders under .pgle/runs/ (a tune folder's collect/ and run/).")
    return [("without profile", folders[0]), ("with profile", folders[1])]


def _run_label(folder: Path) -> str:
    """A tune run phase gets the profile only when phase 1 produced one (never on CPU)."""
    try:
        flags = (folder / "child_env.json").read_text(encoding="utf-8")
    except OSError:
        flags = ""
    return "with profile" if "pgle_profile_file_or_directory_path" in flags else \
        "run phase (no profile: phase 1 produced none)"


def _phase(label: str, folder: Path, dtype: str) -> dict[str, Any]:
    events: RunEvents = read_events(folder / "events.jsonl")
    excluded: set[int] = set()
    if events.trace and events.trace.get("first_step") is not None and events.trace.get("steps"):
        first = events.trace["first_step"]
        excluded = set(range(first, first + events.trace["steps"]))
    times = step_times(events.steps, excluded)
    modules = events.modules
    step_mod = throughput.step_module(modules)
    backend = events.backend or {}
    summary = throughput.summarize(times)
    phase: dict[str, Any] = {
        "label": label, "folder": str(folder), "platform": backend.get("platform"),
        "device_kind": backend.get("device_kind"), "device_count": backend.get("device_count"),
        "step_times_s": times, "step_time": summary,
        "profiled_steps_excluded": sorted(excluded),
        "step_module": step_mod and {k: step_mod.get(k) for k in
                                     ("module", "flops", "transcendentals", "bytes_accessed")},
        "modules": [{k: m.get(k) for k in ("module", "flops", "memory", "hlo_file")}
                    for m in modules],
        "throughput": throughput.throughput(summary and summary["median_s"],
                                            step_mod and step_mod.get("flops"),
                                            backend.get("device_kind"), backend.get("platform"),
                                            dtype),
        "recompilations": diagnostics.recompilations(events.compiles, events.steps),
    }
    if not modules:
        phase["why_no_modules"] = ("the run recorded no module_compiled events (run by a pgle "
                                   "without per-module recording, or jax internals changed)")
    phase.update(_trace_sections(folder, backend.get("platform")))
    return phase


def _trace_sections(folder: Path, platform: str | None) -> dict[str, Any]:
    files = find_xplane_files(folder / "trace") if (folder / "trace").is_dir() else []
    if not files:
        why = ("this phase kept no trace (only a profiling phase, such as tune's collect "
               "phase, runs the profiler)")
        return {"trace_files": [], "communication": None, "communication_why": why,
                "trace_diagnostics": None, "trace_diagnostics_why": why}
    steps_all = []
    acc = over = None
    for path in files:
        trace = TraceFile(path)
        steps = trace.host_steps()
        steps_all += steps
        acc = acc or overlap.OverlapAccumulator(steps)
        over = over or diagnostics.TraceDiagnostics(steps)
        for plane in trace.device_planes():
            acc.add(plane)
            over.add(plane)
        trace.planes = []
    comm = acc.result()
    out: dict[str, Any] = {"trace_files": files, "trace_steps": len(steps_all)}
    if comm["device_planes"] == 0:
        why = (f"the trace holds no device plane: XLA:{(platform or 'cpu').upper()} runs "
               "kernels on host threads, so it has no device timeline, no async collectives "
               "and nothing for PGLE to hide" if (platform or "cpu") not in GPU_PLATFORMS else
               "the trace holds no /device:GPU plane (was CUPTI available to the profiler?)")
        return out | {"communication": None, "communication_why": why,
                      "trace_diagnostics": None, "trace_diagnostics_why": why}
    out["communication"] = comm
    if comm["collectives"] == 0:
        out["communication_why"] = "the device planes hold no collective (a single-device program?)"
    out["trace_diagnostics"] = over.result()
    return out


def _schedule(before: dict, after: dict) -> tuple[dict | None, str | None]:
    def hlo(phase):
        mod = (phase.get("step_module") or {}).get("module")
        files = [m["hlo_file"] for m in phase["modules"] if m.get("hlo_file")
                 and (mod is None or m["module"] == mod)]
        return files[-1] if files else None

    b, a = hlo(before), hlo(after)
    if not b or not a:
        platform = before.get("platform") or after.get("platform")
        if platform and platform not in GPU_PLATFORMS:
            return None, (f"the step module has no async collective on {platform}: XLA:"
                          f"{platform.upper()} runs collectives synchronously, so there is no "
                          "start/done pair for a profile to move")
        return None, "no scheduled HLO with async ops was kept for the step module in both phases"
    for f in (a, b):
        if not os.path.exists(f):
            return None, f"the kept HLO {f} is gone"
    with open(b, encoding="utf-8") as fb, open(a, encoding="utf-8") as fa:
        result = schedule.compare(fb.read(), fa.read())
    result["before_file"], result["after_file"] = b, a
    return result, None


def build(opts: ReportOptions) -> dict[str, Any]:
    """The whole analysis as one JSON-ready dict."""
    phases = [_phase(label, folder, opts.dtype) for label, folder in resolve_phases(opts.run_dirs)]
    data: dict[str, Any] = {"phases": phases}
    if len(phases) == 2:
        before, after = phases
        data["step_ratio"] = throughput.ratio_interval(before["step_times_s"], after["step_times_s"])
        data["memory"] = memory.compare(before["modules"], after["modules"])
        data["schedule"], data["schedule_why"] = _schedule(before, after)
    else:
        data["step_ratio"] = None
        data["memory"] = memory.compare(phases[0]["modules"], [])
        data["schedule"], data["schedule_why"] = None, "one phase only: nothing to compare"
    return data


def report(opts: ReportOptions) -> Report:
    from pgle.analysis import html
    from pgle.atomic import check_writable_target, write_text_atomic

    if opts.output:
        check_writable_target(opts.output, force=opts.force, what="report")
    data = build(opts)
    rep = Report("report", "ok", exit_code=EXIT_OK, run_dir=", ".join(opts.run_dirs))
    rep.details["analysis"] = data
    rep.summary += summary_lines(data)
    if opts.output:
        write_text_atomic(opts.output, html.render(data))
        rep.details["html"] = str(Path(opts.output).resolve())
        rep.summary.append(f"report written to {opts.output}")
    return rep


def _ms(s):
    return f"{s * 1e3:.2f} ms"


def summary_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    for p in data["phases"]:
        st = p["step_time"]
        tp = p["throughput"]
        line = f"{p['label']}: " + (f"median step {_ms(st['median_s'])} (p25 {_ms(st['p25_s'])}, "
                                    f"p75 {_ms(st['p75_s'])}, n={st['count']})" if st else "no step times")
        if tp.get("achieved_tflops") is not None:
            line += f", {tp['achieved_tflops']:.3g} TFLOP/s per device"
        if tp.get("mfu") is not None:
            line += f", MFU {tp['mfu'] * 100:.2f} % ({tp['dtype']})"
        comm = p.get("communication")
        if comm and comm["span_ps"]:
            line += (f", exposed communication {comm['exposed_ps'] / 1e9 / max(comm['device_planes'], 1):.3f} ms "
                     f"per device ({(1 - comm['hidden_fraction']) * 100:.1f} % of {comm['collectives']} "
                     "collective executions)")
        lines.append(line)
    r = data.get("step_ratio")
    if r:
        lines.append(f"step-time ratio with/without the profile {r['ratio']:.3f} "
                     f"(95 % CI {r['low']:.3f}-{r['high']:.3f}: "
                     + ("beyond run-to-run noise)" if r["beyond_noise"] else "within run-to-run noise)"))
    s = data.get("schedule")
    if s:
        lines.append(f"schedule: {s['moved_count']} of {s['pair_count']} async pairs moved "
                     f"({s['more_overlap']} overlap more work, {s['less_overlap']} less)")
    grown = [m for m in data.get("memory") or [] if m["flagged"]]
    if grown:
        lines.append("peak memory grew with the profile: " + ", ".join(
            f"{m['module']} +{m['growth'] * 100:.1f} %" for m in grown[:3]))
    for p in data["phases"]:
        for r in p["recompilations"][:3]:
            lines.append(f"{p['label']}: {r['function']} compiled {r['count']}x after warm-up")
    return lines
