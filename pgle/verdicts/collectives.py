"""Which missing instructions matter: the collective-aware rule of the PGLE verdict.

PGLE exists to price what the latency-hiding scheduler overlaps: async collectives and host
copies. A profile that misses one of those leaves the scheduler guessing exactly where the
profile was meant to help, however many fusions it covers; a profile that misses only compute
leaves those to XLA's fallback estimator, which since jax 0.10.1 (XLA PR #41660) is the
speed-of-light (SoL) cost model on Hopper and Blackwell (`PGLE fallback: using
SolLatencyEstimator`, a VLOG(1) line of gpu_hlo_schedule.cc; docs/xla-facts.md). So, per module
whose accuracy checker printed a block:

1. nothing found: `not_applied` (rule `nothing_found`);
2. a collective or host copy missing: never `applied`: `partial` (rule `collectives`);
3. only compute missing, and XLA falls back to SoL: `applied` with a note (rule
   `sol_fallback`);
4. otherwise `--min-coverage` decides, as before (rule `min_coverage`).

The JSON row says which rule decided (`rule`) and lists every missing collective
(`collectives_missing`); `collectives_total`, where the run kept the module's scheduled HLO,
gives "collectives covered k/n". Names are classified by pgle.xla.hlo_names.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping

from pgle.phrases import plural
from pgle.xla.hlo_names import COLLECTIVE, kind

# jax 0.10.2's plugin holds `PGLE fallback: using SolLatencyEstimator`; 0.9.2's does not
# (docs/xla-facts.md). XLA PR #41660 shipped in jax 0.10.1.
SOL_FALLBACK_SINCE = (0, 10, 1)
LAST_WITHOUT_SOL_FALLBACK = (0, 10, 0)
# Devices whose fallback is the SoL model (elsewhere: "GpuLatencyEstimator (T-shirt sizes)").
SOL_DEVICES = re.compile(r"\b(?:G?H1\d\d|H200|H800|H20|G?B[123]\d\d)\b", re.I)
SHOWN_NAMES = 8

RULE_NOTHING_FOUND = "nothing_found"
RULE_COLLECTIVES = "collectives"
RULE_SOL_FALLBACK = "sol_fallback"
RULE_MIN_COVERAGE = "min_coverage"


@dataclasses.dataclass
class Decision:
    status: str
    rule: str
    notes: list[str]


def sol_fallback_expected(jax: tuple[int, ...] | None, device_kind: str | None) -> bool | None:
    """Whether XLA prices unprofiled instructions with its SoL model in a run of this jax on
    this device: True/False, or None when the jax version is unknown."""
    if jax is None:
        return None
    if jax < SOL_FALLBACK_SINCE:
        return False
    if device_kind is None:
        return True  # a log without its device: pgle targets Hopper and newer
    return bool(SOL_DEVICES.search(device_kind))


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def decide(found: int | None, missing: int, missing_communication: list[str], *,
           coverage: float | None, min_coverage: float, sol_fallback: bool) -> Decision:
    """The status of a module whose accuracy checker printed `Found f` / `Missing m`."""
    if coverage is None or coverage == 0:
        return Decision("not_applied", RULE_NOTHING_FOUND, [])
    if missing_communication:
        families = sorted({kind(n)[1] or "host copy" for n in missing_communication})
        missed = plural(len(missing_communication), "collective or host copy",
                        "collectives or host copies")
        return Decision("partial", RULE_COLLECTIVES, [
            f"the profile misses {missed} ({', '.join(families)}: {_names(missing_communication)}): the scheduler guesses "
            "their cost, which is what PGLE is for; collect the profile again from a run of "
            "this exact program"])
    compute = missing
    if sol_fallback:
        return Decision("applied", RULE_SOL_FALLBACK, [
            f"{plural(compute, 'compute instruction')} not in the profile (coverage "
            f"{coverage:.0%}), no collective is missing: XLA prices them with its speed-of-light "
            "estimator (jax >= 0.10.1 on Hopper/Blackwell), so --min-coverage does not apply"])
    status = "applied" if coverage >= min_coverage else "partial"
    return Decision(status, RULE_MIN_COVERAGE, [])


def collective_names(hlo_text: str) -> list[str]:
    """The collectives and host copies of a scheduled module that a profile can price: the
    `-start` (or synchronous) instructions of the entry computation and the while bodies, the
    computations XLA's accuracy checker walks (docs/xla-facts.md)."""
    from pgle.analysis.schedule import parse_computations

    comps = parse_computations(hlo_text)
    bodies = set(re.findall(r"\bbody=%?([\w.\-]+)", hlo_text))
    names: list[str] = []
    seen: set[int] = set()
    for cname, instrs in comps.items():
        if id(instrs) in seen or not (cname == "ENTRY" or cname in bodies):
            continue
        seen.add(id(instrs))
        for ins in instrs:
            if ins.opcode.endswith("-done"):
                continue
            if kind(ins.opcode)[0] == COLLECTIVE or ins.opcode in ("copy-start",) or (
                    ins.opcode == "async-start" and kind(ins.name)[0] == COLLECTIVE):
                names.append(ins.name)
    return names


def annotate_totals(rows: list[dict], modules: Iterable[Mapping[str, Any]]) -> None:
    """Give each row the number of collectives its module runs (`collectives_total`), from
    the scheduled HLO the harness kept (module_compiled events with `hlo_file`), so the
    summary can say "collectives covered k/n". Rows whose module kept no HLO keep None."""
    files: dict[str, str] = {}
    for m in modules:
        if m.get("module") and m.get("hlo_file"):
            files[m["module"]] = m["hlo_file"]  # the last compile of a name wins
    for row in rows:
        path = files.get(row.get("module") or "")
        if not path:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                names = collective_names(f.read())
        except (OSError, ValueError):
            continue
        row["collectives_total"] = len(names)
