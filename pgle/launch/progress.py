"""Progress of a long launch: plain lines to the log (INFO; the CLI prints them as `pgle:`
lines), at most one every PROGRESS_EVERY_S seconds, from the harness's events file
(pgle.evidence.schema) while the workload runs.

Plain lines, never `\\r` redraws: they stay readable in a log file, under `srun` and in CI, and
the workload's own output goes on between them unchanged.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from pgle.evidence import schema
from pgle.phrases import plural

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0
_STEP_EXIT = schema.STEP_EXIT_LINE.encode()


class WindowProgress:
    """Polled by the launcher while the workload runs (cheap: reads only the new lines).
    `window`: the launch has a profiling window to report on; without one (prewarm, auto) the
    lines say how long the workload has run, its steps, and what auto PGLE profiled."""

    def __init__(
        self, events: Path, every: float = PROGRESS_EVERY_S, *, window: bool = True
    ) -> None:
        self.events, self.every = Path(events), every
        self.window = window
        self.profiled = 0  # auto PGLE's profiled executions (schema.PGLE_PROFILED)
        self.all_steps = 0
        self.start = time.monotonic()
        self.next_at = self.start + every
        self.offset = 0
        self.opened: float | None = None  # monotonic time the window opened
        self.closed = False
        self.steps = 0  # steps entered since the window opened

    def _read(self, now: float) -> None:
        """The lines added since the last poll; `now`: the poll's time, which a window that
        opened since then is taken to have opened at (the same clock for both ends: a window
        never opens after the poll that sees it)."""
        try:
            with open(self.events, "rb") as f:
                f.seek(self.offset)
                for line in f:  # line by line: memory stays flat however much is new
                    if not line.endswith(b"\n"):
                        break  # half-written: the next poll reads it whole
                    self.offset += len(line)
                    self._line(line, now)
        except OSError:
            return

    def _line(self, line: bytes, now: float) -> None:
        # A step's lines are most of the file (a million in a long run): told apart by their
        # start (as the harness writes them), never parsed, while the workload runs.
        if line.startswith(_STEP_EXIT):
            return
        if line.startswith(schema.STEP_ENTER_BYTES):
            kind = schema.STEP_ENTER
        else:
            try:
                kind = json.loads(line).get("kind")
            except (ValueError, AttributeError):
                return
        if kind == schema.PGLE_PROFILED:
            self.profiled += 1
        elif kind == schema.STEP_ENTER:
            self.all_steps += 1
        if kind == schema.TRACE_START and self.opened is None:
            self.opened = now
        elif kind == schema.STEP_ENTER and self.opened is not None and not self.closed:
            self.steps += 1
        elif kind == schema.TRACE_STOP:
            self.closed = True

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.every
        self._read(now)
        ran = f"{now - self.start:.0f} s"
        if not self.window:
            done = [plural(self.all_steps, "step")] if self.all_steps else []
            if self.profiled:
                done.append(f"{plural(self.profiled, 'execution')} profiled by auto PGLE")
            log.info(f"workload running for {ran}" + (": " + ", ".join(done) if done else ""))
            return
        if self.closed:
            return  # the window's end is reported by the command itself
        if self.opened is None:
            log.info(f"workload running for {ran}; the profiling window has not opened yet")
        else:
            steps = f", {plural(self.steps, 'step')} entered" if self.steps else ""
            log.info(
                f"profiling window open for {now - self.opened:.0f} s{steps} "
                f"(workload running for {ran})"
            )
