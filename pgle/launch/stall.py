"""The stall watchdog: a workload that makes no progress for too long is stopped, after every
one of its Python processes wrote its stacks into the run folder.

Progress is anything the workload does that pgle can see: a line of output (either stream),
an event of the harness (a step, a compile starting or ending, a JAX log record, a warning)
and an execution of a jitted function (the harness rewrites `progress` when their count
changes; pgle.launch.harness). A hung job shows none of them: a collective a peer never
joins, a host callback that waits forever, auto PGLE's FDO recompile or its wait for the
profile another process publishes (a 64-GPU job sat 10.5 h there, marin #8222).

The bound (`--stall-timeout`, docs/guide/cluster.md):
- given: that many seconds of no progress, whatever the phase (set it above the longest
  compile);
- by default: while XLA compiles (the harness's compile_begin without its compile_end),
  max(COMPILE_FLOOR_S, COMPILE_FACTOR x the longest compile seen so far; auto PGLE's FDO
  recompile of a module is a compile like its first one, with the profile): a big model's
  first compile takes many minutes; otherwise max(FLOOR_S, STEP_FACTOR x the median of the
  last steps' times).

On a stall pgle sends every harnessed process its dump signal (schema.DUMP_SIGNAL: ignored by
default, so a shell or launcher in the workload's group is never hurt): faulthandler writes
all threads' stacks to `stacks.txt` beside the process's events. pgle then names the phase
(pgle.evidence.stacks), says so in one line, and stops the workload's group (SIGTERM, then
SIGKILL) with EXIT_STALLED. A rank stopped because a peer failed dumps its stacks too
(`dump`), so a multi-process job leaves every rank's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import statistics
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from pgle.errors import EXIT_STALLED
from pgle.evidence import schema, stacks

FLOOR_S = 600.0  # 10 min: no progress of any kind outside a compile
STEP_FACTOR = 20.0  # x the median step time, when it is longer than FLOOR_S / 20
COMPILE_FLOOR_S = 3600.0  # 1 h: big models compile for many minutes
COMPILE_FACTOR = 5.0  # x the longest compile so far
DUMP_WAIT_S = 5.0  # the most pgle waits for the processes to write their stacks
STEP_WINDOW = 50  # steps whose times give the median
_STEP_ENTER = (f'{{"kind": "{schema.STEP_ENTER}", "t": ').encode()


def describe_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclasses.dataclass
class _Process:
    """What pgle knows of one harnessed process of the workload."""

    home: Path
    offset: int = 0
    pid: int | None = None
    main_thread: str | None = None
    stacks: Path | None = None
    steps: deque = dataclasses.field(default_factory=lambda: deque(maxlen=STEP_WINDOW + 1))
    compiling: dict[str, dict] = dataclasses.field(default_factory=dict)  # thread -> begin
    longest_compile: float = 0.0
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

    def message(self) -> str:
        procs = sorted(self.phases)
        if len(procs) == 1:
            where = self.phases[procs[0]]
            files = self.stacks.get(procs[0]) or "(no stacks were written)"
            stacks = f"its Python stacks are in {files}"
        else:
            where = "; ".join(f"process {p}: {self.phases[p]}" for p in procs)
            stacks = f"every process's Python stacks are in {self.run} (stacks.txt, procs/*/)"
        if not procs:
            where, stacks = "no harnessed process answered", "no stacks were written"
        return (
            f"the workload made no progress for {describe_seconds(self.seconds)} "
            f"({self.bound_rule}): {where}; {stacks}; pgle stopped it (exit "
            f"{EXIT_STALLED}; --stall-timeout sets the bound)"
        )

    def to_dict(self) -> dict:
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
    """Polled by the launcher (pgle.launch.launcher.Stall); reads only what is new."""

    def __init__(
        self,
        run_path: Path,
        bound_s: float | None,
        say: Callable[[str], object],
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.run = Path(run_path)
        self.bound_s = bound_s  # None: derived
        self.say = say
        self.clock = clock
        self.last = clock()
        self.processes: dict[Path, _Process] = {}
        self.next_scan = 0.0
        self.report: StallReport | None = None
        self.dumped: dict[int, str] = {}  # pid -> the text of its dump

    # -- what the launcher calls --------------------------------------------------------------
    def poll(self, output_at: float) -> int | None:
        now = self.clock()
        if self._read():
            self.last = now
        last = max(self.last, output_at)
        bound, rule = self.bound()
        if now - last < bound:
            return None
        self.say(
            f"pgle: the workload made no progress for {describe_seconds(now - last)} "
            f"({rule}): writing its Python stacks, then stopping it"
        )
        self.dump(f"no progress for {describe_seconds(now - last)}")
        self.report = self._findings(now - last, bound, rule)
        return EXIT_STALLED

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
        deadline = self.clock() + DUMP_WAIT_S
        waiting = dict(asked)
        while waiting and self.clock() < deadline:
            for pid, (path, size) in list(waiting.items()):
                try:
                    grown = path.stat().st_size > size
                except OSError:
                    grown = False
                if grown:
                    del waiting[pid]
            time.sleep(0.05)
        time.sleep(0.2)  # the dump of a process with many threads: let it finish
        for pid, (path, size) in asked.items():
            try:
                with open(path, "rb") as f:
                    f.seek(size)
                    self.dumped[pid] = f.read().decode("utf-8", "replace")
            except OSError:
                pass

    # -- the bound ------------------------------------------------------------------------------
    def bound(self) -> tuple[float, str]:
        if self.bound_s is not None:
            return self.bound_s, f"--stall-timeout {describe_seconds(self.bound_s)}"
        in_flight = [(p, c) for p in self.processes.values() for c in p.compiling.values()]
        if in_flight:
            longest = max((p.longest_compile for p in self.processes.values()), default=0.0)
            bound = COMPILE_FLOOR_S
            rule = f"the bound while XLA compiles: {describe_seconds(COMPILE_FLOOR_S)}"
            if COMPILE_FACTOR * longest > bound:
                bound = COMPILE_FACTOR * longest
                rule = f"{COMPILE_FACTOR:g}x the longest compile so far"
            return bound, rule
        times = [
            b - a
            for p in self.processes.values()
            for a, b in zip(p.steps, list(p.steps)[1:], strict=False)
        ]
        if times:
            median = statistics.median(times)
            if STEP_FACTOR * median > FLOOR_S:
                return STEP_FACTOR * median, f"{STEP_FACTOR:g}x the median step time"
        return FLOOR_S, f"the default bound, {describe_seconds(FLOOR_S)}"

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
                self.processes.setdefault(home, _Process(home))
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
        """The complete lines added since the last read, one at a time, as WindowProgress reads
        them (pgle.launch.progress): a fast workload adds tens of MB between two polls (a
        million short steps), and reading them whole, split into lines, took pgle's memory past
        200 MB while it waited (issue 25)."""
        moved = False
        try:
            with open(proc.home / "events.jsonl", "rb") as f:
                f.seek(proc.offset)
                for line in f:
                    if not line.endswith(b"\n"):
                        break  # half-written: the next read has it whole
                    proc.offset += len(line)
                    moved = True
                    if line.startswith(_STEP_ENTER):
                        with contextlib.suppress(ValueError):
                            proc.steps.append(float(line[len(_STEP_ENTER) :].split(b",", 1)[0]))
                    elif b'"kind": "step_exit"' not in line[:30]:
                        self._record(proc, line)
        except OSError:
            return moved
        return moved

    def _record(self, proc: _Process, line: bytes) -> None:
        head = line[:40]
        if not any(k in head for k in (b'"compile_', b'"start"', b'"stacks"', b'"exit"')):
            return
        try:
            r = json.loads(line)
        except ValueError:
            return
        kind = r.get("kind")
        if kind == schema.START:
            proc.pid = r.get("pid")
        elif kind == schema.STACKS:
            proc.stacks = Path(r["file"]) if r.get("file") else None
            proc.main_thread = r.get("main_thread")
        elif kind == schema.COMPILE_BEGIN:
            proc.compiling[str(r.get("thread"))] = {
                "module": r.get("module"),
                "fdo": r.get("fdo"),
                "t": r.get("t"),
            }
        elif kind == schema.COMPILE_END:
            begin = next(
                (k for k, c in proc.compiling.items() if c.get("module") == r.get("module")), None
            )
            if begin is not None:
                started = proc.compiling.pop(begin)
                seconds = float(r.get("t") or 0) - float(started.get("t") or 0)
                if seconds > 0:
                    proc.longest_compile = max(proc.longest_compile, seconds)
        elif kind == schema.EXIT:
            proc.exited = True

    # -- the findings ---------------------------------------------------------------------------
    def _findings(self, seconds: float, bound: float, rule: str) -> StallReport:
        phases, names, files = {}, {}, {}
        for proc in self.processes.values():
            if proc.pid is None or proc.pid not in self.dumped:
                continue
            compiling = next(iter(proc.compiling.values()), None)
            found = stacks.phase(stacks.parse(self.dumped[proc.pid]), proc.main_thread, compiling)
            phases[proc.pid], names[proc.pid] = found.text, found.name
            files[proc.pid] = str(proc.stacks)
        return StallReport(seconds, bound, rule, phases, names, files, str(self.run))
