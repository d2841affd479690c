"""`pgle tune --compare`: one table of the arms ("PGLE, O1/SoL, or nothing?").

Per arm: the verdict where a profile is involved, the median step and its ratio (with a
bootstrap interval) against `default`, exposed communication (from the arm's first run's kept
trace), the step module's peak memory and compile time, and whether each run's executables
were compiled or loaded from jax's persistent compilation cache (per run, per kind). Figures
that need a GPU say so on any other backend instead of showing a number that means nothing
there.

`--predict` adds, per arm, the ratio `pgle estimate` predicts (XLA:GPU's own scheduler, a
deviceless compile per arm, every schedule replayed with the same costs: the collected profile's
where there is one), beside the measured one, so predictions can be checked against GPU runs
(the store keeps both: pgle.store.calibration). It costs one more run of the workload on CPU
and one compile per arm (docs/guide/will-pgle-help.md); without the CUDA compiler plugin the
table says so in one line and tune goes on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgle.analysis.memory import peak_bytes
from pgle.commands import arms
from pgle.commands.run_trace import trace_sections
from pgle.evidence import compiles
from pgle.evidence.events import read_events
from pgle.evidence.steps import summarize
from pgle.launch.step_rule import module_of
from pgle.units import human_bytes
from pgle.verdicts.statuses import Applied

NEEDS_GPU = ("step-time ratio", "exposed communication", "verdict")
PREDICTED_ARMS = ("default", "pgle", "o1", "sol")  # the arms `pgle estimate` compiles
log = logging.getLogger(__name__)


def predict(
    plan: Sequence[arms.Arm],
    *,
    workload: Any,
    profile: str | None,
    device_kind: str | None,
    device_count: int | None,
    run_dir: Path,
    in_job: bool,
) -> dict[str, Any]:
    """`--predict`: `pgle estimate`'s ratio per arm (None for arms it does not compile, such
    as o1+pgle), or `why` there is none (one line: the plugin is missing, a job, a failure).
    Never raises a pgle error: a prediction that cannot be made does not stop the tune."""
    from pgle.commands import estimate
    from pgle.errors import PgleError

    out: dict[str, Any] = {
        "ratios": {a.name: None for a in plan},
        "why": None,
        "target": None,
        "devices": device_count,
        "costs": None,
        "run_dir": None,
        "seconds": None,
        "cannot_help": None,
    }
    if in_job:
        out["why"] = "not in a multi-process job (pgle estimate runs the script in one process)"
        return out
    if estimate.plugin_missing():
        out["why"] = f"needs {estimate.PLUGIN_HINT}"
        return out
    wanted = tuple(a.name for a in plan if a.name in PREDICTED_ARMS)
    # The collected profile prices every arm's schedule (what the GPU measured); a per-module
    # profile folder or none (no GPU): costs pgle derives from the module and the target.
    use = profile if profile and os.path.isfile(profile) else None
    began = time.monotonic()
    try:
        report = estimate.estimate(
            estimate.EstimateOptions(
                source="",
                workload=workload,
                device_kind=device_kind,
                devices=device_count or None,
                arms=estimate.parse_arms(",".join(wanted)),
                profile=use,
                run_dir=str(run_dir),
            )
        )
    except (PgleError, OSError) as e:
        out["why"] = "pgle estimate failed: " + (str(e).strip().splitlines() or ["?"])[0]
        out["run_dir"] = str(run_dir)
        return out
    pred = report.details["prediction"]
    out.update(
        target=report.details["target"],
        devices=report.details["devices"],
        costs="the collected profile's costs"
        if use
        else "costs derived from the module and the target",
        run_dir=report.run_dir,
        seconds=round(time.monotonic() - began, 1),
        cannot_help=pred.get("why") if pred.get("cannot_help") else None,
        step_module=report.details["step_module"],
    )
    for name in wanted:
        key = "ratio_to_default" if name == "pgle" else f"{name}_ratio_to_default"
        out["ratios"][name] = 1.0 if name == arms.DEFAULT else pred.get(key)
    return out


def run_facts(folder: Path) -> dict[str, Any]:
    """Compile time and the step module's peak memory of one run folder."""
    events = read_events(folder / "events.jsonl")
    steps = arms.folder_steps(folder)
    module = steps.module if steps else None
    total = sum(float(c.seconds or 0.0) for c in events.compiles)
    # jax 0.4.35-0.5.3 name no function in their backend-compile event (checked in the lane's
    # venvs; 0.6.2 on do): which compile was the step module's is then unknown, not none.
    named = [c for c in events.compiles if c.fun_name]
    step_compile = sum(
        float(c.seconds or 0.0) for c in named if module and module_of(c.fun_name or "") == module
    )
    knows_step_compile = bool(module) and (bool(named) or not events.compiles)
    peak = None
    for m in events.modules:
        if module and m.module == module and m.memory:
            peak = peak_bytes(m.memory)
    made = compiles.executables(events)
    return {
        "step_module": module,
        "compile_s": total,
        "step_compile_s": step_compile if knows_step_compile else None,
        "peak_bytes": peak,
        # compiled | cached | mixed: every executable, then the step module's (issue 33)
        "executables": compiles.label(made),
        "step_executable": compiles.label(made, module) if module else None,
        "compile_by_kind": compiles.by_kind(made),
    }


def _communication(folder: Path, platform: str | None) -> tuple[dict | None, str | None]:
    sec = trace_sections(folder, platform)
    comm = sec.get("communication")
    if not comm:
        return None, sec.get("communication_why")
    n = max(comm["device_planes"], 1)
    return {
        "exposed_ms_per_device": comm["exposed_ps"] / 1e9 / n,
        "hidden_ms_per_device": comm["hidden_ps"] / 1e9 / n,
        "hidden_fraction": comm["hidden_fraction"],
        "collectives": comm["collectives"],
    }, sec.get("communication_why")


def table(
    runs: Sequence[Any], *, platform: str | None, predicted: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The compare table (JSON): one row per arm, `default` first; with `predicted` (from
    `predict`), each row's `predicted_ratio` beside its measured `ratio`."""
    gpu = platform is not None and platform.lower() in arms.GPU_PLATFORMS
    sample: dict[str, list[float]] = {}
    rows = []
    how = None
    if predicted is not None:
        predicted = {**predicted, "line": predicted_line(predicted)}
    for entry in runs:
        times, steps = arms.pooled(entry.folders)
        how = how or (steps.to_dict() if steps else None)
        sample[entry.arm.name] = times
        row: dict[str, Any] = {
            "arm": entry.arm.name,
            "describe": entry.arm.describe(),
            "runs": len(entry.folders),
            "folders": [f.name for f in entry.folders],
            "profile": entry.profile,
            "status": entry.reports[0].status if entry.arm.pgle and entry.reports else None,
            "step_time": summarize(times),
            "ratio": None,
            "interval": None,
            "why_no_ratio": None,
            "communication": None,
            "why_no_communication": None,
        }
        if predicted is not None:
            row["predicted_ratio"] = predicted["ratios"].get(entry.arm.name)
        facts = run_facts(entry.folders[0]) if entry.folders else {}
        row.update(facts)
        # Every run of the arm, not only the first: a later run may load what an earlier wrote.
        row["runs_executables"] = [
            {"folder": f.name, **{k: v for k, v in run_facts(f).items() if "execut" in k}}
            for f in entry.folders
        ]
        if entry.folders:
            row["communication"], row["why_no_communication"] = _communication(
                entry.folders[0], platform
            )
        if not gpu:
            row["why_no_communication"] = row["why_no_communication"] or "needs a GPU"
        rows.append(row)
    base_times = sample.get(arms.DEFAULT, [])
    for row in rows:
        if row["arm"] == arms.DEFAULT:
            row["ratio"] = 1.0 if base_times else None
            continue
        if not gpu:
            row["why_no_ratio"] = (
                f"needs a GPU: backend {platform} applies no profile and "
                "has no latency-hiding scheduler"
            )
            continue
        row["interval"], row["why_no_ratio"] = arms.ratio(base_times, sample[row["arm"]])
        row["ratio"] = row["interval"]["ratio"] if row["interval"] else None
        if row["status"] is not None and row["status"] not in (Applied.APPLIED, Applied.PARTIAL):
            row["why_no_ratio"] = (row["why_no_ratio"] or "") + (
                f" (its profile was {row['status']}: the ratio measures the arm's other flags only)"
            ).strip()
    needs = (
        []
        if gpu
        else [
            n
            for n in NEEDS_GPU
            if n != "verdict" or any(r["status"] == Applied.NOT_APPLICABLE for r in rows)
        ]
    )
    caveat = (
        None
        if gpu
        else (f"backend {platform}: the arms ran, but the {', '.join(needs)} need an NVIDIA GPU")
    )
    return {
        "baseline": arms.DEFAULT,
        "platform": platform,
        "gpu": gpu,
        "needs_gpu": needs,
        "steps": how,
        "arms": rows,
        "caveat": caveat,
        "predicted": predicted,
    }


def _ms(summary: dict | None) -> str:
    return f"{summary['median_s'] * 1e3:.2f} ms" if summary else "-"


def _mib(b: int | None) -> str:
    return "-" if b is None else human_bytes(b)


def table_lines(t: dict[str, Any]) -> list[str]:
    """The compare table for the terminal (the same numbers as the JSON and the HTML)."""
    lines = []
    if (t.get("steps") or {}).get("source") == "executions":
        lines.append(f"steps: {t['steps']['how']}")
    pred = t.get("predicted")
    column = pred is not None and not pred.get("why")
    head = [
        "arm",
        "verdict",
        "median step",
        "ratio vs default",
        *(["predicted"] if column else []),
        "exposed comm",
        "peak memory",
        "compile",
    ]
    body = []
    for r in t["arms"]:
        if r["interval"]:
            ci = r["interval"]
            ratio = f"{ci['ratio']:.3f} ({ci['low']:.3f}..{ci['high']:.3f})"
        elif r["arm"] == t["baseline"]:
            ratio = "1 (baseline)"
        else:
            ratio = "needs a GPU" if not t["gpu"] else "-"
        comm = r.get("communication")
        exposed = (
            f"{comm['exposed_ms_per_device']:.3f} ms"
            if comm
            else ("needs a GPU" if not t["gpu"] else "-")
        )
        compile_s = f"{r['compile_s']:.2f} s" if r.get("compile_s") is not None else "-"
        kinds = sorted({x.get("executables") or "-" for x in r.get("runs_executables") or []})
        if kinds and kinds != ["-"]:
            compile_s += f" ({'/'.join(kinds)})"  # compiled, or loaded from the cache
        body.append(
            [
                r["arm"],
                r["status"] or "-",
                _ms(r["step_time"]),
                ratio,
                *([predicted_text(r.get("predicted_ratio"))] if column else []),
                exposed,
                _mib(r.get("peak_bytes")),
                compile_s,
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    for row in [head, *body]:
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)).rstrip())
    for r in t["arms"]:
        if r.get("why_no_ratio") and t["gpu"]:
            lines.append(f"{r['arm']}: {r['why_no_ratio']}")
    if pred is not None:
        lines.append(pred.get("line") or predicted_line(pred))
    if t.get("caveat"):
        lines.append(t["caveat"])
    return lines


def predicted_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.3f}"


def predicted_line(pred: dict[str, Any]) -> str:
    """Where the predicted column comes from, or why there is none (one place)."""
    if pred.get("why"):
        return f"predicted: {pred['why']}"
    line = (
        f"predicted: pgle estimate, XLA:GPU's scheduler for {pred['devices']} x "
        f"{pred['target']} (no GPU), every arm's schedule replayed with {pred['costs']}"
        f" ({pred['seconds']:.0f} s; {pred['run_dir']})"
    )
    if pred.get("cannot_help"):
        line += f"; {pred['cannot_help']}"
    return line


def predicted_vs_measured(t: dict[str, Any]) -> list[str]:
    """`pgle report`'s lines for a `--predict` table: each arm's predicted and measured ratio,
    then where the prediction came from (or why there is none)."""
    pred = t.get("predicted")
    if not pred:
        return []
    lines = []
    if not pred.get("why"):
        parts = [
            f"{r['arm']} {predicted_text(r.get('predicted_ratio'))} "
            f"(measured {predicted_text(r.get('ratio'))})"
            for r in t["arms"]
            if r["arm"] != t.get("baseline")
        ]
        lines.append("predicted ratio vs default: " + ", ".join(parts))
    lines.append(pred.get("line") or predicted_line(pred))
    return lines
