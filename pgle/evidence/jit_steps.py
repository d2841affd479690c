"""The steps of a run, marked or not: what `tune`, `run` and `pgle report` time.

A script that marks steps (jax.profiler.StepTraceAnnotation) is timed by its markers: a
step's time is the interval between the completions of the work dispatched inside consecutive
markers (the harness's `step_completions` event: pgle.launch.harness.StepCompletions), the
loop's throughput whether or not it syncs; a marker closes when the host leaves it, which with
async dispatch can be long before the device finishes (issue 33). Where no marked step's
completion was seen (no jitted call inside the markers, or a run of a pgle before issue 33),
they are timed start to start of the markers (pgle.evidence.steps), and `how` says so. Most
training scripts mark none; their steps are then the executions
of the step function the harness found (its `jit_functions` event, written at exit;
pgle.launch.step_rule), timed like marked steps: from the completion of one execution's outputs
to that of the next (pgle.launch.harness.CompletionWatcher), the loop's throughput, everything
it does per step (other jitted calls, Python) included, shared equally among executions that
completed together (`execution_times`). Never the interval between the starts of two
executions: with jax's async dispatch that is how fast the host enqueues, hundreds of times less
than a step takes; nor one execution's device work alone, which on a Python-bound loop is a
fraction of its time per step (issue 33). Its first execution (the compile), intervals with a
compile in them and those that touch a kept trace (the profiler's window) are left out. Where no
completion was seen, or every interval between two was left out, there are no step times (and
so no ratio), and `how` says why.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pgle.evidence.event_kinds import (
    JitFunctions,
    ScriptTrace,
    StepCompletions,
    TraceStart,
    TraceStop,
)
from pgle.evidence.events import RunEvents, Steps
from pgle.evidence.steps import step_times


@dataclasses.dataclass
class RunSteps:
    times: list[float]
    source: str | None  # "markers" | "executions" | None (no steps)
    function: str | None = None  # the step function (`jit(train_step)`), marked or not
    module: str | None = None  # its XLA module (`jit_train_step`)
    how: str = ""  # how the steps were found, in words
    excluded: int = 0  # intervals left out (compile, kept trace)
    # What a time measures: "completion" (marked steps: from one step's completion to the
    # next's; executions: the work until the outputs were ready), "markers" (start to start
    # of marked steps, whose completion was not seen), None (no step times)
    time_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "function": self.function,
            "module": self.module,
            "how": self.how,
            "step_time_source": self.time_source,
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
        name = events.steps[0].name
        marked = f"StepTraceAnnotation steps{f' named {name!r}' if name else ''}"
        done = next(reversed(events.of(StepCompletions)), None)
        times = completion_times(done, excluded, _starts(events)) if done else []
        if times:
            return RunSteps(
                times,
                "markers",
                function,
                module,
                f"{marked}; each step's time is from the completion of the previous step's "
                "work to that of its own (the outputs of the last jitted call inside its "
                f"marker ready; {_watched((done.watch if done else None) or {})})",
                max(len(events.steps) - 1 - len(times), 0),
                "completion",
            )
        times = step_times(events.steps, excluded)
        if done is None and jit is not None and jit.work is None:
            why = "this run's events predate completion timing (pgle < issue 33)"
        elif done is None:
            why = "pgle saw no counted jitted call inside the markers"
        else:
            why = (
                "pgle saw the outputs of too few marked steps complete "
                f"({_watched(done.watch or {})})"
            )
        return RunSteps(
            times,
            "markers",
            function,
            module,
            f"{marked}; each step's time is start to start of its marker ({why}: with "
            "asynchronous dispatch a marker can close long before its work is done, so a "
            "loop that never waits on its steps shows how fast the host enqueues them)",
            max(len(events.steps) - 1 - len(times), 0),
            "markers",
        )
    if not jit or not function:
        return RunSteps(
            [],
            None,
            how="the workload marks no steps and no jitted function executed at least 3 times",
        )
    span = _trace_span(events)
    execs = next(
        (f["executions"] for f in jit.functions or [] if f.get("function") == function),
        len(jit.starts or []),
    )
    found = (
        f"no step markers: the steps are the {execs} executions of {function}, "
        f"{jit.rule or 'the busiest jitted function'}"
    )
    if not jit.work:
        why = (
            "this run's events predate completion timing (pgle < issue 33)"
            if jit.work is None
            else "pgle saw none of its executions complete (outputs that are no jax arrays, "
            "or donated to a later call before they could be waited on)"
        )
        return RunSteps(
            [],
            "executions",
            function,
            module,
            f"{found}; no step times: {why}, and the gap between two executions' starts is "
            "only how fast the host dispatches",
            len(jit.starts or []),
        )
    timed = execution_times(jit.work, span)
    if timed:
        times = [t for _, t in timed]
        how = (
            f"{found}; each step's time is from the completion of the previous execution's "
            "outputs to that of its own (the loop's throughput: other jitted calls and Python "
            "included), shared equally among executions that completed together; a "
            "completion is noted when pgle's thread gets the GIL, up to the switch interval "
            "(5 ms by default) late while the loop runs Python: one step's time is that "
            "uncertain, a run of steps' is not"
        )
        return RunSteps(
            times, "executions", function, module, how, max(execs - len(times), 0), "completion"
        )
    if any(len(row) >= 5 for row in jit.work):
        # Completions were seen, but every interval between two of them was left out: one
        # execution's device work is no time per step (issue 33), so there is none.
        return RunSteps(
            [],
            "executions",
            function,
            module,
            f"{found}; no step times: each interval between the completions of two of its "
            "executions held a compile or touched the kept trace (a function recompiled at "
            "every call, or too few executions outside the profiler's window), and one "
            "execution's device work alone is not the loop's time per step",
            execs,
        )
    # Events of a pgle before throughput timing: rows [start, seconds of work] only.
    times, left_out = [], 0
    for row in jit.work:
        if len(row) < 2:
            continue
        start, seconds = row[0], row[1]
        if start is None or seconds is None or not math.isfinite(start + seconds):
            continue
        if span is not None and span[0] <= start <= span[1]:
            left_out += 1  # the profiler's window
            continue
        times.append(seconds)
    left_out += max(execs - len(times) - left_out, 0)  # the compile, unknown completions
    how = (
        f"{found}; each step's time is its device work until its outputs were ready (this "
        "run's events predate throughput timing: a loop's Python and other calls left out)"
    )
    return RunSteps(times, "executions", function, module, how, left_out, "completion")


def _span_row(r: list[float | None]) -> tuple[int, int, float, float, int] | None:
    """(first number, last number, start, completion, compiles) of one `work` row; None for a
    row without a completion (rows of two) or with a hole where a number must be."""
    if len(r) < 5:
        return None
    start, _, done, last, compiles, *rest = r
    k = rest[0] if rest else 1
    if start is None or done is None or last is None or compiles is None or k is None:
        return None
    # json reads NaN and Infinity too: int() of either raises
    if not all(map(math.isfinite, (start, done, last, compiles, k))) or k < 1:
        return None
    return int(last) - int(k) + 1, int(last), float(start), float(done), int(compiles)


def execution_times(
    work: list[list[float | None]], trace: tuple[float, float] | None = None
) -> list[tuple[float, float]]:
    """(start, seconds) of the step function's executions, timed completion to completion:
    an execution's time is from the known completion of the function's previous executions to
    that of its own, over the executions in between (those that completed together share it
    equally). `work`: the harness's rows [start, work seconds, completion, number, compiles,
    executions]: `executions` consecutive executions ending with `number` that completed
    together (a light step's span between two sampled executions: one start for them all);
    rows of five (a pgle before spans) are one execution each, rows of two (a pgle before
    throughput timing) have no completion. Left out: an interval with a compile in it (the
    compiles differ, or an execution of the function has no row: its span held one), or one
    that touches the kept trace `trace` (start, stop)."""
    # (first number, last number, start, completion, compiles)
    rows = sorted(filter(None, map(_span_row, work)))
    groups: list[list[tuple[int, int, float, float, int]]] = []
    for row in rows:
        last = groups[-1][-1] if groups else None
        if last is not None and row[3] == last[3] and row[0] == last[1] + 1:
            groups[-1].append(row)
        else:
            groups.append([row])
    out: list[tuple[float, float]] = []
    for prev, group in zip(groups, groups[1:], strict=False):
        _, n0, _, d0, c0 = prev[-1]
        n1, d1, c1 = group[-1][1], group[-1][3], group[-1][4]
        if c1 != c0 or group[0][0] != n0 + 1 or d1 <= d0:
            continue
        if trace is not None and d1 >= trace[0] and d0 <= trace[1]:
            continue  # the profiler's window: its start, stop and settle
        share = (d1 - d0) / (n1 - n0)
        out += [
            (start, share) for first, last, start, _, _ in group for _ in range(last - first + 1)
        ]
    return out


def _starts(events: RunEvents) -> dict[int, float]:
    """Each marked step's start (its marker's entry), by index."""
    steps = events.steps
    if isinstance(steps, Steps):
        return dict(zip(steps.indices, steps.t_enter, strict=False))
    return {s.index: s.t_enter for s in steps}


def _watched(watch: dict[str, int]) -> str:
    """The watcher's tally of marked steps, in words."""
    parts = [
        f"{watch.get('ready_at_end', 0)} ready by the marker's end",
        f"{watch.get('waited', 0)} after it",
    ]
    if watch.get("unknown"):
        parts.append(f"{watch['unknown']} donated before they could be waited on")
    if watch.get("no_array"):
        parts.append(f"{watch['no_array']} with no jax array among the outputs")
    return ", ".join(parts)


def completion_times(
    done: StepCompletions, exclude: set[int], starts: dict[int, float] | None = None
) -> list[float]:
    """Marked steps' times from their completions: step k's is the time from the previous
    known completion (step j's) to its own, shared among steps j+1..k when the steps between
    have none: equally, or, when both j and k were ready by their marker's end (a loop that
    syncs, where pgle checks one step in several), in proportion to the steps' start-to-start
    marker times (`starts`: index -> its marker's start), so that a loop that syncs keeps its
    per-step spread. Device work completes in dispatch order, so a step whose successor
    completed had completed by then too (a completion noted late by the watcher's thread is
    brought forward). Left out: the steps before the first known completion (step 0: the
    compile), a span with a backend compile in it, and one that touches an excluded step
    (profiled) or follows one (the profiler's stop ran before it)."""
    index, at, compiles = done.index or [], done.done_ns or [], done.compiles or []
    at_end = done.at_end or [0] * len(index)
    rows = sorted(zip(index, at, compiles, at_end, strict=False))
    known: list[tuple[int, int, int, int]] = []
    for i, t, c, e in reversed(rows):  # dedupe by index, completions in dispatch order
        if known and known[-1][0] == i:
            known[-1] = (i, min(t, known[-1][1]), c, e)
            continue
        if known:
            t = min(t, known[-1][1])
        known.append((i, t, c, e))
    known.reverse()
    starts = starts or {}
    times: list[float] = []
    for (j, tj, cj, ej), (k, tk, ck, ek) in zip(known, known[1:], strict=False):
        if ck != cj or any(i in exclude for i in range(j, k + 1)):
            continue
        total = (tk - tj) / 1e9
        marks = [starts.get(i + 1, 0.0) - starts.get(i, 0.0) for i in range(j + 1, k + 1)]
        if k - j > 1 and ej and ek and all(m > 0 for m in marks):
            times += [m * total / sum(marks) for m in marks]
        else:
            times += [total / (k - j)] * (k - j)
    return times


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
