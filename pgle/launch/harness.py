"""Runs inside the workload's processes and observes the run from there.

Two ways in:
- script mode: `python -m pgle.launch.harness --spec SPEC.json` (`main`; the workload's
  arguments come in the environment, schema.WORKLOAD_ARGS) runs the user's script or
  `-m module` with runpy, so that `sys.argv`, `sys.path[0]` and `__main__` look exactly as
  under plain `python`;
- command mode: `pgle CMD -- COMMAND` puts pgle/launch/boot first on PYTHONPATH; its
  sitecustomize calls `activate` in every Python process of the command, and a process is
  harnessed once it imports jax (the first in the run folder, the others in procs/<pid>/).

What it observes, once the workload imports jax (never earlier: JAX reads its JAX_* variables
at import and XLA_FLAGS at backend start, and a script may set them itself):
- step boundaries, through a subclass put in place of `jax.profiler.StepTraceAnnotation`,
  and the executions of the workload's jitted functions (`jax.jit`, `jax.pmap`, pjit
  wrapped: JitCounter), with their completion times (CompletionWatcher, StepCompletions);
- compilations, through `jax.monitoring` (public API), and each compiled module's facts and
  scheduled HLO through jax's compiler internals (pgle.launch.jax_internals), as auto PGLE's
  profiled executions when asked;
- records of the JAX loggers named in the spec, Python warnings, the workload's own profiler
  calls (`jax.profiler.start_trace`/`stop_trace`/`trace`, or jax >= 0.12's ProfileSession);
- the JAX profiler window of `pgle collect` (ProfilerWindow);
- the exit: its code, stack dumps on request (faulthandler), and, for a `--gather kv` job,
  the hand-off rounds before jax's own teardown (pgle.launch.handoff).

Everything observed goes as JSON lines to the events file in the run folder, but the marked
steps' edges: int64 records in steps.bin beside it (Events; the layout and its reader:
pgle.evidence.step_file); the `progress` beacon counts executions for the stall watchdog. The
harness also watches pgle (PGLE_PARENT_FD): if pgle dies, the workload's process group is killed.
The profiler is only ever started once the backend is up (after the first compilation):
`jax.profiler.start_trace` initializes the backends (jax 0.10.2, `jax/_src/profiler.py`),
which would break a script that calls `jax.distributed.initialize()` or sets XLA_FLAGS
itself.
"""

from __future__ import annotations

import array
import builtins
import collections
import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import json
import logging
import os
import queue
import runpy
import shutil
import struct
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, ModuleType, TracebackType
from typing import Any, NoReturn, TextIO

try:
    from pgle.evidence import schema, step_file
    from pgle.launch import step_rule, trace_options, tracebacks
    from pgle.phrases import plural
    from pgle.redact import redact_json
except ImportError:  # pgle not installed: this file is pgle/launch/harness.py
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from pgle.evidence import schema, step_file
    from pgle.launch import step_rule, trace_options, tracebacks
    from pgle.phrases import plural
    from pgle.redact import redact_json

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
AUTO_STEPS = (2, 5)  # steps 2..6 when the script marks steps and no window was given
# --steps on a script without markers: say so once a jitted function ran this
# often without any StepTraceAnnotation (early, not after the whole run).
NO_MARKER_EXECUTIONS = 20
# The execution window's choice of the step (ProfilerWindow._choose): the longest wait for the
# completion watcher to reach the executions so far, and the calls that may ask before the
# rule answers from what it has (host time where some candidate's work is still unknown).
DECIDE_WAIT_S = 10.0
DECIDE_ASKS = 4
# On one known execution each, the choice is taken only when the busiest candidate's work is
# this many times the next one's; else it waits for a second and ranks by each candidate's
# least work per execution: a span's time holds the watcher's wake-up, which only adds (issue
# 33: under load a ~50 us `jit(next_batch)` measured 0.5-5 ms on its one sample, more than the
# step's, in 4 of 48 window choices beside a mutation run).
DECIDE_MARGIN = 4.0


# Written out as soon as they happen: the window's edges, the run's start and end, errors.
# The frequent kinds (log records, compiles; a step's edges always) wait in the buffer.
_BUFFERED_KINDS = frozenset(
    {
        schema.STEP_ENTER,
        schema.LOG,
        schema.WARNING,
        schema.COMPILE,
        schema.JAX_EVENT,
        schema.PGLE_PROFILED,
        schema.MODULE_COMPILED,
    }
)
FLUSH_EVERY_S = 1.0  # the most a kill -9 can lose (docs/reliability.md)


class Events:
    """Append-only JSON lines and step records (pgle.evidence.step_file), safe from any thread.

    A marked step runs inside the user's training loop, so its two edges cost no system call,
    no lock and no object kept alive (issue 25: one write per line was ~36 us a step; a tuple
    per line kept until the next write-out, ~2.5 us more on short steps, the heap growing
    between write-outs): a step's edges go into one array of int64 (`_steps`, a step file
    record an edge, written out as it is), every other line waits in a deque, its place among
    the edges in its `edges` field. Both are written out when a window edge, the start, the
    exit or an error is recorded, before the process forks (the child must not inherit lines
    the parent will write), when the workload calls os._exit, and at least every FLUSH_EVERY_S by a
    background thread. So a kill -9 or a fatal signal loses at most the last second of steps;
    every edge is on disk at once.
    """

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._steps_fd = step_file.open_for_append(str(step_file.beside(path)))
        self._lines: collections.deque[str] = collections.deque()
        # A step edge: time.time_ns() (negated for an exit), index, step_num, name id, packed
        # (_EDGE). One `frombytes` is one C call: the GIL keeps an edge whole.
        self._steps = array.array("q")
        self._base = 0  # step edges written out before the array's first
        self._lock = threading.Lock()  # one writer of the file at a time
        self.failed = False
        self.closed = False
        self._through = False  # a forked child writes each line at once (it has no flusher)
        self._names: dict[str, int] = {}  # step name -> its id (a step_name event)
        # called by the flusher thread every FLUSH_EVERY_S
        self.on_tick: list[Callable[[], None]] = []
        threading.Thread(target=self._flusher, name="pgle-events", daemon=True).start()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=self.flush, after_in_child=self._forked)

    def write(self, kind: str, **fields: Any) -> None:
        # Secrets never reach the file: the workload's argv (`-- COMMAND --token x`), a
        # warning quoting a URL with its password (pgle.redact; issue 31).
        record = redact_json({"kind": kind, "t": time.time(), **fields})
        line = json.dumps(record, default=str)[:-1]
        with self._lock:  # its place among the step edges must not move under a flush
            edges = self._base + len(self._steps) // STEP_FIELDS
            self._lines.append(f'{line}, "edges": {edges}}}\n')
        if kind not in _BUFFERED_KINDS or self._through:
            self.flush()

    def name_id(self, name: str) -> int:
        """The id of a step name, its step_name event written at once (before any record of
        it: a reader always knows the names of the steps it reads)."""
        with self._lock:
            known = self._names.get(name)
            if known is not None:
                return known
            known = self._names[name] = len(self._names)
        self.write(schema.STEP_NAME, id=known, name=name)
        return known

    def flush(self) -> None:
        with self._lock:
            steps = self._steps
            n = len(steps)
            n -= n % STEP_FIELDS  # never half an edge (a frombytes is whole: the GIL)
            block = steps[:n]
            del steps[:n]  # edges added meanwhile stay, for the next flush
            self._base += n // STEP_FIELDS
            pop = self._lines.popleft
            items = [pop() for _ in range(len(self._lines))]
            if not (items or n) or self.closed or self.failed:
                return
            # The records first: a line read names no record that is not on disk yet.
            try:
                for fd, data in (
                    (self._steps_fd, step_file.encode(block)),
                    (self._fd, "".join(items).encode("utf-8", "replace")),
                ):
                    while data:
                        data = data[os.write(fd, data) :]
            except OSError:
                # A full disk must not break the user's step (this runs inside it);
                # pgle reads the events that made it and says the log is incomplete.
                self.failed = True

    def _flusher(self) -> None:
        while not self.closed:
            time.sleep(FLUSH_EVERY_S)
            self.flush()
            for tick in self.on_tick:
                with contextlib.suppress(Exception):
                    tick()

    def _forked(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        # Flushed before the fork: anything here is the parent's to write.
        self._lines.clear()
        del self._steps[:]
        self._through = True

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for fd in (self._fd, self._steps_fd):
                try:
                    os.close(fd)
                except OSError:
                    self.failed = True


STEP_FIELDS = step_file.FIELDS  # int64 numbers a step edge takes in Events._steps
# A step edge's bytes in Events._steps (native int64, as array("q") holds them). One `pack`
# and one `frombytes` are two C calls with no per-number argument parsing: `extend` of a
# tuple parsed each number through PyArg_Parse, ~3,300 of a marked step's ~18,000
# instructions under pgle on a short jitted step (issue 33, callgrind, CPython 3.11).
_EDGE = struct.Struct(f"{STEP_FIELDS}q").pack
# A StepCompletions row (index, time.time_ns(), compiles, 1 if ready by the marker's end),
# packed the same way: its own layout, not a step edge's.
_COMPLETION_ROW = struct.Struct("4q").pack
NULL_STEP_NUM = step_file.NULL_STEP_NUM  # step_num=None (any other non-int: Events.write)


_now = time.time
_now_ns = time.time_ns  # a step edge's time


# What --delay counts from: the harness's import, before the workload's code (script mode), or
# the process's first `import jax` (command mode: boot/sitecustomize.py imports the harness
# then), on the monotonic clock ProfilerCalls.clock reads by default.
PROCESS_START = time.monotonic()


def _start_jax_trace(target: str, options: Any = None) -> None:
    with _pgle_own():
        if options is None:  # jax's defaults; jax < 0.6 takes no profiler_options at all
            _ORIGINAL["start_trace"](target)
        else:
            _ORIGINAL["start_trace"](target, profiler_options=options)


def _stop_jax_trace() -> None:
    with _pgle_own():
        _ORIGINAL["stop_trace"]()


def _settle_devices() -> None:
    _wait_for_devices()


@dataclasses.dataclass(frozen=True)
class ProfilerCalls:
    """What the window acts through: the profiler and the clock. In the workload these are
    jax.profiler's own start_trace/stop_trace (as they were before pgle's hooks) and the
    monotonic clock; `settle` finishes queued device work before a stop; `origin` is what
    `--delay` counts from (the process start, on `clock`); `options` builds what start is
    asked to record (pgle.launch.trace_options.build: the options, or None, and its record)."""

    start: Callable[[str, Any], None] = _start_jax_trace
    stop: Callable[[], None] = _stop_jax_trace
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    settle: Callable[[], None] = _settle_devices
    origin: float = PROCESS_START
    options: Callable[[str], tuple[Any, dict[str, Any]]] = trace_options.build


class ProfilerWindow:
    """Decides when the JAX profiler runs, from step and compile events.

    Steps (`--steps START:COUNT`): the trace starts as marked step START is entered (the
    step's index counts the steps pgle counts, from 0) and stops as the COUNT-th step from
    there exits: steps START..START+COUNT-1, both ends included. Time (`--delay D
    --duration S`): it starts D seconds after `calls.origin` (the process start), never
    before the backend is up, and stops S seconds later. Auto: steps 2..6 of a script that
    marks steps, else executions of the step function. A start or stop that raises is
    recorded (`trace_error`) and ends the window: it never retries. The workload's own
    start_trace ends pgle's window for good (its trace is the one collect converts).

    What the profiler records: `spec.detail` (pgle.launch.trace_options). Size (`spec.max_bytes`,
    a step window): the profiler tells no size before its export, so the step before the
    window is traced alone first (a probe, into a scratch folder, deleted), and the window
    keeps at most max_bytes / (the probe's bytes) steps."""

    def __init__(
        self, spec: schema.WindowSpec | None, events: Events, calls: ProfilerCalls | None = None
    ):
        self.spec = spec
        self.events = events
        self.calls = calls or ProfilerCalls()
        self.mode = spec.mode if spec else None  # None | steps | time | auto
        self.start_step, self.count = (spec.start, spec.count) if spec else (0, 0)
        if self.mode == "auto":
            self.start_step, self.count = AUTO_STEPS
        self.dir = spec.dir if spec else None
        self.active: str | None = None  # what the running trace is for: window | whole
        self.done = False
        self.started_at = 0.0
        self.first_step_in_trace: int | None = None
        self.steps_in_trace = 0
        self.backend_up = False
        self.seen_steps = False
        self.lock = threading.RLock()
        self._time_thread: threading.Thread | None = None
        # The execution window (auto mode, no step markers): calls of each jax.jit function.
        self.warmup = spec.warmup if spec else 0
        self.max_executions = spec.executions if spec else 0
        self.max_seconds = spec.max_seconds if spec else 0.0
        self.jits: JitCounter | None = None  # set by the harness: executions and host time
        self.hot_name: str | None = None  # the jitted function whose executions are the steps
        self.pending: str | None = None  # the step the rule picked; the window opens at its call
        self.asks = 0  # calls that asked the rule which function is the step (_choose)
        self.first_execution: int | None = None
        self.executions_in_trace = 0
        self.counting = self.mode in ("auto", "steps")
        self.no_marker_warned = False
        self.script_trace: dict[str, Any] | None = None  # the workload's own start_trace call
        self.target: str | None = None
        self.stop_reason: str | None = None
        self.detail = spec.detail if spec else trace_options.PGLE
        self.max_bytes = spec.max_bytes if spec else 0
        self._options: tuple[Any, dict[str, Any]] | None = None  # built at the first start
        self.probed = False  # the size probe ran (or could not)

    # -- triggers ---------------------------------------------------------
    def on_backend_up(self) -> None:
        with self.lock:
            if self.backend_up:
                return
            self.backend_up = True
            if self.mode == "time":
                self._time_thread = threading.Thread(target=self._time_window, daemon=True)
                self._time_thread.start()

    def on_step_enter(self, index: int) -> None:
        if self.seen_steps and self.active is None and (self.done or self.mode in (None, "time")):
            return  # nothing left for a step to decide: no lock on every marked step (issue 25)
        with self.lock:
            first = not self.seen_steps
            self.seen_steps = True
            if self.mode == "auto" and first and self.active == "executions":
                # The script marks steps after all: drop the execution window's trace and
                # profile steps 2..6 instead.
                self._stop(discard=True)
            if (
                self.max_bytes > 0
                and not self.probed
                and self.mode in ("steps", "auto")
                and not self.done
                and self.active is None
                and self.count > 1
                and index == self.start_step - 1
            ):
                self._probe_start(index)
            if (
                self.mode in ("steps", "auto")
                and not self.done
                and self.active is None
                and index == self.start_step
                and self.count > 0
            ):
                self._start("window")
            if self.active == "window" and self.first_step_in_trace is None:
                self.first_step_in_trace = index

    def on_step_exit(self, index: int) -> None:
        if self.active is None:
            return  # only an open window counts steps out (re-checked under the lock below)
        with self.lock:
            if self.active == "probe":
                self._probe_stop(index)
                return
            if self.active == "window" and self.first_step_in_trace is not None:
                self.steps_in_trace = index - self.first_step_in_trace + 1
                if self.mode in ("steps", "auto") and self.steps_in_trace >= self.count:
                    self._stop()
                elif self.mode == "auto" and self._over_time():
                    self._stop(reason=f"the {self.max_seconds:g} s bound")

    def _over_time(self) -> bool:
        return bool(self.max_seconds) and self.calls.clock() - self.started_at >= self.max_seconds

    # -- the execution window (no step markers) ----------------------------
    def before_execution(self, name: str, n: int) -> bool:
        """The jitted function `name` is about to run its n-th execution (top-level calls
        only). True: call `after_execution` when it returns."""
        with self.lock:
            if self.seen_steps or self.done or self.script_trace is not None:
                if self.mode != "auto" or self.seen_steps:
                    self.counting = False
                return False
            if self.mode == "steps":
                if n >= NO_MARKER_EXECUTIONS and not self.no_marker_warned:
                    self._warn_no_markers(name, n)
                return False
            if self.active == "executions":
                if self._over_time():
                    self._stop(reason=f"the {self.max_seconds:g} s bound")
                    return False
                return name == self.hot_name
            if self.active is None and self.hot_name is None and self.backend_up:
                if self.pending is None and n > self.warmup:
                    self.pending = self._choose(name)
                if self.pending == name:
                    self.hot_name, self.first_execution = name, n - 1
                    self.events.write(
                        schema.WINDOW_PLAN,
                        function=name,
                        first_execution=n - 1,
                        executions=self.max_executions,
                        max_seconds=self.max_seconds,
                    )
                    self._start("executions")
                    return self.active == "executions"
            return False

    def _choose(self, name: str) -> str | None:
        """The step whose executions the window profiles, asked by each call past its warm-up
        until it answers (None: ask again). The rule (pgle.launch.step_rule) runs over every
        function with a timed execution, so a helper called before the step each iteration
        crosses first and the step still wins. It ranks by work once every candidate has a
        known completion; the watcher's thread trails the loop (more so on a loaded machine),
        so it is first let reach every execution so far: a wait on work already dispatched,
        bounded by DECIDE_WAIT_S, at most DECIDE_ASKS times, before the window opens (issue
        33: on 1 or 2 samples the host-time fallback picked a helper by its dispatch noise).
        A candidate whose only timed execution's span held a compile (an eager op compiled
        in the first iteration) has no known work yet: the next call asks again. On one known
        execution each, only a clear lead (DECIDE_MARGIN) answers; with two or more, each
        candidate's least work per execution ranks it (the watcher's lag only adds)."""
        jits = self.jits
        if jits is None:
            return name
        jits.watcher.catch_up(DECIDE_WAIT_S)
        functions = jits.snapshot()
        # Ranked by the executions the watcher reached, not those counted: asked at a helper's
        # call, the helper has one more counted than the step called after it, a half more
        # weight on 2 against 3 (issue 33: under load a helper's one sample, the watcher's
        # wake-up in it, outweighed the step's, equinox's step in a full run).
        reached = [{**f, "executions": f["reached"]} for f in functions]
        self.asks += 1
        if step_rule.by_work(reached, min_executions=2):
            least = jits.least_work()
            if all(f["work_known"] >= 2 for f in step_rule.candidates(reached, 2)):
                reached = [
                    {**f, "work_s": least[f["function"]] * f["work_known"]}
                    if f["function"] in least
                    else f
                    for f in reached
                ]
            elif self.asks < DECIDE_ASKS and not step_rule.clear(reached, DECIDE_MARGIN, 2):
                return None
            chosen = step_rule.pick(reached, min_executions=2)
            if chosen is not None:
                return str(chosen["function"])
        if self.asks < DECIDE_ASKS:
            return None
        chosen = step_rule.pick(functions, min_executions=2)
        return str(chosen["function"]) if chosen else name

    def after_execution(self, name: str) -> None:
        with self.lock:
            if self.active != "executions" or name != self.hot_name:
                return
            self.executions_in_trace += 1
            if self.executions_in_trace >= self.max_executions:
                self._stop()
            elif self._over_time():
                self._stop(reason=f"the {self.max_seconds:g} s bound")

    def _warn_no_markers(self, name: str, n: int) -> None:
        self.no_marker_warned = True
        self.counting = False
        first, count = self.start_step, self.count
        message = (
            f"--steps {first}:{count} cannot be met: {name} has executed {n} times and the "
            "workload marks no step with jax.profiler.StepTraceAnnotation; nothing will be "
            "profiled. Drop --steps (pgle then profiles executions of the most-executed jitted "
            "function), pass --step-name NAME if the steps have another name, use "
            "--delay/--duration, or wrap the step: `with jax.profiler.StepTraceAnnotation("
            "'train', step_num=i):`"
        )
        self.events.write(schema.WINDOW_WARNING, message=message, early=True)
        _say(f"warning: {message}")

    # -- the workload's own profiler ----------------------------------------
    def on_script_start(self, site: str, log_dir: object) -> None:
        """The workload calls jax.profiler.start_trace: pgle's window gives way to it, and
        collect converts the workload's own trace."""
        with self.lock:
            if self.active:
                self._stop(discard=True)
            self.done = True
            self.counting = False
            where = str(log_dir) if log_dir is not None else None
            self._edge()
            self.script_trace = {"site": site, "dir": where, "t": self.calls.clock()}
            self.events.write(schema.SCRIPT_TRACE, call="start", site=site, dir=where)
            if self.mode is not None:
                kept = where or "kept in memory; pgle exports it when it stops"
                _say(
                    f"the workload starts its own profiler at {site} "
                    f"(jax.profiler); pgle uses that trace ({kept}) instead of its own window"
                )

    def on_script_stop(self, site: str, exported_to: str | None = None) -> None:
        """`exported_to`: where pgle wrote a session the workload kept in memory only
        (jax >= 0.12 `ProfileSession(log_dir=None)`), so collect can convert it."""
        with self.lock:
            self._edge()
            started = self.script_trace
            if started is not None and exported_to:
                started["dir"] = exported_to
            self.events.write(
                schema.SCRIPT_TRACE, call="stop", site=site, dir=started["dir"] if started else None
            )
            if started is not None and self.mode is not None:
                self.events.write(
                    schema.TRACE_STOP,
                    dir=started["dir"],
                    purpose="script",
                    seconds=self.calls.clock() - started["t"],
                    stop_trace_seconds=None,
                    first_step=None,
                    steps=None,
                    reason=None,
                    site=started["site"],
                )

    def on_exit(self, last_step: int | None, step_name: str | None, other_names: list[str]) -> None:
        with self.lock:
            if self.active:
                self._stop(reason="workload ended")
            self._warn_window(last_step, step_name, other_names)

    def _warn_window(
        self, last_step: int | None, step_name: str | None, other_names: list[str]
    ) -> None:
        """Say so when the window is not what was asked for (pgle collect copies these)."""
        if self.mode not in ("steps", "auto") or self.script_trace is not None:
            return
        if self.no_marker_warned:
            return  # said while it ran
        first, count = self.start_step, self.count
        asked = f"--steps {first}:{count} (steps {first}..{first + count - 1})"
        if last_step is None and step_name:
            marks = (
                f"it marks {', '.join(repr(n) for n in other_names)}"
                if other_names
                else "it marks no step with jax.profiler.StepTraceAnnotation"
            )
            done = (
                f"executions of {self.hot_name} were profiled instead"
                if self.hot_name
                else "nothing was profiled"
            )
            self.events.write(
                schema.WINDOW_WARNING,
                message=(
                    f"--step-name {step_name!r} matched no step of the workload ({marks}); {done}"
                ),
            )
        elif self.mode == "auto":
            if last_step is None and self.hot_name is None:
                self.events.write(
                    schema.WINDOW_WARNING,
                    message=(
                        "nothing was profiled: the workload marks no step with "
                        "jax.profiler.StepTraceAnnotation and no jitted function (jax.jit, "
                        f"jax.pmap, pjit) executed more than {plural(self.warmup, 'time')}; use "
                        "--delay/--duration"
                    ),
                )
            elif (
                self.hot_name is not None
                and last_step is None
                and self.executions_in_trace < self.max_executions
                and (self.stop_reason or "").startswith("workload")
            ):
                self.events.write(
                    schema.WINDOW_WARNING,
                    message=(
                        f"the execution window was cut short: the workload ended after "
                        f"{plural(self.executions_in_trace, 'profiled execution')} of "
                        f"{self.hot_name}, "
                        f"not {self.max_executions}"
                    ),
                )
            return  # the default window takes what the workload has
        elif last_step is not None and last_step < first:
            self.events.write(
                schema.WINDOW_WARNING,
                message=(
                    f"{asked} never opened: the workload marked only "
                    f"{plural(last_step + 1, 'step')}"
                ),
            )
        elif self.first_step_in_trace is not None and self.steps_in_trace < count:
            last = self.first_step_in_trace + self.steps_in_trace - 1
            self.events.write(
                schema.WINDOW_WARNING,
                message=(
                    f"{asked} was cut short: the workload ended after step {last}, so the profile "
                    f"holds {plural(self.steps_in_trace, 'step')}, not {count}"
                ),
            )

    # -- mechanics --------------------------------------------------------
    def _time_window(self) -> None:
        spec = self.spec
        delay = float(spec.delay or 0.0) if spec else 0.0
        duration = float(spec.duration or 0.0) if spec else 0.0
        # The delay counts from process start; the trace never starts before the backend
        # (this runs once the backend is up).
        wait = self.calls.origin + delay - self.calls.clock()
        if wait > 0:
            self.calls.sleep(wait)
        with self.lock:
            if self.done or self.active:
                return
            self._start("window")
        if duration > 0:
            self.calls.sleep(duration)
            with self.lock:
                if self.active:
                    self._stop()

    def options(self) -> tuple[Any, dict[str, Any]]:
        """What start_trace is asked to record, built once (jax is imported by then)."""
        if self._options is None:
            self._options = self.calls.options(self.detail)
            ignored = self._options[1].get("ignored")
            if ignored:
                self.events.write(
                    schema.WINDOW_WARNING,
                    message=(
                        f"the JAX profiler did not take {', '.join(ignored)} (no such setting "
                        "in this jaxlib's ProfileOptions, or it reads back different): the "
                        "trace records more than pgle asked and its export takes longer"
                    ),
                )
        return self._options

    def _start(self, purpose: str) -> None:
        target = self.dir if purpose != "executions" else self._scratch()
        if target is None:  # no spec: nothing asked for a trace
            return
        options, record = self.options()
        try:
            self.calls.start(target, options)
        except Exception as e:  # another session (auto PGLE, the script's own) holds the profiler
            self.events.write(schema.TRACE_ERROR, error=f"{type(e).__name__}: {e}")
            self.done = True
            return
        self.active = purpose
        self.target = target
        self.started_at = self.calls.clock()
        self._edge()
        self.events.write(schema.TRACE_START, dir=target, purpose=purpose, options=record)

    def _edge(self) -> None:
        """A trace starts or stops: the watcher's held executions go no further than here."""
        if self.jits is not None:
            self.jits.trace_edges += 1

    # -- the size bound (--trace-max-bytes) ---------------------------------
    def _probe_start(self, index: int) -> None:
        """Trace step `index` alone (the step before the window) to learn a step's bytes."""
        self.probed = True
        target = os.path.join(self.dir, ".probe") if self.dir else None
        if target is None:
            return
        shutil.rmtree(target, ignore_errors=True)
        try:
            self.calls.start(target, self.options()[0])
        except Exception as e:  # the profiler is held: no probe, the window as asked
            self.events.write(
                schema.TRACE_PROBE, step=index, steps=self.count, error=f"{type(e).__name__}: {e}"
            )
            return
        self.active = "probe"
        self.target = target
        # Said before it is written: a process that dies in the probe's stop_trace (a crash
        # in the profiler's teardown) is then told apart from one that died before the window.
        self.events.write(schema.TRACE_PROBE, step=index, steps=self.count)

    def _probe_stop(self, index: int) -> None:
        self.calls.settle()
        started = self.calls.clock()
        target, self.active, self.target = self.target, None, None
        try:
            self.calls.stop()
        except Exception as e:
            self.events.write(
                schema.TRACE_PROBE, step=index, steps=self.count, error=f"{type(e).__name__}: {e}"
            )
            return
        seconds = self.calls.clock() - started
        size = _tree_bytes(target) if target else 0
        if target:
            shutil.rmtree(target, ignore_errors=True)
        asked = self.count
        if size > 0:
            self.count = max(1, min(self.count, self.max_bytes // size))
        self.events.write(
            schema.TRACE_PROBE, step=index, bytes=size, stop_trace_seconds=seconds, steps=self.count
        )
        if self.count < asked:
            message = (
                f"--trace-max-bytes {self.max_bytes}: step {index} alone traced to {size} bytes, "
                f"so the window holds {plural(self.count, 'step')} "
                f"(steps {self.start_step}..{self.start_step + self.count - 1}), not {asked}"
            )
            self.events.write(schema.WINDOW_WARNING, message=message, early=True)
            _say(f"warning: {message}")

    def _scratch(self) -> str | None:
        # An execution window's trace is dropped if markers show up; keep it apart until then.
        return os.path.join(self.dir, ".executions") if self.dir else None

    def _stop(self, discard: bool = False, reason: str | None = None) -> None:
        self.calls.settle()
        # The window ends once the device work is done; stop_trace's own shutdown
        # (seconds, writing the trace) is not part of it.
        ended = self.calls.clock()
        seconds = ended - self.started_at
        if not discard:
            self.events.write(schema.TRACE_EXPORT, purpose=self.active)
        try:
            self.calls.stop()
        except Exception as e:
            self.events.write(schema.TRACE_ERROR, error=f"{type(e).__name__}: {e}")
        stop_seconds = self.calls.clock() - ended
        purpose, target = self.active, self.target
        self.active = None
        self._edge()
        if discard:
            if target is not None:
                shutil.rmtree(target, ignore_errors=True)
            self.events.write(schema.TRACE_DISCARD, dir=target)
            return
        self.stop_reason = reason
        if (
            purpose == "executions"
            and target is not None
            and self.dir is not None
            and os.path.isdir(target)
        ):  # absent when stop_trace failed before writing
            # Nothing marked steps: the execution window is the window; move it in place.
            for name in os.listdir(target):
                shutil.move(os.path.join(target, name), os.path.join(self.dir, name))
            os.rmdir(target)
        self.done = True
        size = _tree_bytes(self.dir) if self.dir else None
        if size is not None and self.max_bytes and size > self.max_bytes:
            self.events.write(
                schema.WINDOW_WARNING,
                message=(
                    f"the trace is {size} bytes, over --trace-max-bytes {self.max_bytes}"
                    + (
                        ""
                        if purpose == "window" and self.seen_steps
                        else " (only a step window is bounded before it is written)"
                    )
                ),
            )
        self.events.write(
            schema.TRACE_STOP,
            dir=self.dir,
            purpose=purpose,
            seconds=seconds,
            stop_trace_seconds=stop_seconds,
            first_step=self.first_step_in_trace,
            steps=self.steps_in_trace if purpose == "window" and self.seen_steps else None,
            reason=reason,
            function=self.hot_name if purpose == "executions" else None,
            first_execution=self.first_execution if purpose == "executions" else None,
            executions=self.executions_in_trace if purpose == "executions" else None,
            bytes=size,
        )


def _tree_bytes(root: str) -> int:
    """The bytes of the files under `root` (a trace folder pgle's window made), links not
    followed."""
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _wait_for_devices() -> None:
    """Finish queued device work so the trace holds whole steps (async dispatch)."""
    import jax

    try:
        live: Callable[[], list[Any]] = jax.live_arrays  # unannotated in jax 0.10.2
        for array in live():
            array.block_until_ready()
    except Exception:
        pass
    with contextlib.suppress(Exception):
        barrier: Callable[[], None] = jax.effects_barrier  # unannotated in jax 0.10.2
        barrier()


class Harness:
    """One harnessed process of the workload. `home`: the folder of its events, stacks and
    trace (the run folder; in command mode, procs/<pid>/ for every process but the first to
    import jax)."""

    def __init__(
        self, spec: schema.HarnessSpec, home: str | None = None, calls: ProfilerCalls | None = None
    ):
        default = os.path.dirname(os.path.abspath(spec.events))
        self.home = home or default
        if home is not None and os.path.abspath(home) != default and spec.profile is not None:
            spec = dataclasses.replace(
                spec, profile=dataclasses.replace(spec.profile, dir=os.path.join(home, "trace"))
            )
        self.spec = spec
        events = spec.events if home is None else os.path.join(home, os.path.basename(spec.events))
        self.events = Events(events)
        self.window = ProfilerWindow(spec.profile, self.events, calls)
        self.jits = JitCounter()
        self.beacon = _Beacon(self.home, self.jits)
        self.events.on_tick.append(self.beacon.tick)
        self.step_name = (spec.profile.step_name if spec.profile else None) or spec.step_name
        self.step_index = 0  # steps entered so far
        self._indices = itertools.count()
        self.other_step_names: list[str] = []
        self.jax_ready = False
        self.backend_recorded = False
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.finished = False

    def start(self) -> None:
        """Before the workload's code (script mode), or at its `import jax` (command mode)."""
        self.events.write(
            schema.START,
            pid=os.getpid(),
            argv=sys.argv,
            python=sys.version.split()[0],
            ppid=os.getppid(),
        )
        _flush_before_os_exit(self)
        tracebacks.install()
        _register_stack_dump(self.home, self.events)

    # -- jax hooks ----------------------------------------------------------
    def install(self) -> None:
        if "jax" in sys.modules and hasattr(sys.modules["jax"], "profiler"):
            self.on_jax_imported()
        else:
            sys.meta_path.insert(0, _JaxImportHook(self.on_jax_imported))
        self._capture_warnings()

    def on_jax_imported(self) -> None:
        if self.jax_ready:
            return
        self.jax_ready = True
        import jax
        import jax.monitoring
        import jax.profiler

        jax.profiler.StepTraceAnnotation = self.step_class(  # type: ignore[misc]
            jax.profiler.StepTraceAnnotation
        )  # a subclass in its place: the workload's steps are seen (jax exports it as a type)
        _hook_profiler(jax.profiler, self.window)
        if self.spec.count_jits or self.window.counting:
            # Counted in every run that reads them (not only for a window): the step's
            # executions are the step times of a script without markers, and its module leads
            # the module lists.
            self.window.jits = self.jits
            window = self.window
            # JitCounter.consider_light: not once steps are marked (their completions need
            # each call's outputs) nor while the execution window counts calls
            self.jits.may_go_light = lambda: not self.step_index and not window.counting
            if self.spec.export_dir:
                from pgle.launch import step_export  # importable: see the schema import above

                self.jits.export = step_export.Exporter(self.spec.export_dir)
            jax.jit = _counting(jax.jit, "jit", self.jits, self.window)
            jax.pmap = _counting(jax.pmap, "pmap", self.jits, self.window)
            _hook_pjit(self.jits, self.window)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)
        for entry in self.spec.capture_loggers:
            _capture_logger(entry["name"], entry.get("level", "DEBUG"), self.events)
        events, hlo_dir = self.events, os.path.join(self.home, "hlo")
        if self.spec.observe_pgle:  # per-execution auto PGLE events; the verdict works without
            ok = _observe(events, lambda j: j.observe_pgle(events.write, _count_execution))
            events.write(schema.OBSERVE_PGLE, installed=ok)
        # Per-module FLOPs, memory and scheduled HLO for `pgle report`; nothing depends on them.
        ok = _observe(events, lambda j: j.observe_modules(events.write, hlo_dir))
        events.write(schema.OBSERVE_MODULES, installed=ok)
        if self.spec.hold:
            from pgle.launch import jax_internals  # importable: see the schema import above

            jax_internals.defer_distributed_shutdown()
        _exclude_own_frames()
        self.events.write(schema.JAX_IMPORTED, version=getattr(jax, "__version__", None))

    # jax.monitoring calls its listeners in the thread that records the event, and jax
    # records the compile's cache events (compiler.compile_or_get_cached) and its
    # backend-compile duration (pxla._cached_compilation, around that call) in the compiling
    # thread (jax 0.10.2). So the thread written here is the compile's: with several threads
    # compiling at once, pgle.evidence.compiles pairs each event with its own compile (#33).
    def _on_duration(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event != BACKEND_COMPILE_EVENT:
            return
        fun_name = kwargs.get("fun_name")
        fun_name = str(fun_name) if fun_name is not None else None
        self.events.write(
            schema.COMPILE,
            fun_name=fun_name,
            seconds=duration_secs,
            thread=str(threading.get_native_id()),
        )
        self.jits.compiled(_depth.name, fun_name)
        if not self.backend_recorded:
            self._check_xla_flags()
        self._record_backend()
        self.window.on_backend_up()

    def _on_event(self, event: str, **kwargs: object) -> None:
        # The persistent cache's events are the only ones jax records by name (0.4.35-0.12,
        # checked in the lane's 13 venvs: none names PGLE).
        if event.startswith("/jax/compilation_cache/"):
            self.events.write(
                schema.JAX_EVENT,
                event=event,
                thread=str(threading.get_native_id()),  # the compile's (see above)
                **{k: str(v) for k, v in kwargs.items() if k != "thread"},
            )

    def _check_xla_flags(self) -> None:
        """XLA read XLA_FLAGS when the backend came up; a script that assigned it (instead of
        appending) dropped pgle's flags. Say so now, while the run goes on."""
        expected = self.spec.expected_xla_flags
        if not expected:
            return
        effective = os.environ.get("XLA_FLAGS", "")
        try:
            from pgle.xla.flags import XlaFlags  # importable: see the schema import above

            have = {f.name: f.raw for f in XlaFlags.parse(effective).flags}
        except Exception:  # not flags XLA could read (FlagError): its words, as they stand
            have = {t.split("=", 1)[0].lstrip("-"): t for t in effective.split()}
        missing = sorted(name for name, raw in expected.items() if have.get(name) != raw)
        self.events.write(schema.XLA_FLAGS_SEEN, effective=effective, missing=missing)
        if missing:
            shown = " ".join(expected[n] for n in missing)
            _say(
                f"warning: the workload replaced XLA_FLAGS before XLA read it, so pgle's "
                f"{shown} never reached XLA (XLA_FLAGS is now {effective!r}). Make the script "
                "append: os.environ['XLA_FLAGS'] = os.environ.get('XLA_FLAGS', '') + ' ...'"
            )

    def _record_backend(self) -> None:
        with self.lock:
            if self.backend_recorded:
                return
            self.backend_recorded = True
        import jax

        try:
            devices = jax.devices()
            self.events.write(
                schema.BACKEND,
                platform=jax.default_backend(),
                device_count=len(devices),
                local_device_count=jax.local_device_count(),
                device_kind=devices[0].device_kind if devices else None,
                process_index=jax.process_index(),
                process_count=jax.process_count(),
            )
        except Exception as e:
            self.events.write(schema.BACKEND_ERROR, error=f"{type(e).__name__}: {e}")

    # -- steps --------------------------------------------------------------
    def step_class(self, base: Any) -> type[Any]:
        """jax's StepTraceAnnotation (`base`) with pgle's step hooks inline in its `__init__`
        and `__exit__`: the user's training loop runs them every marked step, between
        executions that evict the interpreter's state from the CPU's caches, so each frame,
        lock and attribute counted several times over what a bare loop of the hooks shows
        (issue 25); a hook in a frame of its own was two frames more a step (issue 33). A
        step's edges wait in the events buffer as int64 numbers, written out as they are
        (pgle.evidence.step_file) by the flusher thread while the loop waits on the device."""
        harness, events, window = self, self.events, self.window
        put, edge, ids, name_id = events._steps.frombytes, _EDGE, events._names, events.name_id
        indices = self._indices
        step_name, others = self.step_name, self.other_step_names
        idle = window.mode in (None, "time")  # a mode no step opens a window in
        depth, jits = _depth, self.jits
        marks = jits.steps
        rows, pending, done_row = marks.rows.frombytes, marks.pending, _COMPLETION_ROW
        from pgle.launch import jax_internals  # importable: see the schema import above

        (base_init, extra), base_exit = jax_internals.step_trace_init(base), base.__exit__
        arrays: tuple[type, ...] = ()  # jax's array class, once a step's outputs are seen
        streak = skip = 0  # steps ready by their marker's end in a row; steps left to skip

        class StepTraceAnnotation(base):  # type: ignore[misc]  # jax's class, known at run time
            __doc__ = base.__doc__

            def __init__(self, name: str, **kwargs: Any) -> None:
                # The step counts (and the window may start) here, before the base class
                # constructs its TraceMe: jaxlib's TraceMe decides at construction whether
                # the profiler records it (jax 0.10.2), so a trace started in __enter__
                # would miss the first step of the window.
                if step_name and name != step_name:
                    if name not in others and len(others) < 5:
                        others.append(name)  # for the warning on a mistyped --step-name
                    self._pgle_index = None
                    base_init(self, name, **extra, **kwargs)  # not super(): every step (issue 25)
                    return
                # the step's completion: that of the work dispatched inside it
                depth.cell[1] = None
                index = self._pgle_index = next(indices)  # atomic under the GIL: no lock
                harness.step_index = index + 1
                if index == LIGHT_AFTER_STEPS and not window.counting:
                    jits.marked = True  # JitCounter: executions only from now on
                # window.on_step_enter's own first test, without its frame
                if not (window.seen_steps and window.active is None and (window.done or idle)):
                    window.on_step_enter(index)
                step_num = kwargs.get("step_num")
                if step_num is None:
                    step_num = NULL_STEP_NUM
                elif type(step_num) is not int or not NULL_STEP_NUM < step_num < 2**63:
                    # a string, a numpy integer, a huge int: one ordinary line
                    events.write(schema.STEP_ENTER, name=name, step_num=step_num, index=index)
                    base_init(self, name, **extra, **kwargs)
                    return
                known = ids.get(name)
                put(edge(_now_ns(), index, step_num, name_id(name) if known is None else known))
                if events._through:
                    events.flush()
                base_init(self, name, **extra, **kwargs)

            def __exit__(self, kind: Any, value: Any, tb: Any) -> Any:
                nonlocal arrays, streak, skip
                result = base_exit(self, kind, value, tb)  # no tuple of them built
                index = self._pgle_index
                if index is None:
                    return result
                t = _now_ns()
                put(edge(-t, index, 0, 0))
                if events._through:
                    events.flush()
                cell = depth.cell
                out = cell[1]
                if out is not None and index < MAX_STARTS:
                    # StepCompletions, inline: a frame and its attribute reads were most of
                    # its cost on a short step that syncs
                    cell[1] = None
                    if skip:
                        skip -= 1  # a loop that syncs: one step in SYNCED_EVERY is checked
                    else:
                        if not arrays:
                            arrays = _array_type()
                        leaf = out if type(out) in arrays else _quick_leaf(out, arrays)
                        try:
                            ready = leaf.is_ready()
                        except Exception:  # deleted (donated inside the step), or no array
                            ready = None if leaf is not None else False
                        if ready:
                            rows(done_row(index, t, jits.compiles, 1))
                        else:
                            pending(index, t, leaf, ready)
                        if ready or marks.keeps_up:
                            streak += 1
                            if streak >= SYNCED_STREAK:
                                skip = SYNCED_EVERY - 1
                        else:
                            streak = 0
                if window.active is not None:
                    window.on_step_exit(index)
                return result

        StepTraceAnnotation.__module__ = base.__module__
        StepTraceAnnotation.__qualname__ = base.__qualname__
        return StepTraceAnnotation

    # -- warnings -----------------------------------------------------------
    def _capture_warnings(self) -> None:
        original = warnings.showwarning
        events = self.events

        shown: set[tuple[str, type[Warning], str, int]] = set()
        forced = tuple(getattr(builtins, c, Warning) for c in self.spec.warnings_always)

        def showwarning(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            events.write(
                schema.WARNING,
                category=category.__name__,
                message=str(message),
                filename=filename,
                lineno=lineno,
            )
            if forced and issubclass(category, forced) and _from_jax(filename):
                # Every one is recorded; the terminal shows each once, as Python's
                # default filter would have.
                key = (str(message), category, filename, lineno)
                if key in shown:
                    return None
                shown.add(key)
            return original(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        for category in forced:
            # Only JAX's own (auto PGLE's empty-profile warning): the user's warnings keep
            # Python's default once-per-location rule.
            warnings.filterwarnings("always", category=category, module=r"jax\.")

    # -- run ------------------------------------------------------------------
    def run(self) -> int:
        """Script mode: the workload's script or module, through runpy."""
        workload = self.spec.workload
        self.start()
        self.install()
        code = 0
        try:
            if workload.module:
                sys.argv = [workload.module, *workload.args]
                sys.path[0] = os.getcwd()  # as `python -m` does
                runpy.run_module(workload.module, run_name="__main__", alter_sys=True)
            else:
                script = workload.script
                assert script is not None  # a spec names a module, a script or a command
                sys.argv = [script, *workload.args]
                sys.path[0] = os.path.dirname(script)  # as `python script.py` does
                runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = _exit_code(e.code)
            self._finish(code)
            raise
        except KeyboardInterrupt:
            # Python prints it (without pgle's frames: pgle.launch.tracebacks) and ends the
            # process by SIGINT, as it would without pgle.
            self.finished = True
            self.events.write(schema.EXIT, code=130, interrupted=True)
            self.events.close()
            raise
        except BaseException as e:
            # As plain python prints it: the workload's frames, not the harness's or runpy's;
            # before the exit record, so that the log holds it when pgle reads it.
            sys.excepthook(type(e), e, e.__traceback__)
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            self._finish(1, error=f"{type(e).__name__}: {e}")
            sys.exit(1)
        self._finish(code)
        return code

    def _finish(self, code: int, error: str | None = None) -> None:
        if self.finished or os.getpid() != self.pid:
            return  # once, and never in a forked child (it has the parent's harness)
        self.finished = True
        try:
            if self.jax_ready:  # before jax, no window could open: nothing to say about it
                self.window.on_exit(
                    self.step_index - 1 if self.step_index else None,
                    self.step_name,
                    self.other_step_names,
                )
        except Exception as e:
            self.events.write(schema.TRACE_ERROR, error=f"{type(e).__name__}: {e}")
        try:
            self.jits.record(self.events)
        except Exception as e:  # never hide the workload's exit for a statistic
            self.events.write(schema.OBSERVE_ERROR, error=f"{type(e).__name__}: {e}")
        self.events.write(schema.EXIT, code=code, error=error)
        if self.spec.hold and self.jax_ready:
            try:
                from pgle.launch import handoff  # importable: see the schema import above

                if not handoff.hold(
                    self.home, self.events.write, self.events.flush, self.spec.hold_timeout_s
                ):
                    self.events.write(
                        schema.RELEASED, error="no jax.distributed client in this process"
                    )
            except KeyboardInterrupt:
                self.events.close()
                raise
            except Exception as e:
                self.events.write(schema.RELEASED, error=f"{type(e).__name__}: {e}")
        self.events.close()


class _Beacon:
    """The `progress` file: the count of the workload's executions, rewritten (by the events
    flusher, at most once a second) when it changed, so the stall watchdog sees executions
    that leave no event (pgle.launch.stall). A light step's calls (JitCounter.light) reach
    `_EXECUTIONS` only at its samples, which a loop that slows down after going light may not
    reach for minutes (up to LIGHT_MAX_SPAN calls): its count since the last sample is added
    here, or a healthy loop would look stalled."""

    def __init__(self, home: str, jits: JitCounter):
        self.jits = jits
        self.written = 0
        try:
            self.fd: int | None = os.open(
                os.path.join(home, schema.PROGRESS_NAME),
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666,
            )
        except OSError:
            self.fd = None

    def tick(self) -> None:
        n = _EXECUTIONS[0]
        light = self.jits.light
        if light is not None and light.beacon:
            n += max(light.count() - light.beacon, 0)  # counted since its last sample
        if n == self.written or self.fd is None:
            return
        self.written = n
        try:
            os.pwrite(self.fd, b"%d\n" % n, 0)
        except OSError:
            self.fd = None


# Executions of jitted functions so far (counted around the call, or by auto PGLE's observer).
_EXECUTIONS = [0]


def _count_execution() -> None:
    _EXECUTIONS[0] += 1


def _register_stack_dump(home: str, events: Events) -> None:
    """pgle's dump signal makes faulthandler write every thread's Python stack to
    <home>/stacks.txt (the stall watchdog, pgle.launch.stall); C code, so it answers while
    the workload's threads are blocked in jax or XLA."""
    try:
        import faulthandler
        import signal as signals

        sig = getattr(signals, schema.DUMP_SIGNAL)
        path = os.path.join(home, schema.STACKS_NAME)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
        )
        # faulthandler holds the file while the signal is registered (CPython 3.11's register
        # keeps a reference) and writes to its descriptor from the signal handler.
        stream = os.fdopen(fd, "w")
        faulthandler.register(sig, file=stream, all_threads=True, chain=False)
        events.write(
            schema.STACKS,
            file=path,
            signal=int(sig),
            main_thread=hex(threading.main_thread().ident or 0),
        )
    except (OSError, ValueError, RuntimeError, AttributeError) as e:
        events.write(schema.OBSERVE_ERROR, error=f"stack dump: {type(e).__name__}: {e}")


def _exclude_own_frames() -> None:
    """jax's traceback filter drops pgle's wrappers too (pgle.launch.jax_internals)."""
    try:
        from pgle.launch import jax_internals  # importable: see the schema import above

        here = os.path.dirname(_HERE)
        jax_internals.exclude_from_jax_tracebacks(
            [_HERE, os.path.join(here, "jax_internals.py"), os.path.join(here, "boot")]
        )
    except Exception:
        pass


class _JaxImportHook(importlib.abc.MetaPathFinder):
    """Calls `on_import()` right after the workload's own `import jax` completes."""

    def __init__(self, on_import: Callable[[], None]):
        self.on_import = on_import

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.loader is None:
            return spec
        loader, on_import = spec.loader, self.on_import
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            on_import()

        loader.exec_module = exec_module  # type: ignore[method-assign]  # on purpose: see above
        return spec


# jax.profiler.start_trace/stop_trace before the hooks: pgle's own calls
_ORIGINAL: dict[str, Callable[..., Any]] = {}
_HERE = os.path.abspath(__file__)


def _say(text: str) -> None:
    """A `pgle:` line on the workload's stderr (the terminal, and the log)."""
    try:
        sys.stderr.write(f"pgle: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _from_jax(filename: str) -> bool:
    """A file of the jax package imported here; not the workload's own file that lies in a
    folder named jax (a checkout's examples/), which is no frame to skip."""
    jax = sys.modules.get("jax")
    root = os.path.dirname(getattr(jax, "__file__", None) or "")
    return bool(root) and (filename or "").startswith(root + os.sep)


def _call_site(frame: FrameType | None) -> str:
    """file:line of the workload's call into a hooked jax.profiler function: the first frame
    from `frame` (the hook's own) outward that is neither pgle's, contextlib's nor jax's. The
    hook hands over its frame: no count of frames depends on how this function is called."""
    import contextlib as _cl

    while frame is not None and (
        frame.f_code.co_filename in (_HERE, _cl.__file__) or _from_jax(frame.f_code.co_filename)
    ):
        frame = frame.f_back  # jax's start_trace/trace call ProfileSession.start (jax 0.12)
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


_OWN = threading.local()


@contextlib.contextmanager
def _pgle_own() -> Iterator[None]:
    """pgle's own profiler calls: the hooks below let them through unseen."""
    _OWN.active = True
    try:
        yield
    finally:
        _OWN.active = False


def _hook_profiler(profiler: ModuleType, window: ProfilerWindow) -> None:
    """The workload's own jax.profiler.start_trace/stop_trace/trace (MaxText `profiler: xplane`,
    levanter `--profiler`) go through pgle's window: pgle gives way to the script's trace.

    jax >= 0.12 has a public `jax.profiler.ProfileSession` (start_trace returns one, trace
    yields one, scripts may start one directly; one at a time): there the session's own
    start/stop are hooked, which sees every way in, and the public functions stay jax's own
    (so `trace` yields the real session). Older jax: the three functions are wrapped (their
    `trace` yields None, as jax's does)."""
    if _ORIGINAL:
        return
    start, stop = _ORIGINAL["start_trace"], _ORIGINAL["stop_trace"] = (
        profiler.start_trace,
        profiler.stop_trace,
    )
    session = getattr(profiler, "ProfileSession", None)
    if (
        session is not None
        and callable(getattr(session, "start", None))
        and callable(getattr(session, "stop", None))
    ):
        _hook_session(session, window)
        return

    def start_trace(log_dir: object, *args: Any, **kwargs: Any) -> Any:
        window.on_script_start(_call_site(sys._getframe()), log_dir)
        return start(log_dir, *args, **kwargs)

    def stop_trace() -> Any:
        try:
            return stop()
        finally:
            window.on_script_stop(_call_site(sys._getframe()))

    @contextlib.contextmanager
    def trace(log_dir: object, *args: Any, **kwargs: Any) -> Iterator[None]:
        start_trace(log_dir, *args, **kwargs)
        try:
            yield
        finally:
            stop_trace()

    for name, fn in (("start_trace", start_trace), ("stop_trace", stop_trace), ("trace", trace)):
        original = getattr(profiler, name)
        fn.__doc__, fn.__name__ = original.__doc__, original.__name__
        setattr(profiler, name, fn)


def _hook_session(session_cls: type[Any], window: ProfilerWindow) -> None:
    """jax >= 0.12: `ProfileSession.start`/`stop` tell the window about the workload's own
    sessions (not pgle's: `_pgle_own`). A session with no log_dir keeps its trace in memory;
    once it stops, pgle exports it where its own window would have written (collect converts
    it; `ProfileSession.export_profile_data`, jax 0.12)."""
    original_start, original_stop = session_cls.start, session_cls.stop

    def start(self: Any) -> Any:
        if not getattr(_OWN, "active", False):
            window.on_script_start(_call_site(sys._getframe()), getattr(self, "log_dir", None))
        return original_start(self)

    def stop(self: Any) -> Any:
        if getattr(_OWN, "active", False):
            return original_stop(self)
        site = _call_site(sys._getframe())
        exported = None
        try:
            result = original_stop(self)
            if getattr(self, "log_dir", None) is None and window.mode is not None:
                try:
                    with _pgle_own():
                        self.export_profile_data(window.dir)
                    exported = str(window.dir)
                except Exception as e:  # the workload's session is its own: never break it
                    window.events.write(schema.TRACE_ERROR, error=f"{type(e).__name__}: {e}")
            return result
        finally:
            window.on_script_stop(site, exported)

    for name, fn in (("start", start), ("stop", stop)):
        original = getattr(session_cls, name)
        fn.__doc__, fn.__name__, fn.__qualname__ = (
            original.__doc__,
            original.__name__,
            original.__qualname__,
        )
        setattr(session_cls, name, fn)


class _Depth(threading.local):
    """Per thread: the counted call running (`name`, None outside one; an AOT compile sets it
    too). `cell`: [1 inside a counted call else 0, the outputs of this thread's last
    top-level counted call since its marked step began (None: none yet), what a marked
    step's completion is waited on (StepCompletions)]. A marked step with a jitted call read
    or set these seven times; each read or write of a thread-local's attribute looks up the
    thread's dict first, so the hot paths fetch the list once and index it (issue 33)."""

    name: str | None = None

    def __init__(self) -> None:  # in each thread, at its first use
        self.cell: list[Any] = [0, None]


_depth = _Depth()
LIGHT_AFTER_STEPS = 20  # marked steps after which a jitted call only counts (JitCounter.marked)
# An unmarked loop's step function goes light (JitCounter.consider_light) once it has this many
# executions and LIGHT_AFTER_KNOWN of them have a known work share, and the rule picks it.
LIGHT_AFTER_EXECUTIONS = 100
LIGHT_AFTER_KNOWN = 10
# The watcher's thread asks the rule again at most this often: while no function is light
# (the full count, ~6 us a call, runs until the rule settles: at 50 ms a 30,000-step 16x16 loop
# of ~0.3 s ran 3,468 executions, 12%, at full count, issue 33), and once one is (whether it
# still should be; each ask takes the counter's lock the full count takes too).
LIGHT_SETTLE_CHECK_S = 0.005
LIGHT_CHECK_S = 0.05
# A light function's executions are sampled about this often (seconds; a span of at most
# LIGHT_MAX_SPAN executions): each sample wakes the watcher's thread, whose GIL hand-offs
# cost a dispatch-bound loop far more than the work they do on a loaded machine (issue 33:
# a sample every 1 ms cost a 16x16 loop ~20%, every 10 ms ~10%, every 100 ms ~2%).
LIGHT_SAMPLE_S = 0.05
LIGHT_MAX_SPAN = 5000
# A frameless light function (_Light.enter) is sampled when the watcher's thread asks, and the
# executions after the last sample are counted but not timed (no output is kept to wait on):
# the ask comes LIGHT_SAMPLE_SHARE of the light phase's age after the last sample (at least
# LIGHT_FIRST_SAMPLE_S, at most LIGHT_SAMPLE_S), so a loop that ends leaves at most about that
# share of its light executions untimed, and a long one is sampled every LIGHT_SAMPLE_S.
LIGHT_SAMPLE_SHARE = 0.05
LIGHT_FIRST_SAMPLE_S = 0.002
MAX_STARTS = 100_000  # start times kept per function (the step's go to the events file)
TOP_FUNCTIONS = 20  # functions listed in the jit_functions event


class JitCounter:
    """Per jitted function (by the name jax gives its module): top-level executions, the host
    time they account for, and their start times; `pgle.launch.step_rule` picks the step.

    No public jax hook sees executions: jitted calls take jaxlib's C++ fast path (jax 0.10.2),
    so they are counted around the call, one lock and one clock read per top-level call.

    `marked`: the workload marks its steps and LIGHT_AFTER_STEPS of them ran. Its step times
    come from the markers, and the step function is picked from what was counted so far, so
    from then on a call only counts its execution (the module rows' `executions`): no clock,
    no lock, no start time (issue 25: the full count was a third of a short marked step's
    cost under pgle).

    `light`: a loop without markers whose step function is known (`consider_light`): its
    calls only count, and one in several (about one every LIGHT_SAMPLE_S, _light_sample) is
    timed and handed to the CompletionWatcher, whose span of the executions in between
    gives their step time (issue 33: the full count and hand-over were ~80% of a 16x16
    step's cost). Other functions keep the full count."""

    def __init__(self) -> None:
        self.marked = False
        self.marked_classes: dict[tuple[type, str], type] = {}  # _marked_class, by proxy class
        self.lock = threading.Lock()
        self.stats: dict[str, list[Any]] = {}  # name -> [executions, seconds after the first]
        self.starts: dict[str, list[float]] = {}
        # (name, start, number, row, the light function's executions then)
        self.last: tuple[str, float, int, list[Any], int] | None = None
        self.light: _Light | None = None  # the function whose calls only count, if any
        self.dark: _Light | None = None  # the last one unlit while frameless
        self.may_go_light: Callable[[], bool] = lambda: False  # set by the harness
        # name -> the module XLA compiled for it: the last compile while its first execution
        # (or its AOT `.compile()`) ran; the eager jits its tracing runs compile before it.
        # jax 0.10.2 compiles `jax.pmap(f)` as `jit__fun` (a jit of a shard_map), not pmap_f.
        self.modules: dict[str, str] = {}
        # `pgle estimate`: called with (name, jitted, args, kwargs) at a function's
        # step_rule.MIN_EXECUTIONS-th execution (pgle.launch.step_export).
        self.export: Callable[[str, Any, tuple[Any, ...], dict[str, Any]], None] | None = None
        self.compiles = 0  # backend compiles so far: a span holding one is no step's work
        # profiler starts and stops so far (ProfilerWindow._edge): the watcher holds no
        # execution across one, so a span ends at the kept trace's edges and the steps outside
        # it are timed (a loop of sub-millisecond steps was one span across the whole trace)
        self.trace_edges = 0
        self.watcher = CompletionWatcher(self)
        self.steps = StepCompletions(self)
        # name -> [[start, seconds of work each, the span's completion, last number,
        # compiles, executions]]: consecutive executions that completed together, one row
        self.work: dict[str, list[list[Any]]] = {}
        self.work_sum: dict[str, list[Any]] = {}  # name -> [seconds, known, unknown]

    def compiled(self, name: str | None, fun_name: str | None) -> None:
        """XLA compiled `fun_name` (jax's `jit(f)`) while `name` ran."""
        self.compiles += 1
        if not name or not fun_name:
            return
        with self.lock:
            if (self.stats.get(name) or [0])[0] <= 1:
                self.modules[name] = step_rule.module_of(fun_name)

    def begin(self, name: str) -> tuple[int, float]:
        """An execution of `name` starts; returns its number (1-based) and its start. The
        previous call's host time ends here (its first execution, with the compile, is not
        counted)."""
        t = _now()
        with self.lock:
            row = self.stats.get(name)
            if row is None:
                row = self.stats[name] = [0, 0.0]
                self.starts[name] = []
            n = row[0] = row[0] + 1
            last = self.last
            light = self.light
            counted = light.row[0] if light is not None else 0
            # light executions since the last call: its host time is not its own
            if last is not None and last[2] > 1 and last[4] == counted:
                last[3][1] += t - last[1]
            self.last = (name, t, n, row, counted)
            starts = self.starts[name]
            if len(starts) < MAX_STARTS:
                starts.append(t)
            return n, t

    def sampled(self, name: str, t: float) -> None:
        """A light function's sampled execution started at `t` (counted already)."""
        with self.lock:
            starts = self.starts.get(name)
            if starts is not None and len(starts) < MAX_STARTS:
                starts.append(t)
            self.last = None  # light executions ran since: no host time to give

    def worked(
        self,
        span: list[tuple[str, float, int, int]],
        seconds: float | None,
        done: float,
        c: int,
    ) -> None:
        """The watcher's share of a span of executions between two known completions: each
        entry (name, start, number, executions: that many ending with `number`) took
        `seconds` of work an execution (None: unknown, the span held a compile), and completed
        by `done`, after `c` backend compiles. The work ranks the step (pgle.launch.step_rule);
        `done` and the numbers time it from completion to completion (pgle.evidence.jit_steps:
        the loop's throughput). Consecutive executions that completed together are one row."""
        with self.lock:
            for name, t, n, k in span:
                agg = self.work_sum.get(name)
                if agg is None:
                    agg = self.work_sum[name] = [0.0, 0, 0]  # seconds, known, unknown
                    self.work[name] = []
                if seconds is None:
                    agg[2] += k
                else:
                    agg[0] += seconds * k
                    agg[1] += k
                # A span of unknown work keeps its row too: its completion is where the next
                # span's time starts (a loop of 16 sub-millisecond steps is one held span
                # after the two that compiled: without theirs, no step time at all).
                rows = self.work[name]
                last = rows[-1] if rows else None
                if (
                    last is not None
                    and last[2] == done
                    and last[3] == n - k
                    and (last[1] is None) == (seconds is None)
                ):
                    last[3] = n
                    last[5] += k
                elif len(rows) < MAX_STARTS:
                    rows.append([t, seconds, done, n, c, k])

    def least_work(self) -> dict[str, float]:
        """Per function, the least work per execution over its known spans (seconds)."""
        with self.lock:
            least = {}
            for name, rows in self.work.items():
                known = [r[1] for r in rows if r[1] is not None]
                if known:
                    least[name] = min(known)
            return least

    def consider_light(self) -> None:
        """In the watcher's thread: the function the rule picks, once its ranking is settled
        (LIGHT_AFTER_EXECUTIONS executions, LIGHT_AFTER_KNOWN with known work, every candidate
        ranked by work), goes light; the light one stops being light when the rule picks
        another or when it may no longer be (steps marked, a counting profiler window)."""
        light = self.light
        if self.marked or not self.may_go_light():
            if light is not None:
                self.unlight()
            return
        functions = self.snapshot()
        step = step_rule.pick(functions)
        if step is None or not step_rule.by_work(functions):
            if light is not None:
                self.unlight()
            return
        if light is not None:
            if light.name != step["function"]:
                self.unlight()
            return
        if step["executions"] >= LIGHT_AFTER_EXECUTIONS and step["work_known"] >= LIGHT_AFTER_KNOWN:
            with self.lock:
                row = self.stats[step["function"]]
            light = _Light(step["function"], row)
            light.per_exec = step["work_s"] / step["work_known"]
            self.light = light

    def unlight(self) -> None:
        """Back to the full count: each light proxy swaps back at its next call."""
        light, self.light = self.light, None
        if light is not None:
            light.off = True
            light.due[0] = 0
            if light.frameless:
                light.arm()  # its next call goes framed, then back to the full count
                self.dark = light  # ...or, if none comes, its count is folded at exit

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            out = []
            for n, r in self.stats.items():
                agg = self.work_sum.get(n) or [0.0, 0, 0]
                out.append(
                    {
                        "function": n,
                        "module": self.modules.get(n) or step_rule.module_of(n),
                        "executions": r[0],
                        "seconds": r[1],
                        "work_s": agg[0],
                        "work_known": agg[1],
                        "reached": agg[1] + agg[2],  # executions the watcher timed or not
                    }
                )
            return out

    def record(self, events: Events) -> None:
        """The `jit_functions` event: the busiest functions, the step, its start times and
        its executions' work (pgle.launch.step_rule); the marked steps' completions."""
        self.watcher.finish(WATCH_DRAIN_S)
        self.steps.record(events)
        functions = sorted(
            self.snapshot(), key=lambda f: (-step_rule.weight(f), -f["seconds"], -f["executions"])
        )
        if not functions:
            return
        step = step_rule.pick(functions)
        with self.lock:
            starts = list(self.starts.get(step["function"], ())) if step else []
            work = list(self.work.get(step["function"], ())) if step else []
        events.write(
            schema.JIT_FUNCTIONS,
            functions=functions[:TOP_FUNCTIONS],
            step=step["function"] if step else None,
            module=step["module"] if step else None,
            starts=[round(t, 6) for t in starts],
            work=[
                [round(t, 6), None if w is None else round(w, 9), round(d, 6), n, c, k]
                for t, w, d, n, c, k in work
            ],
            watch=self.watcher.summary(),
            rule=step_rule.describe(step is None or step_rule.by_work(functions)),
        )


WATCH_DRAIN_S = 30.0  # at exit, the longest pgle waits for the last executions to complete
WAKE_EVERY_NS = 1_000_000  # the watcher is woken from idle for a marked step at most this often
# While the outputs the watcher reaches have completed already (the device keeps up with the
# host: a dispatch-bound loop), an execution is handed to it at most this often (seconds).
WAKE_EVERY_S = WAKE_EVERY_NS / 1e9
# After SYNCED_STREAK marked steps in a row whose outputs were ready by their marker's end (a
# loop that syncs) or had completed when the watcher reached them (the device keeps up), one
# step in SYNCED_EVERY is checked (the time between two checked steps is shared among them)
# until one is behind: a check was ~1 us of a short step's 5 us budget.
SYNCED_STREAK = 32
SYNCED_EVERY = 8


def _array_type() -> tuple[type, ...]:
    """jax's concrete array class, for a type test that costs no isinstance walk."""
    try:
        from jax._src.array import ArrayImpl  # jax 0.4.1 .. 0.10.2

        return (ArrayImpl,)
    except Exception:
        import jax

        return (jax.Array,)


_DELETED = object()  # a held execution's output, freed before the watcher could wait on it


def _ready_at(leaf: Any) -> float | None:
    """In the workload's thread, as a call returns: now, if its output is ready already (jax
    0.10.2 on CPU runs a small computation inside the call), else None. The watcher's thread
    reaches an output later, by as much as its wake-up takes on a loaded machine: a ready
    output's completion would then be known only to be before that, and a cheap helper's
    span would take the wake-up, and the step's work after it, as its own (issue 33: under
    load `jit(next_batch)` measured 0.6 ms to the step's 0.04 ms and was profiled)."""
    if leaf is None:
        return None
    try:
        return _now() if leaf.is_ready() else None
    except Exception:  # donated or deleted already: the watcher counts it as unknown
        return None


class CompletionWatcher:
    """When each execution's work completes, without a sync in the workload (issue 33).

    jax dispatches asynchronously: a jitted call returns once its work is queued, so the gap
    between two calls' starts is how fast the host enqueues. The counted call hands one leaf
    of what it returned to this thread, which waits on it (`block_until_ready` releases the
    GIL; the workload's loop keeps its pipelining) and notes when it became ready. The work of
    the executions between two known completions is the gap between those completions (from
    the first one's start when the device was idle before it), shared equally among them: it
    ranks the step. Each execution also keeps its span's completion time, from which the step
    function's executions are timed completion to completion (the loop's throughput).

    Donation: a later call may donate the leaf before this thread reaches it; waiting on a
    deleted array raises (jax 0.10.2: INVALID_ARGUMENT, "called on deleted or donated
    buffer"), and that completion is unknown: the span runs on to the next known one (the
    step's last output, donated by no later call, always is). A span holding a compile is
    unknown. Nothing is held after its completion, so a step's outputs live no longer.

    Rate: each execution handed over wakes the thread, whose GIL hand-offs cost a loop of tiny
    steps ~4 us a call (issue 33: a dispatch-bound loop of 16x16 matmuls ran 1.4x slower).
    While the last output the thread reached had completed already, or did within
    WAKE_EVERY_S of its call (`keeps_up`: the device keeps up with the host, so completions
    only trail dispatches; with asynchronous dispatch the output reached is mostly the one
    the device is running, so "completed already" alone turned holding off every few
    executions and woke the thread ~3x as often), further executions of the
    same function are handed over at most once every WAKE_EVERY_S, and none is held across
    a profiler start or stop (JitCounter.trace_edges); the ones in between are
    held as (name, start, number, compiles), no output kept alive, and ride along with the
    next one handed over: its span holds them and shares its time equally among them, as a
    donated output's span does, which is the loop's throughput. A compile among them still
    makes the span unknown. When another function is called (or at exit), the last held
    execution is handed over first, with its output if the workload still holds it (a weak
    reference), so a span holds one function's executions and the work ranks the step as
    before. The simplest rule that keeps every figure: once the device is behind (real steps,
    an eval that waits on the queue), the first output that completes WAKE_EVERY_S or more
    after its call turns `keeps_up` off and every execution is waited on again (a step of
    the device's own time is then timed alone); a loop that alternates functions saves nothing,
    and loses nothing."""

    def __init__(self, counter: JitCounter) -> None:
        self.counter = counter
        self.queue: queue.SimpleQueue[tuple[Any, ...] | threading.Event | None] = (
            queue.SimpleQueue()
        )
        self.thread: threading.Thread | None = None
        self.on = True  # off in a forked child (no thread there) and after finish
        self.busy = False  # the thread has work queued or is waiting on an output
        self.arrays: tuple[type, ...] | None = None
        self.known = self.unknown = self.no_array = self.skipped = 0
        self.keeps_up = False  # the last output the thread reached had completed already
        self.sent = 0.0  # the start of the last execution handed to the thread
        self.sent_edges = 0  # JitCounter.trace_edges then
        self.last: str | None = None  # the function of the last execution handed over
        # executions not handed over yet (name, start, number, compiles, executions: that
        # many ending with `number`), and a weak reference to the last one's output: no
        # output is kept alive by being held
        self.held: list[tuple[str, float, int, int, int]] = []
        self.tail: Callable[[], Any] | None = None
        self.tail_ready: float | None = None  # the last held one's _ready_at
        # the execution handed over last: a weak reference to its output and its completion's
        # bound, set by `_bound_prev`
        self.prev: tuple[weakref.ref[Any], list[float | None]] | None = None
        self.checked = 0.0  # when the thread last asked JitCounter.consider_light

    def put(self, name: str, n: int, t: float, out: Any) -> None:
        """In the workload's thread, after a top-level call returned: one tuple on a queue,
        or, for another execution of the function just seen while the device keeps up and
        one was handed over less than WAKE_EVERY_S ago, one on a list (no thread woken)."""
        arrays = self.arrays
        if arrays is None:
            arrays = self.arrays = _array_type()
            self._start()
        leaf = None
        kind = type(out)
        if kind in arrays:
            leaf = out
        elif kind is tuple or kind is list:
            for x in reversed(out):  # `return state, loss`: the loss, which no call donates
                if type(x) in arrays:
                    leaf = x
                    break
        if leaf is None:
            leaf = _any_leaf(out, arrays)
        light = self.counter.light
        if light is not None and light.tail[0] is not None and name != light.name:
            self._flush_light(light)  # the light function's last executions: a span first
        if name != self.last:
            self._bound_prev()
        held = self.held
        edges = self.counter.trace_edges
        if (
            name == self.last
            and self.keeps_up
            and t - self.sent < WAKE_EVERY_S
            and edges == self.sent_edges
        ):
            held.append((name, t, n, self.counter.compiles, 1))
            self.tail_ready = _ready_at(leaf)
            try:
                self.tail = None if leaf is None else weakref.ref(leaf)
            except TypeError:  # an array type without weak references: counted as none
                self.tail = None
            return
        if held and (name != self.last or edges != self.sent_edges):
            self._flush()
            if name != self.last:
                self._bound_prev()  # the held run's last execution, handed over just now
            held = self.held
        self.last, self.sent, self.sent_edges = name, t, edges
        if held:
            self.held = []
        self._hand(name, n, t, self.counter.compiles, leaf, held or None, _ready_at(leaf))

    def _hand(
        self,
        name: str,
        n: int,
        t: float,
        c: int,
        leaf: Any,
        held: list[tuple[str, float, int, int, int]] | None,
        ready_at: float | None,
    ) -> None:
        """Queue one execution for the thread, keeping a weak reference to its output: when
        another function is called before the thread reached it (`_bound_prev`), whether it
        is ready by then bounds its completion."""
        bound: list[float | None] = [None]
        self.prev = None
        if ready_at is None and leaf is not None and leaf is not _DELETED:
            with contextlib.suppress(TypeError):  # an array type without weak references
                self.prev = (weakref.ref(leaf), bound)
        self.queue.put((name, n, t, c, leaf, held, ready_at, bound))

    def _bound_prev(self) -> None:
        """In the workload's thread, as another function's call returns: the execution
        handed over last is complete by now if its output is ready (one `is_ready`, only when
        the function changes). The thread notes a completion when it gets the GIL, which on a
        loaded machine can be after the next function's work: a batch helper's span then took
        the step's work as its own and the window profiled the helper (issue 37: 4 of the 10 full
        runs of the suite, `test_the_step_is_found_in_every_form`)."""
        prev, self.prev = self.prev, None
        if prev is None:
            return
        ref, bound = prev
        leaf = ref()
        if leaf is None:
            return
        with contextlib.suppress(Exception):  # donated or deleted: the thread counts it unknown
            if leaf.is_ready():
                bound[0] = _now()

    def _flush(self) -> None:
        """Hand over the last held execution with its output (if it still exists), so that
        the next function's executions start a span of their own."""
        held, ref, ready_at = self.held, self.tail, self.tail_ready
        self.held, self.tail, self.tail_ready = [], None, None
        name, t, n, c, _ = held.pop()
        leaf = None if ref is None else ref()
        if ref is not None and leaf is None:
            leaf = _DELETED  # freed by the workload before it could be waited on
        self._hand(name, n, t, c, leaf, held or None, ready_at)

    def put_sample(self, light: _Light, n: int, t: float, out: Any) -> None:
        """A light function's sampled execution `n` (started at `t`): handed over with the
        executions counted since the last one handed over as one entry of its span."""
        if self.arrays is None:
            self.arrays = _array_type()
            self._start()
        name = light.name
        if self.held and name != self.last:
            self._flush()
        held, self.held = self.held, []
        light.tail[0] = None
        gap = n - 1 - light.sent if light.sent else 0
        if gap > 0:
            held.append((name, light.t, n - 1, self.counter.compiles, gap))
        light.sent, light.t = n, t
        self.last, self.sent = name, t
        leaf = _quick_leaf(out, self.arrays)
        self.queue.put(
            (name, n, t, self.counter.compiles, leaf, held or None, _ready_at(leaf), None)
        )

    def _flush_light(self, light: _Light) -> None:
        """Hand over the light function's last execution (its output still held) with those
        counted since the last one handed over: another function is called (or the run ends),
        and its span must not absorb theirs."""
        out, light.tail[0] = light.tail[0], None
        n = light.row[0]
        if n <= light.sent:
            return
        if self.held and light.name != self.last:
            self._flush()
        held, self.held = self.held, []
        gap = n - 1 - light.sent if light.sent else 0
        c = self.counter.compiles
        if gap > 0:
            held.append((light.name, light.t, n - 1, c, gap))
        leaf = _quick_leaf(out, self.arrays or _array_type())
        t = light.t
        light.sent, light.t = n, _now()
        self.last = light.name
        self.queue.put((light.name, n, t, c, leaf, held or None, None, None))

    def put_step(self, index: int, compiles: int, leaf: Any, end_ns: int) -> None:
        """A marked step's output to wait on (StepCompletions.pending)."""
        if self.arrays is None:
            self.arrays = _array_type()
            self._start()
        self.queue.put((None, index, end_ns, compiles, leaf, None, None, None))

    def _start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="pgle-completions", daemon=True)
        self.thread.start()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self.on = False  # the thread is not in the child: nothing would drain the queue

    def _run(self) -> None:
        get, counter = self.queue.get, self.counter
        span: list[tuple[str, float, int, int]] = []
        last_done: float | None = None
        compiles = -1
        tainted = True  # the first span: no completion before it to start from
        empty = self.queue.empty
        while True:
            if empty():
                self.busy = False
            light = counter.light
            if light is not None and light.frameless and not light.armed and not light.off:
                # A frameless loop hands nothing over by itself: ask for its next sample.
                now = _now()
                wait = light.next_ask(now) - now
                if wait <= 0:
                    light.arm()
                    continue
                try:
                    item = get(timeout=wait)
                except queue.Empty:
                    continue
            else:
                item = get()
            self.busy = True
            if item is None:
                return
            if isinstance(item, threading.Event):  # catch_up: every item before it is reached
                item.set()
                continue
            name, n, t, c, leaf, held, ready_at, bound = item
            if name is None:  # a marked step's outputs, not ready at its marker's end
                self.counter.steps.waited(n, c, leaf, t)
                del leaf, item
                continue
            if held:  # executions before this one that were not handed over (put)
                for hn, ht, hi, hc, hk in held:
                    self.skipped += hk
                    span.append((hn, ht, hi, hk))
                    if hi <= hk or hc != compiles:  # its first execution among them
                        tainted = True
                        compiles = hc
            span.append((name, t, n, 1))
            if n == 1 or c != compiles:
                tainted = True  # a compile ran in this span: the device may have idled
                compiles = c
            if leaf is None:
                self.no_array += 1
                continue
            if ready_at is not None:  # ready as its call returned: completed by then
                ready, done = True, ready_at
            elif leaf is _DELETED:
                self.keeps_up = False
                self.unknown += 1
                continue
            else:
                try:
                    # A ready output is not waited on: block_until_ready releases and retakes
                    # the GIL (jaxlib 0.10.2), a hand-off the loop pays for even when nothing
                    # waits.
                    ready = leaf.is_ready()
                    if not ready:
                        leaf.block_until_ready()
                except Exception:
                    self.keeps_up = False
                    self.unknown += 1  # donated (deleted) before it could be waited on
                    continue
                done = _now()
                if bound is not None and bound[0] is not None and bound[0] < done:
                    done = bound[0]  # ready by the next function's call (_bound_prev)
            self.keeps_up = ready or done - t < WAKE_EVERY_S
            self.known += 1
            if last_done is not None and done < last_done:
                # Ready as its call returned, before the one before it was seen complete:
                # that one was reached late (its time holds the watcher's wake-up), and where
                # this one's work began is unknown (its call may have waited on the queue).
                tainted = True
            if tainted or last_done is None:
                counter.worked(span, None, done, c)
            else:
                each = (done - max(last_done, span[0][1])) / sum(e[3] for e in span)
                counter.worked(span, each, done, c)
                light = counter.light
                if light is not None and name == light.name:
                    light.per_exec = each
            last_done, span, tainted = max(done, last_done or done), [], False
            del leaf, item  # hold no output past its completion
            if done - self.checked >= (
                LIGHT_SETTLE_CHECK_S if counter.light is None else LIGHT_CHECK_S
            ):
                self.checked = done
                counter.consider_light()

    def catch_up(self, timeout: float) -> bool:
        """In the workload's thread: hand over the held executions and wait (at most `timeout`)
        until the thread has reached every execution handed over so far, so their work is
        known (or known to be unknown). A wait on work already dispatched: the results are the
        same, the queue behind it drains once. False: timed out, or no thread. (No light
        function's executions are pending: none goes light while a window counts.)"""
        if self.thread is None or not self.on:
            return False
        if self.held:
            self._flush()
        reached = threading.Event()
        self.queue.put(reached)
        return reached.wait(timeout)

    def finish(self, timeout: float) -> None:
        """At exit: let the thread reach the last execution (bounded), then stop."""
        if self.thread is None or not self.on:
            return
        self.on = False
        light = self.counter.light
        for frameless in {light, self.counter.dark}:
            if frameless is not None and frameless.frameless:
                # the executions since its last sample: counted, not timed (LIGHT_SAMPLE_SHARE)
                self.skipped += max(frameless.fold() - frameless.sent, 0)
        if light is not None and light.tail[0] is not None:
            self._flush_light(light)
        if self.held:
            self._flush()
        self.queue.put(None)
        self.thread.join(timeout)

    def summary(self) -> dict[str, int]:
        """Executions by what became of them: waited on (known), donated first (unknown), no
        array to wait on, and not waited on (skipped: held while the device kept up)."""
        return {
            "known": self.known,
            "unknown": self.unknown,
            "no_array": self.no_array,
            "skipped": self.skipped + len(self.held),
        }


class StepCompletions:
    """When the work dispatched inside each marked step completed (issue 33).

    A marker closes when the host leaves the `with` block; with async dispatch the device may
    still be steps behind, so marker to marker is how fast the host enqueues. At a marker's
    end, the outputs of the last top-level jitted call made inside it (one jax array of them:
    the last of a returned tuple, such as the loss, which no later call donates) are either
    ready, and the step completed by the marker's end (a loop that syncs: its time is taken
    then, in the workload's thread: one `is_ready`, no thread woken), or handed to the
    CompletionWatcher's thread, which notes when they become ready (woken from idle at most
    every WAKE_EVERY_NS). A step's time is then the interval between the completions of
    consecutive steps (pgle.evidence.jit_steps), the loop's throughput whether or not it
    syncs. A step with no jitted call inside it, or
    whose outputs were donated before the watcher reached them, has no completion: the time
    between the completions around it is shared among its steps.

    Rows are (index, time.time_ns(), backend compiles so far, 1 if ready by the marker's end):
    a span across a compile is not a step's work. Kept for the first MAX_STARTS steps. The
    check at a marker's end is inline in Harness.step_class's `__exit__`."""

    def __init__(self, counter: JitCounter) -> None:
        self.counter = counter
        # index, done (ns), compiles, 1 if ready by the marker's end: four numbers a step
        self.rows = array.array("q")
        self.waited_on = self.unknown = self.no_array = self.skipped = 0
        self.woke = 0  # time.time_ns() the watcher was last woken for a step
        self.keeps_up = False  # the last step the watcher reached had completed already

    def pending(self, index: int, t_ns: int, leaf: Any, ready: bool | None) -> None:
        """In the workload's thread: step `index` ended at `t_ns` with `leaf` not ready
        (None: deleted). The watcher's thread waits on it; while the steps it reaches have
        completed already (a loop whose host barely runs ahead of the device), it is woken
        from idle at most once every WAKE_EVERY_NS: it would otherwise be woken every step,
        and each wake costs the loop the GIL. A step left out has no completion: the
        time between the completions around it is shared (pgle.evidence.jit_steps)."""
        if leaf is None:
            self.no_array += 1
            return
        if ready is None:
            self.unknown += 1
            return
        counter = self.counter
        watcher = counter.watcher
        if not watcher.on:
            return
        if watcher.busy or not self.keeps_up:
            watcher.put_step(index, counter.compiles, leaf, t_ns)
        elif t_ns - self.woke > WAKE_EVERY_NS:
            self.woke = t_ns
            watcher.put_step(index, counter.compiles, leaf, t_ns)
        else:
            self.skipped += 1

    def waited(self, index: int, compiles: int, leaf: Any, end_ns: int) -> None:
        """In the watcher's thread: wait for the output of a step that ended at `end_ns`,
        note when it was ready."""
        try:
            ready = leaf.is_ready()
            leaf.block_until_ready()
        except Exception:
            self.keeps_up = False
            self.unknown += 1  # donated to a later call before it could be waited on
            return
        done = _now_ns()
        self.keeps_up = ready or done - end_ns < WAKE_EVERY_NS  # see CompletionWatcher
        self.waited_on += 1
        self.rows.extend((index, done, compiles, 0))

    def record(self, events: Events) -> None:
        """The `step_completions` event, when some marked step's outputs were seen."""
        rows = self.rows
        ready = len(rows) // 4 - self.waited_on
        if not (ready or self.waited_on or self.unknown or self.no_array or self.skipped):
            return
        events.write(
            schema.STEP_COMPLETIONS,
            index=rows[0::4].tolist(),
            done_ns=rows[1::4].tolist(),
            compiles=rows[2::4].tolist(),
            at_end=rows[3::4].tolist(),
            watch={
                "ready_at_end": ready,
                "waited": self.waited_on,
                "unknown": self.unknown,
                "no_array": self.no_array,
                "skipped": self.skipped,
            },
        )


def _quick_leaf(out: Any, arrays: tuple[type, ...]) -> Any:
    """A jax array of a step's outputs, looked for as `return state, loss` and `return state,
    {"loss": loss}` put them (the last first), else among all its leaves."""
    kind = type(out)
    if kind is tuple or kind is list:
        for x in reversed(out):
            if type(x) in arrays:
                return x
            if type(x) is dict:
                for v in reversed(x.values()):
                    if type(v) in arrays:
                        return v
    elif kind is dict:
        for v in reversed(out.values()):
            if type(v) in arrays:
                return v
    return _any_leaf(out, arrays)


def _any_leaf(out: Any, arrays: tuple[type, ...]) -> Any:
    """A jax array among a pytree's leaves (the last), or None (a tracer, no array)."""
    try:
        import jax

        leaves = jax.tree_util.tree_leaves(out)
    except Exception:
        return None
    for x in reversed(leaves):
        if type(x) in arrays:
            return x
    return None


def _counted_call(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
    """A call of a counted jitted (or compiled) function: one execution of its name when it is
    a top-level call (not nested in another counted call, such as a jitted function traced
    inside another). Runs on every call of the workload's jitted functions, so it is one frame
    with no getattr defaults (issue 25: ~2 us a call before, ~1 us after)."""
    wrapped, name, counter, window = self._pgle
    cell = _depth.cell
    if cell[0]:
        return wrapped(*args, **kwargs)
    light = counter.light
    if light is not None:
        if light.name == name and counter.watcher.on:
            light.enter(self)  # calls of the step only count from now on
            return self(*args, **kwargs)  # type: ignore[operator]  # now the light class
        if light.frameless and not light.off:
            # Another function between the light one's calls: framed from now on (its
            # output kept, so a span holds one function's work); the executions since its
            # last sample go first, with no output to wait on: they share the next span.
            light.to_framed()
            if counter.watcher.on:
                counter.watcher._flush_light(light)
    if counter.marked:
        row = counter.stats.get(name)
        if row is not None:  # a function first called now takes the full count below
            self.__class__ = _marked_class(counter, type(self), name, row)
            return self(*args, **kwargs)  # type: ignore[operator]  # now the marked class
    _EXECUTIONS[0] += 1
    depth = _depth
    cell[0], depth.name = 1, name
    tell = False
    try:
        n, t = counter.begin(name)
        if n == step_rule.MIN_EXECUTIONS and counter.export is not None:
            counter.export(name, wrapped, args, kwargs)
        tell = window.counting and window.before_execution(name, n)
        out = cell[1] = wrapped(*args, **kwargs)
    finally:
        cell[0], depth.name = 0, None
    if counter.watcher.on:
        counter.watcher.put(name, n, t, out)
    if tell:
        window.after_execution(name)
    return out


def _marked_class(counter: JitCounter, base: type, name: str, row: list[Any]) -> type:
    """`base` (a proxy class) with the call of a loop whose steps are marked (JitCounter.marked,
    one-way): it counts the execution and keeps its output for the step's completion, and
    nothing else; the row and the output cell in closure cells, not looked up per call (issue
    33: the per-step cost of short marked steps)."""
    cls = counter.marked_classes.get((base, name))
    if cls is not None:
        return cls
    executions = _EXECUTIONS

    def __call__(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        cell = _depth.cell
        if cell[0]:  # nested in another counted call (traced inside it): not an execution
            return self._pgle[0](*args, **kwargs)
        executions[0] += 1
        row[0] += 1  # no lock: a count (the GIL keeps it whole but for racing threads)
        cell[0] = 1
        try:
            out = cell[1] = self._pgle[0](*args, **kwargs)
        finally:
            cell[0] = 0
        return out

    cls = type(base.__name__, (base,), {"__call__": __call__, "__module__": base.__module__})
    counter.marked_classes[(base, name)] = cls
    return cls


class _Light:
    """The light function of an unmarked loop (JitCounter.light). Its proxies first go
    frameless: each gets a class of its own whose `__call__` is a C-level call that counts
    (`_frameless_call`); now and then (LIGHT_SAMPLE_SHARE) the watcher's thread swaps in a
    Python call that times one execution and hands it over (`_frameless_sample`). Once another
    counted function is called, or the light ends, they go framed (`to_framed`): a
    subclass whose call counts and keeps the output (`_light_class`), one in every `due`-th
    execution sampled (`_light_sample`), as a loop of several functions needs (an eval's span
    must not absorb the queued steps' work)."""

    def __init__(self, name: str, row: list[Any]):
        self.name = name
        self.row = row  # JitCounter.stats[name]: row[0] counts its executions
        self.due = [0]  # the number of the next sampled execution (0: the next call)
        self.tail: list[Any] = [None]  # the last execution's output, not handed over yet
        self.off = False  # back to the full count (JitCounter.unlight)
        self.sent = 0  # the number of its last execution handed to the watcher
        self.t = 0.0  # that execution's start
        self.beacon = 0  # executions added to the beacon's count so far
        # seconds an execution by its completions (the watcher's last span of it): a loop
        # whose host runs ahead of the device is sampled by the device's pace
        self.per_exec = 0.0
        self.classes: dict[type, type] = {}
        # Frameless: per proxy, its own class and the counting call its `__call__` holds;
        # row[0] is `base` plus their counts, written in the workload's thread (`fold`).
        self.frameless = True
        self.base = 0
        self.calls: dict[type, Any] = {}  # functools.lru_cache wrappers
        self.armed = False  # a sample is asked for (the watcher's thread swapped it in)
        self.since = self.asked = _now()  # frameless since; a sample last asked for or taken

    def cls(self, base: type) -> type:
        light = self.classes.get(base)
        if light is None:
            light = self.classes[base] = _light_class(base, self)
        return light

    def enter(self, proxy: _Proxy) -> None:
        """`proxy` (of the light function) starts counting: frameless or framed."""
        if not self.frameless:
            proxy.__class__ = self.cls(type(proxy))
            return
        if not self.calls:
            # its executions so far are in _EXECUTIONS already and with the watcher (the
            # full count's): the first sample's span starts after them
            self.base = self.beacon = self.sent = self.row[0]
            self.since = self.asked = self.t = _now()
        base = type(proxy)
        call = _frameless_call(proxy._pgle[0])
        cls = type(
            base.__name__, (base,), {"__call__": staticmethod(call), "__module__": base.__module__}
        )
        self.calls[cls] = call
        proxy.__class__ = cls

    def count(self) -> int:
        """Its executions so far, from any thread (no write)."""
        calls = list(self.calls.values())
        if self.frameless and calls:
            return self.base + sum(int(c.cache_info().misses) for c in calls)
        return int(self.row[0])

    def fold(self) -> int:
        """In the workload's thread: row[0] brought up to the frameless count."""
        n = self.row[0] = self.count()
        return n

    def next_ask(self, now: float) -> float:
        """When the watcher's thread asks for the next sample (LIGHT_SAMPLE_SHARE)."""
        age = now - self.since
        return self.asked + min(LIGHT_SAMPLE_S, max(LIGHT_FIRST_SAMPLE_S, LIGHT_SAMPLE_SHARE * age))

    def arm(self) -> None:
        """In the watcher's thread: the next call of a frameless proxy takes a sample (or,
        once off, goes framed)."""
        self.armed, self.asked = True, _now()
        sample = _frameless_sample(self)
        for cls in list(self.calls):
            cls.__call__ = sample  # type: ignore[method-assign]

    def to_framed(self) -> None:
        """In the workload's thread: from frameless to framed, for good; the next call takes
        a sample (`due` 0), which also goes back to the full count when `off`."""
        if self.frameless:
            self.fold()
            self.frameless = False
        self.due[0] = 0
        framed = _framed_call(self)
        for cls in list(self.calls):
            cls.__call__ = framed  # type: ignore[method-assign]


def _frameless_call(wrapped: Any) -> Any:
    """`wrapped`, called through a C-level wrapper that counts its calls: no Python frame
    between the workload's call and jax's (issue 33: a frame is ~1 us of a 16x16 step's
    ~10-15 us of host time). functools.lru_cache with maxsize 0 caches nothing, builds no
    key (jax arrays are not hashable) and counts every call as a miss (CPython 3.11-3.13,
    `uncached_lru_cache_wrapper`; the pure-Python fallback counts the same): the stdlib's
    one C callable that forwards a call and counts it."""
    import functools

    return functools.lru_cache(maxsize=0)(wrapped)


def _frameless_sample(light: _Light) -> Callable[..., Any]:
    """The call a frameless light proxy takes when the watcher asks for a sample: the
    frameless call back in place, one execution timed and handed over (as `_light_sample`)."""

    def __call__(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        if light.off or not light.frameless:
            light.to_framed()
            return self(*args, **kwargs)  # type: ignore[operator]  # the framed call now
        cls = type(self)
        call = light.calls[cls]
        light.asked = _now()
        light.armed = False
        for c, f in list(light.calls.items()):
            c.__call__ = staticmethod(f)  # type: ignore[method-assign]
        return _take_sample(self, light, call, None, args, kwargs)

    return __call__


def _light_class(base: type, light: _Light) -> type:
    """`base` (a proxy class) with the framed light call (`_framed_call`)."""
    return type(
        base.__name__, (base,), {"__call__": _framed_call(light), "__module__": base.__module__}
    )


def _framed_call(light: _Light) -> Callable[..., Any]:
    """A call that only counts, but every `due`-th: no lock, no clock, no thread-local, the
    count and the output in closure cells (issue 33: a Python frame is ~1 us of a 16x16
    step's ~10 us of host time; the full count ~6 us). A call nested in another's trace is
    counted too (a retrace while light; rare)."""
    row, due, tail = light.row, light.due, light.tail

    def __call__(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        n = row[0] = row[0] + 1
        if n < due[0]:
            # Held until the next call (as `x = step(x)` holds it): handed over when another
            # function is called, so that its span does not absorb this one's work.
            out = tail[0] = self._pgle[0](*args, **kwargs)
            return out
        return _light_sample(self, light, n, args, kwargs)

    return __call__


def _light_sample(self: _Proxy, light: _Light, n: int, args: Any, kwargs: Any) -> Any:
    """Execution `n` of a light function, timed and handed to the watcher; the next sample
    about LIGHT_SAMPLE_S later (at most LIGHT_MAX_SPAN executions)."""
    wrapped, _name, counter, _window = self._pgle
    depth = _depth
    cell = depth.cell
    if light.off or cell[0]:  # the full count again (or a call nested in a trace)
        light.row[0] -= 1
        if light.off:
            if light.beacon:  # the calls since its last sample, for the beacon
                _EXECUTIONS[0] += max(light.row[0] - light.beacon, 0)
                light.beacon = light.row[0]
            self.__class__ = type(self).__bases__[0]
            if light.tail[0] is not None and counter.watcher.on:
                counter.watcher._flush_light(light)
        return _counted_call(self, *args, **kwargs)
    return _take_sample(self, light, wrapped, n, args, kwargs)


def _take_sample(
    self: _Proxy, light: _Light, call: Any, n: int | None, args: Any, kwargs: Any
) -> Any:
    """Execution `n` of a light function (None: frameless, counted by `call`), timed and
    handed to the watcher; framed, the next sample is due about LIGHT_SAMPLE_S later (at most
    LIGHT_MAX_SPAN executions)."""
    name, counter = self._pgle[1], self._pgle[2]
    depth = _depth
    cell = depth.cell
    t = _now()
    cell[0], depth.name = 1, name
    try:
        out = call(*args, **kwargs)
    finally:
        cell[0], depth.name = 0, None
    if n is None:
        n = light.fold()
    if not light.beacon:
        light.beacon = n - 1
    _EXECUTIONS[0] += n - light.beacon
    light.beacon = n
    counter.sampled(name, t)
    if not light.frameless:
        prev_n, prev_t = light.sent, light.t
        each = light.per_exec  # by completions; by dispatches when the host is slower
        if prev_n and n > prev_n and t > prev_t:
            each = max(each, (t - prev_t) / (n - prev_n))
        k = min(max(int(LIGHT_SAMPLE_S / each), 1), LIGHT_MAX_SPAN) if each > 0 else 1
        light.due[0] = n + k
    watcher = counter.watcher
    if watcher.on:
        watcher.put_sample(light, n, t, out)
    else:
        light.sent, light.t = n, t
    return out


class _Proxy:
    """Forwards every attribute to the wrapped jax object."""

    _pgle: tuple[Any, str, JitCounter, ProfilerWindow]  # (wrapped, name, counter, window)

    def __init__(self, wrapped: Any, name: str, counter: JitCounter, window: ProfilerWindow):
        self._pgle = (wrapped, name, counter, window)

    def __getattr__(self, attr: str) -> Any:
        if attr == "_pgle":  # copy/pickle build the object without __init__
            raise AttributeError(attr)
        return getattr(self._pgle[0], attr)

    def __repr__(self) -> str:
        return repr(self._pgle[0])


class _Compiled(_Proxy):
    """`jit(f).lower(...).compile()`: its calls are executions of `jit(f)`."""

    __call__ = _counted_call


class _Lowered(_Proxy):
    def compile(self, *args: Any, **kwargs: Any) -> _Compiled:
        wrapped, name, counter, window = self._pgle
        outer = _depth.name
        _depth.name = outer or name  # the compile is this function's (pgle.launch.step_rule)
        try:
            compiled = wrapped.compile(*args, **kwargs)
        finally:
            _depth.name = outer
        return _Compiled(compiled, name, counter, window)


class _Traced(_Proxy):
    def lower(self, *args: Any, **kwargs: Any) -> _Lowered:
        wrapped, name, counter, window = self._pgle
        return _Lowered(wrapped.lower(*args, **kwargs), name, counter, window)


class _Jitted(_Proxy):
    """A jitted (or pmapped) function whose top-level calls are counted."""

    def __init__(self, wrapped: Any, name: str, counter: JitCounter, window: ProfilerWindow):
        super().__init__(wrapped, name, counter, window)
        import functools

        with contextlib.suppress(Exception):
            functools.update_wrapper(self, wrapped)

    __call__ = _counted_call

    # as a method, like jax's own jitted functions
    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        import functools

        return self if obj is None else functools.partial(self, obj)

    def lower(self, *args: Any, **kwargs: Any) -> _Lowered:
        wrapped, name, counter, window = self._pgle
        return _Lowered(wrapped.lower(*args, **kwargs), name, counter, window)

    def trace(self, *args: Any, **kwargs: Any) -> _Traced:
        wrapped, name, counter, window = self._pgle
        return _Traced(wrapped.trace(*args, **kwargs), name, counter, window)


def _fun_name(fun: Any) -> str:
    """The name jax gives the function's module (jax/_src/util.py `fun_name`, 0.10.2)."""
    import functools

    name: str | None = getattr(fun, "__name__", None)
    if name is not None:
        return name
    if isinstance(fun, functools.partial):
        return _fun_name(fun.func)
    return "<unnamed function>"


def _counting(
    transform: Callable[..., Any], prefix: str, counter: JitCounter, window: ProfilerWindow
) -> Callable[..., Any]:
    """`transform` (jax.jit, jax.pmap, pjit) whose functions are counted. Every way scripts
    write it reaches here: `@jax.jit`, `@jax.jit(donate_argnums=0)` (jax >= 0.8.1: no function
    gives a decorator), `functools.partial(jax.jit, ...)`, `jax.jit(f).lower(x).compile()`, and
    the wrappers that call `jax.jit` (flax `nnx.jit`, equinox `eqx.filter_jit`). Only the public
    attributes are replaced: jax's own internal jits (jax.numpy) are not counted."""
    import functools

    @functools.wraps(transform)
    def counting(*args: Any, **kwargs: Any) -> Any:
        fun = args[0] if args else kwargs.get("fun")
        result = transform(*args, **kwargs)
        if fun is None:
            if not callable(result):
                return result

            @functools.wraps(result)
            def decorate(f: Any) -> Any:  # the decorator jax returned, with pgle's count
                return counting(f, *args, **kwargs)

            return decorate
        if not callable(result):
            return result
        return _Jitted(result, f"{prefix}({_fun_name(fun)})", counter, window)

    return counting


def _hook_pjit(counter: JitCounter, window: ProfilerWindow) -> None:
    """`jax.experimental.pjit.pjit` (deprecated since jax 0.8, still used): counted as jit.
    jax 0.10.2 serves it through the module's deprecation table, whose entry is replaced
    (so the DeprecationWarning stays); older jax has a plain attribute."""
    try:
        import jax.experimental.pjit as module
    except Exception:
        return
    table = getattr(module, "_deprecations", None)
    if (
        isinstance(table, dict)
        and isinstance(table.get("pjit"), tuple)
        and callable(table["pjit"][1])
    ):
        message, fn = table["pjit"]
        table["pjit"] = (message, _counting(fn, "jit", counter, window))
    elif callable(module.__dict__.get("pjit")):
        module.pjit = _counting(module.__dict__["pjit"], "jit", counter, window)


def _observe(events: Events, install: Callable[[ModuleType], bool]) -> bool:
    """Install one of pgle.launch.jax_internals' observers: whether it is. (Its event is
    written by the caller, by name: tests/evidence/test_event_kinds.py reads the writes.)"""
    try:
        from pgle.launch import jax_internals  # importable: see the schema import above

        return install(jax_internals)
    except Exception as e:  # never break the user's run for a diagnostic
        events.write(schema.OBSERVE_ERROR, error=f"{type(e).__name__}: {e}")
        return False


def _capture_logger(name: str, level: str, events: Events) -> None:
    """Record `name`'s records down to `level` without changing what the user sees.

    The logger's level is lowered so JAX emits the records; a logger filter sends
    the ones below the level the user had straight to the events file and keeps
    them from the user's handlers.
    """
    logger = logging.getLogger(name)
    user_level = logger.level
    capture_level = logging.getLevelName(level) if isinstance(level, str) else level

    def visible_level() -> int:
        if user_level != logging.NOTSET:
            return user_level
        return logger.parent.getEffectiveLevel() if logger.parent else logging.WARNING

    def record_filter(record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        # A filter runs in the thread that logs: jax logs a compile's cache miss and its FDO
        # line in the compiling thread (jax 0.10.2), paired per thread (pgle.evidence.jax_log).
        events.write(
            schema.LOG,
            logger=record.name,
            level=record.levelname,
            message=message,
            thread=str(threading.get_native_id()),
        )
        return record.levelno >= visible_level()

    logger.addFilter(record_filter)
    if logger.getEffectiveLevel() > capture_level:
        logger.setLevel(capture_level)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1  # sys.exit("message") prints the message and exits 1


def _flush_before_os_exit(harness: Harness) -> None:
    """os._exit skips every cleanup (some distributed scripts end with it): the harness
    finishes first (the exit record, the job's exchange when one is asked). A forked child's
    buffer is empty (Events._forked) and its os._exit finishes nothing (Harness._finish)."""
    real_exit = os._exit

    def _exit(status: int) -> NoReturn:
        try:
            if os.getpid() == harness.pid and not harness.finished:
                harness._finish(status)
            else:
                harness.events.flush()
        finally:
            real_exit(status)

    _exit.__doc__, _exit.__wrapped__ = real_exit.__doc__, real_exit  # type: ignore[attr-defined]
    os._exit = _exit


def watch_parent(*, for_children: bool = False) -> None:
    """Kill this process group when pgle dies, even by SIGKILL (see pgle/launch/launcher.py).

    The read end of a pipe whose write end only pgle holds gives EOF when pgle is gone
    (at once, if it died before this ran); then the workload and every child it started in
    its group are killed. `for_children` (command mode): the descriptor and its variable stay
    for the Python processes the command starts below this one, which watch it too.
    """
    raw = (
        os.environ.get("PGLE_PARENT_FD") if for_children else os.environ.pop("PGLE_PARENT_FD", None)
    )
    if not raw:
        return
    try:
        fd = int(raw)
        if not for_children:
            os.set_inheritable(fd, False)  # the workload's own subprocesses need not hold it
        os.fstat(fd)
    except (ValueError, OSError):
        return

    def wait() -> None:
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        try:
            os.killpg(os.getpgrp(), 9)
        except OSError:
            os._exit(137)

    threading.Thread(target=wait, name="pgle-parent-watch", daemon=True).start()


def _load_spec(path: str) -> schema.HarnessSpec:
    with open(path, encoding="utf-8") as f:
        return schema.HarnessSpec.from_json(f.read())


def main(argv: list[str] | None = None) -> None:
    """Script mode: `python harness.py --spec SPEC.json` runs the workload's script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--spec":
        sys.stderr.write("usage: python -m pgle.launch.harness --spec SPEC.json\n")
        sys.exit(2)
    watch_parent()
    spec = _load_spec(argv[1])
    spec = spec.with_args_from(os.environ.pop(schema.WORKLOAD_ARGS, None))
    Harness(spec).run()


# -- command mode: the harness travels by environment ---------------------------------------


def activate(spec_path: str) -> None:
    """Command mode, in every Python process of the command (pgle/launch/boot/sitecustomize.py):
    watch pgle, and harness this process once it imports jax (a process that never does, a
    shell tool or a launcher such as torchrun, is left alone)."""
    watch_parent(for_children=True)
    try:
        spec = _load_spec(spec_path)
    except (OSError, ValueError, KeyError, TypeError):
        return  # a spec that is gone (the run folder was removed): run unobserved
    if "jax" in sys.modules:
        _attach(spec)
    else:
        sys.meta_path.insert(0, _JaxImportHook(lambda: _attach(spec)))


def _claim_home(spec: schema.HarnessSpec) -> str:
    """The first process of the command to import jax writes beside the spec (the run folder
    looks as in script mode); every other one in procs/<pid>/."""
    run = os.path.dirname(os.path.abspath(spec.events))
    try:
        os.close(
            os.open(
                os.path.join(run, schema.PRIMARY_CLAIM),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                0o666,
            )
        )
        return run
    except OSError:
        home = os.path.join(run, schema.PROCS_DIR, str(os.getpid()))
        os.makedirs(home, exist_ok=True)
        return home


_EXIT_CODE = [0]
_ATTACHED: list[bool] = []


def _attach(spec: schema.HarnessSpec) -> None:
    import atexit

    if _ATTACHED:
        return
    _ATTACHED.append(True)
    harness = Harness(spec, _claim_home(spec))
    harness.start()
    harness._capture_warnings()
    harness.on_jax_imported()
    _watch_exit_code()
    # Registered after jax's own (jax/_src/api.py `clean_up`, at import): runs before it, so
    # the job's exchange (spec.hold) happens while jax.distributed is still up.
    atexit.register(lambda: harness._finish(_EXIT_CODE[0]))


def _watch_exit_code() -> None:
    """What the process will exit with, as far as Python shows it: `sys.exit(n)`, an uncaught
    exception (1), Ctrl-C (130). (`raise SystemExit(n)` is not seen: 0.)"""
    real_exit, previous_hook = sys.exit, sys.excepthook

    def exit(code: str | int | None = None) -> NoReturn:
        _EXIT_CODE[0] = _exit_code(code)
        real_exit(code)

    def excepthook(
        kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        _EXIT_CODE[0] = 130 if issubclass(kind, KeyboardInterrupt) else 1
        previous_hook(kind, value, tb)

    exit.__doc__ = real_exit.__doc__
    sys.exit = exit
    sys.excepthook = excepthook


if __name__ == "__main__":
    main()
