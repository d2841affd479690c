"""`pgle prewarm --cache-dir DIR`: fill a compilation cache with PGLE-optimized executables.

One run with auto PGLE and the persistent cache (jax >= 0.5.1). Every module
JAX compiles is written (min compile time 0, no min entry size); a module that
completes its PGLE cycle (runs+1 executions) leaves two entries: the first-pass
one (profiling compile, command buffers off) and the PGLE-optimized one (key
derived with the sentinel profile b"pgle profiled"). Nothing on disk tells them
apart, so the keys, the executions seen and the environment that produced them
go into `<DIR>/pgle-manifest.json` for `pgle nsys` and `pgle cache ls`.

On jax 0.4.36-0.10.2 the cache key depends on the cache directory string (XLA's
autotune cache path is in the compile options): pgle hands JAX the absolute path
and records it; `--relocatable` sets JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none
there, so the directory can be moved or mounted elsewhere (GPU autotuning
results are then not cached). jax >= 0.11 keeps the path out of the key: the
cache moves as it is (pgle.cache.key_rules).
"""

from __future__ import annotations

import dataclasses
import logging
import time

from pgle.cache import entries, manifest
from pgle.commands import auto_env
from pgle.commands.options import AutoPgleOptions
from pgle.evidence import jax_log
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.launch import childenv
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.phrases import plural
from pgle.report import Report
from pgle.verdicts import auto_pgle
from pgle.verdicts.across_ranks import JobReports, ModuleRule, combine_modules
from pgle.verdicts.auto_pgle import STATUS_OPTIMIZED

log = logging.getLogger(__name__)

KEEP_RUNS = 20  # finished runs the manifest remembers


@dataclasses.dataclass(frozen=True)
class PrewarmOptions:
    workload: Workload
    cache_dir: str
    pgle: AutoPgleOptions = AutoPgleOptions()
    relocatable: bool = False
    run_dir: str | None = None
    log: str | None = None


def request(opts: PrewarmOptions) -> LayoutRequest:
    return LayoutRequest(run_dir=opts.run_dir, log=opts.log, inputs={"cache_dir": opts.cache_dir})


RULE = ModuleRule(
    STATUS_OPTIMIZED,
    auto_pgle.prewarm_status,
    "prewarm",
    "have a PGLE-optimized entry",
    ("cache_dir", "manifest", "environment", "runs", "percentile"),
)


def combine(opts: PrewarmOptions, layout: RankLayout, job: JobReports) -> Report:
    return combine_modules(job, RULE, opts.pgle.require_all, opts.pgle.require)


def body(opts: PrewarmOptions, layout: RankLayout, launch, environ: dict[str, str]) -> Report:
    """Fill the cache, a verdict per module. JAX writes cache entries from process 0 only, so
    only the process that `writes_shared` records the run and its modules in the manifest."""
    p = opts.pgle
    auto_env.require_expect_pgle(", so a prewarmed cache cannot be checked")
    cache_dir = auto_env.normalize_cache_dir(layout.input("cache_dir"))
    entries.check_writable_dir(cache_dir, create=True, what="write to")
    previous = manifest.load(cache_dir)  # a corrupt manifest stops us before the run
    known = {
        k
        for m in (previous or {}).get("modules", {}).values()
        for k in m.get("pgle_optimized_keys", [])
    }
    writes = layout.writes_shared
    warnings = auto_env.pre_launch_warnings(opts.workload, p.runs, p.percentile)
    warnings += auto_env.size_cap_warnings(environ)
    for w in warnings:
        log.warning(w)
    variables = {
        **auto_env.pgle_variables(p.runs, p.percentile),
        **auto_env.cache_variables(cache_dir, opts.relocatable),
    }
    child = childenv.build(environ, xla=auto_env.pgle_xla_flags(), variables=variables)
    for line in child.notices:
        log.info(line)
    environment = auto_env.replay_environment(
        child.env, environ, cache_dir, opts.workload, opts.relocatable
    )
    run_record = manifest.new_run(opts.workload.describe(), environment)
    if writes:
        manifest.update(cache_dir, lambda data: data["runs"].append(run_record))

    run = RunFolder.create("prewarm", layout.run_dir)
    log.info(
        f"prewarming {cache_dir} with auto PGLE "
        f"({plural(p.runs, 'profiled execution')}): "
        f"{opts.workload.describe()} (run folder {run.path})"
    )
    try:
        ex = launch(opts.workload, run, child, log_copy=layout.log, **auto_env.AUTO_PGLE_LAUNCH)
    except BaseException:
        # Never leave a run "in progress" behind: it would block `pgle cache prune`.
        if writes:
            _close_run(cache_dir, run_record["id"], "failed", None, [])
        raise
    state = "finished" if ex.exit_code == 0 else "failed"
    facts = jax_log.summarize(ex.events.records)
    backend = ex.events.backend_record or {}
    # JAX writes cache entries from process 0 only; the other processes' view of the cache
    # is partial, so only process 0 records modules in the manifest.
    writer = writes and backend.get("process_index") in (None, 0)
    on_disk = {e.key for e in entries.list_entries(cache_dir)}
    modules = auto_pgle.prewarm_modules(
        facts, p.runs, ex.events.platform, on_disk, known, writer=writer
    )
    environment.update(
        platform=backend.get("platform"),
        device_kind=backend.get("device_kind"),
        device_count=backend.get("device_count"),
        process_count=backend.get("process_count"),
    )
    if writes:
        _close_run(
            cache_dir,
            run_record["id"],
            state,
            environment if writer else None,
            modules if writer else [],
        )

    report = ex.report("prewarm", auto_pgle.prewarm_status(modules), modules=modules)
    report.warnings += warnings + child.warnings
    if facts.filelock_missing:
        report.warnings.append(
            "JAX used no cache: the size cap needs `filelock` (pip install filelock)."
        )
    report.details.update(
        {
            "cache_dir": cache_dir,
            "manifest": manifest.manifest_path(cache_dir),
            "environment": environment,
            "runs": p.runs,
            "percentile": p.percentile,
            "backend": ex.events.backend_record,
            "empty_traces": facts.empty_traces,
            "cache_writer": writer,
        }
    )
    auto_env.summarize(report, RULE, f" in {cache_dir}")
    report.exit_code = auto_env.finish_code(report, ex, STATUS_OPTIMIZED, p.require_all, p.require)
    return report


def _close_run(
    cache_dir: str, run_id: str, state: str, environment: dict | None, modules: list[dict]
) -> None:
    """One locked update: merge this run's modules and mark it done (other runs' entries stay)."""

    def change(data: dict) -> None:
        for run in data["runs"]:
            if run.get("id") == run_id:
                run.update(state=state, finished=time.time())
                if environment is not None:
                    run["environment"] = environment
        if state == "finished" and environment is not None:
            data["environment"] = environment
        # Keep the manifest small: every run in progress, and the latest finished ones.
        done = [r for r in data["runs"] if r.get("state") != "in_progress"]
        data["runs"] = [
            r for r in data["runs"] if r.get("state") == "in_progress" or r in done[-KEEP_RUNS:]
        ]
        for row in modules:
            entry = manifest.record_keys(
                data, row["module"], manifest.ROLE_FIRST_PASS, row["first_pass_keys"]
            )
            manifest.record_keys(
                data, row["module"], manifest.ROLE_PGLE_OPTIMIZED, row["pgle_optimized_keys"]
            )
            entry.update(
                status=row["status"],
                executions_seen=row["executions_seen"],
                profiled_executions=row["profiled_executions"],
                empty_profiles=row["empty_profiles"],
                reason=row["reason"],
                run=run_id,
            )

    manifest.update(cache_dir, change)
