"""`--require MODULE` (glob, repeatable) for the PGLE-applied verdict (run, tune, verify): exit 3
unless every module matching each glob applied the profile, whatever the other modules did (an
eval or init module at 0 % no longer decides a job whose train step applied it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.phrases import plural
from pgle.report import Report
from pgle.verdicts.auto_pgle import required_failures
from pgle.verdicts.rows import module_name
from pgle.verdicts.statuses import Applied

OK = Applied.APPLIED


def failures(modules: Sequence[Mapping[str, Any]], require: Sequence[str]) -> list[str]:
    """Sentences for every required module that is not applied (or a glob matching none).
    A module XLA did not name is matched by the name the summary shows for it."""
    named = [dict(m, module=module_name(m)) for m in modules]
    return required_failures(named, ok=OK, require_all=False, require=tuple(require))


def enforce(report: Report, require: Sequence[str]) -> None:
    """Exit 3 (with the reasons) when a required module did not apply the profile; the
    workload's own failure, or an exit code already set, stays."""
    if not require:
        return
    if not report.modules:
        # No module has a row (a backend without PGLE, no profile read): the verdict's own
        # reason is the cause; "no module matches" would deny the step module the run named.
        globs = ", ".join(require)
        missed = [f"{globs}: no module used a profile (verdict {report.status})"]
        report.reasons.append(f"--require {missed[0]}")
        report.summary.append(f"--require {missed[0]}")
    else:
        missed = failures(report.modules, require)
        if missed:
            report.reasons += [f"--require: {m}" for m in missed]
            report.summary.append("--require: not verified: " + "; ".join(missed))
        else:
            report.summary.append(f"--require: {', '.join(require)}: applied")
    if missed and report.exit_code == 0:
        report.exit_code = EXIT_NOT_VERIFIED


def require_applied_line(status: str, coverage_unknown: int) -> str:
    """Why `--require-applied` exits 3: the status, or an applied verdict whose coverage this
    jax's checker cannot prove."""
    if status != OK:
        return f"--require-applied: status is {status}, not applied"
    return (
        f"--require-applied: the coverage is unknown for {plural(coverage_unknown, 'module')} "
        "(this jax's WARN checker prints nothing); PGLE_STRICTNESS_LEVEL_ERROR proves it"
    )
