"""Verdicts across the ranks of a multi-process job, built on rank 0 from every rank's report.

Per module across ranks (README "Running on a cluster"): a module applied (or optimized, or
loaded) on some ranks only is `partial`, with the ranks named; ranks that never reported are
left out of the verdict and named by the driver (pgle.jobs.driver).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.phrases import plural, ranks_phrase
from pgle.report import Report
from pgle.verdicts.auto_pgle import finish_code
from pgle.verdicts.pgle_applied import overall_status
from pgle.verdicts.rows import module_lines, module_name
from pgle.verdicts.statuses import Applied

MAX_MISSING_NAMES = 50


@dataclasses.dataclass(frozen=True)
class JobReports:
    """What rank 0 gathered: every rank's report as written (rank 0's own included) and the
    ranks that never reported, with what their files say."""

    command: str
    world_size: int
    reports: Mapping[int, dict[str, Any]]
    missing: Mapping[int, str] = dataclasses.field(default_factory=dict)

    @property
    def own(self) -> dict[str, Any]:
        """Rank 0's report (the one that builds the job report)."""
        return self.reports.get(0) or {}


# -- per module across ranks --------------------------------------------------------------------


def aggregate_modules(
    by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
    *,
    ok: str = Applied.APPLIED,
    expected: Iterable[int] | None = None,
) -> list[dict[str, Any]]:
    """One row per module over the ranks. A module with one status on every expected rank keeps
    it; one that is `ok` (or `partial`) on some ranks only is `partial`, and so is one `ok`
    everywhere it was seen but absent on other ranks; anything else takes the status most
    ranks gave. Rows keep the fields of the worst rank's row (coverage: the lowest), plus
    `ranks` ({status: [ranks]}), `absent_ranks`, `ranks_summary` (a phrase naming them) and,
    where the ranks disagree, `per_rank` ([{rank, status, coverage, ...}]).

    Modules are matched by name and fingerprint; a name compiled several times on one rank
    matches its n-th compile on the other ranks.
    """
    expected_ranks = sorted(set(by_rank) if expected is None else set(expected))
    # (name, fingerprint, n-th compile) -> rank -> that rank's row
    rows: dict[tuple[str, Any, int], dict[int, Mapping[str, Any]]] = {}
    for rank in sorted(by_rank):
        seen: Counter[tuple[str, Any]] = Counter()
        for m in by_rank[rank]:
            name = module_name(m)
            base = (name, m.get("fingerprint"))
            key = (*base, seen[base])
            seen[base] += 1
            rows.setdefault(key, {})[rank] = m
    out = []
    for per_rank in rows.values():
        out.append(_aggregate_row(per_rank, ok, expected_ranks))
    return out


def _aggregate_row(
    per_rank: Mapping[int, Mapping[str, Any]], ok: str, expected: Sequence[int]
) -> dict[str, Any]:
    by_status: dict[str, list[int]] = {}
    for r in sorted(per_rank):
        by_status.setdefault(str(per_rank[r].get("status")), []).append(r)
    absent = [r for r in expected if r not in per_rank]
    if len(by_status) == 1 and not absent:
        status = next(iter(by_status))
    elif ok in by_status or Applied.PARTIAL in by_status:
        status = Applied.PARTIAL
    else:
        status = max(by_status, key=lambda s: (len(by_status[s]), -by_status[s][0]))
    worst_rank = next(
        (r for r in sorted(per_rank) if per_rank[r].get("status") != ok), min(per_rank)
    )
    row = {k: v for k, v in per_rank[worst_rank].items()}
    row["status"] = status
    row["rank"] = None
    coverages = [float(m["coverage"]) for m in per_rank.values() if m.get("coverage") is not None]
    if "coverage" in row:
        row["coverage"] = min(coverages) if coverages else None
    if "instructions_missing" in row:
        miss = [
            int(m["instructions_missing"])
            for m in per_rank.values()
            if m.get("instructions_missing") is not None
        ]
        row["instructions_missing"] = max(miss) if miss else None
    if "missing_instructions" in row:
        names: dict[str, None] = {}
        for r in sorted(per_rank):
            for n in per_rank[r].get("missing_instructions") or []:
                if len(names) < MAX_MISSING_NAMES:
                    names.setdefault(n, None)
        row["missing_instructions"] = list(names)
    if "notes" in row:
        notes: dict[str, None] = {}
        for r in sorted(per_rank):
            for n in per_rank[r].get("notes") or []:
                notes.setdefault(n, None)
        row["notes"] = list(notes)
    row["ranks"] = by_status
    row["absent_ranks"] = absent
    row["ranks_summary"] = _ranks_summary(per_rank, by_status, absent)
    # Each rank's own figures, only where the ranks disagree (512 ranks x 50 modules add up).
    row["per_rank"] = (
        [
            {
                "rank": r,
                "status": m.get("status"),
                **{k: m[k] for k in ("coverage", "instructions_missing", "reason") if k in m},
            }
            for r, m in sorted(per_rank.items())
        ]
        if len(by_status) > 1 or absent
        else []
    )
    return row


def _ranks_summary(
    per_rank: Mapping[int, Mapping[str, Any]],
    by_status: Mapping[str, list[int]],
    absent: Sequence[int],
) -> str:
    parts = []
    for status, rs in by_status.items():
        text = f"{status} on {ranks_phrase(rs)}"
        covs = [float(c) for r in rs if (c := per_rank[r].get("coverage")) is not None]
        if covs and min(covs) < 1.0:
            low = min(covs)
            text += f" (coverage {'' if len(set(covs)) == 1 else 'down to '}{low:.0%}"
            miss = [per_rank[r].get("instructions_missing") or 0 for r in rs]
            text += f", {max(miss)} missing)" if max(miss) else ")"
        parts.append(text)
    if absent:
        parts.append(f"no evidence for it on {ranks_phrase(absent)}")
    return "; ".join(parts)


def grouped(reports: Mapping[int, dict[str, Any]], field: str, world_size: int) -> list[str]:
    """Each distinct sentence of `field` across ranks, prefixed with its ranks unless all."""
    by_text: dict[str, list[int]] = {}
    for r, rep in sorted(reports.items()):
        for text in rep.get(field) or []:
            by_text.setdefault(text, []).append(r)
    return [t if len(rs) == world_size else f"{ranks_phrase(rs)}: {t}" for t, rs in by_text.items()]


# -- the job verdict of run / verify ---------------------------------------------------------------


def judge_job(
    by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
    rank_status: Mapping[int, str | None],
    rank_reasons: Mapping[int, Sequence[str]],
) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(status, modules, reasons) of a job from each rank's verdict modules and status (README
    "Verdicts", over ranks). Ranks are those in `rank_status`."""
    expected = [r for r, s in rank_status.items() if s != Applied.NOT_APPLICABLE]
    modules = aggregate_modules(by_rank, ok=Applied.APPLIED, expected=expected)
    world = len(rank_status)
    reasons: list[str] = []
    errors = sorted(r for r, s in rank_status.items() if s == Applied.ERROR)
    if errors:
        status = Applied.ERROR
        reasons += grouped(
            {r: {"reasons": rank_reasons.get(r, [])} for r in errors}, "reasons", world
        )
    elif not modules:
        statuses = set(rank_status.values())
        status = (
            Applied.NOT_APPLICABLE if statuses == {Applied.NOT_APPLICABLE} else Applied.NOT_APPLIED
        )
        reasons += grouped({r: {"reasons": rs} for r, rs in rank_reasons.items()}, "reasons", world)
    else:
        counts = Counter(m["status"] for m in modules)
        status = overall_status(m["status"] for m in modules)
        mixed = [m for m in modules if len(m["ranks"]) > 1 or m["absent_ranks"]]
        text = (
            f"{counts['applied']} of {plural(len(modules), 'module')} applied the profile on every "
            f"rank that reported ({ranks_phrase(rank_status)})"
        )
        if counts[Applied.PARTIAL]:
            text += f", {counts['partial']} partially"
            if mixed:
                text += f" ({len(mixed)} on some ranks only)"
        if counts[Applied.NOT_APPLIED]:
            text += f", {counts['not_applied']} not at all"
        reasons.append(text + ".")
        for m in mixed:
            reasons.append(f"{module_name(m)}: {m['ranks_summary']}.")
    return status, modules, reasons


def combine_verdicts(job: JobReports, *, require_applied: bool = False) -> Report:
    """The job report of `pgle run`: the verdict per module across the ranks that reported."""
    reports = job.reports
    by_rank = {r: rep.get("modules") or [] for r, rep in reports.items()}
    status, modules, reasons = judge_job(
        by_rank,
        {r: rep.get("status") for r, rep in reports.items()},
        {r: rep.get("reasons") or [] for r, rep in reports.items()},
    )
    own = job.own
    report = Report(
        own.get("command") or job.command,
        status,
        modules=modules,
        reasons=reasons,
        profile=own.get("profile"),
        log_path=own.get("log_path"),
        workload_exit_code=own.get("workload_exit_code"),
    )
    report.details["step_times"] = {r: rep.get("step_times") for r, rep in sorted(reports.items())}
    report.details["backend"] = own.get("backend")
    report.summary.append(f"job verdict: {status}: " + " ".join(reasons[:1]))
    report.summary += module_lines(modules)
    report.exit_code = EXIT_NOT_VERIFIED if require_applied and status != Applied.APPLIED else 0
    if report.exit_code == EXIT_NOT_VERIFIED:
        report.summary.append(f"--require-applied: the job's status is {status}, not applied")
    return report


# -- the job verdict of auto / prewarm / nsys ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModuleRule:
    """How a workflow whose modules have one `ok` status (auto: optimized, prewarm: optimized,
    nsys: loaded_optimized) judges them across the ranks: `overall`, the workflow's own rule
    on the aggregated modules; `headline` and `what` (`ok` in words) for the summary; `keep`:
    details of rank 0's report copied into the job report."""

    ok: str
    overall: Callable[[list[dict[str, Any]]], str]
    headline: str
    what: str
    keep: tuple[str, ...] = ()


def combine_modules(
    job: JobReports, rule: ModuleRule, require_all: bool, require: tuple[str, ...]
) -> Report:
    """The job report: per module across the ranks, by `rule`; `partial` when a module is
    `ok` on some ranks only. `require_all`, `require`: --require-all / --require (failures
    exit 3)."""
    ok, what = rule.ok, rule.what
    reports = job.reports
    by_rank = {r: rep.get("modules") or [] for r, rep in reports.items()}
    modules = aggregate_modules(by_rank, ok=ok, expected=sorted(reports))
    status = rule.overall(modules)
    if any(m["status"] == Applied.PARTIAL for m in modules):
        status = (
            Applied.PARTIAL
        )  # a module `ok` on some ranks only: the ranks run different programs
    own = job.own
    report = Report(
        own.get("command") or job.command,
        status,
        modules=modules,
        log_path=own.get("log_path"),
        workload_exit_code=own.get("workload_exit_code"),
    )
    for key in ("backend", *rule.keep):
        if key in own:
            report.details[key] = own[key]
    mixed = [m for m in modules if len(m["ranks"]) > 1 or m["absent_ranks"]]
    n_ok = sum(1 for m in modules if m["status"] == ok)
    head = (
        f"{n_ok} of {len(modules)} modules {what} on every rank that reported "
        f"({ranks_phrase(reports)})"
    )
    if mixed:
        head += f"; {len(mixed)} on some ranks only"
    report.reasons.append(head + ".")
    for m in mixed:
        report.reasons.append(f"{m.get('module')}: {m['ranks_summary']}.")
    report.reasons += grouped({r: rep for r, rep in reports.items()}, "reasons", len(reports))
    report.summary.append(f"{rule.headline}: {status}: {head}")
    report.summary += module_lines(modules, ok=ok)
    report.exit_code = finish_code(report, 0, ok, require_all, require)
    return report
