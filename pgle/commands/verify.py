"""`pgle verify LOG`: the PGLE verdict from a saved log (`-` reads stdin)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from pgle.commands.options import VerdictOptions
from pgle.errors import BadInput
from pgle.evidence.xla_log import LogScanner
from pgle.profiles import files as profile
from pgle.report import Report
from pgle.verdicts import collectives, require
from pgle.verdicts.across_ranks import judge_job
from pgle.verdicts.pgle_applied import exit_code_for, judge, overall_status, summary_lines
from pgle.verdicts.rows import module_lines
from pgle.xla import flag_table, versions


@dataclasses.dataclass(frozen=True)
class VerifyOptions:
    log: str
    profile: str | None = None
    platform: str | None = None
    verdict: VerdictOptions = VerdictOptions()
    accuracy_checker: bool = True
    jax: str | None = None  # the jax version that wrote the log (default: the installed one)


def verify(opts: VerifyOptions) -> Report:
    jax = versions.parse_version(opts.jax) if opts.jax else versions.jax_version()
    if opts.jax and jax is None:
        raise BadInput(f"--jax {opts.jax} is not a version (e.g. 0.4.34).")
    # jax < 0.4.36 has no warn-level accuracy checker: its silence proves nothing about coverage.
    checker = opts.accuracy_checker and versions.at_least(jax, flag_table.ACCURACY_CHECKER_SINCE)
    absent = opts.profile is not None and not os.path.exists(opts.profile)
    source = profile.load_profile_source(opts.profile) if opts.profile and not absent else None
    scanner = LogScanner()
    if opts.log == "-":
        evidence = scanner.scan_stream(sys.stdin.buffer)
    else:
        path = Path(opts.log)
        if not path.is_file():
            raise BadInput(f"log {opts.log} does not exist or is not a file.")
        try:
            evidence = scanner.scan_file(path)
        except OSError as e:
            raise BadInput(f"cannot read log {opts.log}: {e.strerror}.") from None
    verdict = judge(evidence, platform=opts.platform, min_coverage=opts.verdict.min_coverage,
                    accuracy_checker=checker,
                    sol_fallback=collectives.sol_fallback_expected(jax, None))
    if absent and verdict.status == "not_applied" and not evidence.reads:
        # jax <= 0.5.3 says nothing when the profile file does not exist: pgle looks itself.
        verdict.status = "error"
        verdict.reasons.insert(0, f"the profile {opts.profile} does not exist, and XLA gave no sign "
                                  "of reading any profile (jax <= 0.5.3 logs nothing for a "
                                  "missing file).")
    report = Report("verify", verdict.status, modules=verdict.modules, reasons=verdict.reasons,
                    log_path=None if opts.log == "-" else str(Path(opts.log).absolute()))
    ranked = sorted({m["rank"] for m in verdict.modules if m.get("rank") is not None})
    if ranked and verdict.status != "error" and all(m.get("rank") is not None
                                                   for m in verdict.modules):
        # An `srun --label` log: one verdict per module across the ranks that logged it.
        by_rank = {r: [m for m in verdict.modules if m["rank"] == r] for r in ranked}
        status, modules, reasons = judge_job(by_rank, {r: None for r in ranked}, {})
        report.status, report.modules, report.reasons = status, modules, reasons
        report.details["ranks"] = [{"rank": r, "status": overall_status(m["status"] for m in by_rank[r])} for r in ranked]
        report.summary.append(f"verdict: {status}: " + " ".join(reasons[:1]))
        report.summary += module_lines(modules)
    else:
        report.summary += summary_lines(verdict)
    if absent and verdict.status != "error":
        report.warnings.append(f"the profile {opts.profile} does not exist (any more)")
    if source is not None:
        report.profile = source.to_dict()
        foreign = [p for p in dict.fromkeys(evidence.reads) if not _same_profile(p, source)]
        for p in foreign:
            report.warnings.append(f"the log read {p}, which is not {opts.profile}")
    report.exit_code = exit_code_for(report.status, 0, opts.verdict.require_applied)
    require.enforce(report, opts.verdict.require)
    return report


def _same_profile(read_path: str, source: profile.ProfileSource) -> bool:
    """A read matches if it is the profile itself, or pgle's content-addressed copy of it.

    XLA logs the path exactly as it was given (relative stays relative, jax 0.4.34-0.10.2):
    a relative one is compared as the workload saw it, from its working directory, which
    verify cannot know; so it matches when it resolves from here or ends the profile's path."""
    name = Path(read_path).name
    if read_path.startswith("fdo_profile"):
        return True
    if Path(read_path) == source.path or str(source.path) in read_path:
        return True
    read = Path(read_path)
    if not read.is_absolute():
        mine = Path(os.path.abspath(source.path))
        if Path(os.path.abspath(read)) == mine:
            return True
        parts = [p for p in read.parts if p != "."]
        if parts and ".." not in parts and mine.parts[-len(parts):] == tuple(parts):
            return True
        if source.kind == "directory" and len(parts) > 1 \
                and mine.parts[-(len(parts) - 1):] == tuple(parts[:-1]):
            return any(f.name == name for f in source.files)
    if source.sha256[:16] in read_path:
        return True
    return source.kind == "directory" and any(f.name == name for f in source.files)
