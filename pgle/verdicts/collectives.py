"""Which missing instructions matter: the collective-aware rule of the PGLE verdict.

PGLE exists to price what the latency-hiding scheduler overlaps: async collectives and host
copies. A profile that misses one of those leaves the scheduler guessing exactly where the
profile was meant to help, however many fusions it covers; a profile that misses only compute
leaves those to XLA's fallback estimator, which since jax 0.10.1 (XLA PR #41660) is the
speed-of-light (SoL) cost model on Hopper and Blackwell (`PGLE fallback: using
SolLatencyEstimator`, a VLOG(1) line of gpu_hlo_schedule.cc; docs/xla-facts.md). So, per module
whose accuracy checker printed a block:

1. nothing found: `not_applied` (rule `nothing_found`);
2. a collective or host copy missing that the executed module runs: never `applied`:
   `partial` (rule `collectives`);
3. an async collective missing that the log cannot tell from one XLA made synchronous after
   scheduling (jax >= 0.11.1 renames those, so that no profile can hold them;
   pgle.verdicts.sync_converted): `partial` (rule `collectives_unresolved`), with how to tell;
4. only compute missing (besides such converted collectives, which are not counted, in the
   coverage either), and XLA falls back to SoL: `applied` with a note (rule `sol_fallback`);
   nothing but converted collectives: `applied` (rule `converted_to_sync`);
   only where `--min-coverage` was not given: a threshold the user gives always decides;
5. otherwise `--min-coverage` decides (default 0.9; rule `min_coverage`).

The JSON row says which rule decided (`rule`) and lists every missing collective
(`collectives_missing`: the ones the module runs, and the unresolved ones, also in
`collectives_unresolved`; the converted ones apart, in `collectives_converted`);
`collectives_total`, where the run kept the module's scheduled HLO, gives "collectives covered
k/n". Names are classified by pgle.xla.instruction_kinds; a missing async wrapper whose kind
the log does not show (`fusion-start`, `custom-call-start`) is never compute: `partial` (rule
`async_unknown`), with how to tell, unless the executed HLO (`pgle run`) tells its kind.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pgle.phrases import listed, plural
from pgle.verdicts.statuses import Applied
from pgle.verdicts.sync_converted import Split, converted_note, unknown_note, unresolved_note
from pgle.xla import hlo_text
from pgle.xla.instruction_kinds import classify, classify_module

if TYPE_CHECKING:  # the events module costs start-up: verify reads no events
    from pgle.evidence.event_kinds import ModuleCompiled

# jax 0.10.2's plugin holds `PGLE fallback: using SolLatencyEstimator`; 0.9.2's does not
# (docs/xla-facts.md). XLA PR #41660 shipped in jax 0.10.1.
SOL_FALLBACK_SINCE = (0, 10, 1)
LAST_WITHOUT_SOL_FALLBACK = (0, 10, 0)
# Devices whose fallback is the SoL model (elsewhere: "GpuLatencyEstimator (T-shirt sizes)").
# GH200 is Hopper too: its device_kind is "NVIDIA GH200 480GB" (no word boundary before H200).
SOL_DEVICES = re.compile(r"\b(?:G?H1\d\d|G?H200|H800|H20|G?B[123]\d\d)\b", re.I)
DEFAULT_MIN_COVERAGE = 0.9  # where --min-coverage is not given and the SoL rule does not decide

RULE_NOTHING_FOUND = "nothing_found"
RULE_COLLECTIVES = "collectives"
RULE_SOL_FALLBACK = "sol_fallback"
RULE_MIN_COVERAGE = "min_coverage"
# Every missing name is an async collective XLA made synchronous after scheduling: in no
# profile, and none can hold it (pgle.verdicts.sync_converted).
RULE_CONVERTED = "converted_to_sync"
# A missing async collective the log cannot tell converted from missing: never `applied`.
RULE_UNRESOLVED = "collectives_unresolved"
# A missing async wrapper whose kind the log does not show (`fusion-start`: on jax >= 0.11
# maybe a Triton collective fusion; `custom-call-start`): never compute, never `applied`.
RULE_ASYNC_UNKNOWN = "async_unknown"


@dataclasses.dataclass
class Decision:
    status: Applied
    rule: str
    notes: list[str]
    # The coverage to report: the checker's found / (found + missing), without the async
    # collectives no profile can hold (pgle.verdicts.sync_converted) on either side.
    coverage: float | None = None


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


def decide(
    found: int | None,
    missing: int,
    missing_communication: list[str],
    *,
    coverage: float | None,
    min_coverage: float | None,
    sol_fallback: bool,
    sync: Split | None = None,
) -> Decision:
    """The status of a module whose accuracy checker printed `Found f` / `Missing m`.
    `sync`: its missing collectives sorted by what XLA made synchronous after scheduling
    (pgle.verdicts.sync_converted); None: every one is missing. `min_coverage`: None when the
    user gave none (the SoL rule may decide), else the threshold, which then always decides."""
    if coverage is None or coverage == 0:
        return Decision(Applied.NOT_APPLIED, RULE_NOTHING_FOUND, [], coverage)
    sync = sync or Split(missing=list(missing_communication))
    extra = [n for n in (converted_note(sync), unresolved_note(sync), unknown_note(sync)) if n]
    if sync.missing:
        families = sorted({sync.labels.get(n) or classify(n).label() for n in sync.missing})
        missed = plural(len(sync.missing), "collective or host copy", "collectives or host copies")
        return Decision(
            Applied.PARTIAL,
            RULE_COLLECTIVES,
            [
                (
                    f"the profile misses {missed} ({', '.join(families)}: "
                    f"{listed(sync.missing)}): the scheduler guesses their cost, which is what "
                    "PGLE is for; collect the profile again from a run of this exact program"
                )
            ]
            + extra,
            coverage,
        )
    if sync.unresolved:
        return Decision(Applied.PARTIAL, RULE_UNRESOLVED, extra, coverage)
    if sync.unknown:
        return Decision(Applied.PARTIAL, RULE_ASYNC_UNKNOWN, extra, coverage)
    # What is left missing is compute, plus the collectives no profile can hold: those are
    # left out of the coverage (it counts what a profile can hold).
    compute = missing - len(sync.converted)
    if sync.converted and found is not None:
        coverage = found / (found + compute) if found + compute else None
    if compute <= 0:
        return Decision(Applied.APPLIED, RULE_CONVERTED, extra, coverage)
    if sol_fallback and min_coverage is None:
        return Decision(
            Applied.APPLIED,
            RULE_SOL_FALLBACK,
            [
                (
                    f"{plural(compute, 'compute instruction')} not in the profile (coverage "
                    f"{coverage:.0%}), no collective is missing: XLA prices them with its "
                    "speed-of-light estimator (jax >= 0.10.1 on Hopper/Blackwell): the "
                    "SoL rule decides, as --min-coverage was not given"
                )
            ]
            + extra,
            coverage,
        )
    floor = DEFAULT_MIN_COVERAGE if min_coverage is None else min_coverage
    enough = coverage is not None and coverage >= floor
    status = Applied.APPLIED if enough else Applied.PARTIAL
    return Decision(status, RULE_MIN_COVERAGE, extra, coverage)


def collective_names(text: str) -> list[str]:
    """The collectives and host copies of a scheduled module that a profile can price: the
    `-start` (or synchronous) instructions of the entry computation and the while bodies, the
    computations XLA's accuracy checker walks (docs/xla-facts.md)."""
    module = hlo_text.parse(text)
    if not module.computations:  # not HLO: the caller counts nothing rather than zero
        raise ValueError("the HLO text holds no computation")
    kinds = classify_module(module)
    bodies = {i.attribute("body") for c in module.computations.values() for i in c.instructions}
    names: list[str] = []
    for comp in module.computations.values():
        if not (comp.entry or comp.name in bodies):
            continue
        for ins in comp.instructions:
            k = kinds.get(ins.name)
            if k is not None and k.communication and k.phase != "done":
                names.append(ins.name)
    return names


def annotate_totals(rows: list[dict[str, Any]], modules: Iterable[ModuleCompiled]) -> None:
    """Give each row the number of collectives its module runs (`collectives_total`), from
    the scheduled HLO the harness kept (module_compiled events with `hlo_file`), so the
    summary can say "collectives covered k/n". Rows whose module kept no HLO keep None."""
    files: dict[str, str] = {}
    for m in modules:
        if m.module and m.hlo_file:
            files[m.module] = m.hlo_file  # the last compile of a name wins
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
