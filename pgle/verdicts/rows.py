"""Module rows: the typed rows each verdict builds, and the one way they are rendered.

A row's `to_dict()` is what lands in the JSON report's `modules` list; its field names are
part of the report contract (docs/reference/report.md) and must not change. Rows aggregated
over the ranks of a job (pgle.verdicts.across_ranks) stay dicts: they copy the worst rank's
row and add `ranks`, `absent_ranks`, `ranks_summary` and `per_rank`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

UNNAMED = "(module name not logged)"


def _plain(row) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
        d = _plain(self)
        if not self.from_cache:
            d.pop("from_cache")
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
    if row.get("module") or row.get("fingerprint"):
        return row.get("module") or row.get("fingerprint")
    return f"unnamed module #{row['ordinal']}" if row.get("ordinal") else UNNAMED


def module_line(row: Mapping[str, Any], *, ok: str | None = None) -> str:
    """One indented summary line for a row of any verdict (one rank, or across ranks)."""
    name = module_name(row)
    if "ranks" in row:  # across ranks
        uniform = len(row.get("ranks") or {}) == 1 and not row.get("absent_ranks")
        text = (f"  {name}: {row.get('ranks_summary')}" if uniform
                else f"  {name}: {row['status']} ({row.get('ranks_summary')})")
        if row.get("reason") and uniform:
            text += f" ({row['reason']})"
    else:
        where = f" [rank {row['rank']}]" if row.get("rank") is not None else ""
        text = f"  {name}{where}: {row['status']}"
        if "coverage" in row:  # a PGLE-applied verdict
            cov = "?" if row["coverage"] is None else f"{row['coverage']:.0%}"
            missing = row.get("instructions_missing")
            text += f" (coverage {cov}" + (f", {missing} missing)" if missing else ")")
        elif row.get("reason"):
            text += f" ({row['reason']})"
    if row.get("fix") and row["status"] != ok:
        text += f"; fix: {row['fix']}"
    return text


def module_lines(rows: Iterable[Mapping[str, Any]], *, ok: str | None = None) -> list[str]:
    return [module_line(r, ok=ok) for r in rows]
