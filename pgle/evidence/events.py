"""Reading the harness's events file (JSON lines written by pgle/launch/harness.py; the kinds
and their fields are in pgle/evidence/schema.py).

Streamed and summarised (issue 25): the file is read in blocks, never whole; step events, the
only kind that grows with the run, are kept as compact columns (`Steps`: 8-byte index, time,
step number and a name id per step, ~30 MB for a million steps where a list of records took
1.3 GB), step_exit events are not kept (nothing reads when a step ended), and every other
record is kept as it was written (those grow with compiles and log lines, not with steps).
Large files parse their step lines in bulk with numpy (pgle/evidence/step_lines.py); small
ones, and any line the bulk parser does not take, go through `json.loads`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pgle.evidence import schema
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
    TraceError,
    TraceStop,
    XlaCompile,
    XlaFlagsSeen,
    decode,
    parse,
)

# From this size on, step lines are parsed in bulk (numpy's import costs more below it).
BULK_MIN_BYTES = 1 << 20
BLOCK_BYTES = 2 << 20
_NUMPY_STEPS = 1 << 16  # from this many steps, ordering checks run in numpy
# A step_num that is not an int (or is this value) is kept aside in `Steps.other_nums`.
_NONE = -(1 << 63)
E = TypeVar("E", bound=Event)

if TYPE_CHECKING:  # numpy is imported only for large files
    from pgle.evidence.step_lines import StepRows

    # step_lines.parse_chunk's result: the block's steps, its other lines, step_exits dropped
    Chunk = tuple[StepRows, list[tuple[int, bytes]], int]


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
    """Step_enter records in file order, as columns."""

    def __init__(self) -> None:
        self.index, self.t = array("q"), array("d")
        self.name, self.num = array("q"), array("q")
        self.names: dict[str, int] = {}
        self.other_nums: dict[int, Any] = {}  # position -> step_num that is not a plain int
        self.blocks: list[tuple[Any, ...]] = []  # numpy columns of bulk-parsed blocks
        self.bulk_lines = 0  # step lines the bulk parser took (step_exit lines included)

    def add(self, r: dict[str, Any]) -> None:
        index, t = r.get("index"), r.get("t")
        if type(index) is not int or not isinstance(t, (int, float)) or isinstance(t, bool):
            return  # not a step the harness wrote; nothing to order it by
        if not -(1 << 63) <= index < 1 << 63:
            return
        self._flush_blocks()
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

    def add_rows(self, rows: StepRows) -> None:
        """Bulk-decoded rows (step_lines.StepRows) of one block."""
        import numpy as np

        ids = np.array([self.names.setdefault(n, len(self.names)) for n in rows.names], np.int64)
        num = np.where(rows.num_null, _NONE, rows.step_num)
        self.blocks.append((rows.index, rows.t, ids[rows.name] if ids.size else rows.name, num))

    def _flush_blocks(self) -> None:
        for index, t, name, num in self.blocks:
            self.index.frombytes(index.astype("<i8").tobytes())
            self.t.frombytes(t.astype("<f8").tobytes())
            self.name.frombytes(name.astype("<i8").tobytes())
            self.num.frombytes(num.astype("<i8").tobytes())
        self.blocks = []

    def steps(self) -> Steps:
        self._flush_blocks()
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
    lines: int = 0  # records read, step events included
    # A command with several Python processes importing jax (command mode): one row each,
    # this one (the first to import jax) first; empty for one process.
    processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Lines that were no event the harness writes (a run folder is untrusted input): skipped.
    rejected: int = 0

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
    """The file's lines (the last one may lack its newline), split on newlines only, as the
    bulk parser does (json.dumps never writes a raw carriage return)."""
    for block in _blocks(path, 0, size):
        yield from (block[:-1] if block.endswith(b"\n") else block).split(b"\n")


def _records_bulk(path: Path, steps: _StepLog) -> Iterator[dict[str, Any]]:
    """Every record but the step lines step_lines decodes (those go to `steps`), in file
    order; the step lines it leaves arrive here as records."""
    import numpy as np

    for rows, others, exits in _parsed_blocks(path):
        steps.bulk_lines += rows.line.size + exits
        # Steps and other lines in block order: the last record of an index wins.
        before = np.searchsorted(rows.line, [line_no for line_no, _ in others]).tolist()
        done = 0
        for (_, line), upto in zip(others, before, strict=True):
            if upto > done:
                steps.add_rows(_take(rows, done, upto))
                done = upto
            r = decode(line)
            if r is not None:
                yield r
        if done < rows.line.size:
            steps.add_rows(_take(rows, done, rows.line.size))


# From this size on, with several cores, the file's parts are parsed in worker processes
# (the workload has exited: its cores are free; parsing is most of what a long run's verdict
# waits for).
PARALLEL_MIN_BYTES = 32 << 20


def _parsed_blocks(path: Path) -> Iterator[Chunk]:
    """parse_chunk's result for each block of whole lines, in file order (the last line, if
    it lacks its newline, as a block of its own)."""
    import os

    size = path.stat().st_size
    workers = min(os.cpu_count() or 1, 4)
    if size < PARALLEL_MIN_BYTES or workers < 2 or not _fork_is_safe():
        yield from _parse_range(path, 0, size)
        return
    import concurrent.futures
    import multiprocessing

    cuts = _line_cuts(path, size, workers * 4)
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork")
    ) as pool:
        for part in pool.map(_parse_part, [(str(path), a, b) for a, b in itertools.pairwise(cuts)]):
            yield from part


def _fork_is_safe() -> bool:
    """fork() only from a single-threaded process that has not loaded jax (jaxlib's threads
    are invisible to `threading`; a forked copy of a multithreaded process can deadlock). The
    CLI never imports jax; a notebook calling pgle's API may have."""
    import os
    import sys
    import threading

    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and not any(name in sys.modules for name in ("jax", "jaxlib"))
    )


def _line_cuts(path: Path, size: int, parts: int) -> list[int]:
    """Offsets that split the file into about `parts` ranges of whole lines."""
    cuts = [0]
    with open(path, "rb") as f:
        for k in range(1, parts):
            f.seek(max(k * size // parts, cuts[-1]))
            line = f.readline()  # the rest of the line the guess fell in
            at = f.tell()
            if at >= size:
                break
            if at > cuts[-1] and line.endswith(b"\n"):
                cuts.append(at)
    cuts.append(size)
    return cuts


def _parse_part(args: tuple[str, int, int]) -> list[Chunk]:
    path, start, end = args
    return list(_parse_range(Path(path), start, end))


def _parse_range(path: Path, start: int, end: int) -> Iterator[Chunk]:
    from pgle.evidence.step_lines import parse_chunk

    for block in _blocks(path, start, end):
        yield parse_chunk(block) if block.endswith(b"\n") else parse_chunk_tail(block)


def parse_chunk_tail(line: bytes) -> Chunk:
    """A last line without its newline: no step is decoded from it; it goes to json.loads."""
    import numpy as np

    from pgle.evidence.step_lines import StepRows

    empty = np.zeros(0, np.int64)
    return (
        StepRows(empty, empty, np.zeros(0, np.float64), empty, [], empty, np.zeros(0, bool)),
        [(0, line)],
        0,
    )


def _take(rows: StepRows, a: int, b: int) -> StepRows:
    from pgle.evidence.step_lines import StepRows

    return StepRows(
        rows.line[a:b],
        rows.index[a:b],
        rows.t[a:b],
        rows.name[a:b],
        rows.names,
        rows.step_num[a:b],
        rows.num_null[a:b],
    )


def read_events(path: Path | str, *, bulk: bool | None = None) -> RunEvents:
    """The events of a run. `bulk`: parse step lines with numpy (default: for files of
    BULK_MIN_BYTES or more; both ways give the same events)."""
    path = Path(path)
    steps = _StepLog()
    backend: Backend | None = None
    trace: TraceStop | None = None
    exit_: Exit | None = None
    records: list[Event] = []
    errors: list[str] = []
    compiles: list[Compile] = []
    modules: list[ModuleCompiled] = []
    script_traces: list[ScriptTrace] = []
    xla_compiles: list[XlaCompile] = []
    flags_seen: XlaFlagsSeen | None = None
    lines = rejected = 0
    size = path.stat().st_size if path.exists() else 0
    if size:
        if bulk is None:
            bulk = size >= BULK_MIN_BYTES
        if bulk:
            source: Iterator[dict[str, Any]] = _records_bulk(path, steps)
        else:
            source = (r for r in map(decode, _lines(path, size)) if r is not None)
        for r in source:
            lines += 1
            kind = r.get("kind")
            if kind == schema.STEP_ENTER:
                steps.add(r)  # as columns (the one kind that grows with the run)
                continue
            if kind == schema.STEP_EXIT:
                continue
            event = parse(r)
            if event is None:
                rejected += 1
                continue
            records.append(event)
            if isinstance(event, Backend):
                backend = backend or event
            elif isinstance(event, TraceStop):
                trace = event
            elif isinstance(event, TraceError):
                errors.append(event.error)
            elif isinstance(event, Compile):
                compiles.append(event)
            elif isinstance(event, ModuleCompiled):
                modules.append(event)
            elif isinstance(event, Exit):
                exit_ = event
            elif isinstance(event, XlaFlagsSeen):
                flags_seen = flags_seen or event
            elif isinstance(event, ScriptTrace):
                script_traces.append(event)
            elif isinstance(event, XlaCompile):
                xla_compiles.append(event)
    return RunEvents(
        records,
        steps.steps(),
        backend,
        trace,
        errors,
        compiles,
        exit_,
        modules,
        flags_seen,
        script_traces,
        xla_compiles,
        lines=lines + steps.bulk_lines,
        rejected=rejected,
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
