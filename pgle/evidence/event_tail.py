"""The one incremental reader of a run's events while the workload writes them: the stall
watchdog (pgle.launch.stall), the progress lines (pgle.launch.progress), a job's fleet feed
(pgle.jobs.fleet) and the poll of a held workload (pgle.launch.execution). The whole run
after it ended: pgle.evidence.events.

Each `read()` yields the events of the asked kinds (pgle.evidence.event_kinds) in the lines
completed since the last read; a half-written last line is kept for the next one. The writer,
pgle.launch.harness `Events`, starts every line `{"kind": "<kind>", ` (json.dumps of
`{"kind": ..., "t": ..., **fields}`), so a line of another kind is told by its start and never
decoded. The marked steps (most of a long run: a fast workload adds a million between two
polls) are steps.bin's records (pgle.evidence.step_file), counted and timed in numpy; an event
comes after the records its `edges` says were written before it. A line in another layout (a
run folder is untrusted input) goes through json.loads. Memory stays flat: both files are read
in blocks, and a line longer than MAX_LINE_BYTES (none the harness writes) is skipped.
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Iterator
from pathlib import Path

from pgle.evidence import schema, step_file
from pgle.evidence.event_kinds import Event, StepEnter, decode, parse

BLOCK_BYTES = 1 << 20
BLOCK_RECORDS = BLOCK_BYTES // step_file.RECORD_BYTES
MAX_LINE_BYTES = 64 << 20
_HEAD = b'{"kind": "'
_STEP_ENTER = schema.STEP_ENTER.encode()


class EventTail:
    """`kinds`: the event classes `read` yields (a line of another kind is only counted);
    `keep_steps`: how many of the last marked steps' times `step_times` holds."""

    def __init__(
        self, path: Path | str, kinds: Collection[type[Event]], *, keep_steps: int = 1
    ) -> None:
        self.path = Path(path)
        self.kinds = frozenset(cls.KIND for cls in kinds)
        self._kinds = frozenset(k.encode() for k in self.kinds)
        self.offset = 0  # the end of the last complete line read
        self.lines = 0  # complete lines read
        self.rejected = 0  # lines of an asked kind (or another layout) that were no event
        self.steps = 0  # marked steps entered
        self.step_file = step_file.StepFile(step_file.beside(self.path))
        self.step_times: collections.deque[float] = collections.deque(maxlen=keep_steps)
        self._rest: list[bytes] = []  # the last line, not complete yet
        self._skip = False  # within a line longer than MAX_LINE_BYTES

    @property
    def records(self) -> int:
        """Step records read (a step's entry and its exit: one each)."""
        return self.step_file.records

    def read(self) -> Iterator[Event]:
        """The events of the asked kinds completed since the last read, in file order. Consume
        it whole: `steps` and `step_times` move as it goes (at an event: the steps before it)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset + sum(map(len, self._rest)))
                while block := f.read(BLOCK_BYTES):
                    lines = self._complete(block)
                    self.lines += len(lines)
                    for line in lines:
                        if event := self._event(line):
                            yield event
        except OSError:
            pass
        self._records(None)

    def _complete(self, block: bytes) -> list[bytes]:
        """The lines `block` completes; its last, incomplete line is kept."""
        cut = block.rfind(b"\n")
        if cut < 0:
            self._rest.append(block)
            if sum(map(len, self._rest)) > MAX_LINE_BYTES:
                self.offset += sum(map(len, self._rest))
                self._rest, self._skip = [], True
            return []
        lines = b"".join([*self._rest, block[:cut]]).split(b"\n")
        self._rest = [block[cut + 1 :]] if cut + 1 < len(block) else []
        self.offset += sum(map(len, lines)) + len(lines)
        if self._skip:  # the end of a line too long to be an event
            self._skip = False
            self.rejected += 1
            del lines[0]
        return lines

    def _event(self, line: bytes) -> Event | None:
        if line.startswith(_HEAD):
            kind = line[len(_HEAD) : line.find(b'"', len(_HEAD))]
            if kind not in self._kinds and kind != _STEP_ENTER:
                return None
        event = parse(decode(line))
        if event is None:
            self.rejected += 1
            return None
        if event.edges is not None:
            self._records(event.edges)
        if isinstance(event, StepEnter):  # a step_num steps.bin does not hold; older pgle's
            self.steps += 1
            self.step_times.append(event.t)
        elif event.kind in self.kinds:
            return event
        return None

    def _records(self, upto: int | None) -> None:
        """Read the step records up to the `upto`-th (None: all there are)."""
        keep = self.step_times.maxlen or 0
        while upto is None or self.step_file.records < upto:
            want = BLOCK_RECORDS if upto is None else min(BLOCK_RECORDS, upto - self.records)
            t_ns = self.step_file.read(want)["t_ns"]
            if not t_ns.size:
                return
            entered = t_ns[t_ns > 0]
            self.steps += entered.size
            if keep:
                self.step_times.extend(step_file.seconds(entered[-keep:]).tolist())
