"""The schema of the harness's events file: one frozen dataclass per kind (the kinds' names are
in pgle/evidence/schema.py, which the harness imports), its fields the fields the harness
writes (tests/evidence/test_event_kinds.py holds the harness to them, both ways), and the one
place a record read from `events.jsonl` becomes one.

Every event is one JSON object per line, `{"kind": ..., "t": ..., **fields, "edges": ...}`
(pgle.launch.harness `Events.write`; `edges`: the step records written before it, the marked
steps' edges being records of steps.bin: pgle.evidence.step_file). A run folder may come from
another user (a shared job folder, `pgle report` on a colleague's run): a record is taken only
when each field it holds has the type the harness writes, and a closed field (a trace's
purpose, a script trace's call) one of its values; anything else is rejected, never half-read.
A kind this pgle does not know (a newer harness) is kept as `UnknownEvent`. Every event keeps
the record it was read from (`to_dict`): reports that show a record (a run's `backend`) show it
as written, and fields a newer harness adds survive.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Union

from pgle.evidence import schema

Thread = int | str  # a native thread id (the harness writes str(threading.get_native_id()))
KINDS: dict[str, type[Event]] = {}  # kind -> its class, filled as the classes below are made


@typing.dataclass_transform(frozen_default=True, kw_only_default=True)
@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """One record of the events file. A kind's class names its kind, `class Exit(Event,
    kind=schema.EXIT)`, and is made a frozen keyword-only dataclass here (one definition for
    every kind)."""

    KIND: ClassVar[str] = ""
    t: float  # time.time() in the workload
    edges: int | None = None  # the step records (steps.bin) written before it; None: older pgle
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)
        if kind:
            cls.KIND = kind
            KINDS[kind] = cls

    @property
    def kind(self) -> str:
        return self.KIND

    def to_dict(self) -> dict[str, Any]:
        """The record as the harness wrote it."""
        return dict(self.raw)


class UnknownEvent(Event):
    """A kind this pgle does not know (written by a newer harness): kept as it was."""

    name: str

    @property
    def kind(self) -> str:
        return self.name


class Start(Event, kind=schema.START):
    pid: int | None = None
    argv: list[str] | None = None
    python: str | None = None
    ppid: int | None = None


class JaxImported(Event, kind=schema.JAX_IMPORTED):
    version: str | None = None


class Backend(Event, kind=schema.BACKEND):
    platform: str | None = None
    device_count: int | None = None
    local_device_count: int | None = None
    device_kind: str | None = None
    process_index: int | None = None
    process_count: int | None = None


class BackendError(Event, kind=schema.BACKEND_ERROR):
    error: str = ""


class Compile(Event, kind=schema.COMPILE):
    fun_name: str | None = None
    seconds: float | None = None
    thread: Thread | None = None  # the compiling thread; None: pgle before #33's fix


class JaxEvent(Event, kind=schema.JAX_EVENT):
    """Another jax.monitoring event; its keyword arguments, as strings, are in `raw`."""

    event: str | None = None
    thread: Thread | None = None  # the thread that recorded it; None: pgle before #33's fix


class StepEnter(Event, kind=schema.STEP_ENTER):
    """A marked step whose step_num is no int nor None (the others are records of steps.bin);
    every marked step, in run folders of pgle before issue 35."""

    index: int
    name: str | None = None
    step_num: Any = None  # the script's own: usually an int, may be anything JSON holds


class StepName(Event, kind=schema.STEP_NAME):
    """The name of the steps.bin records whose name is `id`."""

    id: int
    name: str


class TraceStart(Event, kind=schema.TRACE_START):
    purpose: Literal["window", "executions"]
    dir: str | None = None
    # what pgle asked the profiler: {"detail", "asked", "ignored", "why"} (trace_options)
    options: dict[str, Any] | None = None


class TraceStop(Event, kind=schema.TRACE_STOP):
    """The kept trace: `seconds` the window (to the device barrier), `stop_trace_seconds`
    stop_trace's own time; `steps`/`first_step` for a step window, `function`,
    `first_execution`, `executions` for an execution window, `site` for the script's own."""

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


class TraceExport(Event, kind=schema.TRACE_EXPORT):
    """pgle's window closed; stop_trace writes the trace (until the trace_stop)."""

    purpose: str | None = None


class TraceProbe(Event, kind=schema.TRACE_PROBE):
    """--trace-max-bytes: the step before the window traced alone, to size the window."""

    step: int | None = None
    bytes: int | None = None
    stop_trace_seconds: float | None = None
    steps: int | None = None  # the steps the window keeps
    error: str | None = None


class TraceDiscard(Event, kind=schema.TRACE_DISCARD):
    dir: str | None = None


class TraceError(Event, kind=schema.TRACE_ERROR):
    error: str = ""


class WindowWarning(Event, kind=schema.WINDOW_WARNING):
    message: str = ""
    early: bool | None = None  # said while the workload ran


class PythonWarning(Event, kind=schema.WARNING):
    category: str | None = None
    message: str = ""
    filename: str | None = None
    lineno: int | None = None


class Log(Event, kind=schema.LOG):
    logger: str | None = None
    level: str | None = None
    message: str = ""
    thread: Thread | None = None  # the logging thread; None: pgle before #33's fix


class ObservePgle(Event, kind=schema.OBSERVE_PGLE):
    installed: bool | None = None


class ObserveError(Event, kind=schema.OBSERVE_ERROR):
    error: str = ""


class PgleProfiled(Event, kind=schema.PGLE_PROFILED):
    module: str | None = None
    index: int | None = None
    runs: int | None = None
    profile_bytes: int | None = None
    thread: Thread | None = None


class PgleSessionError(Event, kind=schema.PGLE_SESSION_ERROR):
    module: str | None = None
    thread: Thread | None = None
    error: str = ""
    holder_module: str | None = None
    holder_thread: Thread | None = None


class ObserveModules(Event, kind=schema.OBSERVE_MODULES):
    installed: bool | None = None


class ModuleCompiled(Event, kind=schema.MODULE_COMPILED):
    module: str | None = None
    flops: float | None = None
    transcendentals: float | None = None
    bytes_accessed: float | None = None
    memory: dict[str, int] | None = None
    hlo_file: str | None = None


class ModuleIdentity(Event, kind=schema.MODULE_IDENTITY):
    """A module's fingerprint, before its compile, in a jax.distributed process (issue 36)."""

    module: str | None = None
    fingerprint: str = ""
    bytes: int | None = None
    text_file: str | None = None


class ModuleError(Event, kind=schema.MODULE_ERROR):
    error: str = ""


class XlaCompile(Event, kind=schema.XLA_COMPILE):
    platform: str | None = None
    thread: Thread | None = None
    pid: int | None = None


class Exit(Event, kind=schema.EXIT):
    code: int | None = None
    error: str | None = None
    interrupted: bool | None = None


class ScriptTrace(Event, kind=schema.SCRIPT_TRACE):
    """The workload's own start_trace/stop_trace: `site` its call's "file:line", `dir` its
    log_dir."""

    call: Literal["start", "stop"]
    site: str | None = None
    dir: str | None = None


class XlaFlagsSeen(Event, kind=schema.XLA_FLAGS_SEEN):
    """`effective`: os.environ["XLA_FLAGS"] at the first compile; `missing`: pgle's flags not
    in it."""

    effective: str | None = None
    missing: list[str] | None = None


class WindowPlan(Event, kind=schema.WINDOW_PLAN):
    function: str | None = None
    first_execution: int | None = None
    executions: int | None = None
    max_seconds: float | None = None


class JitFunctions(Event, kind=schema.JIT_FUNCTIONS):
    """`functions`: [{function, module, executions, seconds, work_s, work_known, reached: the
    executions whose completion the watcher reached, timed or not}] most work
    first; `step`/`module`: the one pgle.launch.step_rule picks; `starts`: time.time() of each
    of its executions timed in full (a light step's sampled ones only); `work`: [start,
    seconds of work each, completion, last number, compiles, executions] per span of
    consecutive executions whose completion was seen (issue 33; rows of five, one execution
    each, and of two, [start, seconds], from older pgles); `watch`: completions {known,
    unknown, no_array, skipped} over every function."""

    functions: list[dict[str, Any]] | None = None
    step: str | None = None
    module: str | None = None
    starts: list[float] | None = None
    work: list[list[float | None]] | None = None  # seconds None: the span's work unknown
    watch: dict[str, int] | None = None
    rule: str | None = None


class StepCompletions(Event, kind=schema.STEP_COMPLETIONS):
    """Per marked step whose completion was seen: its index, time.time_ns() of its completion
    (its marker's end when its outputs were ready then: at_end 1), backend compiles so far
    (issue 33); `watch`: {ready_at_end, waited, unknown, no_array, skipped} steps."""

    index: list[int] | None = None
    done_ns: list[int] | None = None
    compiles: list[int] | None = None
    at_end: list[int] | None = None
    watch: dict[str, int] | None = None


class CompileBegin(Event, kind=schema.COMPILE_BEGIN):
    module: str | None = None
    fdo: bool | None = None
    thread: Thread | None = None


class CompileEnd(Event, kind=schema.COMPILE_END):
    module: str | None = None
    ok: bool | None = None
    thread: Thread | None = None  # its CompileBegin's; None: pgle before #33's fix


class Stacks(Event, kind=schema.STACKS):
    file: str | None = None
    signal: int | None = None
    main_thread: str | None = None


class Hold(Event, kind=schema.HOLD):
    process_index: int | None = None
    process_count: int | None = None
    dir: str | None = None


class Released(Event, kind=schema.RELEASED):
    error: str | None = None


# -- checking a record against its kind's fields ---------------------------------------------
Check = Callable[[Any], bool]


def is_number(v: Any) -> bool:
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
        return is_number
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


def decode(line: bytes) -> dict[str, Any] | None:
    """The JSON object of one line of the events file; None for anything else."""
    try:
        r = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        # A line cut short by a crash; or, in another user's run folder, anything (nesting
        # deeper than json's recursion limit raises RecursionError, not a decode error).
        return None
    return r if isinstance(r, dict) else None


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
