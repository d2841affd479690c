"""The steps of a run, marked or not: what `tune`, `run` and `pgle report` time.

A script that marks steps (jax.profiler.StepTraceAnnotation) is timed by its markers
(pgle.evidence.steps). Most training scripts mark none; their steps are then the executions
of the step function the harness found (its `jit_functions` event, written at exit;
pgle.launch.step_rule): a step's time is the interval between the starts of consecutive
executions, the same start-to-start measure as for markers. Its first execution (the compile)
and every interval that overlaps a kept trace (the profiler's window) are left out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pgle.evidence.event_kinds import JitFunctions, ScriptTrace, TraceStart, TraceStop
from pgle.evidence.events import RunEvents
from pgle.evidence.steps import step_times


@dataclasses.dataclass
class RunSteps:
    times: list[float]
    source: str | None  # "markers" | "executions" | None (no steps)
    function: str | None = None  # the step function (`jit(train_step)`), marked or not
    module: str | None = None  # its XLA module (`jit_train_step`)
    how: str = ""  # how the steps were found, in words
    excluded: int = 0  # intervals left out (compile, kept trace)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "function": self.function,
            "module": self.module,
            "how": self.how,
            "count": len(self.times),
            "excluded": self.excluded,
        }


def step_function(events: RunEvents) -> JitFunctions | None:
    """The harness's `jit_functions` record (functions by host time, the step, its starts)."""
    return next(reversed(events.of(JitFunctions)), None)


def _trace_span(events: RunEvents) -> tuple[float, float] | None:
    """(start, stop) of the kept trace, pgle's window or the workload's own start_trace /
    stop_trace, in the events' clock (a run still tracing at exit: to its end)."""
    start = next(
        (
            r.t
            for r in events.records
            if isinstance(r, TraceStart) or (isinstance(r, ScriptTrace) and r.call == "start")
        ),
        None,
    )
    if start is None:
        return None
    stop = next(
        (
            r.t
            for r in events.records
            if r.t >= start
            and (isinstance(r, TraceStop) or (isinstance(r, ScriptTrace) and r.call == "stop"))
        ),
        None,
    )
    return start, float("inf") if stop is None else stop


def run_steps(events: RunEvents) -> RunSteps:
    """The step times of one run: by its markers when it has them, else by the executions of
    its step function; profiled steps (a kept trace) left out either way."""
    jit = step_function(events)
    function = jit.step if jit else None
    module = jit.module if jit else None
    if events.steps:
        excluded: set[int] = set()
        trace = events.trace
        if trace and trace.first_step is not None and trace.steps:
            excluded = set(range(trace.first_step, trace.first_step + trace.steps))
        times = step_times(events.steps, excluded)
        name = events.steps[0].name
        return RunSteps(
            times,
            "markers",
            function,
            module,
            f"StepTraceAnnotation steps{f' named {name!r}' if name else ''}",
            max(len(events.steps) - 1 - len(times), 0),
        )
    if not jit or not function:
        return RunSteps(
            [],
            None,
            how="the workload marks no steps and no jitted function executed at least 3 times",
        )
    starts = jit.starts or []
    span = _trace_span(events)
    times, left_out = [], 0
    for i, (a, b) in enumerate(zip(starts, starts[1:], strict=False)):
        if i == 0 or (span is not None and a < span[1] and b > span[0]):
            left_out += 1  # the compile, or the profiler's window
            continue
        times.append(b - a)
    execs = next(
        (f["executions"] for f in jit.functions or [] if f.get("function") == function), len(starts)
    )
    how = (
        f"no step markers: the steps are the {execs} executions of {function}, "
        f"{jit.rule or 'the busiest jitted function'}"
    )
    return RunSteps(times, "executions", function, module, how, left_out)


def executions_by_module(events: RunEvents) -> dict[str, int]:
    """Top-level executions per XLA module, from the harness's count of the jitted functions
    that compiled them (functions of one module are added up)."""
    jit = step_function(events)
    out: dict[str, int] = {}
    for f in (jit.functions if jit else None) or []:
        if f.get("module"):
            out[f["module"]] = out.get(f["module"], 0) + int(f.get("executions") or 0)
    return out


def step_first(rows: list[dict[str, Any]], events: RunEvents) -> list[dict[str, Any]]:
    """Module rows with the step's module first, then by executions (most first; rows of
    modules the harness never saw execute keep their order at the end). Each row gets
    `executions` where known."""
    counts = executions_by_module(events)
    jit = step_function(events)
    step = jit.module if jit else None
    for row in rows:
        if row.get("module") in counts:
            row["executions"] = counts[row["module"]]
    return sorted(
        rows, key=lambda r: (r.get("module") != step or step is None, -(r.get("executions") or 0))
    )
