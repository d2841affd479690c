"""Whether XLA applied a PGLE profile, per module and overall, judged from log evidence.

The evidence comes from pgle.evidence.xla_log (what XLA printed); this module only decides.
Statuses, in order of strength: applied, partial, not_applied; plus not_applicable (not an
XLA:GPU backend) and error (XLA could not read the profile). docs/reference/verdicts.md
states the rules.
"""

from __future__ import annotations

import dataclasses

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.xla_log import Evidence, ModuleEvidence
from pgle.verdicts.rows import AppliedRow, module_lines

GPU_PLATFORMS = ("gpu", "cuda", "rocm")
STATUSES = ("applied", "partial", "not_applied", "not_applicable", "error")


@dataclasses.dataclass
class Verdict:
    status: str
    modules: list[dict]
    reasons: list[str]
    evidence: Evidence


def judge(evidence: Evidence, *, platform: str | None = None, min_coverage: float = 0.9,
          accuracy_checker: bool = True) -> Verdict:
    """Turn evidence into per-module and overall statuses (README "Verdicts")."""
    modules = [_judge_module(m, min_coverage, accuracy_checker).to_dict()
               for m in evidence.modules]
    reasons: list[str] = []
    if evidence.parse_errors:
        reasons += [f"XLA could not parse the profile: {e}" for e in evidence.parse_errors]
        status = "error"
    elif evidence.missing_files:
        reasons += [f"XLA found no profile file at {p}" for p in dict.fromkeys(evidence.missing_files)]
        status = "error"
    elif not modules and not evidence.reads:
        if platform and platform.lower() not in GPU_PLATFORMS:
            status = "not_applicable"
            reasons.append(
                f"backend {platform}: PGLE is an XLA:GPU feature, so no module used a profile and "
                "none could; run on an NVIDIA GPU to apply it.")
        else:
            status = "not_applied"
            reasons.append("no PGLE line in the log: XLA never read a profile (is the INFO log on, "
                           "TF_CPP_MIN_LOG_LEVEL=0, and did the profile flag reach XLA?).")
    elif not modules:
        status = "not_applied"
        reasons.append("XLA read the profile but no module reported using it.")
    else:
        counts = {s: sum(1 for m in modules if m["status"] == s) for s in STATUSES}
        status = overall_status(m["status"] for m in modules)
        reasons.append(
            f"{counts['applied']} of {len(modules)} module(s) applied the profile"
            + (f", {counts['partial']} partially" if counts["partial"] else "")
            + (f", {counts['not_applied']} not at all" if counts["not_applied"] else "") + ".")
    return Verdict(status, modules, reasons, evidence)


def overall_status(module_statuses) -> str:
    """All modules applied: applied; some applied or partial: partial; else not_applied."""
    statuses = list(module_statuses)
    if statuses and all(s == "applied" for s in statuses):
        return "applied"
    if any(s in ("applied", "partial") for s in statuses):
        return "partial"
    return "not_applied"


def summary_lines(verdict: Verdict) -> list[str]:
    return [f"verdict: {verdict.status}: " + " ".join(verdict.reasons)] + module_lines(verdict.modules)


def exit_code_for(status: str, workload_code: int, require_applied: bool) -> int:
    """The workload's own failure first; then --require-applied."""
    if workload_code != 0:
        return workload_code
    if require_applied and status != "applied":
        return EXIT_NOT_VERIFIED
    return 0


def _judge_module(m: ModuleEvidence, min_coverage: float, accuracy_checker: bool) -> AppliedRow:
    found, missing, coverage, notes = m.checker_found, m.checker_missing, None, []
    if m.no_profile_file:
        status = "not_applied"
        notes.append(f"no {m.fingerprint}.pb or .pbtxt in the profile directory")
    elif m.discarded:
        status = "not_applied"
        notes.append("the accuracy checker (ERROR level) discarded the profile")
        coverage = _ratio(found, missing)
    elif missing is not None:
        coverage = _ratio(found, missing)
        if coverage is None or coverage == 0:
            status = "not_applied"
        elif coverage >= min_coverage:
            status = "applied"
        else:
            status = "partial"
    elif accuracy_checker:
        # The checker is silent when nothing is missing: the profile covers the module.
        status, missing, coverage = "applied", 0, 1.0
    else:
        status = "applied"
        notes.append("accuracy checker off: coverage unknown")
    if m.note:
        notes.append(m.note)
    return AppliedRow(
        module=m.module, status=status, instructions_found=found,
        instructions_missing=missing, coverage=coverage, fingerprint=m.fingerprint,
        profile_path=m.profile_path, profile_found=not m.no_profile_file, rank=m.rank,
        missing_instructions=m.missing_names, notes=notes)


def _ratio(found: int | None, missing: int | None) -> float | None:
    if found is None or missing is None or found + missing == 0:
        return None
    return found / (found + missing)
