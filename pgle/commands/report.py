"""`pgle report RUN_FOLDER...`: what PGLE bought, and why, in one HTML page and one JSON report.

The truth first: the verdict, its reason and what to do head both the JSON (`verdict`) and the
page. Then the comparison tune made, never another one: for a `pgle tune` folder, its baseline
runs (no profile) against its runs with the profile (tune.json names them and holds the
numbers tune printed), or each `--compare` arm against `default`; tune's collect phase is
shown as what it was (the profiler on, command buffers off) and never compared. Two run
folders are WITHOUT and WITH; one run folder is shown alone. A run where no module applied
the profile is never labelled "with profile", and there is no ratio where tune said none.

Each side contributes what it kept: step times (pgle.evidence.jit_steps: markers, else the
executions of the step function), the step module (the step function's module, not the one
with the most FLOPs) with XLA's FLOPs and memory, compile times, the scheduled HLO, and the
short trace of its first run (exposed vs hidden communication per collective, before and
after). A section that cannot be filled says why.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from pgle import shared_folders
from pgle.analysis import diagnostics, memory, schedule, throughput
from pgle.commands import arms
from pgle.commands.run_trace import trace_sections
from pgle.errors import EXIT_OK, BadInput
from pgle.evidence import compiles
from pgle.evidence.event_kinds import JitFunctions
from pgle.evidence.events import RunEvents, read_events
from pgle.evidence.steps import summarize
from pgle.launch.step_rule import module_of
from pgle.phrases import plural
from pgle.report import Report
from pgle.verdicts.pgle_applied import GPU_PLATFORMS
from pgle.verdicts.statuses import Applied

APPLIED = (Applied.APPLIED, Applied.PARTIAL)


@dataclasses.dataclass
class ReportOptions:
    run_dirs: list[str]
    output: str | None = None  # the HTML page
    force: bool = False
    dtype: str = "bf16"


@dataclasses.dataclass
class Side:
    label: str
    role: str  # collect | baseline | with_profile | run | arm | single
    folders: list[Path]
    arm: str | None = None
    status: str | None = None  # the PGLE verdict of the side's runs, where a profile was given


def _is_run_folder(p: Path) -> bool:
    return (p / "events.jsonl").exists()


def _numbered(top: Path, base: str) -> list[Path]:
    """`base`, `base-2`, `base-3` ... that exist, in order."""
    out: list[Path] = []
    i = 1
    while True:
        p = top / (base if i == 1 else f"{base}-{i}")
        if not _is_run_folder(p):
            return out
        out.append(p)
        i += 1


def _collect_label(changed: list[str] | None) -> str:
    off = any("command buffers off" in c for c in changed or [])
    return "collect (profiler on" + (", command buffers off" if off else "") + ")"


def _profile_label(status: str | None, platform: str | None, runs: int) -> tuple[str, str]:
    """(label, role) of the side that was given the profile: "with profile" only when a
    module applied it."""
    n = f", {runs} run{'s' if runs != 1 else ''}"
    if status in APPLIED:
        return f"with profile{n}", "with_profile"
    if status is None:  # two folders given as WITHOUT WITH, the second without a log
        return f"with profile (no log to judge{n})", "with_profile"
    if platform and platform.lower() not in GPU_PLATFORMS:
        return f"run (no profile applies on backend {platform}{n})", "run"
    return f"run (profile {status or 'not applied'}{n})", "run"


def _verdict_of(folder: Path) -> dict[str, Any]:
    """The PGLE verdict of one run folder, from its log (as `pgle verify` would judge it)."""
    from pgle.evidence.xla_log import LogScanner
    from pgle.verdicts import sync_converted
    from pgle.verdicts.pgle_applied import judge

    events = read_events(folder / "events.jsonl")
    log = folder / "workload.log"
    if not log.exists():
        return {"status": None, "reasons": [f"{folder} kept no workload.log"]}
    v = judge(
        LogScanner().scan_file(log),
        platform=events.platform,
        jax_imported=events.jax_imported,
        executed=sync_converted.load_executed(events.modules),
    )
    return {"status": v.status, "reasons": v.reasons, "modules": v.modules}


def resolve(run_dirs: list[str]) -> tuple[list[Side], dict[str, Any] | None]:
    """The sides to show, and tune.json when the folder is a tune folder that has one."""
    if not run_dirs:
        raise BadInput("no run folder given.", hint="Pass a .pgle/runs/<stamp>-tune-<pid>/ folder.")
    if len(run_dirs) > 2:
        raise BadInput(
            f"{len(run_dirs)} run folders given; pass one tune run folder, or two "
            "run folders (without the profile, then with it)."
        )
    folders = []
    for d in run_dirs:
        p = Path(d)
        if not p.is_dir():
            raise BadInput(f"run folder {d} does not exist or is not a directory.")
        folders.append(p)
    if len(folders) == 2:
        for p in folders:
            if not _is_run_folder(p):
                raise BadInput(
                    f"{p} is not a pgle run folder (no events.jsonl).",
                    hint="Pass folders under .pgle/runs/ (a tune folder's baseline/ and run/).",
                )
        status = _verdict_of(folders[1])["status"]
        label, role = _profile_label(status, read_events(folders[1] / "events.jsonl").platform, 1)
        return [
            Side("without profile", "baseline", [folders[0]]),
            Side(label, role, [folders[1]], status=status),
        ], None
    top = folders[0]
    tune_file = top / arms.TUNE_JSON
    if tune_file.exists():
        try:
            tune = json.loads(tune_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BadInput(f"{tune_file} is not readable JSON ({e}).") from None
        return _tune_sides(top, tune), tune
    if _is_run_folder(top / "collect") and _is_run_folder(top / "run"):
        # A tune folder written before tune.json: its baseline and profiled runs by name.
        sides = [Side(_collect_label(None), "collect", [top / "collect"])]
        base, runs = _numbered(top, "baseline"), _numbered(top, "run")
        status = _verdict_of(runs[0])["status"]
        platform = read_events(runs[0] / "events.jsonl").platform
        if base:
            sides.append(
                Side(f"baseline (no profile, {plural(len(base), 'run')})", "baseline", base)
            )
        label, role = _profile_label(status, platform, len(runs))
        sides.append(Side(label, role, runs, status=status))
        return sides, None
    if not _is_run_folder(top):
        raise BadInput(
            f"{top} is not a pgle run folder (no events.jsonl, and no collect/ and run/ phases).",
            hint="Pass a folder under .pgle/runs/.",
        )
    return [Side(top.name, "single", [top])], None


def _tune_folder(top: Path, name: Any) -> Path:
    """A run folder tune.json names: one plain name inside the tune folder, never a path or a
    link out of it (a tune folder may sit in a shared folder others write: untrusted input)."""
    if not shared_folders.is_plain_name(name) or (top / name).is_symlink():
        raise BadInput(
            f"{top / arms.TUNE_JSON} names {name!r} as a run folder: not a folder inside "
            f"{top} (pgle reads nothing outside the tune folder).",
            hint="Pass the run folders themselves, or restore tune.json as tune wrote it.",
        )
    return top / name


def _tune_sides(top: Path, tune: dict[str, Any]) -> list[Side]:
    sides = [
        Side(
            _collect_label(tune.get("collect", {}).get("changed")),
            "collect",
            [_tune_folder(top, tune.get("collect", {}).get("folder", "collect"))],
        )
    ]
    for arm in tune.get("arms") or []:
        named = [_tune_folder(top, f) for f in arm.get("folders") or []]
        folders = [f for f in named if _is_run_folder(f)]
        if not folders:
            continue
        status = (arm.get("statuses") or [None])[0] if arm.get("pgle") else None
        if tune.get("plain"):
            if arm["name"] == arms.DEFAULT:
                sides.append(
                    Side(
                        f"baseline (no profile, {plural(len(folders), 'run')})",
                        "baseline",
                        folders,
                        arm["name"],
                    )
                )
            else:
                label, role = _profile_label(status, tune.get("platform"), len(folders))
                sides.append(Side(label, role, folders, arm["name"], status))
        else:
            what = arm.get("describe") or arm["name"]
            if arm.get("pgle") and status not in APPLIED:
                what += f"; profile {status}"
            sides.append(Side(f"arm {arm['name']} ({what})", "arm", folders, arm["name"], status))
    return sides


# -- one side --------------------------------------------------------------------------------
def _side(side: Side, dtype: str) -> dict[str, Any]:
    first = side.folders[0]
    events: RunEvents = read_events(first / "events.jsonl")
    times, steps = arms.pooled(side.folders)
    modules = events.modules
    step_name = steps.module if steps else None
    step_mod = next((m for m in reversed(modules) if step_name and m.module == step_name), None)
    step_source = "the step function" if step_mod else None
    if step_mod is None and step_name is None and not events.of(JitFunctions):
        # A run folder from before pgle recorded its jitted functions: the only evidence left
        # is XLA's cost analysis, and the module with the most FLOPs stands in (said so).
        step_mod = throughput.step_module(modules)
        step_source = (
            "the module with the most FLOPs (the run predates pgle's step detection)"
            if step_mod
            else None
        )
    backend = events.backend
    summary = summarize(times)
    phase: dict[str, Any] = {
        "label": side.label,
        "role": side.role,
        "arm": side.arm,
        "status": side.status,
        "folder": str(first),
        "folders": [str(f) for f in side.folders],
        "platform": events.platform,
        "device_kind": backend.device_kind if backend else None,
        "device_count": backend.device_count if backend else None,
        "step_times_s": times,
        "step_time": summary,
        "steps": steps.to_dict() if steps else None,
        "profiled_steps_excluded": steps.excluded if steps else 0,
        "step_module": step_mod
        and {
            "module": step_mod.module,
            "flops": step_mod.flops,
            "transcendentals": step_mod.transcendentals,
            "bytes_accessed": step_mod.bytes_accessed,
        },
        "step_module_source": step_source,
        "modules": [
            {"module": m.module, "flops": m.flops, "memory": m.memory, "hlo_file": m.hlo_file}
            for m in modules
        ],
        "throughput": throughput.throughput(
            summary["median_s"] if summary else None,
            step_mod.flops if step_mod else None,
            backend.device_kind if backend else None,
            events.platform,
            dtype,
        ),
        "compile": _compile(events, step_name),
        "recompilations": diagnostics.recompilations(events.compiles, events.steps),
    }
    if step_mod is None:
        if step_name:
            why = f"XLA recorded no module {step_name} (run by a pgle without per-module recording)"
        elif events.steps:  # the steps are marked: what is missing is the function inside them
            why = (
                "the StepTraceAnnotation steps ran no jitted function pgle could name (none "
                "executed 3 times or more inside them)"
            )
        else:
            why = (
                "no step was found (no StepTraceAnnotation markers, no jitted function executed "
                "3 times or more)"
            )
        phase["why_no_step_module"] = why
    if not modules:
        phase["why_no_modules"] = (
            "the run recorded no module_compiled events (run by a pgle "
            "without per-module recording, or jax internals changed)"
        )
    phase.update(trace_sections(first, events.platform))
    return phase


def _compile(events: RunEvents, step_module: str | None) -> dict[str, Any]:
    """Compile seconds of one run (jax's backend-compile events): all modules, the step's."""
    total = sum(float(c.seconds or 0.0) for c in events.compiles)
    step = [
        float(c.seconds or 0.0)
        for c in events.compiles
        if step_module and module_of(c.fun_name or "") == step_module
    ]
    made = compiles.executables(events)
    return {
        "total_s": total,
        "count": len(events.compiles),
        "step_module_s": sum(step) if step else None,
        # compiled or loaded from jax's persistent cache, per module and per kind (issue 33)
        "executables": made,
        "by_kind": compiles.by_kind(made),
        "label": compiles.label(made),
    }


def _schedule(before: dict, after: dict) -> tuple[dict | None, str | None]:
    def hlo(phase):
        mod = (phase.get("step_module") or {}).get("module")
        files = [
            m["hlo_file"]
            for m in phase["modules"]
            if m.get("hlo_file") and (mod is None or m["module"] == mod)
        ]
        return files[-1] if files else None

    b, a = hlo(before), hlo(after)
    platform = before.get("platform") or after.get("platform")
    synchronous = (
        f"the step module has no async collective on {platform}: XLA:"
        f"{(platform or '').upper()} runs collectives synchronously, so there is no "
        "start/done pair for a profile to move"
    )
    if not b or not a:
        if platform and platform not in GPU_PLATFORMS:
            return None, synchronous
        return None, "no scheduled HLO with async ops was kept for the step module in both phases"
    for f in (a, b):
        if not os.path.exists(f):
            return None, f"the kept HLO {f} is gone"
    with open(b, encoding="utf-8") as fb, open(a, encoding="utf-8") as fa:
        result = schedule.compare(fb.read(), fa.read())
    if not result["pair_count"]:
        # The harness also keeps modules with only synchronous collectives (for the verdict).
        if platform and platform not in GPU_PLATFORMS:
            return None, synchronous
        return None, "the step module's kept HLO has no async pair in either phase"
    result["before_file"], result["after_file"] = b, a
    return result, None


def communication_change(before: dict, after: dict) -> tuple[list[dict] | None, str | None]:
    """Per collective (HLO op and module): exposed and hidden time per device, before and
    after; the biggest exposure (either side) first."""
    cb, ca = before.get("communication"), after.get("communication")
    if not cb or not ca:
        missing = [p for p in (before, after) if not p.get("communication")]
        return None, "; ".join(f"{p['label']}: {p.get('communication_why')}" for p in missing)
    rows: dict[tuple, dict] = {}
    for side, c in (("before", cb), ("after", ca)):
        n = max(c["device_planes"], 1)
        for op in c.get("per_op") or c.get("top_exposed") or []:
            row = rows.setdefault(
                (op["op"], op["module"]), {"op": op["op"], "module": op["module"]}
            )
            row[f"{side}_exposed_ps"] = op["exposed_ps"] / n
            row[f"{side}_hidden_ps"] = (op["span_ps"] - op["exposed_ps"]) / n
            row[f"{side}_count"] = op["count"]
    out = sorted(
        rows.values(),
        key=lambda r: -max(r.get("before_exposed_ps") or 0, r.get("after_exposed_ps") or 0),
    )
    return out, None


def _verdict(sides: list[Side], tune: dict | None, data: dict[str, Any]) -> dict[str, Any]:
    """The verdict, its reason and what to do: the page's and the JSON's first word."""
    if tune is not None:
        v = dict(tune.get("verdict") or {})
    else:
        profiled = next((s for s in sides if s.role in ("with_profile", "run")), None)
        target = profiled or sides[-1]
        v = _verdict_of(target.folders[0])
        v.pop("modules", None)
    status = v.get("status")
    platform = next((p["platform"] for p in data["phases"] if p.get("platform")), None)
    r = data.get("step_ratio")
    if status == Applied.NOT_APPLICABLE:
        todo = (
            f"nothing to do on backend {platform}: PGLE is an XLA:GPU feature; run this "
            "on an NVIDIA GPU to learn what it buys"
        )
    elif status == Applied.APPLIED:
        if r is None:
            todo = "the profile applies; " + (data.get("step_ratio_why") or "no step-time ratio")
        elif r["beyond_noise"] and r["ratio"] < 1:
            todo = f"keep the profile: steps are {(1 - r['ratio']) * 100:.1f} % faster with it"
        elif r["beyond_noise"]:
            todo = (
                f"the profile makes steps {(r['ratio'] - 1) * 100:.1f} % slower: run without "
                "it, or collect it again from a longer window"
            )
        else:
            todo = (
                "the profile applies but the step time does not change beyond run-to-run "
                "noise: the schedule was already good (or the job is not communication-"
                "bound); PGLE is not worth its runs here"
            )
    elif status == Applied.PARTIAL:
        todo = (
            "collect the profile again from this exact program (same flags, shapes, "
            "sharding, jax version); the modules below say what it misses"
        )
    elif status == Applied.NOT_APPLIED:
        todo = "make sure the profile flag reaches XLA (see the reasons) and run again"
    elif status == "error":
        todo = "fix what the reasons say, then run again"
    else:
        todo = "no verdict: the run left no log to judge"
    return {"status": status, "reasons": v.get("reasons") or [], "what_to_do": todo}


def build(opts: ReportOptions) -> dict[str, Any]:
    """The whole analysis as one JSON-ready dict, the verdict first."""
    sides, tune = resolve(opts.run_dirs)
    phases = [_side(s, opts.dtype) for s in sides]
    data: dict[str, Any] = {"verdict": None, "phases": phases}
    before = next((p for p in phases if p["role"] == "baseline"), None)
    after = next((p for p in phases if p["role"] in ("with_profile", "run")), None)
    if tune is not None and tune.get("compare"):
        before = next((p for p in phases if p.get("arm") == arms.DEFAULT), None)
        after = next((p for p in phases if p["role"] == "arm" and p.get("arm") == "pgle"), None)
        data["compare"] = tune["compare"]
    data["collect_changed"] = (tune or {}).get("collect", {}).get("changed")
    data["comparison"] = (
        {"before": before["label"], "after": after["label"]} if before and after else None
    )
    data["step_ratio"], data["step_ratio_why"] = _ratio(sides, tune, before, after)
    if before and after:
        data["memory"] = memory.compare(before["modules"], after["modules"])
        data["schedule"], data["schedule_why"] = _schedule(before, after)
        data["communication_change"], data["communication_change_why"] = communication_change(
            before, after
        )
        data["compile"] = {"before": before["compile"], "after": after["compile"]}
    else:
        only = after or before or phases[-1]
        data["memory"] = memory.compare(only["modules"], [])
        platform = only.get("platform")
        data["schedule"], data["schedule_why"] = (
            None,
            (
                _schedule(only, only)[1]
                if platform and platform not in GPU_PLATFORMS
                else "one side only: nothing to compare"
                if not tune
                else "no baseline run to compare with (tune runs one when a profile can apply: "
                "on a GPU)"
            ),
        )
        data["communication_change"], data["communication_change_why"] = None, data["schedule_why"]
        data["compile"] = {"before": None, "after": only["compile"]}
    data["verdict"] = _verdict(sides, tune, data)
    data["tune_lines"] = _tune_lines(tune)
    return data


def _tune_lines(tune: dict | None) -> list[str] | None:
    """The step-time lines `pgle tune` printed, rebuilt from its tune.json by the same code."""
    if tune is None:
        return None
    if tune.get("compare"):
        from pgle.commands.compare import table_lines

        return table_lines(tune["compare"])
    if tune.get("step_times"):
        profiled = any(a.get("profile") for a in tune.get("arms") or [])
        return arms.step_time_lines(tune["step_times"], profiled=profiled)
    return None


def _ratio(sides: list[Side], tune: dict | None, before, after) -> tuple[dict | None, str]:
    """tune's own ratio (tune.json), else the same computation on the folders."""
    if tune is not None:
        if tune.get("compare"):
            row = next((r for r in tune["compare"]["arms"] if r["arm"] == "pgle"), None)
            if row is None:
                return None, "the compared arms hold no plain pgle arm: see the arms table"
            return row.get("interval"), row.get("why_no_ratio") or ""
        times = tune.get("step_times") or {}
        return times.get("interval"), times.get("caveat") or ""
    if before is None or after is None:
        return None, "one side only: nothing to compare"
    side_of = {s.label: s for s in sides}
    b, a = side_of[before["label"]], side_of[after["label"]]
    platform = after.get("platform") or before.get("platform")
    times = arms.compare_step_times(
        Path("/nonexistent"),
        b.folders,
        a.folders,
        platform=platform,
        applied=a.status in APPLIED or a.status is None,
    )
    return times.get("interval"), times.get("caveat") or ""


def report(opts: ReportOptions) -> Report:
    from pgle.analysis import html
    from pgle.atomic import check_writable_target, write_text_atomic

    if opts.output:
        check_writable_target(opts.output, force=opts.force, what="report")
    data = build(opts)
    v = data["verdict"]
    # The truth first: the JSON's status is the runs' PGLE verdict (the report itself
    # succeeded: exit 0), with its reasons and what to do.
    rep = Report(
        "report",
        v["status"] or "unknown",
        exit_code=EXIT_OK,
        run_dir=", ".join(opts.run_dirs),
        reasons=list(v["reasons"]),
    )
    rep.details["what_to_do"] = v["what_to_do"]
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
    v = data["verdict"]
    lines = [
        f"verdict: {v['status']}: " + " ".join(v["reasons"][:1]),
        f"what to do: {v['what_to_do']}",
    ]
    for p in data["phases"]:
        st = p["step_time"]
        tp = p["throughput"]
        line = f"{p['label']}: " + (
            f"median step {_ms(st['median_s'])} (p25 {_ms(st['p25_s'])}, "
            f"p75 {_ms(st['p75_s'])}, n={st['count']})"
            if st
            else "no step times"
        )
        if tp.get("achieved_tflops") is not None:
            line += f", {tp['achieved_tflops']:.3g} TFLOP/s per device"
        if tp.get("mfu") is not None:
            line += f", MFU {tp['mfu'] * 100:.2f} % ({tp['dtype']})"
        comm = p.get("communication")
        if comm and comm["span_ps"]:
            per_device_ms = comm["exposed_ps"] / 1e9 / max(comm["device_planes"], 1)
            line += (
                f", exposed communication {per_device_ms:.3f} ms per device "
                f"({(1 - comm['hidden_fraction']) * 100:.1f} % of {comm['collectives']} "
                "collective executions)"
            )
        lines.append(line)
    r = data.get("step_ratio")
    if r:
        lines.append(
            f"step-time ratio with/without the profile {r['ratio']:.3f} "
            f"({r['confidence']:.0%} interval {r['low']:.3f}..{r['high']:.3f}: "
            + ("beyond" if r["beyond_noise"] else "within")
            + " run-to-run noise)"
        )
    elif data.get("step_ratio_why"):
        lines.append(data["step_ratio_why"])
    if data.get("compare"):
        from pgle.commands.compare import predicted_vs_measured

        lines += predicted_vs_measured(data["compare"])
    s = data.get("schedule")
    if s:
        lines.append(
            f"schedule: {s['moved_count']} of {s['pair_count']} async pairs moved "
            f"({s['more_overlap']} overlap more work, {s['less_overlap']} less)"
        )
    grown = [m for m in data.get("memory") or [] if m["flagged"]]
    if grown:
        lines.append(
            "peak memory grew with the profile: "
            + ", ".join(f"{m['module']} +{m['growth'] * 100:.1f} %" for m in grown[:3])
        )
    for p in data["phases"]:
        for rc in p["recompilations"][:3]:
            lines.append(f"{p['label']}: {rc['function']} compiled {rc['count']}x after warm-up")
    return lines
