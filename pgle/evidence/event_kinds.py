"""One frozen dataclass per kind of the harness's events (the kinds and their fields:
pgle/evidence/schema.py), and the one place a record read from `events.jsonl` becomes one.

A run folder may come from another user (a shared job folder, `pgle report` on a colleague's
run): a record is taken only when each field it holds has the type the harness writes, and a
closed field (a trace's purpose, a script trace's call) one of its values; anything else is
rejected, never half-read. A kind this pgle does not know (a newer harness) is kept as
`UnknownEvent`. Every event keeps the record it was read from (`to_dict`): reports that show
a record (a run's `backend`) show it as written, and fields a newer harness adds survive.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Union

from pgle.evidence import schema

Thread = int | str  # a native thread id (jax_internals writes ints; older runs, strings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    KIND: ClassVar[str] = ""
    t: float  # time.time() in the workload
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return self.KIND

    def to_dict(self) -> dict[str, Any]:
        """The record as the harness wrote it."""
        return dict(self.raw)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """A kind this pgle does not know (written by a newer harness): kept as it was."""

    name: str

    @property
    def kind(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True, kw_only=True)
class Start(Event):
    KIND = schema.START
    pid: int | None = None
    argv: list[str] | None = None
    python: str | None = None
    ppid: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaxImported(Event):
    KIND = schema.JAX_IMPORTED
    version: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend(Event):
    KIND = schema.BACKEND
    platform: str | None = None
    device_count: int | None = None
    local_device_count: int | None = None
    device_kind: str | None = None
    process_index: int | None = None
    process_count: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BackendError(Event):
    KIND = schema.BACKEND_ERROR
    error: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compile(Event):
    KIND = schema.COMPILE
    fun_name: str | None = None
    seconds: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaxEvent(Event):
    """Another jax.monitoring event; its keyword arguments, as strings, are in `raw`."""

    KIND = schema.JAX_EVENT
    event: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepEnter(Event):
    KIND = schema.STEP_ENTER
    index: int
    name: str | None = None
    step_num: Any = None  # the script's own: usually an int, may be anything JSON holds


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepExit(Event):
    KIND = schema.STEP_EXIT
    index: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceStart(Event):
    KIND = schema.TRACE_START
    purpose: Literal["window", "executions"]
    dir: str | None = None
    # what pgle asked the profiler: {"detail", "asked", "ignored", "why"} (trace_options)
    options: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceStop(Event):
    """The kept trace: `seconds` the window (to the device barrier), `stop_trace_seconds`
    stop_trace's own time; `steps`/`first_step` for a step window, `function`,
    `first_execution`, `executions` for an execution window, `site` for the script's own."""

    KIND = schema.TRACE_STOP
    purpose: Literal["window", "executions", "script"]
    dir: str | None = None
    seconds: float | None = None
    stop_trace_seconds: float | None = None
    first_step: int | None = None
    steps: int | None = None
    reason: str | None = None
    function: str | None = None
    first_execution: int | None = None
    executions: int | None = None
    site: str | None = None
    bytes: int | None = None  # the trace's files on disk once stop_trace wrote them


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceExport(Event):
    """pgle's window closed; stop_trace writes the trace (until the trace_stop)."""

    KIND = schema.TRACE_EXPORT
    purpose: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceProbe(Event):
    """--trace-max-bytes: the step before the window traced alone, to size the window."""

    KIND = schema.TRACE_PROBE
    step: int | None = None
    bytes: int | None = None
    stop_trace_seconds: float | None = None
    steps: int | None = None  # the steps the window keeps
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceDiscard(Event):
    KIND = schema.TRACE_DISCARD
    dir: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceError(Event):
    KIND = schema.TRACE_ERROR
    error: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowWarning(Event):
    KIND = schema.WINDOW_WARNING
    message: str = ""
    early: bool | None = None  # said while the workload ran


@dataclasses.dataclass(frozen=True, kw_only=True)
class PythonWarning(Event):
    KIND = schema.WARNING
    category: str | None = None
    message: str = ""
    filename: str | None = None
    lineno: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Log(Event):
    KIND = schema.LOG
    logger: str | None = None
    level: str | None = None
    message: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObservePgle(Event):
    KIND = schema.OBSERVE_PGLE
    installed: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObserveError(Event):
    KIND = schema.OBSERVE_ERROR
    error: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PgleProfiled(Event):
    KIND = schema.PGLE_PROFILED
    module: str | None = None
    index: int | None = None
    runs: int | None = None
    profile_bytes: int | None = None
    thread: Thread | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PgleSessionError(Event):
    KIND = schema.PGLE_SESSION_ERROR
    module: str | None = None
    thread: Thread | None = None
    error: str = ""
    holder_module: str | None = None
    holder_thread: Thread | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObserveModules(Event):
    KIND = schema.OBSERVE_MODULES
    installed: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModuleCompiled(Event):
    KIND = schema.MODULE_COMPILED
    module: str | None = None
    flops: float | None = None
    transcendentals: float | None = None
    bytes_accessed: float | None = None
    memory: dict[str, int] | None = None
    hlo_file: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModuleIdentity(Event):
    """A module's fingerprint, before its compile, in a jax.distributed process (issue 36)."""

    KIND = schema.MODULE_IDENTITY
    module: str | None = None
    fingerprint: str = ""
    bytes: int | None = None
    text_file: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModuleError(Event):
    KIND = schema.MODULE_ERROR
    error: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class XlaCompile(Event):
    KIND = schema.XLA_COMPILE
    platform: str | None = None
    thread: Thread | None = None
    pid: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exit(Event):
    KIND = schema.EXIT
    code: int | None = None
    error: str | None = None
    interrupted: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScriptTrace(Event):
    KIND = schema.SCRIPT_TRACE
    call: Literal["start", "stop"]
    site: str | None = None
    dir: str | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class XlaFlagsSeen(Event):
    KIND = schema.XLA_FLAGS_SEEN
    effective: str | None = None
    missing: list[str] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowPlan(Event):
    KIND = schema.WINDOW_PLAN
    function: str | None = None
    first_execution: int | None = None
    executions: int | None = None
    max_seconds: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class JitFunctions(Event):
    KIND = schema.JIT_FUNCTIONS
    functions: list[dict[str, Any]] | None = None
    step: str | None = None
    module: str | None = None
    starts: list[float] | None = None
    work: list[list[float]] | None = None
    watch: dict[str, int] | None = None
    rule: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepCompletions(Event):
    KIND = schema.STEP_COMPLETIONS
    index: list[int] | None = None
    done_ns: list[int] | None = None
    compiles: list[int] | None = None
    at_end: list[int] | None = None
    watch: dict[str, int] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompileBegin(Event):
    KIND = schema.COMPILE_BEGIN
    module: str | None = None
    fdo: bool | None = None
    thread: Thread | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompileEnd(Event):
    KIND = schema.COMPILE_END
    module: str | None = None
    ok: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stacks(Event):
    KIND = schema.STACKS
    file: str | None = None
    signal: int | None = None
    main_thread: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Hold(Event):
    KIND = schema.HOLD
    process_index: int | None = None
    process_count: int | None = None
    dir: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Released(Event):
    KIND = schema.RELEASED
    error: str | None = None


KINDS: dict[str, type[Event]] = {
    cls.KIND: cls
    for cls in (
        Start,
        JaxImported,
        Backend,
        BackendError,
        Compile,
        JaxEvent,
        StepEnter,
        StepExit,
        TraceStart,
        TraceStop,
        TraceDiscard,
        TraceExport,
        TraceProbe,
        TraceError,
        WindowWarning,
        PythonWarning,
        Log,
        ObservePgle,
        ObserveError,
        PgleProfiled,
        PgleSessionError,
        ObserveModules,
        ModuleCompiled,
        ModuleError,
        ModuleIdentity,
        XlaCompile,
        Exit,
        ScriptTrace,
        XlaFlagsSeen,
        WindowPlan,
        JitFunctions,
        StepCompletions,
        CompileBegin,
        CompileEnd,
        Stacks,
        Hold,
        Released,
    )
}


# -- checking a record against its kind's fields ---------------------------------------------
Check = Callable[[Any], bool]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_of(tp: Any) -> Check:
    """Whether a JSON value has the type `tp` (the annotations used above only)."""
    if tp is Any:
        return lambda v: True
    if tp is type(None):
        return lambda v: v is None
    if tp is bool:
        return lambda v: isinstance(v, bool)
    if tp is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if tp is float:
        return _number
    if tp is str:
        return lambda v: isinstance(v, str)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return lambda v: isinstance(v, str) and v in args
    if origin in (Union, types.UnionType):
        checks = [_check_of(a) for a in args]
        return lambda v: any(c(v) for c in checks)
    if origin is list:
        item = _check_of(args[0])
        return lambda v: isinstance(v, list) and all(item(x) for x in v)
    if origin is dict:
        value = _check_of(args[1])
        return lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and value(x) for k, x in v.items())
        )
    raise TypeError(f"no check for {tp!r}")  # a field type added above without one


def _fields_of(cls: type[Event]) -> tuple[tuple[str, Check, bool], ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            _check_of(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
        if f.name not in ("t", "raw")
    )


_FIELDS = {kind: _fields_of(cls) for kind, cls in KINDS.items()}


def parse(record: Any) -> Event | None:
    """The event a decoded JSON line holds; None when it is not one the harness could have
    written (not an object, no kind or time, a field of the wrong type or value)."""
    if not isinstance(record, dict):
        return None
    kind, t = record.get("kind"), record.get("t")
    if not isinstance(kind, str) or not isinstance(t, (int, float)) or isinstance(t, bool):
        return None
    cls = KINDS.get(kind)
    if cls is None:
        return UnknownEvent(t=float(t), raw=record, name=kind)
    values: dict[str, Any] = {}
    for name, check, required in _FIELDS[kind]:
        if name not in record:
            if required:
                return None
            continue
        value = record[name]
        if not check(value):
            return None
        values[name] = value
    return cls(t=float(t), raw=record, **values)
