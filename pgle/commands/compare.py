"""`pgle tune --compare`: one table of the arms ("PGLE, O1/SoL, or nothing?").

Per arm: the verdict where a profile is involved, the median step and its ratio (with a
bootstrap interval) against `default`, exposed communication (from the arm's first run's kept
trace), the step module's peak memory and compile time, and whether each run's executables
were compiled or loaded from jax's persistent compilation cache (per run, per kind). Figures
that need a GPU say so on any other backend instead of showing a number that means nothing
there.
"""

from __future__ import annotations

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


def run_facts(folder: Path) -> dict[str, Any]:
    """Compile time and the step module's peak memory of one run folder."""
    events = read_events(folder / "events.jsonl")
    steps = arms.folder_steps(folder)
    module = steps.module if steps else None
    total = sum(float(c.seconds or 0.0) for c in events.compiles)
    step_compile = sum(
        float(c.seconds or 0.0)
        for c in events.compiles
        if module and module_of(c.fun_name or "") == module
    )
    peak = None
    for m in events.modules:
        if module and m.module == module and m.memory:
            peak = peak_bytes(m.memory)
    made = compiles.executables(events)
    return {
        "step_module": module,
        "compile_s": total,
        "step_compile_s": step_compile if module else None,
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


def table(runs: Sequence[Any], *, platform: str | None) -> dict[str, Any]:
    """The compare table (JSON): one row per arm, `default` first."""
    gpu = platform is not None and platform.lower() in arms.GPU_PLATFORMS
    sample: dict[str, list[float]] = {}
    rows = []
    how = None
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
    head = [
        "arm",
        "verdict",
        "median step",
        "ratio vs default",
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
    if t.get("caveat"):
        lines.append(t["caveat"])
    return lines
