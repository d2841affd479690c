"""Module rows: the typed rows each verdict builds, and the one way they are rendered.

A row's `to_dict()` is what lands in the JSON report's `modules` list; its field names are
part of the report contract (docs/reference/report.md) and must not change. Rows aggregated
over the ranks of a job (pgle.verdicts.across_ranks) stay dicts: they copy the worst rank's
row and add `ranks`, `absent_ranks`, `ranks_summary` and `per_rank`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pgle.phrases import listed, plural
from pgle.verdicts.statuses import Applied

UNNAMED = "(module name not logged)"


def _plain(row: object) -> dict[str, Any]:
    return dict(row.__dict__)


@dataclasses.dataclass
class AppliedRow:
    """One module of a `run`/`verify` verdict: did XLA apply the profile to it."""

    module: str | None
    status: str
    instructions_found: int | None
    instructions_missing: int | None
    coverage: float | None
    fingerprint: str | None
    profile_path: str | None
    profile_found: bool
    rank: int | None
    missing_instructions: list[str]
    notes: list[str]
    # k: the k-th module XLA reported; names a module no log line names (no VLOG before 0.7.2).
    ordinal: int | None = None
    # Which rule decided the status (pgle.verdicts.collectives: nothing_found, collectives,
    # sol_fallback, min_coverage; else checker_silent, no_checker, no_profile_file, ...).
    rule: str | None = None
    # Every collective / host copy the profile misses, and (where the run kept the module's
    # scheduled HLO) how many the module runs: "collectives covered k/n".
    collectives_missing: list[str] = dataclasses.field(default_factory=list)
    collectives_total: int | None = None
    # Async collectives the checker lists that XLA made synchronous after scheduling under a
    # new name, so that no profile can hold them: {"scheduled": <name the scheduler asked
    # for>, "executed": <the synchronous instruction's name, or None where unknown>}; not in
    # collectives_missing, not counted. And those of collectives_missing the log cannot tell
    # from such (pgle.verdicts.sync_converted).
    collectives_converted: list[dict[str, str | None]] = dataclasses.field(default_factory=list)
    collectives_unresolved: list[str] = dataclasses.field(default_factory=list)
    # Missing async wrappers whose kind the log does not show (`fusion-start`, `custom-call-
    # start`): never compute, and not known to be collectives (pgle.xla.instruction_kinds).
    async_unknown: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclasses.dataclass
class AutoRow:
    """One module of an `auto` (and, extended, a `prewarm`) verdict."""

    module: str
    status: str
    profiled_executions: int | None
    runs: int
    empty_profiles: int | None
    profile_bytes: int | None
    reason: str | None = None
    fix: str | None = None
    from_cache: bool = False  # in the JSON only when true
    # Its profiling session collided with another (threads | script | other): in the JSON only
    # when set; such a module is never lumped with one-shot code.
    collision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = _plain(self)
        if not self.from_cache:
            d.pop("from_cache")
        if self.collision is None:
            d.pop("collision")
        return d


@dataclasses.dataclass
class PrewarmRow(AutoRow):
    first_pass_keys: list[str] = dataclasses.field(default_factory=list)
    pgle_optimized_keys: list[str] = dataclasses.field(default_factory=list)
    executions_seen: int | None = None


@dataclasses.dataclass
class NsysRow:
    """One module of an `nsys` verdict: did it load its PGLE-optimized executable."""

    module: str
    prewarm_status: str | None
    prewarm_executions: int | None
    status: str = ""
    reason: str | None = None
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


def module_name(row: Mapping[str, Any]) -> str:
    """XLA's module name, else its fingerprint, else its place among the modules XLA reported."""
    if name := row.get("module") or row.get("fingerprint"):
        return str(name)
    return f"unnamed module #{row['ordinal']}" if row.get("ordinal") else UNNAMED


def _label_and_text(row: Mapping[str, Any], ok: str | None) -> tuple[str, str]:
    """A row's line in two parts: who (module, rank) and what (status, reason, fix)."""
    name = module_name(row)
    if "ranks" in row:  # across ranks
        uniform = len(row.get("ranks") or {}) == 1 and not row.get("absent_ranks")
        label = name
        text = (
            f"{row.get('ranks_summary')}"
            if uniform
            else f"{row['status']} ({row.get('ranks_summary')})"
        )
        if row.get("reason") and uniform:
            text += f" ({row['reason']})"
    else:
        label = name + (f" [rank {row['rank']}]" if row.get("rank") is not None else "")
        text = f"{row['status']}"
        if row.get("rule") == "compile_failed":  # no coverage of a module that never compiled
            text += " (compile failed)"
        elif "coverage" in row:  # a PGLE-applied verdict
            cov = "?" if row["coverage"] is None else f"{row['coverage']:.0%}"
            converted = len(row.get("collectives_converted") or ())
            missing = (row.get("instructions_missing") or 0) - converted
            text += f" (coverage {cov}" + (f", {missing} missing" if missing > 0 else "")
            comm = "; ".join(t for t in (_collectives_text(row), _converted_text(row)) if t)
            text += f"; {comm})" if comm else ")"
        elif row.get("reason"):
            text += f" ({row['reason']})"
    if row.get("fix") and row["status"] != ok:
        text += f"; fix: {row['fix']}"
    return label, text


def _collectives_text(row: Mapping[str, Any]) -> str | None:
    """'collectives covered k/n' where the module's collectives are known, else 'k
    collective(s) missing' when some are (pgle.verdicts.collectives)."""
    missing = row.get("collectives_missing")
    if missing is None:
        return None
    total = row.get("collectives_total")
    if total is not None and total >= len(missing):
        return f"collectives covered {total - len(missing)}/{total}"
    if missing:
        return f"{plural(len(missing), 'collective')} missing"
    if row.get("async_unknown"):
        return f"{len(row['async_unknown'])} async of unknown kind missing (maybe collectives)"
    converted = len(row.get("collectives_converted") or ())
    return "no collective missing" if (row.get("instructions_missing") or 0) > converted else None


def _converted_text(row: Mapping[str, Any]) -> str | None:
    """The async collectives XLA made synchronous after scheduling (in no profile, not
    counted) and those the log cannot tell from such (pgle.verdicts.sync_converted)."""
    parts = []
    if row.get("collectives_unresolved"):
        parts.append(
            f"{len(row['collectives_unresolved'])} of them maybe made synchronous "
            "by XLA (the log cannot tell)"
        )
    if row.get("collectives_converted"):
        parts.append(
            f"{plural(len(row['collectives_converted']), 'async collective')} made "
            "synchronous by XLA, in no profile: not counted"
        )
    return "; ".join(parts) or None


# The execution count of a row of the auto-PGLE family (auto, prewarm, nsys), by field.
EXECUTION_FIELDS = ("executions_seen", "profiled_executions", "prewarm_executions")


def executions(row: Mapping[str, Any]) -> int | None:
    """Executions the verdict saw; an auto row's profiled executions plus the recompiled one."""
    if row.get("executions_seen") is None and row.get("profiled_executions") is not None:
        return int(row["profiled_executions"]) + (1 if row.get("profile_bytes") else 0)
    return next((int(row[f]) for f in EXECUTION_FIELDS if row.get(f) is not None), None)


def module_lines(rows: Iterable[Mapping[str, Any]], *, ok: str | None = None) -> list[str]:
    """The summary lines of a verdict's rows. Rows of the auto-PGLE family (they count
    executions) come most-executed first (the train step leads, not the alphabet); modules
    executed once that are not `ok` (setup, eval: no number of steps re-optimizes them) share
    one line; rows with the same status, reason and fix share one line. The JSON rows are
    untouched."""
    rows = list(rows)
    if not any(any(f in r for f in EXECUTION_FIELDS) for r in rows):
        return _applied_lines(rows, ok)
    rows.sort(key=lambda r: -(executions(r) or 0))  # stable: ties keep their order
    one_shot = [
        r for r in rows if executions(r) == 1 and r["status"] != ok and not r.get("collision")
    ]
    if len(one_shot) < 2:
        one_shot = []
    groups: dict[str, list[str]] = {}
    for r in rows:
        if not any(r is o for o in one_shot):
            label, text = _label_and_text(r, ok)
            groups.setdefault(text, []).append(label)
    lines = said_once([f"  {listed(labels)}: {text}" for text, labels in groups.items()])
    if one_shot:
        statuses = ", ".join(dict.fromkeys(r["status"] for r in one_shot))
        lines.append(
            f"  {len(one_shot)} modules executed only once ({statuses}; one-shot code "
            f"such as setup or eval, which auto PGLE never re-optimizes): "
            + listed([_label_and_text(r, ok)[0] for r in one_shot])
        )
    return lines


_CLAUSE = re.compile(r"(; | \(|\): |: )")
LONG_CLAUSE = 40  # characters: a cause or fix this long is said once, then "as above"


def said_once(lines: list[str]) -> list[str]:
    """Lines whose long clauses (a cause, a fix) repeat an earlier line's say "as above"
    instead: groups that differ only by a count would otherwise repeat a 200-character cause
    (issue 38)."""
    seen: set[str] = set()
    out = []
    for line in lines:
        parts = _CLAUSE.split(line)
        for i in range(0, len(parts), 2):  # the clauses; the separators sit between them
            clause = parts[i]
            if len(clause) >= LONG_CLAUSE:
                if clause in seen:
                    # The ")" that close an earlier " (" stay: the line keeps its parentheses.
                    parts[i] = "as above" + ")" * max(0, clause.count(")") - clause.count("("))
                seen.add(clause)
        out.append("".join(parts))
    return out


def _applied_lines(rows: list[Mapping[str, Any]], ok: str | None) -> list[str]:
    """Rows of a PGLE-applied verdict: one line each; a row that is not applied carries XLA's
    own note (the first one: e.g. the profile entry the module lacks); rows whose line would
    read the same share one line (a stale profile gives dozens of identical ones)."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        label, text = _label_and_text(r, ok)
        if r.get("status") not in (Applied.APPLIED, None) and r.get("notes") and "coverage" in r:
            text += f": {r['notes'][0]}"
        groups.setdefault(text, []).append(label)
    out = []
    for text, labels in groups.items():
        if len(labels) >= 3 and not text.startswith(Applied.APPLIED):
            out.append(f"  {len(labels)} modules ({listed(labels)}): {text}")
        else:
            out += [f"  {label}: {text}" for label in labels]
    return out
