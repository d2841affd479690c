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
import logging
import os
import re

from pgle.launch.runfolder import RunFolder

from pgle.commands.options import AutoPgleOptions, StoreOptions
from pgle.evidence import jax_log
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.launch import childenv
from pgle.launch.workload import Workload
from pgle.report import Report
from pgle.verdicts import auto_pgle
from pgle.verdicts.across_ranks import JobReports, combine_modules
from pgle.phrases import plural
from pgle.verdicts.auto_pgle import STATUS_OPTIMIZED
from pgle.verdicts.rows import module_lines
from pgle.xla import flag_table
from pgle.xla import versions

log = logging.getLogger(__name__)

# What the harness must capture for the verdicts of auto, prewarm and nsys.
CAPTURE_LOGGERS = list(jax_log.CAPTURE_LOGGERS)
WARNINGS_ALWAYS = list(jax_log.WARNING_CATEGORIES)


@dataclasses.dataclass(frozen=True)
class AutoOptions:
    workload: Workload
    pgle: AutoPgleOptions = AutoPgleOptions()
    run_dir: str | None = None
    log: str | None = None
    store: StoreOptions | None = None  # --store: serve its view to the first compile (see body)


# Why `auto --store` serves and never adds: JAX keeps auto PGLE's aggregated profile inside
# jax._src (pjit's per-executable PGLE profiler, jax 0.4.31-0.10.2) and hands it to XLA as
# `fdo_profile` bytes with no module fingerprint attached; the fingerprint exists only in
# XLA's VLOG line. Reading it would need jax internals beyond pgle/launch/jax_internals.py's
# observer, and on CPU the profile is empty anyway. `pgle collect --store` adds instead.
AUTO_STORE_NOTE = ("auto only serves the store (to each module's first compile; auto PGLE's "
                   "recompile uses its own profile): JAX keeps auto PGLE's profile inside jax "
                   "with no fingerprint; `pgle collect --per-module --store` adds to it")


# -- before launch --------------------------------------------------------------
def percentile_index(runs: int, percentile: int) -> int:
    """The sorted position jaxlib's aggregate_profiled_instructions picks: int(p/100*(n-1))."""
    return int(percentile / 100 * (runs - 1))


def check_pgle_params(runs: int, percentile: int) -> list[str]:
    """Refuse values JAX would silently turn into no PGLE (AutoPgleOptions); warn on
    degenerate ones."""
    AutoPgleOptions(runs, percentile)
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


# -- the workflow -------------------------------------------------------------------
def request(opts) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.run_dir, log=opts.log)


def combine(opts: AutoOptions, layout: RankLayout, job: JobReports) -> Report:
    """The job's verdict: per module across the ranks."""
    return combine_modules(
        job, ok=STATUS_OPTIMIZED, overall=auto_pgle.auto_status, headline="auto PGLE",
        what="optimized", keep=("runs", "percentile"),
        required=lambda modules: auto_pgle.required_failures(
            modules, ok=STATUS_OPTIMIZED, require_all=opts.pgle.require_all,
            require=opts.pgle.require))


def body(opts: AutoOptions, layout: RankLayout, launch,
         environ: dict[str, str]) -> Report:
    p = opts.pgle
    warnings = pre_launch_warnings(opts.workload, p.runs, p.percentile)
    for w in warnings:
        log.warning(w)
    xla = pgle_xla_flags()
    view = None
    if opts.store is not None:
        from pgle.commands.run import store_view

        view = store_view(opts.store, None, environ)
        if view.path is not None:
            xla[flag_table.PGLE_PROFILE_PATH] = str(view.path)
            if versions.needs_lhs_flag(versions.jax_version()):
                xla[flag_table.LHS] = "true"
    child = childenv.build(environ, xla=xla, variables=pgle_variables(p.runs, p.percentile))
    for line in child.notices:
        log.info(line)
    run = RunFolder.create("auto", layout.run_dir)
    log.info(f"running with auto PGLE ({plural(p.runs, 'profiled execution')}, percentile "
           f"{p.percentile}): {opts.workload.describe()} (run folder {run.path})")
    ex = launch(opts.workload, run, child, capture_loggers=CAPTURE_LOGGERS,
                warnings_always=WARNINGS_ALWAYS, log_copy=layout.log, observe_pgle=True,
                progress=True, count_jits=False)
    facts = jax_log.summarize(ex.events.records)
    collision = auto_pgle.profiler_collision(ex.run.log, ex.events.script_traces)
    modules = auto_pgle.auto_modules(facts, p.runs, ex.events.platform,
                                     _known_pgle_keys(child.env), collision)
    report = Report("auto", auto_pgle.auto_status(modules), workload_exit_code=ex.exit_code,
                    log_path=str(ex.run.log), run_dir=str(ex.run.path), modules=modules)
    report.warnings += warnings + child.warnings
    if collision:
        report.reasons.append(collision)
    report.details.update({"runs": p.runs, "percentile": p.percentile,
                           "backend": ex.events.backend, "empty_traces": facts.empty_traces,
                           "observed_executions": facts.observed})
    if facts.empty_traces and not facts.observed:
        report.reasons.append(f"{facts.empty_traces} profiled executions gave an empty trace: "
                              + auto_pgle.empty_profile_cause(ex.events.platform))
    if not modules:
        report.reasons.append("no jitted module was profiled or recompiled (did the workload run "
                              "any jax.jit function?)")
    report.summary.append(f"auto PGLE: {report.status}: "
                          + auto_pgle.count_line(modules, STATUS_OPTIMIZED, "optimized"))
    report.summary += module_lines(modules)
    report.exit_code = auto_pgle.finish_code(report, ex.exit_code, STATUS_OPTIMIZED,
                                             p.require_all, p.require)
    if view is not None:
        report.details["store"] = {"path": opts.store.path, "key": dataclasses.asdict(view.key),
                                   "view": str(view.path) if view.path else None,
                                   "view_modules": len(view.served), "adds": False,
                                   "note": AUTO_STORE_NOTE}
        report.summary.append(f"store {opts.store.path} ({view.key.describe()}): a view of "
                              f"{plural(len(view.served), 'module profile')} given to XLA; {AUTO_STORE_NOTE}")
    return report


def _known_pgle_keys(env: dict[str, str]) -> set[str]:
    """With the user's own persistent cache, a module may load a PGLE-optimized executable
    that an earlier `pgle prewarm` recorded; without a readable manifest there is no telling."""
    from pgle.cache import manifest

    cache_dir = env.get("JAX_COMPILATION_CACHE_DIR")
    if not cache_dir:
        return set()
    try:
        data = manifest.load(cache_dir) or {}
    except Exception:
        return set()
    return {k for m in data.get("modules", {}).values() for k in m.get("pgle_optimized_keys", [])}
