"""Whether XLA applied a PGLE profile, per module and overall, judged from log evidence.

The evidence comes from pgle.evidence.xla_log (what XLA printed); this module only decides.
Statuses, in order of strength: applied, partial, not_applied; plus not_applicable (not an
XLA:GPU backend) and error (XLA could not read the profile, aborted on an unknown flag,
failed the compile under ERROR strictness, or the log hides XLA's INFO lines so nothing can
be judged). docs/reference/verdicts.md states the rules; docs/gpu-validation.md what the
real compiler of each jax version prints.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any, NamedTuple

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.xla_log import Evidence, ModuleEvidence
from pgle.phrases import listed, plural
from pgle.verdicts import collectives, sync_converted
from pgle.verdicts.origin import Origin
from pgle.verdicts.rows import AppliedRow, module_lines, module_name
from pgle.verdicts.statuses import Applied

GPU_PLATFORMS = ("gpu", "cuda", "rocm")
# jax 0.7.2-0.8.3: XLA's heuristic collective combiner schedules "<module>-clone" first, to
# decide what to combine; the clone never runs (tests/data/xla_gpu/README.md).
CLONE_SUFFIX = "-clone"
STATUSES = tuple(Applied)
# What a module that read the profile and got no accuracy-checker block means:
SILENCE_FULL = "full"  # the checker prints whenever something is missing: full coverage
SILENCE_UNKNOWN = "unknown"  # the checker may have missed instructions without a word
SILENCE_OFF = "off"  # no checker ran: the profile was read, its fit unverified


@dataclasses.dataclass
class Verdict:
    status: Applied
    modules: list[dict[str, Any]]
    reasons: list[str]
    evidence: Evidence
    # For the report's details: `sub_compiles` (modules XLA scheduled while compiling the
    # workload's, reported apart), `not_counted` (evidence inconsistent with the run).
    details: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])


def judge(
    evidence: Evidence,
    *,
    platform: str | None = None,
    min_coverage: float | None = None,
    accuracy_checker: bool = True,
    info_log_hidden: bool = False,
    jax_imported: bool | None = None,
    silence: str | None = None,
    workload_modules: Collection[str] | None = None,
    origin: Origin | None = None,
    sol_fallback: bool | None = None,
    executed: sync_converted.ExecutedModules | None = None,
    renamed: bool | None = None,
    command: bool = False,
    device_kind: str | None = None,
    loaded_from_cache: Collection[str] = (),
    compiled_anew: int | None = None,
) -> Verdict:
    """Turn evidence into per-module and overall statuses (README "Verdicts").

    `silence`: what a module that read the profile and got no accuracy-checker block means
    (SILENCE_FULL, SILENCE_UNKNOWN, SILENCE_OFF; pgle.verdicts.checker decides it per jax
    version and strictness); default: full when `accuracy_checker`, else off.
    `accuracy_checker`: False when the run had none (jax < 0.4.36 without the old flag, or
    PGLE_STRICTNESS_LEVEL_OFF): a silent log then proves the profile was read, not its fit.
    `info_log_hidden`: the run's TF_CPP_MIN_LOG_LEVEL hid XLA's INFO lines.
    `jax_imported`: False when the harness saw the workload finish without importing jax
    (None: unknown, e.g. `verify` of a log); `command`: the workload was `-- COMMAND`, whose
    Python processes the harness reaches through PYTHONPATH only.
    `workload_modules`: the modules the harness saw the workload compile (`pgle run`): any
    other module in the log is XLA's own. `origin`: what pgle knows about the run that wrote
    the log; evidence inconsistent with it is not counted (pgle.verdicts.origin).
    `sol_fallback`: XLA prices unprofiled instructions with its SoL model in this run
    (pgle.verdicts.collectives.sol_fallback_expected; None: only a module's own
    `PGLE fallback: using SolLatencyEstimator` line says so).
    `executed`: the executed HLO of the modules the run kept (`pgle run`): exact evidence of
    the async collectives XLA made synchronous after scheduling; `renamed`: whether the jax
    that wrote the log renames those (sync_converted.renames; None: unknown). Both tell a
    missing async collective no profile can hold from one the profile lacks
    (pgle.verdicts.sync_converted).
    `min_coverage`: the user's threshold, which always decides; None: 0.9, or the SoL rule
    where XLA prices unprofiled compute with its SoL model (pgle.verdicts.collectives).
    `device_kind`: the GPU that ran it (None: not known; the SoL rule then says it assumed
    one).
    `loaded_from_cache`: the modules whose executables jax loaded from its persistent
    compilation cache, and `compiled_anew` how many it compiled (pgle.evidence.compiles; None:
    unknown): XLA compiles nothing for a loaded module, so it logs no PGLE line for it, and
    such a module is never judged not_applied for that.

    The log-level rules (_LOG_RULES, first match decides) and the notes added after the
    status (_NOTES) are tables below, in the order docs/reference/verdicts.md gives them."""
    silence = silence or (SILENCE_FULL if accuracy_checker else SILENCE_OFF)
    details: dict[str, Any] = {}
    if workload_modules:
        mark_foreign_modules(evidence, set(workload_modules))
    foreign = origin.foreign_log(evidence) if origin is not None else None
    if foreign:
        details["not_counted"] = {"reason": foreign, "xla_lines": evidence.pgle_lines}
        return Verdict(Applied.NOT_APPLICABLE, [], [foreign], evidence, details)
    not_counted = origin.foreign_reads(evidence) if origin is not None else {}
    rows = []
    for m in evidence.modules:
        row = _judge_module(
            m,
            min_coverage,
            silence,
            bool(sol_fallback),
            executed.find(m.module, m.fingerprint) if executed else None,
            renamed,
        )
        if m.profile_path is not None and m.profile_path in not_counted:
            row.status, row.coverage = Applied.NOT_APPLIED, None
            row.notes.insert(0, not_counted[m.profile_path])
        rows.append(row.to_dict())
    case = _Case(
        evidence=evidence,
        modules=fold_clones(rows),
        platform=platform,
        jax_imported=jax_imported,
        command=command,
        # A backend that is not XLA:GPU explains a log without PGLE lines whatever it hides.
        off_gpu=bool(platform) and str(platform).lower() not in GPU_PLATFORMS,
        info_hidden=info_log_hidden or (evidence.checker_lines > 0 and evidence.info_lines == 0),
        looked=bool(evidence.reads) or any(not m.fingerprint_only for m in evidence.modules),
        loaded_from_cache=loaded_from_cache,
        compiled_anew=compiled_anew,
        silence=silence,
        device_kind=device_kind,
        details=details,
    )
    reasons: list[str] = []
    if not_counted:
        details["not_counted"] = {"reads": sorted(not_counted)}
        reasons += list(dict.fromkeys(not_counted.values()))
    if evidence.sub_compiles:
        details["sub_compiles"] = [sub_compile_row(m) for m in evidence.sub_compiles]
    ruling = next((r for rule in _LOG_RULES if (r := rule(case)) is not None), None)
    if ruling is not None:
        status = ruling.status
        reasons += ruling.reasons
        if ruling.drop_modules:
            case.modules = []
    else:
        status = _module_ruling(case.modules, reasons)
    case.status = status
    reasons += [note for make in _NOTES if (note := make(case)) is not None]
    return Verdict(status, case.modules, reasons, evidence, details)


@dataclasses.dataclass
class _Case:
    """What the log-level rules and the notes read."""

    evidence: Evidence
    modules: list[dict[str, Any]]  # the judged rows, clones folded
    platform: str | None
    jax_imported: bool | None
    command: bool
    off_gpu: bool
    info_hidden: bool
    looked: bool  # XLA read a profile, or a module logged more than its fingerprint
    loaded_from_cache: Collection[str]
    compiled_anew: int | None
    silence: str
    device_kind: str | None
    details: dict[str, Any]  # the verdict's: a note may add to it
    status: Applied = Applied.NOT_APPLIED  # once decided: what the notes see


class _Ruling(NamedTuple):
    """A log-level rule's decision: the overall status, why, and whether the module rows
    go (nothing in the log can back them)."""

    status: Applied
    reasons: list[str]
    drop_modules: bool = False


def _unknown_flags(c: _Case) -> _Ruling | None:
    if not c.evidence.unknown_flags:
        return None
    flags = " ".join(dict.fromkeys(c.evidence.unknown_flags))
    return _Ruling(
        Applied.ERROR,
        [
            (
                f'XLA aborted before compiling: it does not know {flags} ("Unknown flag in '
                "XLA_FLAGS\"); this jax's XLA has no such flag (see `pgle flags explain`)."
            )
        ],
    )


def _compile_failed(c: _Case) -> _Ruling | None:
    evidence = c.evidence
    if not (evidence.discards or evidence.verifier_failures):
        return None
    reasons = []
    if evidence.discards:
        n = len(evidence.discards)
        reasons.append(
            f"the compile failed ({plural(n, 'time')}): XLA's accuracy checker at ERROR "
            f'strictness discarded the profile ("{evidence.discards[0]}"): the '
            "profile misses instructions of the modules below; collect it again or "
            "use PGLE_STRICTNESS_LEVEL_WARN."
        )
    if evidence.verifier_failures:
        reasons.append(verifier_sentence(evidence.verifier_failures))
    return _Ruling(Applied.ERROR, reasons)


def _parse_errors(c: _Case) -> _Ruling | None:
    if not c.evidence.parse_errors:
        return None
    # One line per compile that tried (every module, every clone): each error said once.
    return _Ruling(
        Applied.ERROR,
        [
            f"XLA could not parse the profile: {e}" + (f" ({n} compiles)" if n > 1 else "")
            for e, n in Counter(c.evidence.parse_errors).items()
        ],
    )


def _missing_files(c: _Case) -> _Ruling | None:
    if not c.evidence.missing_files:
        return None
    missing = dict.fromkeys(c.evidence.missing_files)  # each once, in order
    return _Ruling(Applied.ERROR, [f"XLA found no profile file at {p}" for p in missing])


def _jax_never_imported(c: _Case) -> _Ruling | None:
    if not (c.jax_imported is False and not c.modules and not c.evidence.reads):
        return None
    return _Ruling(
        Applied.NOT_APPLIED,
        [
            "no process of the command imported jax under pgle's harness, so no profile "
            "could apply (the harness travels by PYTHONPATH: a python started with -I, -E "
            "or -S does not read it)."
            if c.command
            else "the workload never imported jax, so XLA compiled nothing and no profile "
            "could apply (a wrapper that starts the training script in another "
            "process? give it as `-- COMMAND ARGS`: pgle then reaches every Python "
            "process below it)."
        ],
    )


def _info_log_hidden(c: _Case) -> _Ruling | None:
    evidence = c.evidence
    if not (c.info_hidden and not evidence.reads and not c.off_gpu):
        return None
    return _Ruling(
        Applied.ERROR,
        [
            "XLA's INFO log is hidden (TF_CPP_MIN_LOG_LEVEL is not 0), so the log cannot show "
            "which modules used the profile"
            + (
                "; its WARNING lines show the accuracy checker ran on "
                + plural(sum(1 for m in evidence.modules if m.checker_found is not None), "module")
                if evidence.checker_lines
                else ""
            )
            + ". Rerun with TF_CPP_MIN_LOG_LEVEL=0."
        ],
        drop_modules=True,
    )


def _nothing_read(c: _Case) -> _Ruling | None:
    if c.looked:
        return None
    evidence, modules, platform = c.evidence, c.modules, c.platform
    cached = sorted(set(c.loaded_from_cache))
    if platform and platform.lower() not in GPU_PLATFORMS:
        return _Ruling(
            Applied.NOT_APPLICABLE,
            [
                (
                    f"backend {platform}: PGLE is an XLA:GPU feature, so no module used a profile "
                    "and none could; run on an NVIDIA GPU to apply it."
                )
            ],
        )
    if evidence.checker_without_path:
        return _Ruling(
            Applied.NOT_APPLIED,
            [
                (
                    "XLA says the accuracy checker is set but no profile path is "
                    '("xla_gpu_pgle_accuracy_checker is set to WARN, but no profile path '
                    f'specified", {plural(evidence.checker_without_path, "time")}): the profile '
                    "flag --xla_gpu_pgle_profile_file_or_directory_path did not reach XLA."
                )
            ],
        )
    if cached and c.compiled_anew == 0 and not modules:
        # jax 0.4.x-0.10.2: a cache hit deserializes the executable; XLA compiles nothing.
        return _Ruling(
            Applied.ERROR,
            [
                f"every executable was loaded from jax's persistent compilation cache "
                f"({plural(len(cached), 'module')}: {', '.join(cached[:5])}"
                + (", ..." if len(cached) > 5 else "")
                + "): XLA compiled nothing, so its log cannot show whether the profile "
                "applied; rerun with the cache off (JAX_ENABLE_COMPILATION_CACHE=false) or "
                "an empty cache folder (JAX_COMPILATION_CACHE_DIR)."
            ],
        )
    if modules:
        return _Ruling(
            Applied.NOT_APPLIED,
            [
                (
                    f"XLA compiled {plural(len(modules), 'module')} and read no profile for any "
                    "(only their fingerprints were logged): did the profile flag reach XLA? "
                    "jax <= 0.5.3 logs nothing when the profile file does not exist, jax <= 0.5.x "
                    "nothing for a directory without the module's file, and jax >= 0.5.1 ignores "
                    "a file that is not .pb/.pbtxt silently."
                )
            ],
        )
    # INFO lines in the log show the INFO log was on: then only the flag is in doubt.
    return _Ruling(
        Applied.NOT_APPLIED,
        [
            "no PGLE line in the log: XLA never read a profile ("
            + ("" if evidence.info_lines else "is the INFO log on, TF_CPP_MIN_LOG_LEVEL=0, and ")
            + "did the profile flag reach XLA? jax <= "
            "0.5.3 logs nothing when the profile file does not exist)."
        ],
    )


def _no_module_used(c: _Case) -> _Ruling | None:
    if c.modules:
        return None
    return _Ruling(Applied.NOT_APPLIED, ["XLA read the profile but no module reported using it."])


# What the log as a whole decides before any module does; the first rule that answers wins.
_LOG_RULES: tuple[Callable[[_Case], _Ruling | None], ...] = (
    _unknown_flags,
    _compile_failed,
    _parse_errors,
    _missing_files,
    _jax_never_imported,
    _info_log_hidden,
    _nothing_read,
    _no_module_used,
)


def _module_ruling(modules: list[dict[str, Any]], reasons: list[str]) -> Applied:
    """No log-level rule decided: the modules' statuses do, counted in the reasons."""
    counts = {s: sum(1 for m in modules if m["status"] == s) for s in STATUSES}
    reasons.append(
        f"{counts[Applied.APPLIED]} of {plural(len(modules), 'module')} applied the profile"
        + (f", {counts[Applied.PARTIAL]} partially" if counts[Applied.PARTIAL] else "")
        + (f", {counts[Applied.NOT_APPLIED]} not at all" if counts[Applied.NOT_APPLIED] else "")
        + "."
    )
    return overall_status(m["status"] for m in modules)


def _applied_some(c: _Case) -> bool:
    return c.status in (Applied.APPLIED, Applied.PARTIAL)


def _rows_with_rule(c: _Case, rule: str) -> list[dict[str, Any]]:
    return [m for m in c.modules if m.get("rule") == rule]


def _names(rows: list[dict[str, Any]]) -> str:
    # module_name: a module XLA did not name (jax <= 0.6 without TF_CPP_VMODULE) is named by
    # its place, as on its row, not "None".
    return f"{', '.join(module_name(m) for m in rows[:4])}{' ...' if len(rows) > 4 else ''}"


def _coverage_unknown_note(c: _Case) -> str | None:
    unknown = [m for m in c.modules if m["status"] == Applied.APPLIED and m["coverage"] is None]
    if not (unknown and _applied_some(c) and c.silence == SILENCE_UNKNOWN):
        return None
    c.details["coverage_unknown"] = len(unknown)
    return (
        f"coverage unknown for {plural(len(unknown), 'module')}: this jax's WARN "
        "accuracy checker prints nothing even when instructions are missing (jax "
        "0.4.36-0.5.0); PGLE_STRICTNESS_LEVEL_ERROR proves the fit."
    )


def _sol_note(c: _Case) -> str | None:
    by_sol = _rows_with_rule(c, collectives.RULE_SOL_FALLBACK)
    return sol_rule_sentence(by_sol, c.device_kind) if by_sol else None


def _rule_note(rule: str, what: str) -> Callable[[_Case], str | None]:
    """A note on the modules `rule` judged, said where PGLE applied to some."""

    def note(c: _Case) -> str | None:
        rows = _rows_with_rule(c, rule)
        return (
            f"{len(rows)} module(s) ({_names(rows)}) {what}" if rows and _applied_some(c) else None
        )

    return note


_unresolved_note = _rule_note(
    collectives.RULE_UNRESOLVED,
    "miss only async collectives that XLA may have made synchronous after scheduling (jax >= "
    "0.11.1 renames those, so that no profile can hold them); the log cannot tell: `pgle run` "
    "reads the executed HLO, or rerun with "
    f"TF_CPP_VMODULE={sync_converted.VMODULE} and verify that log.",
)
_async_unknown_note = _rule_note(
    collectives.RULE_ASYNC_UNKNOWN,
    "miss async instructions whose kind the log does not show (fusion-start: on jax >= 0.11 "
    "maybe a Triton collective fusion; custom-call-start): never counted as compute; `pgle "
    "run` reads the executed HLO and tells.",
)


def _unattributed_pairs_note(c: _Case) -> str | None:
    pairs = c.evidence.unattributed_pairs
    if not (pairs and any(m.get("collectives_unresolved") for m in c.modules)):
        return None
    return (
        f"XLA logged {pairs} `Added pair` line(s) (async "
        "collectives it made synchronous) that pgle cannot give to a module: "
        "without the VLOG fingerprint lines nothing shows where each module's "
        f"compile begins; rerun with TF_CPP_VMODULE={sync_converted.VMODULE}."
    )


def _sub_compiles_note(c: _Case) -> str | None:
    subs = c.evidence.sub_compiles
    return sub_compile_sentence(subs) if subs else None


def _fallbacks_note(c: _Case) -> str | None:
    fallbacks = c.evidence.fallbacks
    if not fallbacks:
        return None
    n = len(fallbacks)
    return (
        f"{plural(n, '<fp>.pbtxt file')} did not parse and XLA read the <fp>.pb "
        f"beside {'it' if n == 1 else 'each'} instead (its lookup order): not an "
        f"error, but remove the broken {'file' if n == 1 else 'files'}, e.g. "
        f"{fallbacks[0]}."
    )


def _lhs_unset_note(c: _Case) -> str | None:
    warnings = c.evidence.lhs_unset_warnings
    if not warnings:
        return None
    # docs/gpu-validation.md ("no LHS flag"): jax 0.4.34 ignores a profile without the
    # flag; 0.5.x-0.6.x read it and warn; 0.7.2 and later read it silently.
    c.details["lhs_unset"] = warnings
    return (
        "XLA warned that --xla_gpu_enable_latency_hiding_scheduler is unset "
        f"({plural(warnings, 'time')}): this jax schedules "
        "with the profile anyway, but jax 0.4.34 ignores a profile without the "
        "flag; set it to true to keep the run's flags portable."
    )


# What is said after the status, in this order; each note speaks only when it applies.
_NOTES: tuple[Callable[[_Case], str | None], ...] = (
    _coverage_unknown_note,
    _sol_note,
    _unresolved_note,
    _async_unknown_note,
    _unattributed_pairs_note,
    _sub_compiles_note,
    _fallbacks_note,
    _lhs_unset_note,
)


# jax 0.11.2 and 0.12.0.1 (the real XLA:GPU compiler, deviceless H100 x8): ERROR strictness
# fails, in the HLO verifier, every module with an async collective XLA makes synchronous after
# scheduling (it renames the pair), with a complete profile and with none.
RULE_COMPILE_FAILED = "compile_failed"


def sol_rule_sentence(rows: list[dict[str, Any]], device_kind: str | None) -> str:
    """Modules the speed-of-light rule decided: said on the verdict line, with the device."""
    device = (
        f"the device: {device_kind}"
        if device_kind
        else "assumed a Hopper/Blackwell GPU, as the log names none (--device-kind names it)"
    )
    return (
        f"the speed-of-light rule decided {plural(len(rows), 'module')} ({_names(rows)}): "
        "--min-coverage was not given, no collective is missing, and XLA prices the missing "
        f"compute with its SoL model (jax >= 0.10.1 on Hopper/Blackwell; {device}); "
        "--min-coverage makes coverage decide."
    )


def verifier_sentence(failures: list[str]) -> str:
    """Why a compile failed in XLA's HLO verifier, and what to use instead."""
    return (
        f"the compile failed in XLA's HLO verifier ({plural(len(failures), 'time')}): "
        f'"{failures[0]}". On jax >= 0.11 (seen on 0.11.2 and 0.12.0.1) '
        "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR fails every module "
        "with an async collective XLA makes synchronous after scheduling (it renames it, "
        "which the verifier rejects), whatever the profile, even with none: use "
        "PGLE_STRICTNESS_LEVEL_WARN (pgle reads its lines; --require-applied fails the job "
        "on a profile that does not fit)."
    )


def mark_foreign_modules(evidence: Evidence, workload: set[str]) -> None:
    """Modules the harness never saw the workload compile are XLA's own (autotuner
    candidates): moved to `sub_compiles`. `<M>-clone` rows stay (folded into M later)."""
    keep = []
    for m in evidence.modules:
        if (
            m.module
            and m.module not in workload
            and not m.module.endswith(CLONE_SUFFIX)
            and m.sub_compile is None
        ):
            m.sub_compile, m.by = "candidate", "not compiled by the workload (pgle's harness)"
            evidence.sub_compiles.append(m)
        else:
            keep.append(m)
    evidence.modules = keep


def sub_compile_row(m: ModuleEvidence) -> dict[str, Any]:
    """A module XLA scheduled while compiling the workload's: what it read, for the report."""
    return {
        "module": m.module,
        "id": m.module_id,
        "fingerprint": m.fingerprint,
        "compiled_for": m.parent,
        "recognised_by": m.by,
        "read_profile": m.found_profile,
        "no_profile_file": m.no_profile_file,
        "instructions_found": m.checker_found,
        "instructions_missing": m.checker_missing,
    }


def sub_compile_sentence(subs: list[ModuleEvidence]) -> str:
    names = list(dict.fromkeys(m.module or "?" for m in subs))
    shown = listed(names, 6)
    by = (
        "their module ids"
        if all(m.by == "module id" for m in subs)
        else "the harness"
        if all((m.by or "").endswith("harness)") for m in subs)
        else "their names (no module ids logged: TF_CPP_VMODULE=gpu_hlo_schedule=1 shows them)"
    )
    return (
        f"XLA also scheduled {plural(len(subs), 'module')} of its own while compiling the "
        f"workload's (autotuner candidates, jax >= 0.11: {shown}; told apart by {by}): not the "
        "workload's modules, not counted (report details: sub_compiles)."
    )


def fold_clones(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold each `<module>-clone` row into its module's row (as a note).

    The clone is a copy XLA's heuristic collective combiner schedules and never runs, so no
    profile of a real run covers it (a full profile leaves it 6/7-19/20 covered) and a
    directory has no file for its fingerprint: counting it would make every fully applied
    profile `partial`. Where XLA stopped before scheduling the module itself (ERROR
    strictness fails on the clone first) the clone's row stands for the module."""
    mains = {
        (r["module"], r["rank"])
        for r in rows
        if r["module"] and not r["module"].endswith(CLONE_SUFFIX)
    }
    out: list[dict[str, Any]] = []
    held: dict[tuple[str, Any], list[dict[str, Any]]] = {}  # (module, rank) -> its clones' rows
    for r in rows:
        name = r["module"]
        if not (name and name.endswith(CLONE_SUFFIX)):
            out.append(r)
            for clone in held.pop((name, r["rank"]), []):
                r["notes"].append(_clone_note(clone))
            continue
        base = name[: -len(CLONE_SUFFIX)]
        if (base, r["rank"]) in mains:
            held.setdefault((base, r["rank"]), []).append(r)
        else:
            r = dict(
                r,
                module=base,
                notes=r["notes"]
                + [
                    (
                        f"XLA did not schedule {base} itself after its clone {name}: this row "
                        "is the clone's evidence"
                    )
                ],
            )
            out.append(r)
    return out


def _clone_note(clone: dict[str, Any]) -> str:
    if not clone["profile_found"]:
        what = "found no file for its own fingerprint (expected)"
    elif clone["coverage"] is None:
        what = "read the profile"
    else:
        what = f"read the profile, coverage {clone['coverage']:.0%}"
    note = (
        f"{clone['module']} (a copy XLA's collective combiner schedules and never runs) {what};"
        " not counted"
    )
    if (
        clone["profile_found"]
        and clone["profile_path"]
        and _is_fingerprint_file(clone["profile_path"])
    ):
        note += (
            "; a clone that reads a profile changes the module's own fingerprint: keep only "
            "main-module fingerprints in a profile directory (as `pgle collect --per-module` "
            "writes), or compile without clones "
            "(--xla_gpu_experimental_enable_heuristic_collective_combining=false)"
        )
    return note


def _is_fingerprint_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    stem, _, ext = name.rpartition(".")
    return ext in ("pb", "pbtxt") and len(stem) == 32 and all(c in "0123456789abcdef" for c in stem)


def overall_status(module_statuses: Iterable[str]) -> Applied:
    """All modules applied: applied; some applied or partial: partial; else not_applied."""
    statuses = list(module_statuses)
    if statuses and all(s == Applied.APPLIED for s in statuses):
        return Applied.APPLIED
    if any(s in (Applied.APPLIED, Applied.PARTIAL) for s in statuses):
        return Applied.PARTIAL
    return Applied.NOT_APPLIED


def summary_lines(verdict: Verdict) -> list[str]:
    return [f"verdict: {verdict.status}: " + " ".join(verdict.reasons)] + module_lines(
        verdict.modules
    )


def exit_code_for(
    status: str, workload_code: int, require_applied: bool, coverage_unknown: int = 0
) -> int:
    """The workload's own failure first; then --require-applied, which also fails where the
    checker may have missed instructions without a word (`coverage_unknown` modules: jax
    0.4.36-0.5.0 under WARN)."""
    if workload_code != 0:
        return workload_code
    if require_applied and (status != Applied.APPLIED or coverage_unknown):
        return EXIT_NOT_VERIFIED
    return 0


def _judge_module(
    m: ModuleEvidence,
    min_coverage: float | None,
    silence: str,
    sol_fallback: bool = False,
    executed: sync_converted.Executed | None = None,
    renamed: bool | None = None,
) -> AppliedRow:
    """One module's row. `silence`: what no checker block means (see `judge`); `executed`:
    the module's executed HLO, where the run kept it; `renamed`: see `judge`."""
    found, missing, coverage, notes = m.checker_found, m.checker_missing, None, []
    rule: str | None = None
    sync = sync_converted.Split(missing=list(m.missing_communication))
    if m.compile_failed and not m.discarded:
        # Whatever XLA read or checked before, the module did not compile: nothing applied.
        status, rule = Applied.NOT_APPLIED, RULE_COMPILE_FAILED
        coverage = _ratio(found, missing)
        notes.append(f"the compile failed (XLA: {m.compile_failed})")
        if "hlo verifier" in m.compile_failed:
            notes.append(
                "jax >= 0.11 under PGLE_STRICTNESS_LEVEL_ERROR fails a module whose async "
                "collective XLA makes synchronous, whatever the profile: use "
                "PGLE_STRICTNESS_LEVEL_WARN"
            )
    elif m.no_profile_file:
        status = Applied.NOT_APPLIED
        notes.append(f"no {m.fingerprint}.pb or .pbtxt in the profile directory")
    elif m.fingerprint_only:
        status = Applied.NOT_APPLIED
        notes.append(
            "XLA read no profile for it (it logged only the module's fingerprint: "
            "no file for it in a profile directory, which jax <= 0.5.x does not "
            "report, or no profile reached XLA)"
        )
    elif m.discarded:
        status = Applied.NOT_APPLIED
        notes.append(
            "the accuracy checker (ERROR level) discarded the profile and the compile failed"
            + (f" (XLA: {m.compile_failed})" if m.compile_failed else "")
        )
        coverage = _ratio(found, missing)
    elif m.not_in_module and missing is None:
        # jax <= 0.4.30 checks the profile's names against the module and stops at the first
        # one it lacks: the profile was not made for this module as compiled; coverage unknown.
        status = Applied.PARTIAL
        notes.append(
            f"XLA: the profile has entries that are not in this module (first: "
            f"{m.not_in_module[0]}); it is used where names match, coverage unknown"
        )
    elif missing is not None:
        # -- the collective-aware rule (pgle.verdicts.collectives) --
        coverage = _ratio(found, missing)
        sync = sync_converted.split(
            m.missing_communication,
            executed=executed,
            seen=m.async_starts_seen,
            added_pairs=m.converted_pairs,
            renamed=renamed,
        )
        decision = collectives.decide(
            found,
            missing,
            m.missing_communication,
            coverage=coverage,
            min_coverage=min_coverage,
            sol_fallback=sol_fallback or m.sol_fallback,
            sync=sync,
        )
        status, rule, coverage = decision.status, decision.rule, decision.coverage
        notes += decision.notes
        # -- end of the collective-aware rule --
    elif silence == SILENCE_FULL:
        # The checker is silent when nothing is missing: the profile covers the module.
        status, missing, coverage = Applied.APPLIED, 0, 1.0
    elif silence == SILENCE_UNKNOWN:
        status = Applied.APPLIED
        notes.append(
            "coverage unknown: XLA printed no accuracy-checker block for it, and this "
            "jax's WARN checker prints nothing even when instructions are missing "
            "(jax 0.4.36-0.5.0); rerun with "
            "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR to prove the fit"
        )
    else:
        status = Applied.APPLIED
        notes.append(
            "coverage unverified: the run had no accuracy checker (jax < 0.4.36 has none "
            "by default, or PGLE_STRICTNESS_LEVEL_OFF), so the log proves the profile was "
            "read, not which instructions it covers"
        )
    if m.fallback_from:
        notes.append(
            f"XLA could not parse {m.fallback_from} and read the .pb beside it "
            "(its lookup order: .pbtxt, then .pb)"
        )
    if m.note:
        notes.append(m.note)
    if m.missed_costs:
        notes.append(
            f"XLA's estimator found no cost for {plural(m.missed_costs, 'instruction')} "
            "('PGLE missed cost for')"
        )
    if m.module is None and m.fingerprint is None and m.ordinal:
        notes.append("XLA did not log the module's name (set TF_CPP_VMODULE=gpu_hlo_schedule=1)")
    return AppliedRow(
        module=m.module,
        status=status,
        instructions_found=found,
        instructions_missing=missing,
        coverage=coverage,
        fingerprint=m.fingerprint,
        profile_path=m.profile_path,
        profile_found=not m.no_profile_file,
        rank=m.rank,
        missing_instructions=m.missing_names,
        notes=notes,
        ordinal=m.ordinal,
        rule=rule or _rule_of(status, m, silence),
        collectives_missing=sync.missing + sync.unresolved,
        collectives_converted=[{"scheduled": n, "executed": e} for n, e in sync.converted],
        collectives_unresolved=list(sync.unresolved),
        async_unknown=list(sync.unknown),
    )


def _rule_of(status: str, m: ModuleEvidence, silence: str) -> str:
    """Which rule decided a module the checker printed nothing for (JSON `rule`)."""
    if m.no_profile_file:
        return "no_profile_file"
    if m.discarded:
        return "discarded"
    if m.not_in_module:
        return "not_in_module"
    if m.fingerprint_only:
        return "no_profile_read"
    return {SILENCE_FULL: "checker_silent", SILENCE_UNKNOWN: "checker_silence_unknown"}.get(
        silence, "no_checker"
    )


def _ratio(found: int | None, missing: int | None) -> float | None:
    if found is None or missing is None or found + missing == 0:
        return None
    return found / (found + missing)
