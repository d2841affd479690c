"""`--require MODULE` (glob, repeatable) for the PGLE-applied verdict (run, tune, verify): exit 3
unless every module matching each glob applied the profile, whatever the other modules did (an
eval or init module at 0 % no longer decides a job whose train step applied it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgle.errors import EXIT_NOT_VERIFIED
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
    missed = failures(report.modules, require)
    if missed:
        report.reasons += [f"--require: {m}" for m in missed]
        report.summary.append("--require: not verified: " + "; ".join(missed))
        if report.exit_code == 0:
            report.exit_code = EXIT_NOT_VERIFIED
    else:
        report.summary.append(f"--require: {', '.join(require)}: applied")
