"""`pgle run --profile P`: run the workload with a profile and prove XLA used it."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Callable

from pgle.launch import childenv
from pgle.xla import flag_table
from pgle.profiles import manifest
from pgle.profiles import files as profile
from pgle.xla import versions
from pgle.atomic import check_writable_target
from pgle.errors import EXIT_NOT_VERIFIED, ProfileError
from pgle.launch.execution import Execution
from pgle.jobs.driver import DEFAULT_GATHER_TIMEOUT_S, JobRun, combine_verdicts
from pgle.report import Report
from pgle.launch.runfolder import DEFAULT_ROOT, RunFolder
from pgle.evidence.steps import step_times, summarize
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import Verdict, judge, module_label
from pgle.launch.workload import Workload
from pgle.xla.flags import XlaFlags


@dataclasses.dataclass
class RunOptions:
    workload: Workload
    profile: str | None  # None: a plain run (tune on a backend without profiles)
    require_applied: bool = False
    min_coverage: float = 0.9
    run_dir: str | None = None
    log: str | None = None
    profile_store: str | None = None  # where content-addressed copies go
    job_dir: str | None = None  # multi-process: the shared job folder (default .pgle/jobs/<job>.<step>)
    gather_timeout: float = DEFAULT_GATHER_TIMEOUT_S  # rank 0 waits this long for the ranks' reports


def prepare_profile(path: str, store: str | None) -> tuple[profile.ProfileSource, Path]:
    """Validate the profile and hand XLA a content-addressed copy of it.

    XLA's compilation-cache key hashes the flag string, not the file: a profile
    regenerated at the same path would hit a stale executable. A path that
    names the content cannot.
    """
    source = profile.load_profile_source(path)
    if source.is_empty():
        raise ProfileError(
            f"profile {path} is empty: XLA would have nothing to use.",
            hint="Collect it on an NVIDIA GPU (`pgle collect`); see `pgle inspect`.")
    copy = profile.content_addressed_copy(source, store or Path(DEFAULT_ROOT) / "profiles")
    return source, copy


def accuracy_checker_on(flags: XlaFlags, jax: tuple[int, ...] | None = None) -> bool:
    """The checker is on (WARN) by default since jax 0.4.36; OFF silences it. Before, only
    --xla_gpu_enable_pgle_accuracy_checker=true turned it on (strict: a miss fails the compile)."""
    jax = versions.jax_version() if jax is None else jax
    if not versions.at_least(jax, flag_table.ACCURACY_CHECKER_SINCE):
        return flags.value(flag_table.OLD_ACCURACY_CHECKER) in ("true", "1")
    value = flags.value(flag_table.ACCURACY_CHECKER)
    if value is not None:
        return not value.endswith("OFF")
    return True


def run(opts: RunOptions, notify: Callable[[str], None] = lambda s: None,
        environ: dict[str, str] | None = None, command: str = "run",
        job: JobRun | None = None) -> Report:
    """One process: the verdict. One rank of a multi-process job: this rank's verdict goes to
    the job folder; rank 0 returns the job's (per module across ranks). `job`: a phase of an
    enclosing job (tune)."""
    environ = dict(os.environ if environ is None else environ)
    jr = job or JobRun.start(command, environ, job_dir=opts.job_dir,
                             gather_timeout_s=opts.gather_timeout)
    say = jr.notifier(notify)
    return jr.complete(lambda: run_rank(opts, jr, say, environ, command),
                       functools.partial(combine_verdicts, require_applied=opts.require_applied))


def run_rank(opts: RunOptions, jr: JobRun, notify: Callable[[str], None],
             environ: dict[str, str], command: str) -> Report:
    if not 0.0 <= opts.min_coverage <= 1.0:
        from pgle.errors import BadInput

        raise BadInput(f"--min-coverage {opts.min_coverage} is not between 0 and 1.")
    log = jr.per_rank_path(opts.log, "--log")
    if log:
        check_writable_target(log, force=True, what="log")
    xla: dict[str, str | None] = {}
    source = None
    if opts.profile is not None:
        source, copy = prepare_profile(jr.path(opts.profile), jr.path(opts.profile_store))
        xla[flag_table.PGLE_PROFILE_PATH] = str(copy)
        if versions.needs_lhs_flag(versions.jax_version()):
            xla[flag_table.LHS] = "true"
    defaults = {}
    if not versions.uses_absl_log_prefix(versions.jax_version()):
        # Before jax 0.7.2 log lines carry no thread id unless asked, and modules
        # compiling in parallel interleave their accuracy-checker blocks.
        defaults["TF_CPP_LOG_THREAD_ID"] = "1"
    child = childenv.build(environ, xla=xla, defaults=defaults, info_log=True)
    drift_notes = []
    man = None
    if source is not None:
        man = manifest.read(manifest.manifest_path(source.path))
        if man is not None:
            drift_notes = manifest.drift(man, user_flags=child.user_flags)
    for line in child.notices:
        notify(line)
    for line in drift_notes:
        notify(f"warning: {line} (instruction names follow the HLO: the profile may not fit)")
    run_folder = RunFolder.create(command, jr.run_dir(opts.run_dir))
    notify(f"running: {opts.workload.describe()} (run folder {run_folder.path})")
    ex = jr.execute(opts.workload, run_folder, child, log_copy=log)
    return finish_run(opts, ex, source, man, drift_notes, command)


def finish_run(opts: RunOptions, ex: Execution, source, man: dict | None,
               drift_notes: list[str], command: str = "run") -> Report:
    level = ex.child.env.get("TF_CPP_MIN_LOG_LEVEL", "").strip()
    verdict = judge(LogScanner().scan_file(ex.run.log), platform=ex.events.platform,
                    min_coverage=opts.min_coverage, accuracy_checker=accuracy_checker_on(ex.child.flags),
                    info_log_hidden=level not in ("", "0"))
    if man is not None:
        drift_notes = drift_notes + [d for d in manifest.drift(
            man, user_flags=ex.child.user_flags, backend=ex.events.backend)
            if d not in drift_notes]
    report = verdict_report(command, verdict, ex)
    report.profile = source.to_dict() if source is not None else None
    if source is not None:
        report.profile["given_to_xla"] = ex.child.flags.value(flag_table.PGLE_PROFILE_PATH)
    report.warnings += ex.child.warnings + drift_notes
    if source is not None and source.kind == "directory":
        report.details["directory"] = directory_lookups(verdict, source)
    report.details["step_times"] = summarize(step_times(ex.events.steps))
    report.exit_code = exit_code_for(report.status, ex.exit_code, opts.require_applied)
    if ex.exit_code != 0:
        report.summary.append(f"the workload exited with code {ex.exit_code}")
    elif report.exit_code == EXIT_NOT_VERIFIED:
        report.summary.append(f"--require-applied: status is {report.status}, not applied")
    return report


def directory_lookups(verdict: Verdict, source) -> dict:
    """Which per-module files XLA found, which fingerprints it looked for in vain, which it never used."""
    found = sorted({m["fingerprint"] for m in verdict.modules
                    if m["fingerprint"] and m["profile_found"]})
    missing = sorted({m["fingerprint"] for m in verdict.modules
                      if m["fingerprint"] and not m["profile_found"]})
    unused = sorted(set(source.modules) - set(found) - set(missing))
    return {"found": found, "looked_up_missing": missing, "unused": unused}


def verdict_report(command: str, verdict: Verdict, ex: Execution) -> Report:
    report = Report(command, verdict.status, workload_exit_code=ex.exit_code,
                    log_path=str(ex.run.log), run_dir=str(ex.run.path), modules=verdict.modules,
                    reasons=verdict.reasons)
    report.details["backend"] = ex.events.backend
    report.summary += summary_lines(verdict)
    return report


def summary_lines(verdict: Verdict) -> list[str]:
    lines = [f"verdict: {verdict.status}: " + " ".join(verdict.reasons)]
    for m in verdict.modules:
        cov = "?" if m["coverage"] is None else f"{m['coverage']:.0%}"
        missing = m["instructions_missing"]
        detail = f"coverage {cov}" + (f", {missing} missing" if missing else "")
        where = f" [rank {m['rank']}]" if m.get("rank") is not None else ""
        name = module_label(m)
        lines.append(f"  {name}{where}: {m['status']} ({detail})")
    return lines


def exit_code_for(status: str, workload_code: int, require_applied: bool) -> int:
    if workload_code != 0:
        return workload_code
    if require_applied and status != "applied":
        return EXIT_NOT_VERIFIED
    return 0
