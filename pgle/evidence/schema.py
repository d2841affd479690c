"""The contract between pgle and its harness inside the workload: the spec pgle writes to
`spec.json`, and the kinds of the records the harness appends to `events.jsonl` (each kind's
fields: its class in pgle/evidence/event_kinds.py, the events' schema).

Both sides import this module: pgle.launch.execution writes the spec, pgle.launch.harness
reads it and writes events, pgle.evidence.events and pgle.evidence.event_tail read them; it
lives with the readers so that pgle/evidence/ never imports pgle/launch/ (the floors,
docs/architecture.md). It runs inside the workload's process before the user's script, so it
uses the standard library only and imports nothing heavy.

Every event is one JSON object per line, `{"kind": ..., "t": ..., **fields}` (t: time.time()
in the workload). A line cut short by a crash is skipped by readers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

# -- event kinds (events.jsonl) -------------------------------------------------------------
START = "start"  # the harness is up, before the user's code
JAX_IMPORTED = "jax_imported"  # the workload imported jax
BACKEND = "backend"  # the first backend is up: platform, devices, processes
BACKEND_ERROR = "backend_error"
COMPILE = "compile"  # a backend compile finished (jax.monitoring duration event)
JAX_EVENT = "jax_event"  # another jax.monitoring event
# A jax.profiler.StepTraceAnnotation opened whose step_num is no int nor None (the others, and
# every step's exit, are records of steps.bin: pgle.evidence.step_file); in run folders of
# pgle before issue 35, every marked step's two edges (step_exit: the closing one).
STEP_ENTER = "step_enter"
STEP_EXIT = "step_exit"
STEP_NAME = "step_name"  # the name of steps.bin's step name `id`
TRACE_START = "trace_start"  # pgle started the JAX profiler (purpose: window | executions)
TRACE_STOP = "trace_stop"  # ... and stopped: the kept trace
TRACE_DISCARD = "trace_discard"  # pgle dropped its trace: steps came after all, or a script trace
TRACE_ERROR = "trace_error"
# pgle's window closed and stop_trace is writing the trace (the stall watchdog's export bound)
TRACE_EXPORT = "trace_export"
# --trace-max-bytes: one step traced before the window, its bytes and export time (issue 36)
TRACE_PROBE = "trace_probe"
WINDOW_WARNING = "window_warning"  # the window is not what was asked (cut short, never opened)
WARNING = "warning"  # a Python warning the workload raised
LOG = "log"  # a record of a JAX logger named in the spec
OBSERVE_PGLE = "observe_pgle"  # the auto-PGLE observer (pgle.launch.jax_internals) is installed
OBSERVE_ERROR = "observe_error"
PGLE_PROFILED = "pgle_profiled"  # auto PGLE profiled one execution of a module
# auto PGLE could not start a module's profiler session: another session held the profiler
# (`holder_*`: another thread's profiled execution, if one was running)
PGLE_SESSION_ERROR = "pgle_session_error"
OBSERVE_MODULES = "observe_modules"  # the per-module cost/memory/HLO observer is installed
MODULE_COMPILED = "module_compiled"  # XLA's FLOPs, memory and scheduled HLO file of one module
MODULE_ERROR = "module_error"  # describing one compiled module failed (the compile did not)
MODULE_IDENTITY = "module_identity"  # a module's fingerprint before its compile (issue 36)
# XLA was asked to compile for `platform` from thread `thread` (native id) of process `pid`;
# once per distinct (platform, thread): whose compiles the log's XLA lines can be.
XLA_COMPILE = "xla_compile"
EXIT = "exit"  # the workload's exit code (or interrupted)
SCRIPT_TRACE = "script_trace"  # the workload called jax.profiler.start_trace/stop_trace itself
XLA_FLAGS_SEEN = "xla_flags_seen"  # XLA_FLAGS as the workload's process had it at the first compile
WINDOW_PLAN = "window_plan"  # the execution window chose its function (no step markers)
JIT_FUNCTIONS = "jit_functions"  # at exit: executions per jitted function, the step, its starts
STEP_COMPLETIONS = "step_completions"  # at exit: when each marked step's work completed
# XLA's compile of `module` started / ended (`fdo`: it was handed a profile: auto PGLE's
# recompile); what the stall watchdog names when a process stops making progress
COMPILE_BEGIN = "compile_begin"
COMPILE_END = "compile_end"
# The process registered its stack dump: the signal pgle sends makes faulthandler write every
# thread's Python stack to `file` (pgle.launch.stall)
STACKS = "stacks"
# The workload has finished (its exit code is in the exit record) and waits, before jax's own
# teardown, for pgle to exchange the job's files through jax.distributed's key-value store
# (pgle.launch.handoff); `released` when it goes on
HOLD = "hold"
RELEASED = "released"

# -- files beside the events file (the run folder of one process) ---------------------------
STACKS_NAME = "stacks.txt"  # faulthandler's dump of every thread, on pgle's signal
PROGRESS_NAME = "progress"  # the count of executions so far, rewritten when it changes
HANDOFF_DIR = "handoff"  # pgle.launch.handoff's requests and answers
# A command that starts several Python processes importing jax (`-- bash run.sh`, torchrun):
# the first to import jax writes beside the events file; each other one in procs/<pid>/.
PROCS_DIR = "procs"
PRIMARY_CLAIM = ".harness-primary"
# The signal that makes a harnessed process dump its stacks: ignored by default, so a process
# of the workload that has no harness (a shell, a launcher) is never hurt by it.
DUMP_SIGNAL = "SIGURG"
# Command mode: the spec's path, for the harness that travels by environment
# (pgle/launch/boot/sitecustomize.py).
SPEC_VAR = "PGLE_HARNESS_SPEC"


# -- the spec (spec.json) ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    script: str | None  # absolute path, or None with `module` or `command`
    module: str | None
    args: tuple[str, ...] = ()
    # Command mode: the argv pgle starts (`bash run.sh ...`); the harness then travels by
    # environment into every Python process below it that imports jax.
    command: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class WindowSpec:
    """When the harness runs the JAX profiler. steps: `count` steps from step `start`; time:
    `duration` seconds from `delay` after the process start; auto: steps 2..6 when the script
    marks steps, else the whole run. The trace goes to `dir`."""

    mode: str
    dir: str
    start: int = 0
    count: int = 0
    delay: float | None = None
    duration: float | None = None
    step_name: str | None = None
    # auto without step markers: executions of the step function (pgle.launch.step_rule), after
    # `warmup` of them, at most `executions` of them or `max_seconds` (also bounds a marker window)
    warmup: int = 2
    executions: int = 5
    max_seconds: float = 30.0
    # What the profiler records (pgle.launch.trace_options: "pgle" | "full"), and the most
    # bytes the window's trace may hold (0: no bound); issue 36
    detail: str = "pgle"
    max_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class HarnessSpec:
    events: str  # the events file
    workload: WorkloadSpec
    profile: WindowSpec | None = None  # None: no profiler
    step_name: str | None = None  # count only steps of this name
    capture_loggers: tuple[dict[str, Any], ...] = ()  # {"name": logger, "level": "DEBUG"}
    warnings_always: tuple[str, ...] = ()  # builtin warning categories never deduplicated
    observe_pgle: bool = False  # report every execution auto PGLE profiles
    expected_xla_flags: dict[str, Any] | None = None
    # Count the jitted functions' executions (the step rule, step times without markers; a few
    # us per top-level call). Off where nothing reads them (auto, prewarm, the Nsight run).
    count_jits: bool = True
    # Wait at the workload's end, before jax's teardown, for pgle to exchange the job's files
    # through jax.distributed's key-value store (`--gather kv`; pgle.launch.handoff).
    hold: bool = False
    # The longest the harness waits there for pgle (pgle's gather timeout and some).
    hold_timeout_s: float = 900.0
    # `pgle estimate`: export each jitted function that reaches the step rule's minimum of
    # executions for CUDA (jax.export) into this folder (pgle.launch.step_export).
    export_dir: str | None = None

    @property
    def command_mode(self) -> bool:
        return bool(self.workload.command)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> HarnessSpec:
        data: dict[str, Any] = json.loads(text)
        window = data.get("profile")
        return cls(
            events=data["events"],
            workload=WorkloadSpec(
                **{
                    **data["workload"],
                    "args": tuple(data["workload"].get("args") or ()),
                    "command": tuple(data["workload"].get("command") or ()),
                }
            ),
            profile=WindowSpec(**window) if window else None,
            step_name=data.get("step_name"),
            capture_loggers=tuple(data.get("capture_loggers") or ()),
            warnings_always=tuple(data.get("warnings_always") or ()),
            observe_pgle=bool(data.get("observe_pgle")),
            expected_xla_flags=data.get("expected_xla_flags"),
            count_jits=bool(data.get("count_jits", True)),
            hold=bool(data.get("hold")),
            hold_timeout_s=float(data.get("hold_timeout_s") or 900.0),
            export_dir=data.get("export_dir") or None,
        )

    def with_args_from(self, value: str | None) -> HarnessSpec:
        """The spec with the workload's real arguments (`WORKLOAD_ARGS`'s JSON list), where
        spec.json holds them redacted."""
        if value is None:
            return self
        args = tuple(str(a) for a in json.loads(value))
        return dataclasses.replace(self, workload=dataclasses.replace(self.workload, args=args))


# spec.json records the workload's arguments with their secrets redacted (pgle.redact); when
# that changed any, the real ones reach the harness in this variable (a JSON list), which the
# harness removes from its environment before the user's script runs.
WORKLOAD_ARGS = "PGLE_WORKLOAD_ARGS"
