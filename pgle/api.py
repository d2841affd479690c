"""pgle's workflows as Python functions: what `pgle COMMAND` runs, with the same options.

Each function takes the workload (`SCRIPT, *ARGS`, `module=` and `*ARGS`, or any command:
`"bash", "run.sh"`, `"python", "-m", "pkg"`, pgle.launch.workload) and keyword
options named as the CLI's (`--min-coverage` -> `min_coverage`), builds the options (a bad
value raises pgle.errors.BadInput before anything is launched), runs the workflow through
the job driver (pgle.jobs.driver: alone, or as one rank of a job when the environment says
so) and returns its `Report`, the same one `--json` prints. `notify` receives pgle's progress
messages (default: none); `environ` replaces os.environ for the workload. Every workflow that
launches takes `stall_timeout` (`"30m"`, seconds, `"off"`; default: derived from the run,
pgle.launch.stall) and, for a multi-process job, `gather` (`"folder"`, or `"kv"`:
jax.distributed's key-value store, pgle.jobs.kv).

    import pgle
    report = pgle.run("train.py", "--batch", "64", profile="profile.pb")
    report.status, report.exit_code, [m["module"] for m in report.modules]
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from pgle.commands.options import (AutoPgleOptions, Extraction, StoreOptions, VerdictOptions,
                                   Window, parse_steps)
from pgle.errors import BadInput
from pgle.jobs.layout import JobOptions
from pgle.report import Report

if TYPE_CHECKING:
    from pgle.jobs import driver
    from pgle.launch.workload import Workload

Notify = Callable[[str], None]


def _command(name: str):
    """pgle.commands.NAME, imported on first use: each workflow's module pulls in its own
    heavy dependencies (auto/prewarm the cache and flag probes, nsys its reader, collect the
    converters; the job driver and launcher for every workflow but verify), and no command
    should pay start-up time for the others' imports (issue 16)."""
    return importlib.import_module(f"pgle.commands.{name}")


@functools.cache
def _workflow(name: str) -> driver.Workflow:
    from pgle.jobs import driver

    if name == "tune":
        cmd = _command("tune")
        return driver.Workflow("tune", cmd.request, functools.partial(
            cmd.body, collect_workflow=_workflow("collect"), run_workflow=_workflow("run")), None)
    cmd = _command(name)
    combine = _command("collect_job").combine if name == "collect" else cmd.combine
    return driver.Workflow(name, cmd.request, cmd.body, combine)


def _workload(words: tuple[str, ...], module: str | None) -> Workload:
    from pgle.launch.workload import Workload

    return Workload.from_cli(module, tuple(os.fspath(w) for w in words))


def _drive(wf: driver.Workflow, opts, job: JobOptions, notify: Notify | None,
           environ: Mapping[str, str] | None) -> Report:
    from pgle.jobs import driver

    return driver.run(wf, opts, job, notify=notify or (lambda s: None),
                      environ=_caller_environ() if environ is None else environ)


def _caller_environ() -> dict[str, str]:
    """os.environ, as the workload would get it from a shell. A caller that imported jax (a
    notebook) has TF_CPP_MIN_LOG_LEVEL=1 in it: `import jax` sets that default in its own
    process (jax/__init__.py, jax 0.4-0.12); it is jax's, not the user's choice, and would hide
    the INFO lines the verdict reads. pgle treats it as unset (the terminal still shows what
    level 1 shows: pgle.launch.childenv)."""
    environ = dict(os.environ)
    if "jax" in sys.modules and environ.get("TF_CPP_MIN_LOG_LEVEL") == "1":
        del environ["TF_CPP_MIN_LOG_LEVEL"]
    return environ


def _store(store, policy: str | None, *, serve: bool) -> StoreOptions | None:
    """`--store` (with `--store-policy`), checked now: a bad path exits 2 before any launch."""
    if store is None:
        if policy not in (None, "replace"):
            raise BadInput("--store-policy needs --store.")
        return None
    return StoreOptions(os.fspath(store), policy or "replace", serve=serve)


def _window(steps, step_name, delay, duration) -> Window:
    if isinstance(steps, str):
        steps = parse_steps(steps)
    return Window(tuple(steps) if steps is not None else None, step_name, delay, duration)


def collect(*workload: str, module: str | None = None, output: str | None = None,
            steps: str | tuple[int, int] | None = None, step_name: str | None = None,
            delay: float | None = None, duration: float | None = None, force: bool = False,
            allow_empty: bool = False, per_module: bool = False, stat: str | None = None,
            fmt: str | None = None, converter: str | None = None, qualify: bool = False,
            rank: int | None = None, run_dir: str | None = None, log: str | None = None,
            job_dir: str | None = None, gather_timeout: float | None = None,
            gather: str = "folder", stall_timeout: float | str | None = None,
            store: str | None = None, store_policy: str | None = None, keep_trace: bool = True,
            notify: Notify | None = None, environ: Mapping[str, str] | None = None) -> Report:
    """`pgle collect`: profile a window (`steps="10:5"`, or `delay`/`duration` seconds) and
    extract the profile to `output` (default profile.pb, or profiles/ with `per_module`);
    `store`: also add each module's profile to that profile store (needs `per_module`)."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    cmd = _command("collect")
    opts = cmd.CollectOptions(
        _workload(workload, module),
        output if output is not None else ("profiles" if per_module else "profile.pb"),
        window=_window(steps, step_name, delay, duration),
        extraction=Extraction(per_module, stat, fmt, converter, qualify, keep_trace), force=force,
        allow_empty=allow_empty, run_dir=run_dir, log=log, rank=rank,
        store=_store(store, store_policy, serve=False))
    return _drive(_workflow("collect"), opts, job, notify, environ)


def run(*workload: str, profile: str | None = None, module: str | None = None,
        profile_store: str | None = None, min_coverage: float = 0.9,
        require_applied: bool = False, require: Iterable[str] = (), run_dir: str | None = None,
        log: str | None = None, job_dir: str | None = None, gather_timeout: float | None = None,
        gather: str = "folder", stall_timeout: float | str | None = None,
        store: str | None = None, store_policy: str | None = None, trace_window: bool = False,
        notify: Notify | None = None, environ: Mapping[str, str] | None = None) -> Report:
    """`pgle run --profile P` (or `store=DIR`: the profile store's modules for this run's jax
    version and device kind): run with the profile and judge from XLA's log whether each module
    applied it (status applied / partial / not_applied / not_applicable / error).
    `trace_window`: also keep a trace of collect's default window (left out of the step times)."""
    if (profile is None) == (store is None):
        raise BadInput("pgle run needs exactly one of --profile and --store.")
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    cmd = _command("run")
    opts = cmd.RunOptions(_workload(workload, module), profile,
                          verdict=VerdictOptions(min_coverage, require_applied, tuple(require)),
                          run_dir=run_dir, log=log, profile_store=profile_store,
                          store=_store(store, store_policy, serve=True),
                          trace_window=Window() if trace_window else None)
    return _drive(_workflow("run"), opts, job, notify, environ)


def tune(*workload: str, module: str | None = None, output: str | None = None,
         steps: str | tuple[int, int] | None = None, step_name: str | None = None,
         delay: float | None = None, duration: float | None = None, force: bool = False,
         per_module: bool = False, stat: str | None = None, fmt: str | None = None,
         converter: str | None = None, qualify: bool = False, min_coverage: float = 0.9,
         require_applied: bool = False, require: Iterable[str] = (), run_dir: str | None = None,
         log: str | None = None, job_dir: str | None = None, gather_timeout: float | None = None,
         gather: str = "folder", stall_timeout: float | str | None = None,
         html_report: str | None = None, store: str | None = None,
         store_policy: str | None = None, repeat: int = 3, keep_trace: bool = True,
         compare: str | Iterable[str] | None = None, notify: Notify | None = None,
         environ: Mapping[str, str] | None = None) -> Report:
    """`pgle tune`: collect, then run with the profile; one verdict with both phases' step
    times (the profile goes into the run folder unless `output`); `html_report`: also write
    `pgle report`'s page of the run there; `store`: collect adds to it, the run serves it.
    `compare="default,o1,pgle,o1+pgle"` (or `sol`): run those arms instead, one table."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    verdict = VerdictOptions(min_coverage, require_applied, tuple(require))
    cmd = _command("collect")
    copts = cmd.CollectOptions(
        _workload(workload, module), output, window=_window(steps, step_name, delay, duration),
        extraction=Extraction(per_module, stat, fmt, converter, qualify, keep_trace), force=force,
        run_dir=run_dir, log=log, store=_store(store, store_policy, serve=False))
    arms: tuple = ()  # tuple[pgle.commands.arms.Arm, ...], imported only with --compare
    if compare is not None:
        from pgle.commands.arms import parse_arms
        from pgle.xla.versions import jax_version

        text = compare if isinstance(compare, str) else ",".join(compare)
        arms = parse_arms(text, jax_version())
    topts = _command("tune").TuneOptions(copts, verdict, html_report, repeat, arms)
    return _drive(_workflow("tune"), topts, job, notify, environ)


def verify(log: str, *, profile: str | None = None, backend: str | None = None,
           accuracy_checker: bool = True, min_coverage: float = 0.9,
           require_applied: bool = False, require: Iterable[str] = (),
           jax: str | None = None) -> Report:
    """`pgle verify LOG`: the PGLE verdict from a saved log (`-` reads stdin); `jax`: the
    version that wrote it (default: the installed one; < 0.4.36 had no accuracy checker)."""
    cmd = _command("verify")
    return cmd.verify(cmd.VerifyOptions(os.fspath(log), profile, backend,
                                        VerdictOptions(min_coverage, require_applied,
                                                       tuple(require)),
                                        accuracy_checker, jax))


def auto(*workload: str, module: str | None = None, runs: int = 3, percentile: int = 90,
         require_all: bool = False, require: Iterable[str] = (), run_dir: str | None = None,
         log: str | None = None, job_dir: str | None = None,
         gather_timeout: float | None = None, gather: str = "folder",
         stall_timeout: float | str | None = None, store: str | None = None,
         store_policy: str | None = None, notify: Notify | None = None,
         environ: Mapping[str, str] | None = None) -> Report:
    """`pgle auto`: one run with JAX's auto PGLE; per module, was it recompiled with a profile.
    `store`: XLA gets the store's view for each module's first compile (auto only serves)."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    cmd = _command("auto")
    opts = cmd.AutoOptions(_workload(workload, module),
                           AutoPgleOptions(runs, percentile, require_all, tuple(require)),
                           run_dir=run_dir, log=log,
                           store=_store(store, store_policy, serve=True))
    return _drive(_workflow("auto"), opts, job, notify, environ)


def prewarm(*workload: str, cache_dir: str, module: str | None = None, runs: int = 3,
            percentile: int = 90, relocatable: bool = False, require_all: bool = False,
            require: Iterable[str] = (), run_dir: str | None = None, log: str | None = None,
            job_dir: str | None = None, gather_timeout: float | None = None,
            gather: str = "folder", stall_timeout: float | str | None = None,
            notify: Notify | None = None, environ: Mapping[str, str] | None = None) -> Report:
    """`pgle prewarm --cache-dir DIR`: fill the compilation cache with PGLE-optimized
    executables; per module, did one land on disk."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    cmd = _command("prewarm")
    opts = cmd.PrewarmOptions(
        _workload(workload, module), cache_dir,
        AutoPgleOptions(runs, percentile, require_all, tuple(require)),
        relocatable=relocatable, run_dir=run_dir, log=log)
    return _drive(_workflow("prewarm"), opts, job, notify, environ)


def nsys(*workload: str, cache_dir: str, module: str | None = None,
         nsys_options: Iterable[str] = (), nsys: str | None = None, launcher: str | None = None,
         force: bool = False, require_all: bool = False, require: Iterable[str] = (),
         run_dir: str | None = None, log: str | None = None,
         ranks: str | tuple[int, ...] | None = None, job_dir: str | None = None,
         gather_timeout: float | None = None, gather: str = "folder",
         stall_timeout: float | str | None = None, notify: Notify | None = None,
         environ: Mapping[str, str] | None = None) -> Report:
    """`pgle nsys --cache-dir DIR`: the Nsight Systems run; per module, did it load its
    PGLE-optimized executable."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout)
    cmd = _command("nsys")
    if isinstance(ranks, str):
        ranks = cmd.parse_ranks(ranks)
    opts = cmd.NsysOptions(
        _workload(workload, module), cache_dir, nsys_options=tuple(nsys_options), nsys=nsys,
        launcher=launcher, force=force, require_all=require_all, require=tuple(require),
        run_dir=run_dir, log=log, ranks=tuple(ranks) if ranks is not None else None)
    return _drive(_workflow("nsys"), opts, job, notify, environ)
