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

from pgle.commands import auto_env
from pgle.commands.options import AutoPgleOptions, StoreOptions
from pgle.errors import PgleError
from pgle.evidence import jax_log
from pgle.evidence.event_kinds import PgleSessionError
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.launch import childenv
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.phrases import plural
from pgle.report import Report
from pgle.verdicts import auto_pgle
from pgle.verdicts.across_ranks import JobReports, ModuleRule, combine_modules
from pgle.verdicts.auto_pgle import STATUS_OPTIMIZED
from pgle.xla import flag_table, versions

log = logging.getLogger(__name__)


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
AUTO_STORE_NOTE = (
    "auto only serves the store (to each module's first compile; auto PGLE's "
    "recompile uses its own profile): JAX keeps auto PGLE's profile inside jax "
    "with no fingerprint; `pgle collect --per-module --store` adds to it"
)


# -- the workflow -------------------------------------------------------------------
def request(opts) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.run_dir, log=opts.log)


RULE = ModuleRule(
    STATUS_OPTIMIZED, auto_pgle.auto_status, "auto PGLE", "optimized", ("runs", "percentile")
)


def combine(opts: AutoOptions, layout: RankLayout, job: JobReports) -> Report:
    """The job's verdict: per module across the ranks."""
    return combine_modules(job, RULE, opts.pgle.require_all, opts.pgle.require)


def body(opts: AutoOptions, layout: RankLayout, launch, environ: dict[str, str]) -> Report:
    p = opts.pgle
    warnings = auto_env.pre_launch_warnings(opts.workload, p.runs, p.percentile)
    for w in warnings:
        log.warning(w)
    xla = auto_env.pgle_xla_flags()
    view = None
    if opts.store is not None:
        from pgle.commands.run import store_view

        view = store_view(opts.store, None, environ)
        if view.path is not None:
            xla[flag_table.PGLE_PROFILE_PATH] = str(view.path)
            if versions.needs_lhs_flag(versions.jax_version()):
                xla[flag_table.LHS] = "true"
    child = childenv.build(
        environ, xla=xla, variables=auto_env.pgle_variables(p.runs, p.percentile)
    )
    for line in child.notices:
        log.info(line)
    run = RunFolder.create("auto", layout.run_dir)
    log.info(
        f"running with auto PGLE ({plural(p.runs, 'profiled execution')}, percentile "
        f"{p.percentile}): {opts.workload.describe()} (run folder {run.path})"
    )
    ex = launch(opts.workload, run, child, log_copy=layout.log, **auto_env.AUTO_PGLE_LAUNCH)
    facts = jax_log.summarize(ex.events.records)
    collision = auto_pgle.profiler_collision(
        ex.run.log, ex.events.of(PgleSessionError), ex.events.script_traces
    )
    known, unreadable = _known_pgle_keys(child.env)
    rows = auto_pgle.auto_rows(facts, p.runs, ex.events.platform, known, collision)
    modules = [r.to_dict() for r in rows]
    report = ex.report("auto", auto_pgle.auto_status(modules), modules=modules)
    report.warnings += warnings + child.warnings + ([unreadable] if unreadable else [])
    if collision:
        report.reasons.append(collision.text)
        report.details["collision"] = {"kind": collision.kind, "modules": sorted(collision.modules)}
    report.details.update(
        {
            "runs": p.runs,
            "percentile": p.percentile,
            "backend": ex.events.backend_record,
            "empty_traces": facts.empty_traces,
            "observed_executions": facts.observed,
        }
    )
    if facts.empty_traces and not facts.observed:
        report.reasons.append(
            f"{facts.empty_traces} profiled executions gave an empty trace: "
            + auto_pgle.empty_profile_cause(ex.events.platform)
        )
    if not modules:
        report.reasons.append(
            "no jitted module was profiled or recompiled (did the workload run "
            "any jax.jit function?)"
        )
    auto_env.summarize(report, RULE)
    if collision:  # the per-module rows say "not profiled"; this says why, once, with the fix
        report.summary.append(collision.text)
    report.exit_code = auto_env.finish_code(report, ex, STATUS_OPTIMIZED, p.require_all, p.require)
    if view is not None and opts.store is not None:
        report.details["store"] = {
            "path": opts.store.path,
            "key": dataclasses.asdict(view.key),
            "view": str(view.path) if view.path else None,
            "view_modules": len(view.served),
            "adds": False,
            "note": AUTO_STORE_NOTE,
        }
        report.summary.append(
            f"store {opts.store.path} ({view.key.describe()}): a view of "
            f"{plural(len(view.served), 'module profile')} given to XLA; "
            f"{AUTO_STORE_NOTE}"
        )
    return report


def _known_pgle_keys(env: dict[str, str]) -> tuple[set[str], str | None]:
    """With the user's own persistent cache, a module may load a PGLE-optimized executable
    that an earlier `pgle prewarm` recorded. Returns those keys, and a warning when the
    manifest that lists them cannot be read (there is then no telling)."""
    from pgle.cache import manifest

    cache_dir = env.get("JAX_COMPILATION_CACHE_DIR")
    if not cache_dir:
        return set(), None
    try:
        data = manifest.load(cache_dir) or {}
    except (PgleError, OSError) as e:
        return set(), (
            f"cannot read the manifest of JAX_COMPILATION_CACHE_DIR={cache_dir} "
            f"({e}): a module that loaded a PGLE-optimized executable from the cache "
            "is counted as not optimized"
        )
    return (
        {k for m in data.get("modules", {}).values() for k in m.get("pgle_optimized_keys", [])},
        None,
    )
