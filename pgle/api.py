"""pgle's commands as Python functions: what `pgle COMMAND` runs, with the same options.

Every command goes through this module, the command line included (`cli/` parses, calls one
function here, renders the Report). A keyword is its flag's name (`--min-coverage` ->
`min_coverage`, `--format` -> `format`, `-o/--output` -> `output`); positional arguments are
the command's (the workload `SCRIPT, *ARGS`, `module=` and `*ARGS`, or any command:
`"bash", "run.sh"`, pgle.launch.workload; a profile; a folder).

A bad value raises pgle.errors.BadInput before anything is launched, naming the keyword
(`min_coverage 2 is not between 0 and 1.`); the command line names the flag instead. Workflows
run through the job driver (pgle.jobs.driver: alone, or as one rank of a job when the
environment says so); `environ` replaces os.environ for the workload. Each function returns
the `Report` that `--json` prints. Progress and notices go to the `pgle` logger (standard
`logging`: `logging.basicConfig(level=logging.INFO)` shows them).

Every workflow that launches takes `stall_timeout` (`"30m"` or seconds: stop after that long
without progress; `"report:5m"`: report only; `"off"`; default: report after 10 min, stop only
a step rhythm that stopped, pgle.launch.stall) and, for a multi-process job, `gather` (`"folder"`,
or `"kv"`: jax.distributed's key-value store, pgle.jobs.kv).

    import pgle
    report = pgle.run("train.py", "--batch", "64", profile="profile.pb")
    report.status, report.exit_code, [m["module"] for m in report.modules]
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect as _signatures  # the stdlib module: `inspect` is the command below
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pgle.commands.options import (
    DEFAULT_TRACE_MAX_BYTES,
    AutoPgleOptions,
    Extraction,
    StoreOptions,
    VerdictOptions,
    Window,
    parse_steps,
)
from pgle.errors import BadInput, PgleError
from pgle.jobs.layout import JobOptions
from pgle.report import Report

if TYPE_CHECKING:
    from pgle.jobs import driver
    from pgle.launch.workload import Workload

__all__ = [
    "auto",
    "cache_ls",
    "cache_prune",
    "cache_stats",
    "collect",
    "convert",
    "diff",
    "doctor",
    "estimate",
    "flags_explain",
    "inspect",
    "merge",
    "nsys",
    "prewarm",
    "report",
    "run",
    "runs_ls",
    "runs_prune",
    "store_add",
    "store_get",
    "store_ls",
    "store_prune",
    "tune",
    "verify",
    "view",
]

F = TypeVar("F", bound=Callable[..., Report])

# Keywords of an earlier release, accepted for one more with a DeprecationWarning:
# old keyword -> (its keyword now, how its value becomes the new one's).
_RENAMED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "fmt": ("format", lambda v: v),
    "html_report": ("report", lambda v: v),
    "accuracy_checker": ("accuracy_checker_off", lambda v: not v),
    "keep": ("keep_last", lambda v: v),  # store_prune, as runs_prune names it (#38)
}


def _flag(keyword: str) -> str:
    return "--" + keyword.replace("_", "-")


def _keywords_of(fn: Callable[..., Any]) -> dict[str, str]:
    """How a Python caller names each of `fn`'s options: flag (as pgle's messages say it) ->
    keyword; a flag that is off by default -> `keyword=True`."""
    out: dict[str, str] = {}
    for p in _signatures.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name == "environ":
            continue
        out[_flag(p.name)] = f"{p.name}=True" if p.default is False else p.name
    if "output" in out:
        out["-o"] = "output"
    if "module" in out:
        out["-m"] = "module"
    return out


def _accepts(value: Any, hint: Any) -> bool:
    """Whether `value` fits the annotation `hint` (str also takes an os.PathLike: a path).
    What it cannot judge (Any, a class of pgle's) it accepts: the function says then."""
    import types
    import typing

    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is type(None) or hint is None:
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(value, a) for a in args)
    if origin is Literal:  # the type only: the function names a wrong value in its own words
        return any(isinstance(value, type(a)) for a in args)
    if hint is str:
        return isinstance(value, (str, os.PathLike))
    if hint is float:
        return isinstance(value, (int, float))
    if hint in (int, bool):
        return isinstance(value, (int, bool))
    if origin is tuple:
        return isinstance(value, (tuple, list)) and all(
            _accepts(v, a) for v, a in zip(value, args, strict=False)
        )
    if origin is Iterable or hint is Iterable:
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            return False
        if args and isinstance(value, (list, tuple, set, frozenset)):
            return all(_accepts(v, args[0]) for v in value)
        return True
    if origin is Mapping or hint is Mapping:
        if not isinstance(value, Mapping):
            return False
        return not args or all(
            _accepts(k, args[0]) and _accepts(v, args[1]) for k, v in value.items()
        )
    return True


def _type_name(hint: Any) -> str:
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_type_name(a) for a in typing.get_args(hint)))
    if origin is Literal:
        return " or ".join(dict.fromkeys(_type_name(type(a)) for a in typing.get_args(hint)))
    if hint is type(None):
        return "None"
    if hint is str:
        return "a str (or a path)"
    if origin in (Iterable, Mapping, tuple):
        return {Iterable: "a list", Mapping: "a mapping", tuple: "a tuple"}[origin] + (
            " of " + ", ".join(_type_name(a) for a in typing.get_args(hint))
            if typing.get_args(hint)
            else ""
        )
    return f"a {getattr(hint, '__name__', str(hint))}"


def _check_types(fn: Callable[..., Any], bound: _signatures.BoundArguments) -> None:
    """A wrong type (an int for a path, a list for a string, None where None is no value) is
    one BadInput line naming the keyword (exit 2 from the CLI), never a traceback from deep
    inside (docs/reliability.md)."""
    import typing

    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation Python cannot evaluate here: nothing to check against
        return
    params = _signatures.signature(fn).parameters
    for name, value in bound.arguments.items():
        hint = hints.get(name)
        if hint is None:
            continue
        values = value if params[name].kind is params[name].VAR_POSITIONAL else (value,)
        for v in values:
            if not _accepts(v, hint):
                raise BadInput(
                    f"pgle.{fn.__name__}: {name} must be {_type_name(hint)}, not "
                    f"{type(v).__name__} {v!r:.60}."
                )


def _front_door(fn: F) -> F:
    """What every API function shares: errors name its keywords to Python callers (the CLI
    renders the same error with flags: PgleError.text), and the keywords of the last release
    still work, with a DeprecationWarning."""
    keywords = _keywords_of(fn)
    parameters = _signatures.signature(fn).parameters

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Report:
        notify = kwargs.pop("notify", None)
        for old, (new, convert) in _RENAMED.items():
            if old in kwargs and new in parameters:
                warnings.warn(
                    f"pgle.api.{fn.__name__}({old}=...) is now {new}=...; {old} goes "
                    "in the next release.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = convert(kwargs.pop(old))
        if notify is not None:
            from pgle.jobs.driver import log_lines

            warnings.warn(
                f"pgle.api.{fn.__name__}(notify=...) is deprecated: pgle's progress "
                "and notices go to the `pgle` logger.",
                DeprecationWarning,
                stacklevel=2,
            )
        try:
            try:
                bound = _signatures.signature(fn).bind(*args, **kwargs)
            except TypeError as e:  # a missing or unknown keyword: Python's own words
                raise BadInput(f"pgle.{fn.__name__}: {e}.") from None
            _check_types(fn, bound)
            with log_lines(notify) if notify is not None else contextlib.nullcontext():
                return fn(*args, **kwargs)
        except PgleError as e:
            e.keywords = keywords
            raise

    return call  # type: ignore[return-value]


def _command(name: str) -> ModuleType:
    """pgle.commands.NAME, imported on first use: each command's module pulls in its own
    heavy dependencies (auto/prewarm the cache and flag probes, nsys its reader, collect the
    converters; the job driver and launcher for every workflow but verify), and no command
    should pay start-up time for the others' imports (issue 16)."""
    return importlib.import_module(f"pgle.commands.{name}")


@functools.cache
def _workflow(name: str) -> driver.Workflow:
    from pgle.jobs import driver

    if name == "tune":
        cmd = _command("tune")
        return driver.Workflow(
            "tune",
            cmd.request,
            functools.partial(
                cmd.body, collect_workflow=_workflow("collect"), run_workflow=_workflow("run")
            ),
            None,
        )
    cmd = _command(name)
    combine = _command("collect_job").combine if name == "collect" else cmd.combine
    return driver.Workflow(name, cmd.request, cmd.body, combine)


def _workload(words: tuple[str, ...], module: str | None) -> Workload:
    from pgle.launch.workload import Workload

    return Workload.from_cli(module, tuple(os.fspath(w) for w in words))


def _drive(
    wf: driver.Workflow, opts: Any, job: JobOptions, environ: Mapping[str, str] | None
) -> Report:
    from pgle.jobs import driver

    return driver.run(wf, opts, job, environ=_caller_environ() if environ is None else environ)


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


def _store(store: str | None, policy: str | None, *, serve: bool) -> StoreOptions | None:
    """`--store` (with `--store-policy`), checked now: a bad path exits 2 before any launch."""
    if store is None:
        if policy not in (None, "replace"):
            raise BadInput("--store-policy needs --store.")
        return None
    return StoreOptions(os.fspath(store), policy or "replace", serve=serve)


def _window(
    steps: str | tuple[int, int] | None,
    step_name: str | None,
    delay: float | None,
    duration: float | None,
    trace_detail: str = "pgle",
    trace_max_bytes: str | int | None = None,
) -> Window:
    parsed = parse_steps(steps) if isinstance(steps, str) else steps
    if isinstance(trace_max_bytes, str):
        from pgle.units import parse_size

        trace_max_bytes = parse_size(trace_max_bytes, "--trace-max-bytes")
    return Window(
        (parsed[0], parsed[1]) if parsed is not None else None,
        step_name,
        delay,
        duration,
        trace_detail,
        DEFAULT_TRACE_MAX_BYTES if trace_max_bytes is None else trace_max_bytes,
    )


def _keep(keep_trace: bool | Literal["yes", "no"]) -> bool:
    """`--keep-trace yes|no` or True/False."""
    if isinstance(keep_trace, str):
        if keep_trace not in ("yes", "no"):
            raise BadInput(f"--keep-trace {keep_trace!r}: use yes or no.")
        return keep_trace == "yes"
    return bool(keep_trace)


def _words(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """A repeatable option (`--require A --require B`): one string or several."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _seconds(value: str | float | None, option: str) -> float | None:
    """A duration option: '7d', '12h', ... (as on the command line) or seconds."""
    if value is None or not isinstance(value, str):
        return value
    from pgle.units import parse_duration

    return parse_duration(value, option)


# -- the workflows: each launches the workload -------------------------------------------------


@_front_door
def collect(
    *workload: str,
    module: str | None = None,
    output: str | None = None,
    steps: str | tuple[int, int] | None = None,
    step_name: str | None = None,
    delay: float | None = None,
    duration: float | None = None,
    trace_detail: str = "pgle",
    trace_max_bytes: str | int | None = None,
    force: bool = False,
    allow_empty: bool = False,
    per_module: bool = False,
    stat: str | None = None,
    format: Literal["binary", "text"] | None = None,
    converter: str | None = None,
    qualify: bool = False,
    rank: int | None = None,
    run_dir: str | None = None,
    log: str | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    store: str | None = None,
    store_policy: str | None = None,
    keep_trace: bool | Literal["yes", "no"] = True,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle collect`: profile a window (`steps="10:5"`, or `delay`/`duration` seconds) and
    extract the profile to `output` (default profile.pb, or profiles/ with `per_module`);
    `store`: also add each module's profile to that profile store (needs `per_module`; the
    directory then goes into the run folder unless `output` names one)."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    cmd = _command("collect")
    opts = cmd.CollectOptions(
        _workload(workload, module),
        # With a store and no output, the directory goes into the run folder: a recurring
        # refresh then never finds last time's profiles/ in the way.
        output
        if output is not None
        else None
        if store is not None
        else ("profiles" if per_module else "profile.pb"),
        window=_window(steps, step_name, delay, duration, trace_detail, trace_max_bytes),
        extraction=Extraction(per_module, stat, format, converter, qualify, _keep(keep_trace)),
        force=force,
        allow_empty=allow_empty,
        run_dir=run_dir,
        log=log,
        rank=rank,
        store=_store(store, store_policy, serve=False),
    )
    return _drive(_workflow("collect"), opts, job, environ)


@_front_door
def run(
    *workload: str,
    profile: str | None = None,
    module: str | None = None,
    profile_store: str | None = None,
    min_coverage: float | None = None,
    require_applied: bool = False,
    require: str | Iterable[str] = (),
    run_dir: str | None = None,
    log: str | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    store: str | None = None,
    store_policy: str | None = None,
    trace_window: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle run --profile P` (or `store=DIR`: the profile store's modules for this run's jax
    version and device kind): run with the profile and judge from XLA's log whether each module
    applied it (status applied / partial / not_applied / not_applicable / error).
    `trace_window`: also keep a trace of collect's default window (left out of the step times)."""
    if (profile is None) == (store is None):
        raise BadInput("pgle run needs exactly one of --profile and --store.")
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    cmd = _command("run")
    opts = cmd.RunOptions(
        _workload(workload, module),
        profile,
        verdict=VerdictOptions(min_coverage, require_applied, _words(require)),
        run_dir=run_dir,
        log=log,
        profile_store=profile_store,
        store=_store(store, store_policy, serve=True),
        trace_window=Window() if trace_window else None,
    )
    return _drive(_workflow("run"), opts, job, environ)


@_front_door
def tune(
    *workload: str,
    module: str | None = None,
    output: str | None = None,
    steps: str | tuple[int, int] | None = None,
    step_name: str | None = None,
    delay: float | None = None,
    duration: float | None = None,
    trace_detail: str = "pgle",
    trace_max_bytes: str | int | None = None,
    force: bool = False,
    per_module: bool = False,
    stat: str | None = None,
    format: Literal["binary", "text"] | None = None,
    converter: str | None = None,
    qualify: bool = False,
    min_coverage: float | None = None,
    require_applied: bool = False,
    require: str | Iterable[str] = (),
    run_dir: str | None = None,
    log: str | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    report: str | None = None,
    store: str | None = None,
    store_policy: str | None = None,
    repeat: int = 3,
    keep_trace: bool | Literal["yes", "no"] = True,
    compare: str | Iterable[str] | None = None,
    predict: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle tune`: collect, then run with the profile; one verdict with both phases' step
    times (the profile goes into the run folder unless `output`). `report="run.html"`: also
    write `pgle report`'s page of the run there (the JSON report is the returned Report);
    `store`: collect adds to it, the run serves it.
    `compare="default,o1,pgle,o1+pgle"` (or `sol`): run those arms instead, one table;
    `predict=True`: beside each measured ratio, `pgle estimate`'s predicted one."""
    if report is not None and not str(report).lower().endswith((".html", ".htm")):
        raise BadInput(
            f"--report {report}: tune writes pgle report's HTML page there "
            "(a .html path); the JSON report is what the call returns."
        )
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    verdict = VerdictOptions(min_coverage, require_applied, _words(require))
    cmd = _command("collect")
    copts = cmd.CollectOptions(
        _workload(workload, module),
        output,
        window=_window(steps, step_name, delay, duration, trace_detail, trace_max_bytes),
        extraction=Extraction(per_module, stat, format, converter, qualify, _keep(keep_trace)),
        force=force,
        run_dir=run_dir,
        log=log,
        store=_store(store, store_policy, serve=False),
    )
    arms: tuple[Any, ...] = ()  # tuple[pgle.commands.arms.Arm, ...], imported only with --compare
    if compare is not None:
        from pgle.commands.arms import parse_arms
        from pgle.xla.versions import jax_version

        arms = tuple(parse_arms(",".join(_words(compare)), jax_version()))
    topts = _command("tune").TuneOptions(copts, verdict, report, repeat, arms, predict)
    return _drive(_workflow("tune"), topts, job, environ)


@_front_door
def auto(
    *workload: str,
    module: str | None = None,
    runs: int = 3,
    percentile: int = 90,
    require_all: bool = False,
    require: str | Iterable[str] = (),
    run_dir: str | None = None,
    log: str | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    store: str | None = None,
    store_policy: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle auto`: one run with JAX's auto PGLE; per module, was it recompiled with a profile.
    `store`: XLA gets the store's view for each module's first compile (auto only serves)."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    cmd = _command("auto")
    opts = cmd.AutoOptions(
        _workload(workload, module),
        AutoPgleOptions(runs, percentile, require_all, _words(require)),
        run_dir=run_dir,
        log=log,
        store=_store(store, store_policy, serve=True),
    )
    return _drive(_workflow("auto"), opts, job, environ)


@_front_door
def prewarm(
    *workload: str,
    cache_dir: str,
    module: str | None = None,
    runs: int = 3,
    percentile: int = 90,
    relocatable: bool = False,
    require_all: bool = False,
    require: str | Iterable[str] = (),
    run_dir: str | None = None,
    log: str | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle prewarm --cache-dir DIR`: fill the compilation cache with PGLE-optimized
    executables; per module, did one land on disk."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    cmd = _command("prewarm")
    opts = cmd.PrewarmOptions(
        _workload(workload, module),
        cache_dir,
        AutoPgleOptions(runs, percentile, require_all, _words(require)),
        relocatable=relocatable,
        run_dir=run_dir,
        log=log,
    )
    return _drive(_workflow("prewarm"), opts, job, environ)


@_front_door
def nsys(
    *workload: str,
    cache_dir: str,
    module: str | None = None,
    nsys_options: Iterable[str] = (),
    nsys: str | None = None,
    launcher: str | None = None,
    force: bool = False,
    require_all: bool = False,
    require: str | Iterable[str] = (),
    run_dir: str | None = None,
    log: str | None = None,
    ranks: str | Iterable[int] | None = None,
    job_dir: str | None = None,
    gather_timeout: float | None = None,
    gather: str = "folder",
    stall_timeout: float | str | None = None,
    require_same_program: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """`pgle nsys --cache-dir DIR`: the Nsight Systems run (`nsys_options` go to
    `nsys profile`); per module, did it load its PGLE-optimized executable."""
    job = JobOptions(job_dir, gather_timeout, gather, stall_timeout, require_same_program)
    cmd = _command("nsys")
    chosen = cmd.parse_ranks(ranks) if isinstance(ranks, str) else ranks
    opts = cmd.NsysOptions(
        _workload(workload, module),
        cache_dir,
        nsys_options=tuple(nsys_options),
        nsys=nsys,
        launcher=launcher,
        force=force,
        require_all=require_all,
        require=_words(require),
        run_dir=run_dir,
        log=log,
        ranks=tuple(chosen) if chosen is not None else None,
    )
    return _drive(_workflow("nsys"), opts, job, environ)


# -- before any GPU run: XLA:GPU's own estimate ------------------------------------------------


@_front_door
def estimate(
    source: str,
    *workload: str,
    module: str | None = None,
    target: str | None = None,
    devices: int | None = None,
    arms: str | Iterable[str] = "default,pgle",
    profile: str | None = None,
    what_if: str | Iterable[str] = (),
    run_dir: str | None = None,
) -> Report:
    """`pgle estimate SCRIPT|RUN_FOLDER`: PGLE's gain predicted with the real XLA:GPU compiler,
    without a GPU (needs `pip install 'pgle[estimate]'`). `target`: h100 (default), h200, b200;
    `devices`: the job's device count (default: the run folder's, else 8); `arms`: of default,
    pgle, o1, sol; `what_if`: cost rules such as `all-gather*=x2`."""
    cmd = _command("estimate")
    arm_text = arms if isinstance(arms, str) else ",".join(arms)
    return cmd.estimate(
        cmd.EstimateOptions(
            os.fspath(source),
            tuple(workload),
            module,
            target,
            devices,
            cmd.parse_arms(arm_text),
            profile,
            _words(what_if),
            run_dir,
        )
    )


# -- saved logs and run folders: what runs left behind ------------------------------------------


@_front_door
def verify(
    log: str,
    *,
    profile: str | None = None,
    backend: str | None = None,
    accuracy_checker_off: bool = False,
    min_coverage: float | None = None,
    require_applied: bool = False,
    require: str | Iterable[str] = (),
    jax: str | None = None,
    device_kind: str | None = None,
) -> Report:
    """`pgle verify LOG`: the PGLE verdict from a saved log (`-` reads stdin); `jax`: the
    version that wrote it (default: inferred from the log's wording; < 0.4.36 had no accuracy
    checker); `device_kind`: the GPU that ran it (e.g. `NVIDIA H100 80GB HBM3`), where the log
    does not say; `min_coverage`: None lets the speed-of-light rule decide where it applies."""
    cmd = _command("verify")
    return cmd.verify(
        cmd.VerifyOptions(
            os.fspath(log),
            profile,
            backend,
            VerdictOptions(min_coverage, require_applied, _words(require)),
            not accuracy_checker_off,
            jax,
            device_kind,
        )
    )


@_front_door
def report(
    *run_folders: str,
    output: str | None = None,
    force: bool = False,
    dtype: Literal["bf16", "fp16", "fp8", "tf32"] = "bf16",
) -> Report:
    """`pgle report RUN_FOLDER...`: what PGLE bought, and why (a tune run folder, or WITHOUT
    and WITH run folders); `output`: also write the self-contained HTML page there."""
    cmd = _command("report")
    return cmd.report(cmd.ReportOptions([os.fspath(f) for f in run_folders], output, force, dtype))


@_front_door
def view(run_folder: str, *, host: str = "127.0.0.1", port: int = 8791) -> Report:
    """`pgle view RUN_FOLDER`: serve the run's kept trace with XProf until KeyboardInterrupt
    (needs `pip install 'pgle[xprof]'`); `port=0` picks a free port."""
    return _command("view").serve(os.fspath(run_folder), host=host, port=port)


# -- before a job: the machine and XLA_FLAGS ---------------------------------------------------


@_front_door
def doctor(
    *,
    workflow: Literal["manual", "auto", "prewarm", "nsys"] = "manual",
    cache_dir: str | None = None,
    probe: bool = False,
) -> Report:
    """`pgle doctor`: python, jax, the backend, CUPTI, nsys, XLA_FLAGS, the environment and the
    cache, one check each (`details["checks"]`); exit code 1 when a check is an error."""
    return _command("doctor").doctor(workflow=workflow, cache_dir=cache_dir, probe=probe)


@_front_door
def flags_explain(*xla_flags: str, probe: bool = False) -> Report:
    """`pgle flags explain`: each flag's meaning, default, jax versions and status (default:
    $XLA_FLAGS). One argument is the XLA_FLAGS string; several are one flag each, as a shell
    split them. Exit code 1 when XLA would abort on a flag."""
    from pgle.xla.flags import join_words

    text = os.environ.get("XLA_FLAGS", "") if not xla_flags else join_words(xla_flags)
    return _command("doctor").explain_flags(text, probe=probe)


# -- profiles as data --------------------------------------------------------------------------


@_front_door
def inspect(profile: str, *, top: int = 20) -> Report:
    """`pgle inspect PROFILE`: counts, top costs, cost by category, collectives, modules of a
    profile file or per-module directory; status `empty` (exit code 1) for an empty one."""
    return _command("profiles").inspect_report(profile, top=top)


@_front_door
def diff(a: str, b: str, *, top: int = 20) -> Report:
    """`pgle diff A B`: instructions only in A or B, the largest cost changes, the shift per
    category."""
    return _command("profiles").diff_report(a, b, top=top)


@_front_door
def merge(
    *profiles: str,
    output: str,
    method: Literal["percentile", "median", "mean", "min", "max"] = "percentile",
    percentile: int = 90,
    force: bool = False,
) -> Report:
    """`pgle merge PROFILE... -o OUT`: profiles of several runs or ranks into one (by default
    jaxlib's rule: the value at index int(p/100*(n-1)) of the sorted costs); directories merge
    per module."""
    return _command("profiles").merge_report(
        list(profiles), output, method=method, percentile=percentile, force=force
    )


@_front_door
def convert(
    src: str,
    out: str,
    *,
    module: str | Iterable[str] = (),
    qualify: str | None = None,
    format: Literal["binary", "text"] | None = None,
    stat: str | None = None,
    skip: int | None = None,
    dump: str | None = None,
    log: str | None = None,
    qualify_all: bool = False,
    force: bool = False,
) -> Report:
    """`pgle convert IN OUT`: a profile (binary <-> text by extension; file <-> per-module
    directory), a trace run folder, or Nsight Systems data (.nsys-rep, its SQLite export, an
    nsys-jax archive) into profiles. The options of other inputs than IN's are not used."""
    cmd = _command("convert")
    return cmd.convert(
        src,
        out,
        cmd.ConvertOptions(
            module=_words(module),
            qualify=qualify,
            format=format,
            stat=stat,
            skip=skip,
            dump=dump,
            log=log,
            qualify_all=qualify_all,
            force=force,
        ),
    )


# -- shared folders: the compilation cache, the profile store, the run folders ---------------


@_front_door
def cache_ls(cache_dir: str, *, module: str | Iterable[str] = ()) -> Report:
    """`pgle cache ls DIR`: the entries (`details["entries"]`: module, role, size, time, key)
    and the totals per module (`modules`)."""
    return _command("cache").ls(cache_dir, modules=_words(module))


@_front_door
def cache_stats(cache_dir: str) -> Report:
    """`pgle cache stats DIR`: totals per role (`details["roles"]`) and per module
    (`modules`); manifest entries that are gone."""
    return _command("cache").stats(cache_dir)


@_front_door
def cache_prune(
    cache_dir: str,
    *,
    older_than: str | float | None = None,
    module: str | Iterable[str] = (),
    yes: bool = False,
) -> Report:
    """`pgle cache prune DIR`: entries last used longer ago than `older_than` ('7d', or
    seconds) and/or of `module`; only a preview (`details["selected"]`) unless `yes`."""
    return _command("cache").prune(
        cache_dir,
        older_than=_seconds(older_than, "--older-than"),
        modules=_words(module),
        yes=yes,
        now=time.time(),
    )


@_front_door
def store_ls(
    store: str,
    *,
    fingerprint: str | None = None,
    jax: str | None = None,
    device_kind: str | None = None,
) -> Report:
    """`pgle store ls STORE`: one `modules` row per stored profile (fingerprint, entry, jax,
    device, instructions, age, module, source)."""
    return _command("store").ls_report(store, fingerprint, jax, device_kind)


@_front_door
def store_add(
    store: str,
    profile: str,
    *,
    device_kind: str,
    device_count: int = 1,
    jax: str | None = None,
    jaxlib: str | None = None,
    source: str | None = None,
    policy: str | None = None,
) -> Report:
    """`pgle store add STORE PROFILE`: add a per-module profile (directory, or a file of
    `<fp>::name` entries) collected on `device_kind` (default jax/jaxlib: the installed ones)."""
    if device_count < 1:
        raise BadInput(f"--device-count {device_count}: at least 1.")
    return _command("store").add_report(
        store,
        profile,
        jax=jax,
        jaxlib=jaxlib,
        device_kind=device_kind,
        device_count=device_count,
        source=source,
        policy=policy,
    )


@_front_door
def store_get(
    store: str,
    out: str,
    *,
    device_kind: str,
    jax: str | None = None,
    policy: str | None = None,
    force: bool = False,
) -> Report:
    """`pgle store get STORE OUT`: write the view XLA reads (one `<fingerprint>.pbtxt` per
    module) for one jax version and device kind."""
    return _command("store").get_report(
        store, out, jax=jax, device_kind=device_kind, policy=policy, force=force
    )


@_front_door
def store_prune(
    store: str,
    *,
    keep_last: int | None = None,
    older_than: str | float | None = None,
    jax: str | None = None,
    yes: bool = False,
) -> Report:
    """`pgle store prune STORE`: profiles beyond the `keep_last` newest per module, added longer
    ago than `older_than` ('7d', or seconds), or of another `jax`; a preview unless `yes`."""
    if keep_last is not None and keep_last < 1:
        raise BadInput(f"--keep-last {keep_last}: keep at least 1 (or leave it out).")
    return _command("store").prune_report(
        store, keep=keep_last, jax=jax, yes=yes, older_than=_seconds(older_than, "--older-than")
    )


@_front_door
def runs_ls(root: str = ".pgle/runs") -> Report:
    """`pgle runs ls [ROOT]`: the run folders, newest first (`details["runs"]`: size, last
    write, in use or not)."""
    return _command("runs").ls(root)


@_front_door
def runs_prune(
    root: str = ".pgle/runs",
    *,
    older_than: str | float | None = None,
    max_size: str | int | None = None,
    keep_last: int | None = None,
    yes: bool = False,
) -> Report:
    """`pgle runs prune [ROOT]`: run folders by age ('7d', or seconds), total size ('5G', or
    bytes) and count; a folder in use is never deleted; a preview unless `yes`."""
    size = max_size
    if isinstance(max_size, str):
        from pgle.units import parse_size

        size = parse_size(max_size, "--max-size")
    return _command("runs").prune(
        root,
        older_than=_seconds(older_than, "--older-than"),
        max_size=size,
        keep_last=keep_last,
        yes=yes,
    )
