"""Reading a run's events after the run: its events file (JSON lines written by
pgle/launch/harness.py; the kinds and their fields: pgle/evidence/event_kinds.py) and its marked
steps (steps.bin beside it, read by pgle.evidence.step_file).

Streamed and summarised (issue 25): the events file is read in blocks, never whole; the steps,
the only thing that grows with the run, are kept as compact columns (`Steps`: 8-byte index,
time, step number and a name id per step, ~30 MB for a million steps where a list of records
took 1.3 GB), their exits are not kept (nothing reads when a step ended), and every other
record is kept as it was written (those grow with compiles and log lines, not with steps).
A run folder of pgle before issue 35 has no steps.bin: its steps are `step_enter` lines, read
with the other lines by `json.loads`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from pgle.evidence import schema, step_file
from pgle.evidence.event_kinds import (
    Backend,
    Compile,
    Event,
    Exit,
    JaxImported,
    ModuleCompiled,
    ModuleError,
    ObserveModules,
    ScriptTrace,
    Start,
    StepName,
    TraceError,
    TraceStop,
    XlaCompile,
    XlaFlagsSeen,
    decode,
    parse,
)

BLOCK_BYTES = 2 << 20
_NUMPY_STEPS = 1 << 16  # from this many steps, ordering checks run in numpy
# A step_num that is not an int (or is this value: steps.bin's None) is kept aside in
# `Steps.other_nums`.
_NONE = step_file.NULL_STEP_NUM
E = TypeVar("E", bound=Event)


@dataclasses.dataclass
class Step:
    index: int
    name: str
    step_num: Any
    t_enter: float


class Steps(Sequence[Step]):
    """The run's step_enter events, one per index (the last written wins), in index order:
    columns, with `Step` objects made only when one is asked for."""

    def __init__(
        self,
        indices: Sequence[int],
        t_enter: Sequence[float],
        name: Sequence[int],
        names: list[str],
        step_num: Sequence[int],
        other_nums: dict[int, Any],
    ):
        self.indices, self.t_enter, self.name, self.names = indices, t_enter, name, names
        self.step_num, self.other_nums = step_num, other_nums

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, k: int) -> Step: ...

    @overload
    def __getitem__(self, k: slice) -> list[Step]: ...

    def __getitem__(self, k: int | slice) -> Step | list[Step]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        raw = self.step_num[k]
        num: Any = self.other_nums.get(k) if raw == _NONE else int(raw)
        return Step(int(self.indices[k]), self.names[self.name[k]], num, float(self.t_enter[k]))

    def __iter__(self) -> Iterator[Step]:
        return (self[k] for k in range(len(self)))

    def find(self, index: int) -> Step | None:
        """The step of this index, or None."""
        import bisect

        k = bisect.bisect_left(self.indices, index)
        return self[k] if k < len(self) and self.indices[k] == index else None


class _StepLog:
    """Steps entered in the order read, as columns."""

    def __init__(self) -> None:
        self.index, self.t = array("q"), array("d")
        self.name, self.num = array("q"), array("q")
        self.names: dict[str, int] = {}
        self.other_nums: dict[int, Any] = {}  # position -> step_num that is not a plain int

    def add(self, r: dict[str, Any]) -> None:
        index, t = r.get("index"), r.get("t")
        if type(index) is not int or not isinstance(t, (int, float)) or isinstance(t, bool):
            return  # not a step the harness wrote; nothing to order it by
        if not -(1 << 63) <= index < 1 << 63:
            return
        name = r.get("name", "")
        name = name if isinstance(name, str) else str(name)
        num = r.get("step_num")
        if type(num) is int and _NONE < num < 1 << 63:
            self.num.append(num)
        else:
            self.other_nums[len(self.num)] = num
            self.num.append(_NONE)
        self.index.append(index)
        self.t.append(float(t))
        self.name.append(self.names.setdefault(name, len(self.names)))

    def add_records(self, records: Any, names: dict[int, str]) -> None:
        """The steps entered of step file records (pgle.evidence.step_file), in file order; a
        name id no step_name event defined is the name ""."""
        import numpy as np

        enter = records[records["t_ns"] > 0]
        ids = np.unique(enter["name"])
        table = {int(i): self.names.setdefault(names.get(int(i), ""), len(self.names)) for i in ids}
        name = enter["name"]
        if table and any(k != v for k, v in table.items()):
            name = np.array([table[int(i)] for i in ids], np.int64)[np.searchsorted(ids, name)]
        self.index.frombytes(np.ascontiguousarray(enter["index"], "<i8").tobytes())
        self.t.frombytes(step_file.seconds(enter["t_ns"]).astype("<f8").tobytes())
        self.name.frombytes(np.ascontiguousarray(name, "<i8").tobytes())
        self.num.frombytes(np.ascontiguousarray(enter["step_num"], "<i8").tobytes())

    def steps(self) -> Steps:
        index = self.index
        n = len(index)
        if n < _NUMPY_STEPS:
            if all(index[k] < index[k + 1] for k in range(n - 1)):
                return Steps(index, self.t, self.name, list(self.names), self.num, self.other_nums)
            # Out of order or repeated: index order, the last record of an index winning (the
            # old reader kept a dict by index).
            last = {i: k for k, i in enumerate(index)}
            keep = [last[i] for i in sorted(last)]
        else:
            import numpy as np

            v = np.frombuffer(index, np.int64)
            if bool((v[1:] > v[:-1]).all()):
                return Steps(index, self.t, self.name, list(self.names), self.num, self.other_nums)
            order = np.argsort(v, kind="stable")
            ordered = v[order]
            keep = order[np.append(ordered[1:] != ordered[:-1], True)].tolist()
        moved = {k: j for j, k in enumerate(keep) if k in self.other_nums}

        def pick(column: array[Any]) -> array[Any]:
            return array(column.typecode, (column[k] for k in keep))

        return Steps(
            pick(index),
            pick(self.t),
            pick(self.name),
            list(self.names),
            pick(self.num),
            {j: self.other_nums[k] for k, j in moved.items()},
        )


@dataclasses.dataclass
class RunEvents:
    """A run's events, typed (pgle.evidence.event_kinds), the often-read kinds picked out."""

    records: list[Event]  # every event but step_enter/step_exit (steps are in `steps`)
    steps: Steps
    backend: Backend | None
    trace: TraceStop | None  # the kept trace
    trace_errors: list[str]
    compiles: list[Compile]
    exit: Exit | None
    modules: list[ModuleCompiled] = dataclasses.field(default_factory=list)
    xla_flags_seen: XlaFlagsSeen | None = None  # XLA_FLAGS at the first compile
    script_traces: list[ScriptTrace] = dataclasses.field(default_factory=list)
    xla_compiles: list[XlaCompile] = dataclasses.field(default_factory=list)
    lines: int = 0  # records read, step records included
    # A command with several Python processes importing jax (command mode): one row each,
    # this one (the first to import jax) first; empty for one process.
    processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Lines that were no event the harness writes (a run folder is untrusted input): skipped.
    rejected: int = 0
    # The step file is not one this pgle reads (a run folder is untrusted input): no steps.
    steps_error: str | None = None

    def of(self, cls: type[E]) -> list[E]:
        """The events of one kind, in file order."""
        return [r for r in self.records if isinstance(r, cls)]

    @property
    def compile_platforms(self) -> tuple[str, ...] | None:
        """Platforms XLA compiled for, as the harness saw every compile; None when it could
        not watch them (no harness, or its compile observer was not installed)."""
        installed = self.of(ObserveModules)
        if not installed or not installed[-1].installed:
            return None
        return tuple(str(r.platform) for r in self.xla_compiles)

    @property
    def compile_threads(self) -> tuple[str, ...]:
        """Native ids of the threads that called XLA's compile, and the process id (the
        main thread's id on Linux)."""
        ids = [str(r.thread) for r in self.xla_compiles]
        ids += [str(r.pid) for r in self.xla_compiles if r.pid]
        return tuple(dict.fromkeys(ids))

    @property
    def workload_modules(self) -> set[str] | None:
        """The modules the workload compiled (the harness's per-module records); None when
        the records may be incomplete."""
        if self.of(ModuleError) or self.compile_platforms is None:
            return None
        return {r.module for r in self.modules if r.module} or None

    @property
    def platform(self) -> str | None:
        return self.backend.platform if self.backend else None

    @property
    def backend_record(self) -> dict[str, Any] | None:
        """The backend record as written (what reports show as `backend`)."""
        return self.backend.to_dict() if self.backend else None

    @property
    def jax_version(self) -> str | None:
        """The jax the workload imported, as it said."""
        return next((r.version for r in self.of(JaxImported)), None)

    @property
    def jax_imported(self) -> bool | None:
        """Did the workload import jax? None when the harness left no events at all."""
        if self.of(JaxImported):
            return True
        return False if self.lines else None


def _blocks(path: Path, start: int, end: int) -> Iterator[bytes]:
    """The file's bytes from `start` to `end` in blocks of whole lines, then the bytes after
    the last newline (a line cut short), if any."""
    with open(path, "rb") as f:
        f.seek(start)
        left, rest = end - start, b""
        while left > 0 and (block := f.read(min(BLOCK_BYTES, left))):
            left -= len(block)
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]
        if rest:
            yield rest


def _lines(path: Path, size: int) -> Iterator[bytes]:
    """The file's lines (the last one may lack its newline), split on newlines only
    (json.dumps never writes a raw carriage return)."""
    for block in _blocks(path, 0, size):
        yield from (block[:-1] if block.endswith(b"\n") else block).split(b"\n")


def read_events(path: Path | str) -> RunEvents:
    """The events of a run: its events file and the step file beside it."""
    path = Path(path)
    steps = _StepLog()
    records: list[Event] = []
    kinds: dict[type[Event], list[Any]] = {}  # the often-read kinds, in file order
    names: dict[int, str] = {}  # steps.bin's name ids
    lines = rejected = 0
    size = path.stat().st_size if path.exists() else 0
    if size:
        for r in (r for r in map(decode, _lines(path, size)) if r is not None):
            lines += 1
            kind = r.get("kind")
            if kind == schema.STEP_ENTER:
                steps.add(r)  # as columns (the one kind that grows with a run of old pgle)
                continue
            if kind == schema.STEP_EXIT:
                continue
            event = parse(r)
            if event is None:
                rejected += 1
                continue
            if isinstance(event, StepName):
                names[event.id] = event.name
                continue
            records.append(event)
            kinds.setdefault(type(event), []).append(event)
    side = step_file.StepFile(step_file.beside(path))
    # After the step_enter lines: their indices and the records' never meet in one run. In
    # blocks: memory follows the steps kept, not the file.
    while (block := side.read(BLOCK_BYTES // step_file.RECORD_BYTES)).size:
        steps.add_records(block, names)
    if side.error:
        logging.getLogger(__name__).warning(side.error)
    return RunEvents(
        records,
        steps.steps(),
        kinds.get(Backend, [None])[0],
        kinds.get(TraceStop, [None])[-1],
        [e.error for e in kinds.get(TraceError, [])],
        kinds.get(Compile, []),
        kinds.get(Exit, [None])[-1],
        kinds.get(ModuleCompiled, []),
        kinds.get(XlaFlagsSeen, [None])[0],
        kinds.get(ScriptTrace, []),
        kinds.get(XlaCompile, []),
        lines=lines + side.records,
        rejected=rejected,
        steps_error=side.error,
    )


def _process_row(home: Path, ev: RunEvents) -> dict[str, Any]:
    start = next(iter(ev.of(Start)), None)
    backend = ev.backend
    return {
        "pid": start.pid if start else None,
        "argv": start.argv if start else None,
        "dir": str(home),
        "process_index": backend.process_index if backend else None,
        "process_count": backend.process_count if backend else None,
        "exit_code": ev.exit.code if ev.exit else None,
        "steps": len(ev.steps),
        "trace": bool(ev.trace),
    }


def read_run_events(path: Path | str) -> RunEvents:
    """The events of a run folder: its events file and, for a command whose several Python
    processes imported jax, every other process's (procs/<pid>/events.jsonl). The run's
    events are the first process's; the others add their compiles (whose log lines are the
    run's own: pgle.verdicts.origin) and a row each in `processes`."""
    path = Path(path)
    primary = read_events(path)
    procs = path.parent / schema.PROCS_DIR
    try:
        homes = sorted(
            (p for p in procs.iterdir() if p.is_dir()),
            key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0),
        )
    except OSError:
        return primary
    others = [(home, read_events(home / path.name)) for home in homes]
    others = [(home, ev) for home, ev in others if ev.lines]
    if not others:
        return primary
    for _, ev in others:
        primary.xla_compiles += ev.xla_compiles
        primary.modules += ev.modules
    primary.processes = [_process_row(path.parent, primary)] + [
        _process_row(home, ev) for home, ev in others
    ]
    return primary


def workload_exit_phrase(code: int, events: RunEvents, *, command: bool = False) -> str:
    """How a report names the workload's non-zero exit: whose code it is (the workload's,
    passed through: pgle's own bad-input code is 2 too) and how far it got."""
    if command and not events.lines:
        return (
            f"the command exited with code {code} (its own code, passed through) and no "
            "Python process of it imported jax under pgle's harness (it travels by "
            "PYTHONPATH: a python started with -I, -E or -S does not read it)"
        )
    killed = ""
    if 128 < code < 160:
        import signal

        with contextlib.suppress(ValueError):
            killed = f", killed by {signal.Signals(code - 128).name}"
    if events.jax_imported is False:
        return (
            f"the workload exited with code {code}{killed} before importing jax (its own "
            "code, passed through; not pgle's exit 2 for bad input)"
        )
    return f"the workload exited with code {code}{killed}"
