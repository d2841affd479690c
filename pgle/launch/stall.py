"""The stall watchdog: a workload that makes no progress for long writes its Python stacks into
the run folder and says so; pgle stops it only where the user asked, or where its steps had a
rhythm that stopped for far longer than it (issue 31).

Progress is anything the workload does that pgle can see: a line of output (either stream),
an event of the harness (a step, a compile starting or ending, a JAX log record, a warning)
and an execution of a jitted function (the harness rewrites `progress` when their count
changes; pgle.launch.harness). A hung job shows none of them: a collective a peer never
joins, a host callback that waits forever, auto PGLE's FDO recompile or its wait for the
profile another process publishes (a 64-GPU job sat 10.5 h there, marin #8222). Healthy work
can show none of them for many minutes too: a checkpoint to slow storage, a long compile,
`stop_trace` writing a trace (6-8 min measured on 2x8 GPUs), the set-up before the first step.

The rule (`--stall-timeout`, StallPolicy, docs/reliability.md "The stall watchdog"):
- `auto` (the default): after REPORT_AFTER_S without progress every harnessed process writes
  its stacks and pgle says, in one `pgle:` line, where the workload is; it goes on. pgle stops
  the workload only when all of these hold: its processes entered at least RHYTHM_STEPS + 1
  marked steps (a rhythm), no compile and no trace (pgle's or the workload's own, its export
  included) is in flight, and nothing progressed for max(STOP_FLOOR_S, STEP_FACTOR x the median
  of the last STEP_WINDOW step intervals). A workload quiet before its first step is never
  stopped by default.
- a duration (`30m`): that long without progress stops the workload, whatever the phase (the
  user asked: set it above the longest compile and checkpoint), but one: while pgle's window
  writes its trace (between the harness's `trace_export` and `trace_stop`), the bound is
  max(the duration, EXPORT_STOP_S): an export is slow and quiet, not stuck (6-8 min measured
  on 2x8 GPUs with jax.profiler's defaults, marin #5528), and stopping it loses the trace.
- `report:DURATION`: report after that long, never stop. `off`: no watchdog.

Time while pgle is stopped (Ctrl-Z, SIGSTOP) or while the workload's process is stopped
(SIGSTOP, a debugger) is not the workload's: SIGCONT, a pause of the watchdog's polls longer
than STOP_GAP_S (pgle could not have polled: it was stopped), and a stopped workload each
restart the clock (`restart`). CLOCK_MONOTONIC runs on while a process is stopped, so the stop
has to be noticed; a clock that pauses (process CPU time) also pauses while the workload
merely sleeps.

On a stop pgle sends every harnessed process its dump signal (schema.DUMP_SIGNAL: ignored by
default, so a shell or launcher in the workload's group is never hurt): faulthandler writes
all threads' stacks to `stacks.txt` beside the process's events. pgle then names the phase
(pgle.evidence.stacks), says so in one line, and stops the workload (SIGTERM, then SIGKILL)
with EXIT_STALLED. A rank stopped because a peer failed dumps its stacks too (`dump`), so a
multi-process job leaves every rank's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgle.errors import EXIT_STALLED
from pgle.evidence import schema, stacks
from pgle.evidence.event_kinds import (
    CompileBegin,
    CompileEnd,
    Event,
    Exit,
    ScriptTrace,
    Stacks,
    Start,
    TraceDiscard,
    TraceExport,
    TraceStart,
    TraceStop,
)
from pgle.evidence.event_tail import EventTail
from pgle.units import human_seconds

REPORT_AFTER_S = 600.0  # 10 min without progress: stacks and a line, the workload goes on
STOP_FLOOR_S = 3600.0  # by default never stopped before 1 h without progress...
STEP_FACTOR = 20.0  # ... nor before 20x the median step interval
RHYTHM_STEPS = 5  # step intervals that make a rhythm (6 marked steps)
STOP_GAP_S = 2.0  # polls this far apart (they come every 0.5 s): pgle was stopped meanwhile
DUMP_WAIT_S = 5.0  # the most pgle waits for the processes to write their stacks
STEP_WINDOW = 50  # steps whose times give the median
# With an explicit --stall-timeout, the least an export of pgle's trace is given (module doc).
EXPORT_STOP_S = 1800.0
# The events that say what a process is doing (its steps are counted and timed besides)
_WATCHED: tuple[type[Event], ...] = (Start, Stacks, Exit, CompileBegin, CompileEnd, ScriptTrace)
_WATCHED += (TraceStart, TraceExport, TraceStop, TraceDiscard)


@dataclasses.dataclass(frozen=True)
class StallPolicy:
    """What the watchdog does (module docstring). `stop_after_s`: the user's bound, any phase;
    `report_after_s`: when to write stacks and say so (None: never); `rhythm_stop`: stop a
    workload whose step rhythm stopped for far longer than it (the default)."""

    stop_after_s: float | None = None
    report_after_s: float | None = REPORT_AFTER_S
    rhythm_stop: bool = True

    @classmethod
    def of(cls, value: float | StallPolicy | None) -> StallPolicy | None:
        """None: the default; seconds: stop after that long (0: off, None returned)."""
        if value is None:
            return cls()
        if isinstance(value, StallPolicy):
            return value
        if value == 0:
            return None
        return cls(float(value), None, False)

    def describe(self) -> str:
        if self.stop_after_s is not None:
            return f"stop after {describe_seconds(self.stop_after_s)} without progress"
        report = (
            f"report after {describe_seconds(self.report_after_s)} without progress"
            if self.report_after_s is not None
            else "never report"
        )
        return report + ("; stop a stopped step rhythm" if self.rhythm_stop else "; never stop")


def describe_seconds(seconds: float) -> str:
    return human_seconds(
        seconds, ((120, 1, "{:.0f} s"), (7200, 60, "{:.0f} min"), (0, 3600, "{:.1f} h"))
    )


@dataclasses.dataclass
class _Process:
    """What pgle knows of one harnessed process of the workload."""

    home: Path
    events: EventTail
    pid: int | None = None
    main_thread: str | None = None
    stacks: Path | None = None
    compiling: dict[str, CompileBegin] = dataclasses.field(default_factory=dict)  # by thread
    tracing: bool = False  # a trace (pgle's window or the workload's own) is open or exporting
    exporting: bool = False  # pgle's window closed and stop_trace writes its trace
    progress_mtime: int = 0
    exited: bool = False


@dataclasses.dataclass
class StallReport:
    """What the watchdog found, for the message and the report."""

    seconds: float  # without progress
    bound_s: float
    bound_rule: str
    phases: dict[int, str]  # pid -> phrase
    phase_names: dict[int, str]
    stacks: dict[int, str]  # pid -> stacks file
    run: str

    def _said(self, rule: str, then: str) -> str:
        procs = sorted(self.phases)
        if not procs:
            where, stacks = "no harnessed process answered", "no stacks were written"
        elif len(procs) == 1:
            where, files = self.phases[procs[0]], self.stacks.get(procs[0])
            stacks = f"its Python stacks are in {files or '(no stacks were written)'}"
        else:
            where = "; ".join(f"process {p}: {self.phases[p]}" for p in procs)
            stacks = f"every process's Python stacks are in {self.run} (stacks.txt, procs/*/)"
        quiet = describe_seconds(self.seconds)
        return f"the workload made no progress for {quiet}{rule}: {where}; {stacks}; {then}"

    def message(self) -> str:
        return self._said(
            f" ({self.bound_rule})",
            f"pgle stopped it (exit {EXIT_STALLED}; --stall-timeout sets the bound)",
        )

    def note(self) -> str:
        """The report of a quiet spell pgle does not stop (the default watchdog)."""
        return self._said(
            "",
            "pgle lets it run (a compile, a trace export, a checkpoint or the set-up before the "
            "first step is no stall; --stall-timeout DURATION stops a workload after that long "
            "without progress)",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "bound_s": round(self.bound_s, 1),
            "bound_rule": self.bound_rule,
            "processes": [
                {
                    "pid": p,
                    "phase": self.phase_names.get(p),
                    "what": self.phases[p],
                    "stacks": self.stacks.get(p),
                }
                for p in sorted(self.phases)
            ],
        }


class StallWatch:
    """Polled by the launcher (pgle.launch.launcher.Stall); reads only what is new.
    `policy`: a StallPolicy, seconds (the user's bound) or None (the default policy)."""

    def __init__(
        self,
        run_path: Path,
        policy: float | StallPolicy | None,
        say: Callable[[str], object],
        *,
        clock: Callable[[], float] = time.monotonic,
        before_stop: Callable[[StallReport], None] | None = None,
    ):
        self.run = Path(run_path)
        # Called with the findings once the stacks are written, before pgle stops the
        # workload: a job's rank waits there for its peers' phases (pgle.jobs.driver).
        self.before_stop = before_stop
        self.policy = StallPolicy.of(policy) or StallPolicy(None, None, False)
        self.say = say
        self.clock = clock
        self.last = self.polled = clock()
        self.processes: dict[Path, _Process] = {}
        self.next_scan = 0.0
        self.report: StallReport | None = None  # set when pgle stops the workload
        self.notes: list[str] = []  # the quiet spells reported, not stopped
        self.reported_since: float | None = None  # the start of the spell last reported
        self.dumped: dict[int, str] = {}  # pid -> the text of its dump

    # -- what the launcher calls --------------------------------------------------------------
    def restart(self) -> None:
        """The workload or pgle was stopped (SIGTSTP/SIGSTOP ... SIGCONT): that time is not
        the workload's. Safe in a signal handler (two assignments)."""
        self.last = self.polled = self.clock()

    def poll(self, output_at: float) -> int | None:
        now = self.clock()
        if now - self.polled > STOP_GAP_S:
            self.last = now  # pgle could not poll: it was stopped (or starved) meanwhile
        self.polled = now
        if self._read():
            self.last = now
        last = max(self.last, output_at)
        quiet = now - last
        stop = self.stop_bound()
        if stop is not None and quiet >= stop[0]:
            bound, rule = stop
            self.say(
                f"pgle: the workload made no progress for {describe_seconds(quiet)} "
                f"({rule}): writing its Python stacks, then stopping it"
            )
            self.dump(f"no progress for {describe_seconds(quiet)}")
            self.report = self._findings(quiet, bound, rule)
            if self.before_stop is not None:
                self.before_stop(self.report)
            return EXIT_STALLED
        report_s = self.policy.report_after_s
        if report_s is not None and quiet >= report_s and self.reported_since != last:
            self.reported_since = last
            self.dump(f"no progress for {describe_seconds(quiet)}")
            note = self._findings(quiet, report_s, "reported").note()
            self.notes.append(note)
            self.say(f"pgle: {note}")
            self.polled = self.clock()  # the dump's own wait is no stop of pgle
        return None

    def dump(self, why: str) -> None:
        """Every harnessed process writes its stacks; wait until each did (DUMP_WAIT_S)."""
        self._read()
        sig = getattr(signal, schema.DUMP_SIGNAL)
        asked: dict[int, tuple[Path, int]] = {}
        for proc in self.processes.values():
            if proc.pid is None or proc.stacks is None or proc.exited:
                continue
            try:
                size = proc.stacks.stat().st_size
                os.kill(proc.pid, sig)
            except OSError:
                continue
            asked[proc.pid] = (proc.stacks, size)
        deadline = time.monotonic() + DUMP_WAIT_S
        waiting = dict(asked)
        while waiting and time.monotonic() < deadline:
            for pid, (path, size) in list(waiting.items()):
                try:
                    grown = path.stat().st_size > size
                except OSError:
                    grown = False
                if grown:
                    del waiting[pid]
            time.sleep(0.05)
        if asked:
            time.sleep(0.2)  # the dump of a process with many threads: let it finish
        for pid, (path, size) in asked.items():
            try:
                with open(path, "rb") as f:
                    f.seek(size)
                    self.dumped[pid] = f.read().decode("utf-8", "replace")
            except OSError:
                pass

    # -- the bound ------------------------------------------------------------------------------
    def busy(self) -> str | None:
        """What makes a quiet spell no stall: a compile or a trace in flight."""
        for proc in self.processes.values():
            if proc.compiling:
                return "XLA compiles"
            if proc.tracing:
                return "a trace is open or being written"
        return None

    def step_intervals(self) -> list[float]:
        return [
            b - a
            for p in self.processes.values()
            for a, b in zip(p.events.step_times, list(p.events.step_times)[1:], strict=False)
        ]

    def stop_bound(self) -> tuple[float, str] | None:
        """How long without progress stops the workload now, and the rule; None: nothing
        stops it now (the module docstring's rule)."""
        policy = self.policy
        if policy.stop_after_s is not None:
            if policy.stop_after_s < EXPORT_STOP_S and any(
                p.exporting for p in self.processes.values()
            ):
                return EXPORT_STOP_S, (
                    f"--stall-timeout {describe_seconds(policy.stop_after_s)}; the trace's "
                    f"export is given {describe_seconds(EXPORT_STOP_S)}"
                )
            return policy.stop_after_s, f"--stall-timeout {describe_seconds(policy.stop_after_s)}"
        if not policy.rhythm_stop or self.busy():
            return None
        times = self.step_intervals()
        if len(times) < RHYTHM_STEPS:
            return None  # before the first steps (set-up, first compile): never a stall
        median = statistics.median(times)
        if STEP_FACTOR * median > STOP_FLOOR_S:
            return STEP_FACTOR * median, (
                f"the steps stopped: {STEP_FACTOR:g}x the median step interval "
                f"of {describe_seconds(median)}"
            )
        return STOP_FLOOR_S, (
            f"the steps stopped: {describe_seconds(STOP_FLOOR_S)}, the least the "
            f"default watchdog waits"
        )

    # -- reading --------------------------------------------------------------------------------
    def _homes(self) -> list[Path]:
        homes = [self.run]
        procs = self.run / schema.PROCS_DIR
        with contextlib.suppress(OSError):
            homes += sorted(p for p in procs.iterdir() if p.is_dir())
        return homes

    def _read(self) -> bool:
        """Read what is new; True when anything moved."""
        now = self.clock()
        if now >= self.next_scan:
            self.next_scan = now + 2.0
            for home in self._homes():
                if home not in self.processes:
                    events = EventTail(home / "events.jsonl", _WATCHED, keep_steps=STEP_WINDOW + 1)
                    self.processes[home] = _Process(home, events)
        moved = False
        for proc in self.processes.values():
            moved |= self._read_events(proc)
            moved |= self._read_progress(proc)
        return moved

    def _read_progress(self, proc: _Process) -> bool:
        try:
            mtime = (proc.home / schema.PROGRESS_NAME).stat().st_mtime_ns
        except OSError:
            return False
        if mtime == proc.progress_mtime:
            return False
        proc.progress_mtime = mtime
        return True

    def _read_events(self, proc: _Process) -> bool:
        """Read the events added since the last read; True when any line or step record was."""
        read = proc.events.lines, proc.events.records
        for event in proc.events.read():
            self._record(proc, event)
        return (proc.events.lines, proc.events.records) != read

    @staticmethod
    def _record(proc: _Process, event: Event) -> None:
        if isinstance(event, Start):
            proc.pid = event.pid
        elif isinstance(event, Stacks):
            proc.stacks = Path(event.file) if event.file else None
            proc.main_thread = event.main_thread
        elif isinstance(event, CompileBegin):
            proc.compiling[str(event.thread)] = event
        elif isinstance(event, CompileEnd):
            # The compile of its thread (#33): two threads may compile modules of one name.
            # A compile end of pgle before that names no thread: the first of its module.
            begin = (
                str(event.thread)
                if event.thread is not None
                else next((k for k, c in proc.compiling.items() if c.module == event.module), None)
            )
            if begin is not None:
                proc.compiling.pop(begin, None)
        elif isinstance(event, TraceStart):
            proc.tracing = True
        elif isinstance(event, TraceExport):
            proc.exporting = True
        elif isinstance(event, (TraceStop, TraceDiscard)):
            proc.tracing = proc.exporting = False
        elif isinstance(event, ScriptTrace):
            proc.tracing = event.call == "start"  # its stop event comes once it is written
        elif isinstance(event, Exit):
            proc.exited = True

    # -- the findings ---------------------------------------------------------------------------
    def _findings(self, seconds: float, bound: float, rule: str) -> StallReport:
        phases: dict[int, str] = {}
        names: dict[int, str] = {}
        files: dict[int, str] = {}
        for proc in self.processes.values():
            if proc.pid is None or proc.pid not in self.dumped:
                continue
            compiling = next(iter(proc.compiling.values()), None)
            found = stacks.phase(stacks.parse(self.dumped[proc.pid]), proc.main_thread, compiling)
            phases[proc.pid], names[proc.pid] = found.text, found.name
            files[proc.pid] = str(proc.stacks)
        return StallReport(seconds, bound, rule, phases, names, files, str(self.run))
