"""`pgle prewarm --cache-dir DIR`: fill a compilation cache with PGLE-optimized executables.

One run with auto PGLE and the persistent cache (jax >= 0.5.1). Every module
JAX compiles is written (min compile time 0, no min entry size); a module that
completes its PGLE cycle (runs+1 executions) leaves two entries: the first-pass
one (profiling compile, command buffers off) and the PGLE-optimized one (key
derived with the sentinel profile b"pgle profiled"). Nothing on disk tells them
apart, so the keys, the executions seen and the environment that produced them
go into `<DIR>/pgle-manifest.json` for `pgle nsys` and `pgle cache ls`.

The cache key depends on the cache directory string (XLA's autotune cache
path is in the compile options): pgle hands JAX the absolute path and records
it; `--relocatable` sets JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none instead,
so the directory can be moved or mounted elsewhere (GPU autotuning results are
then not cached).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import time
from typing import Callable

from pgle.commands import auto
from pgle.cache import entries as cache
from pgle.cache import manifest as cache_manifest
from pgle.launch import childenv
from pgle.evidence import jax_log as jax_events
from pgle.xla import versions
from pgle.errors import BadInput
from pgle.report import Report
from pgle.launch.workload import Workload

STATUS_OPTIMIZED = "optimized"
STATUS_NOT_OPTIMIZED = "not_optimized"
KEEP_RUNS = 20  # finished runs the manifest remembers

# Variables pgle sets differently in the Nsight run; never part of the replayed environment.
PHASE_VARIABLES = frozenset({"JAX_ENABLE_PGLE", "JAX_PGLE_PROFILING_RUNS",
                             "JAX_PGLE_AGGREGATION_PERCENTILE", "JAX_COMPILATION_CACHE_EXPECT_PGLE"})


@dataclasses.dataclass
class PrewarmOptions:
    workload: Workload
    cache_dir: str
    runs: int = 3
    percentile: int = 90
    relocatable: bool = False
    require_all: bool = False
    require: tuple[str, ...] = ()
    run_dir: str | None = None
    log: str | None = None
    job_dir: str | None = None  # multi-process: the shared job folder
    gather_timeout: float | None = None  # multi-process: rank 0's wait for the ranks' reports


def normalize_cache_dir(path: str) -> str:
    """The exact string JAX gets: absolute, user-expanded, no trailing '/'; URLs untouched."""
    if cache_manifest.is_remote(path):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def cache_variables(cache_dir: str, relocatable: bool) -> dict[str, str]:
    variables = {
        "JAX_ENABLE_COMPILATION_CACHE": "true",
        "JAX_COMPILATION_CACHE_DIR": cache_dir,
        # Write every module, however fast it compiled or small it is (defaults: 1 s, and
        # a filesystem-dependent minimum size; -1 also stops JAX overriding it).
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
    }
    if relocatable:
        variables[jax_events.XLA_CACHES_VAR] = "none"
    return variables


def size_cap_warnings(environ: dict[str, str]) -> list[str]:
    cap = environ.get("JAX_COMPILATION_CACHE_MAX_SIZE", "").strip()
    if not cap or cap == "-1":
        return []
    out = [f"JAX_COMPILATION_CACHE_MAX_SIZE={cap} caps the cache: JAX evicts the least recently "
           "used entries, PGLE-optimized ones included, so they may be gone before the Nsight run; "
           "unset it (or -1) for the prewarm and Nsight runs."]
    if cap == "0":
        out.append("JAX_COMPILATION_CACHE_MAX_SIZE=0 disables the cache: nothing will be written.")
    if importlib.util.find_spec("filelock") is None:
        out.append("a size-capped cache needs the `filelock` package, which is not installed: JAX "
                   "warns once and then uses no cache at all (pip install filelock).")
    return out


def replay_environment(child_env: dict[str, str], user_env: dict[str, str], cache_dir: str,
                       workload: Workload, relocatable: bool) -> dict:
    """What `pgle nsys` must reproduce for every cache key to match."""
    jax_vars = {k: v for k, v in sorted(child_env.items())
                if k.startswith("JAX_") and k not in PHASE_VARIABLES}
    return {
        "XLA_FLAGS": child_env.get("XLA_FLAGS", ""),
        "user_XLA_FLAGS": user_env.get("XLA_FLAGS", ""),
        "jax_variables": jax_vars,
        "user_jax_variables": {k: v for k, v in sorted(user_env.items()) if k.startswith("JAX_")},
        "argv_xla_flags": [a for a in workload.args if a.startswith("--xla")],
        "LIBTPU_INIT_ARGS": child_env.get("LIBTPU_INIT_ARGS"),
        "jax": versions.installed("jax"),
        "jaxlib": versions.installed("jaxlib"),
        "cache_path": cache_dir,
        "relocatable": relocatable,
        "device_kind": None, "device_count": None, "platform": None, "process_count": None,
    }


def judge_modules(facts: jax_events.RunFacts, runs: int, platform: str | None, cache_dir: str,
                  known_pgle_keys: set[str], writer: bool = True) -> list[dict]:
    """Per module: did a PGLE-optimized entry land on disk? With the reason and fix if not.

    `writer`: this is process 0 (or the only process). JAX writes cache entries from process 0
    only, so on the other processes of a job a module counts as optimized when it was
    recompiled with a non-empty profile; its entry is process 0's to write."""
    on_disk = {e.key for e in cache.list_entries(cache_dir)}
    base = {row["module"]: row for row in auto.judge_modules(facts, runs, platform, known_pgle_keys)}
    out = []
    for name in sorted(facts.modules):
        m = facts.modules[name]
        row = dict(base[name])
        pgle_keys = [k for k in m.pgle_keys] + [k for k in m.keys() if k in known_pgle_keys
                                                 and k not in m.pgle_keys]
        first_pass = [k for k in m.keys() if k not in pgle_keys]
        present = [k for k in pgle_keys if k in on_disk]
        row.update(first_pass_keys=first_pass, pgle_optimized_keys=pgle_keys,
                   executions_seen=(m.profiled + (1 if m.fdo_lengths else 0)) if facts.observed else None)
        if not writer:
            if row["status"] == auto.STATUS_EMPTY_PROFILE:
                row["status"] = STATUS_NOT_OPTIMIZED
            if row["status"] == STATUS_OPTIMIZED:
                row["reason"] = (f"{row['reason']}; process 0 writes its cache entry (JAX "
                                 "writes from process 0 only)")
        elif present:
            row["status"] = STATUS_OPTIMIZED
            row["reason"] = ("PGLE-optimized entry written" if any(k in m.writes for k in present)
                             else "PGLE-optimized entry already in the cache")
            row["fix"] = None
        else:
            row["status"] = STATUS_NOT_OPTIMIZED
            if pgle_keys:  # recompiled with a profile, but nothing on disk
                why = "; ".join(dict.fromkeys(m.not_written)) or "the entry is not on disk (evicted?)"
                row["reason"] = f"recompiled with a profile but JAX did not keep it: {why}"
                row["fix"] = ("host callbacks (jax.debug.print, pure_callback) keep JAX from "
                              "caching a module" if "host callbacks" in why
                              else "unset JAX_COMPILATION_CACHE_MAX_SIZE")
            elif m.not_written and not m.writes:
                row["reason"] = f"JAX did not write it: {m.not_written[0]}"
        out.append(row)
    return out


def prewarm(opts: PrewarmOptions, notify: Callable[[str], None] = lambda s: None,
            environ: dict[str, str] | None = None) -> Report:
    """One process: fill the cache, a verdict per module. One rank of a multi-process job: JAX
    writes from process 0 only, so rank 0 alone records the run and its modules in the cache's
    manifest; every rank's verdict goes to the job folder and rank 0 returns the job's."""
    from functools import partial

    from pgle.jobs.driver import JobRun, combine_modules

    environ = dict(os.environ if environ is None else environ)
    jr = JobRun.start("prewarm", environ, job_dir=opts.job_dir,
                      gather_timeout_s=opts.gather_timeout)
    combine = partial(combine_modules, ok=STATUS_OPTIMIZED, overall=_overall,
                      headline="prewarm", what="have a PGLE-optimized entry",
                      required=partial(auto.required_failures, ok=STATUS_OPTIMIZED,
                                       require_all=opts.require_all, require=opts.require),
                      keep=("cache_dir", "manifest", "environment", "runs", "percentile"))
    return jr.complete(lambda: prewarm_rank(opts, jr, jr.notifier(notify), environ), combine)


def _overall(modules: list[dict]) -> str:
    status = auto.overall_status(modules) if modules else STATUS_NOT_OPTIMIZED
    return STATUS_NOT_OPTIMIZED if status == auto.STATUS_EMPTY_PROFILE else status


def prewarm_rank(opts: PrewarmOptions, jr, notify: Callable[[str], None],
                 environ: dict[str, str]) -> Report:
    from pgle.launch.runfolder import RunFolder

    if not versions.supports_expect_pgle(versions.jax_version()):
        raise BadInput(f"jax {versions.installed('jax')} has no JAX_COMPILATION_CACHE_EXPECT_PGLE "
                       "(added in jax 0.5.1), so a prewarmed cache cannot be checked; upgrade jax.")
    cache_dir = normalize_cache_dir(jr.path(opts.cache_dir))
    cache.check_writable_dir(cache_dir, create=True, what="write to")
    previous = cache_manifest.load(cache_dir)  # a corrupt manifest stops us before the run
    known = {k for m in (previous or {}).get("modules", {}).values()
             for k in m.get("pgle_optimized_keys", [])}
    log = jr.per_rank_path(opts.log, "--log")
    # JAX writes cache entries from process 0 only: only rank 0 touches the manifest.
    rank_writes = not jr.multiprocess or jr.rank == 0
    warnings = auto.pre_launch_warnings(opts.workload, opts.runs, opts.percentile)
    warnings += size_cap_warnings(environ)
    for w in warnings:
        notify(f"warning: {w}")
    variables = {**auto.pgle_variables(opts.runs, opts.percentile),
                 **cache_variables(cache_dir, opts.relocatable)}
    child = childenv.build(environ, xla=auto.pgle_xla_flags(), variables=variables)
    for line in child.notices:
        notify(line)
    environment = replay_environment(child.env, environ, cache_dir, opts.workload, opts.relocatable)
    run_record = cache_manifest.new_run(opts.workload.describe(), environment)
    if rank_writes:
        cache_manifest.update(cache_dir, lambda data: data["runs"].append(run_record))

    run = RunFolder.create("prewarm", jr.run_dir(opts.run_dir))
    notify(f"prewarming {cache_dir} with auto PGLE ({auto.plural(opts.runs, 'profiled execution')}): "
           f"{opts.workload.describe()} (run folder {run.path})")
    try:
        ex = jr.execute(opts.workload, run, child, capture_loggers=auto.CAPTURE_LOGGERS,
                        warnings_always=auto.WARNINGS_ALWAYS, log_copy=log,
                        **auto.observer_kwargs())
    except BaseException:
        # Never leave a run "in progress" behind: it would block `pgle cache prune`.
        if rank_writes:
            _close_run(cache_dir, run_record["id"], "failed", None, [])
        raise
    state = "finished" if ex.exit_code == 0 else "failed"
    facts = jax_events.summarize(ex.events.records)
    backend = ex.events.backend or {}
    # JAX writes cache entries from process 0 only; the other ranks' view of the
    # cache is partial, so only process 0 records modules in the manifest.
    writer = rank_writes and backend.get("process_index") in (None, 0)
    modules = judge_modules(facts, opts.runs, ex.events.platform, cache_dir, known, writer=writer)
    environment.update(platform=backend.get("platform"), device_kind=backend.get("device_kind"),
                       device_count=backend.get("device_count"),
                       process_count=backend.get("process_count"))
    if rank_writes:
        _close_run(cache_dir, run_record["id"], state, environment if writer else None,
                   modules if writer else [])

    report = Report("prewarm", _overall(modules), workload_exit_code=ex.exit_code,
                    log_path=str(ex.run.log), run_dir=str(ex.run.path), modules=modules)
    report.warnings += warnings + child.warnings
    if facts.filelock_missing:
        report.warnings.append("JAX used no cache: the size cap needs `filelock` (pip install filelock).")
    report.details.update({"cache_dir": cache_dir, "manifest": cache_manifest.manifest_path(cache_dir),
                           "environment": environment, "runs": opts.runs,
                           "percentile": opts.percentile, "backend": ex.events.backend,
                           "empty_traces": facts.empty_traces, "cache_writer": writer})
    report.summary.append(f"prewarm: {report.status}: "
                          + auto.count_line(modules, STATUS_OPTIMIZED, "have a PGLE-optimized entry")
                          + f" in {cache_dir}")
    report.summary += auto.module_lines(modules)
    report.exit_code = auto.finish_code(report, ex.exit_code, STATUS_OPTIMIZED, opts.require_all,
                                        opts.require)
    return report


def _close_run(cache_dir: str, run_id: str, state: str, environment: dict | None,
               modules: list[dict]) -> None:
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
        data["runs"] = [r for r in data["runs"]
                        if r.get("state") == "in_progress" or r in done[-KEEP_RUNS:]]
        for row in modules:
            entry = cache_manifest.record_keys(data, row["module"], cache_manifest.ROLE_FIRST_PASS,
                                               row["first_pass_keys"])
            cache_manifest.record_keys(data, row["module"], cache_manifest.ROLE_PGLE_OPTIMIZED,
                                       row["pgle_optimized_keys"])
            entry.update(status=row["status"], executions_seen=row["executions_seen"],
                         profiled_executions=row["profiled_executions"], reason=row["reason"],
                         run=run_id)

    cache_manifest.update(cache_dir, change)
