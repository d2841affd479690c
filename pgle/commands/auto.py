"""`pgle auto`: one run with JAX's auto PGLE, and a per-module verdict.

JAX profiles each jitted module on its first N executions
(JAX_PGLE_PROFILING_RUNS), aggregates the N profiles at a percentile, and on
execution N+1 recompiles the module with that profile (jax/_src/pjit.py,
jax/_src/profiler.py, jax 0.10.2). pgle learns what happened from inside the
process: the harness captures JAX's compiler/cache loggers and warnings, and
`pgle.launch.jax_internals` counts profiled executions per module; nothing floods the
user's terminal with DEBUG logs.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable

from pgle.launch import childenv
from pgle.xla import flag_table
from pgle.evidence import jax_log as jax_events
from pgle.xla import versions
from pgle.errors import EXIT_NOT_VERIFIED, BadInput
from pgle.report import Report
from pgle.launch.workload import Workload

STATUS_OPTIMIZED = "optimized"
STATUS_NOT_OPTIMIZED = "not_optimized"
STATUS_EMPTY_PROFILE = "empty_profile"

# What the harness must capture for the verdicts of auto, prewarm and nsys.
CAPTURE_LOGGERS = list(jax_events.CAPTURE_LOGGERS)
WARNINGS_ALWAYS = list(jax_events.WARNING_CATEGORIES)


@dataclasses.dataclass
class AutoOptions:
    workload: Workload
    runs: int = 3
    percentile: int = 90
    require_all: bool = False
    require: tuple[str, ...] = ()  # module name globs that must be optimized
    run_dir: str | None = None
    log: str | None = None
    job_dir: str | None = None  # multi-process: the shared job folder
    gather_timeout: float | None = None  # multi-process: rank 0's wait for the ranks' reports


# -- before launch --------------------------------------------------------------
def percentile_index(runs: int, percentile: int) -> int:
    """The sorted position jaxlib's aggregate_profiled_instructions picks: int(p/100*(n-1))."""
    return int(percentile / 100 * (runs - 1))


def check_pgle_params(runs: int, percentile: int) -> list[str]:
    """Refuse values JAX would silently turn into no PGLE; warn on degenerate ones."""
    if runs < 1:
        raise BadInput(f"--runs {runs}: auto PGLE needs at least 1 profiled execution "
                       "(0 turns it off).")
    if not 0 <= percentile <= 100:
        raise BadInput(f"--percentile {percentile} is outside 0..100; jaxlib would return an empty "
                       "profile and nothing would be optimized.")
    warnings = []
    index = percentile_index(runs, percentile)
    if runs >= 2 and index == 0 and percentile > 0:
        warnings.append(
            f"with --runs {runs}, --percentile {percentile} picks the fastest of the {runs} "
            f"profiled executions for every instruction (index int({percentile}/100*{runs - 1}) = 0); "
            f"use --runs {_runs_for(percentile)} or more, or --percentile 100, for a real percentile.")
    return warnings


def _runs_for(percentile: int) -> int:
    n = 2
    while percentile > 0 and percentile_index(n, percentile) == 0 and n < 100:
        n += 1
    return n


_AOT_LOWER = re.compile(r"\.lower\(")
_AOT_COMPILE = re.compile(r"\.compile\(")
_AOT_DESERIALIZE = re.compile(r"deserialize_and_load|deserialize_executable")


def aot_sites(workload: Workload) -> list[str]:
    """Lines of the script that compile ahead of time (auto PGLE never re-optimizes those).

    A plain-text scan of the script only (never importing the user's code).
    """
    path = workload.script
    if path is None and workload.module and "." not in workload.module:
        candidate = os.path.join(os.getcwd(), workload.module + ".py")
        path = candidate if os.path.isfile(candidate) else None
    if not path:
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    text = "\n".join(lines)
    sites = []
    if _AOT_LOWER.search(text):
        sites += [f"{os.path.basename(path)}:{i}: {line.strip()}" for i, line in enumerate(lines, 1)
                  if _AOT_COMPILE.search(line) and not line.lstrip().startswith("#")]
    sites += [f"{os.path.basename(path)}:{i}: {line.strip()}" for i, line in enumerate(lines, 1)
              if _AOT_DESERIALIZE.search(line) and not line.lstrip().startswith("#")]
    return sites


def pgle_variables(runs: int, percentile: int) -> dict[str, str]:
    return {"JAX_ENABLE_PGLE": "true", "JAX_PGLE_PROFILING_RUNS": str(runs),
            "JAX_PGLE_AGGREGATION_PERCENTILE": str(percentile)}


def pgle_xla_flags() -> dict[str, str | None]:
    """jax <= 0.5.0 runs the latency-hiding scheduler only when asked, profile or not."""
    return {flag_table.LHS: "true"} if versions.needs_lhs_flag(versions.jax_version()) else {}


def pre_launch_warnings(workload: Workload, runs: int, percentile: int) -> list[str]:
    warnings = check_pgle_params(runs, percentile)
    sites = aot_sites(workload)
    if sites:
        warnings.append("the workload compiles ahead of time (`.lower(...).compile()` or a "
                        "deserialized executable); auto PGLE never profiles or re-optimizes those "
                        "executables: " + "; ".join(sites[:3]) + (" ..." if len(sites) > 3 else ""))
    return warnings


# -- after the run ------------------------------------------------------------------
def empty_profile_cause(platform: str | None) -> str:
    if platform and platform not in ("gpu", "cuda"):
        return (f"the backend is {platform}: the JAX profiler records no device kernels there, so "
                "every profile is empty (PGLE is an NVIDIA GPU feature)")
    return ("CUPTI contention (Nsight Systems, DCGM or another profiler attached to the GPU), or "
            "kernels hidden in CUDA graphs; profile with nothing else attached")


def judge_modules(facts: jax_events.RunFacts, runs: int, platform: str | None,
                  known_pgle_keys: set[str] = frozenset()) -> list[dict]:
    """One verdict per module: optimized / not_optimized / empty_profile, with reason and fix."""
    out = []
    for name in sorted(facts.modules):
        m = facts.modules[name]
        row = {"module": name, "status": STATUS_NOT_OPTIMIZED,
               "profiled_executions": m.profiled if facts.observed else None,
               "runs": m.runs or runs, "empty_profiles": m.empty_profiles if facts.observed else None,
               "profile_bytes": max(m.fdo_lengths) if m.fdo_lengths else None,
               "reason": None, "fix": None}
        cached_pgle = [k for k in m.hits if k in known_pgle_keys]
        if m.fdo_lengths:
            row["status"] = STATUS_OPTIMIZED
            row["reason"] = (f"recompiled with a {max(m.fdo_lengths)}-byte profile after "
                             f"{row['runs']} profiled executions")
        elif cached_pgle:
            row["status"] = STATUS_OPTIMIZED
            row["reason"] = "loaded its PGLE-optimized executable from the compilation cache"
            row["from_cache"] = True
        elif facts.observed and m.profiled >= row["runs"] and m.empty_profiles >= m.profiled:
            row["status"] = STATUS_EMPTY_PROFILE
            row["reason"] = f"all {m.profiled} profiled executions gave an empty profile: " \
                            + empty_profile_cause(platform)
            row["fix"] = "run on an NVIDIA GPU with no other CUPTI client attached"
        elif facts.observed and m.profiled >= row["runs"]:
            row["reason"] = (f"profiled {times(m.profiled)} but never executed again: auto PGLE "
                             f"recompiles on execution {row['runs'] + 1}")
            row["fix"] = "run more steps, or lower --runs"
        elif facts.observed and m.profiled > 0:
            row["reason"] = (f"executed {times(m.profiled)}; auto PGLE "
                             f"needs {row['runs'] + 1} ({row['runs']} profiled, then the recompile)")
            row["fix"] = "run more steps, or lower --runs"
        elif facts.observed:
            row["reason"] = ("never profiled: compiled ahead of time (`.lower().compile()`), or "
                             "not executed")
        else:
            row["reason"] = "no recompilation with a profile was logged"
        out.append(row)
    return out


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def times(n: int) -> str:
    return plural(n, "time")


def overall_status(modules: list[dict]) -> str:
    statuses = {m["status"] for m in modules}
    if STATUS_OPTIMIZED in statuses:
        return STATUS_OPTIMIZED
    if STATUS_EMPTY_PROFILE in statuses:
        return STATUS_EMPTY_PROFILE
    return STATUS_NOT_OPTIMIZED


def required_failures(modules: list[dict], *, ok: str, require_all: bool,
                      require: tuple[str, ...]) -> list[str]:
    """Sentences for every required module that is not `ok` (or absent)."""
    import fnmatch

    failures = []
    if require_all:
        failures += [f"{m['module']} is {m['status']}" for m in modules if m["status"] != ok]
    for pattern in require:
        matched = [m for m in modules if fnmatch.fnmatchcase(m["module"], pattern)]
        if not matched:
            failures.append(f"no module matches --require {pattern}")
        failures += [f"{m['module']} is {m['status']}" for m in matched
                     if m["status"] != ok and f"{m['module']} is {m['status']}" not in failures]
    return failures


def module_lines(modules: list[dict]) -> list[str]:
    lines = []
    for m in modules:
        text = f"  {m['module']}: {m['status']}"
        if m.get("reason"):
            text += f" ({m['reason']})"
        if m.get("fix"):
            text += f"; fix: {m['fix']}"
        lines.append(text)
    return lines


def count_line(modules: list[dict], ok: str, what: str) -> str:
    n = sum(1 for m in modules if m["status"] == ok)
    return f"{n} of {len(modules)} modules {what}"


# -- the workflow -------------------------------------------------------------------
def auto(opts: AutoOptions, notify: Callable[[str], None] = lambda s: None,
         environ: dict[str, str] | None = None) -> Report:
    """One process: the per-module verdict. One rank of a multi-process job: this rank's goes to
    the job folder; rank 0 returns the job's, per module across ranks."""
    from functools import partial

    from pgle.jobs.driver import JobRun, combine_modules

    environ = dict(os.environ if environ is None else environ)
    jr = JobRun.start("auto", environ, job_dir=opts.job_dir, gather_timeout_s=opts.gather_timeout)
    combine = partial(combine_modules, ok=STATUS_OPTIMIZED, overall=overall_status,
                      headline="auto PGLE", what="optimized",
                      required=partial(required_failures, ok=STATUS_OPTIMIZED,
                                       require_all=opts.require_all, require=opts.require),
                      keep=("runs", "percentile"))
    return jr.complete(lambda: auto_rank(opts, jr, jr.notifier(notify), environ), combine)


def auto_rank(opts: AutoOptions, jr, notify: Callable[[str], None],
              environ: dict[str, str]) -> Report:
    from pgle.launch.runfolder import RunFolder

    warnings = pre_launch_warnings(opts.workload, opts.runs, opts.percentile)
    for w in warnings:
        notify(f"warning: {w}")
    log = jr.per_rank_path(opts.log, "--log")
    child = childenv.build(environ, xla=pgle_xla_flags(),
                           variables=pgle_variables(opts.runs, opts.percentile))
    for line in child.notices:
        notify(line)
    run = RunFolder.create("auto", jr.run_dir(opts.run_dir))
    notify(f"running with auto PGLE ({plural(opts.runs, 'profiled execution')}, percentile "
           f"{opts.percentile}): {opts.workload.describe()} (run folder {run.path})")
    ex = jr.execute(opts.workload, run, child, capture_loggers=CAPTURE_LOGGERS,
                    warnings_always=WARNINGS_ALWAYS, log_copy=log,
                    **observer_kwargs())
    facts = jax_events.summarize(ex.events.records)
    modules = judge_modules(facts, opts.runs, ex.events.platform, _known_pgle_keys(child.env))
    report = Report("auto", overall_status(modules), workload_exit_code=ex.exit_code,
                    log_path=str(ex.run.log), run_dir=str(ex.run.path), modules=modules)
    report.warnings += warnings + child.warnings
    report.details.update({"runs": opts.runs, "percentile": opts.percentile,
                           "backend": ex.events.backend, "empty_traces": facts.empty_traces,
                           "observed_executions": facts.observed})
    if facts.empty_traces and not facts.observed:
        report.reasons.append(f"{facts.empty_traces} profiled executions gave an empty trace: "
                              + empty_profile_cause(ex.events.platform))
    if not modules:
        report.reasons.append("no jitted module was profiled or recompiled (did the workload run "
                              "any jax.jit function?)")
    report.summary.append(f"auto PGLE: {report.status}: "
                          + count_line(modules, STATUS_OPTIMIZED, "optimized"))
    report.summary += module_lines(modules)
    report.exit_code = finish_code(report, ex.exit_code, STATUS_OPTIMIZED, opts.require_all,
                                   opts.require)
    return report


def _known_pgle_keys(env: dict[str, str]) -> set[str]:
    """With the user's own persistent cache, a module may load a PGLE-optimized executable
    that an earlier `pgle prewarm` recorded; without a readable manifest there is no telling."""
    from pgle.cache import manifest as cache_manifest

    cache_dir = env.get("JAX_COMPILATION_CACHE_DIR")
    if not cache_dir:
        return set()
    try:
        data = cache_manifest.load(cache_dir) or {}
    except Exception:
        return set()
    return {k for m in data.get("modules", {}).values() for k in m.get("pgle_optimized_keys", [])}


def finish_code(report: Report, workload_code: int, ok: str, require_all: bool,
                require: tuple[str, ...]) -> int:
    """The workload's own failure first; then --require-all / --require."""
    if workload_code != 0:
        report.summary.append(f"the workload exited with code {workload_code}")
        return workload_code
    failures = required_failures(report.modules, ok=ok, require_all=require_all, require=require)
    if failures:
        report.reasons += failures
        report.summary.append("not verified: " + "; ".join(failures))
        return EXIT_NOT_VERIFIED
    return 0


def observer_kwargs() -> dict:
    """Ask the harness for per-execution PGLE events (pgle/launch/jax_internals.py)."""
    return {"extra_spec": {"observe_pgle": True}}
