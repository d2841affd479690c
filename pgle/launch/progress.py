"""Progress of a long launch: plain lines to the log (INFO; the CLI prints them as `pgle:`
lines), at most one every PROGRESS_EVERY_S seconds, from the harness's events file
(pgle.evidence.event_tail) while the workload runs.

Plain lines, never `\\r` redraws: they stay readable in a log file, under `srun` and in CI, and
the workload's own output goes on between them unchanged.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pgle.evidence.event_kinds import PgleProfiled, TraceStart, TraceStop
from pgle.evidence.event_tail import EventTail
from pgle.phrases import plural

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0


class WindowProgress:
    """Polled by the launcher while the workload runs (cheap: reads only the new lines).
    `window`: the launch has a profiling window to report on; without one (prewarm, auto) the
    lines say how long the workload has run, its steps, and what auto PGLE profiled."""

    def __init__(
        self, events: Path, every: float = PROGRESS_EVERY_S, *, window: bool = True
    ) -> None:
        self.events = EventTail(events, (PgleProfiled, TraceStart, TraceStop))
        self.every, self.window = every, window
        self.profiled = 0  # auto PGLE's profiled executions
        self.start = time.monotonic()
        self.next_at = self.start + every
        self.opened: float | None = None  # monotonic time the window opened
        self.opened_at = 0  # the steps entered before it opened
        self.closed = False

    def _read(self, now: float) -> None:
        """The events added since the last poll; `now`: the poll's time, which a window that
        opened since then is taken to have opened at (the same clock for both ends: a window
        never opens after the poll that sees it)."""
        for event in self.events.read():
            if isinstance(event, PgleProfiled):
                self.profiled += 1
            elif isinstance(event, TraceStart) and self.opened is None:
                self.opened, self.opened_at = now, self.events.steps
            elif isinstance(event, TraceStop):
                self.closed = True

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.every
        self._read(now)
        ran = f"{now - self.start:.0f} s"
        if not self.window:
            done = [plural(self.events.steps, "step")] if self.events.steps else []
            if self.profiled:
                done.append(f"{plural(self.profiled, 'execution')} profiled by auto PGLE")
            log.info(f"workload running for {ran}" + (": " + ", ".join(done) if done else ""))
            return
        if self.closed:
            return  # the window's end is reported by the command itself
        if self.opened is None:
            log.info(f"workload running for {ran}; the profiling window has not opened yet")
        else:
            entered = self.events.steps - self.opened_at
            steps = f", {plural(entered, 'step')} entered" if entered else ""
            log.info(
                f"profiling window open for {now - self.opened:.0f} s{steps} "
                f"(workload running for {ran})"
            )
