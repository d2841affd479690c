"""Fleet forensics of a multi-process job (issue 36): what every rank compiled and how far it
got, published through the job folder while the workload runs.

    <job_dir>/fleet/rank-<r>.json        its modules' identities (name, fingerprint, text),
                                         steps, executions, last progress (wall clock)
    <job_dir>/fleet/rank-<r>.stall.json  its phase when its workload was stopped for a stall
                                         (its own, or a peer's)
    <job_dir>/fleet/divergence.json      rank 0: the modules the ranks compiled differently

Every rank's pgle reads its own run folder's events (the harness's `module_identity` before
each compile, the step markers, the `progress` file) from the launcher's poll loop (the
driver's watchdog hook) and rewrites its file when something changed, at most every POLL_S.
Rank 0 alone reads every rank's file (one listing and the files that changed), so a job of N
ranks costs the metadata server N small writes per POLL_S and one listing, never N x N. Rank 0
says a divergence in one line the moment two ranks' fingerprints of one module differ
(pgle.jobs.divergence), before the compile or the first collective hangs; with
`--require-same-program` every rank stops its workload as soon as `divergence.json` appears
(exit 3, EXIT_NOT_VERIFIED).

Every file here comes from another rank: names are matched, JSON is checked field by field,
paths to module texts are kept only inside the job folder, nothing follows a link.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from pgle.atomic import write_text_atomic
from pgle.errors import EXIT_NOT_VERIFIED, BadInput
from pgle.evidence import schema, stacks
from pgle.evidence.event_kinds import ModuleIdentity, Stacks, is_number
from pgle.evidence.event_tail import EventTail
from pgle.jobs import divergence, first_stopped
from pgle.shared_folders import read_bytes_nofollow

log = logging.getLogger(__name__)

FLEET_DIR = "fleet"
DIVERGENCE = "divergence.json"
POLL_S = 1.0  # the most a divergence waits to be published and seen (x2: rank r, then rank 0)
# How long rank 0 waits for the peers' phases after a stall. A rank names its phase after
# its workload's stacks are dumped and read; on a loaded 2-core machine that took over the
# 10 s this once was, and the report named the first rank with no phase. Only a rank that
# never publishes (dead, or its folder unwritable) makes rank 0 wait it out.
STALL_WAIT_S = 30.0
# A rank whose own stall bound ran out waits up to this long for its peers' phases before pgle
# stops its workload: ranks waiting for it in a collective reach their bounds a step later,
# and once its workload is gone their collective may fail at once (gloo on CPU, jax 0.10.2:
# the peer's sockets close), ending their workloads before their stacks are written.
PEER_PHASE_WAIT_S = 10.0
MAX_FILE_BYTES = 4 << 20  # a rank's fleet file: thousands of modules
MAX_MODULES = 20000
_RANK_FILE = re.compile(r"^rank-(\d+)\.json$")
_STALL_FILE = re.compile(r"^rank-(\d+)\.stall\.json$")
_FP = re.compile(r"^[0-9a-f]{8,64}$")


class _Feed:
    """This rank's run folder, read incrementally: only what is new since the last read."""

    def __init__(self, run_path: Path):
        self.run = Path(run_path)
        self.events = EventTail(self.run / "events.jsonl", (ModuleIdentity,))
        self.modules: list[tuple[str, str, str | None]] = []
        self.last_progress = time.time()
        self.executions = 0
        self.progress_mtime = 0

    def read(self) -> bool:
        lines = self.events.lines
        for event in self.events.read():
            if (
                isinstance(event, ModuleIdentity)
                and event.module is not None
                and _FP.match(event.fingerprint)
            ):
                self.modules.append((event.module, event.fingerprint, event.text_file))
                self.last_progress = max(self.last_progress, event.t)
        self.last_progress = max([self.last_progress, *self.events.step_times])
        moved = self.events.lines != lines
        path = self.run / schema.PROGRESS_NAME
        try:
            st = path.stat()
            if st.st_mtime_ns != self.progress_mtime:
                self.progress_mtime = st.st_mtime_ns
                with open(path, "rb") as f:
                    text = f.read(64).split()
                self.executions = int(text[0]) if text else self.executions
                self.last_progress = max(self.last_progress, st.st_mtime)
                moved = True
        except (OSError, ValueError):
            pass
        return moved


class Fleet:
    """One rank's side: publish its feed; on rank 0 also compare the ranks'."""

    def __init__(
        self, job_dir: Path, rank: int, world_size: int, *, require_same_program: bool = False
    ):
        self.job_dir = Path(job_dir)
        self.dir = self.job_dir / FLEET_DIR
        self.rank = rank
        self.world_size = world_size
        self.require_same_program = require_same_program
        self.feed: _Feed | None = None
        self.next_poll = 0.0
        self.published: str | None = None
        self.peers: dict[int, tuple[int, list[divergence.ModuleId]]] = {}  # rank -> (mtime, ..)
        self.said: set[tuple[str, int]] = set()
        self.found: list[divergence.Divergence] = []
        self.stopped_for_divergence = False

    # -- while a workload runs ---------------------------------------------------------------
    def attach(self, run_path: Path) -> None:
        """The run folder of this rank's (next) launch."""
        self.feed = _Feed(run_path)
        self.next_poll = 0.0

    def poll(self) -> int | None:
        """From the launcher's poll loop: an exit code to stop the workload with
        (`--require-same-program` and the ranks diverged), else None."""
        now = time.monotonic()
        if now < self.next_poll or self.feed is None:
            return None
        self.next_poll = now + POLL_S
        try:
            if self.feed.read():
                self.publish()
            if self.rank == 0:
                self.compare()
            if self.require_same_program and (self.found or (self.dir / DIVERGENCE).is_file()):
                self.stopped_for_divergence = True
                return EXIT_NOT_VERIFIED
        except OSError as e:  # a job folder that fails now fails the gather too; say it once
            if not getattr(self, "_io_said", False):
                self._io_said = True
                log.warning(f"fleet: cannot use {self.dir}: {e.strerror or e}")
        return None

    def flush(self) -> None:
        """After the workload ended: read what its harness wrote last and publish it (the
        polls stop with the workload; a short run writes its events out at exit)."""
        try:
            if self.feed is not None and self.feed.read():
                self.publish()
        except OSError as e:
            log.warning(f"fleet: cannot use {self.dir}: {e.strerror or e}")

    def _own_text(self, path: str | None) -> str | None:
        if not path:
            return None
        with contextlib.suppress(ValueError):
            rel = os.path.relpath(path, self.job_dir)
            if not rel.startswith(".."):
                return rel
        return None

    def publish(self) -> None:
        feed = self.feed
        if feed is None:
            return
        data = {
            "rank": self.rank,
            "pid": os.getpid(),
            "modules": [[n, fp, self._own_text(t)] for n, fp, t in feed.modules[:MAX_MODULES]],
            "steps": feed.events.steps,
            "executions": feed.executions,
            "last_progress": feed.last_progress,
        }
        text = json.dumps(data, sort_keys=True)
        if text == self.published:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.dir / f"rank-{self.rank}.json", text + "\n")
        self.published = text

    # -- rank 0 ------------------------------------------------------------------------------
    def _read_ranks(self, name: re.Pattern[str] = _RANK_FILE) -> dict[int, dict[str, Any]]:
        """Every rank's fleet file (`name`: or its stall file), validated."""
        out: dict[int, dict[str, Any]] = {}
        try:
            entries = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return out
        for entry in entries:
            m = name.match(entry.name)
            if m and int(m.group(1)) < self.world_size:
                data = _read_json(Path(entry.path))
                if data is not None:
                    out[int(m.group(1))] = data
        return out

    def modules(self) -> dict[int, list[divergence.ModuleId]]:
        out = {}
        for rank, data in self._read_ranks().items():
            pairs = []
            for item in data.get("modules") or []:
                if (
                    isinstance(item, list)
                    and len(item) == 3
                    and isinstance(item[0], str)
                    and isinstance(item[1], str)
                    and _FP.match(item[1])
                ):
                    text = divergence.inside(item[2], self.job_dir) if item[2] else None
                    pairs.append((item[0][:200], item[1], text))
            out[rank] = divergence.indexed(pairs[:MAX_MODULES])
        return out

    def compare(self) -> list[divergence.Divergence]:
        found = divergence.compare(self.modules())
        new = [d for d in found if (d.module, d.index) not in self.said]
        self.found = found
        if new:
            for d in new:
                self.said.add((d.module, d.index))
                log.warning(
                    d.line()
                    + (
                        "; --require-same-program: stopping the job"
                        if self.require_same_program
                        else " (the job goes on; its collectives may hang: "
                        "--require-same-program stops it)"
                    )
                )
            self.dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(
                self.dir / DIVERGENCE,
                json.dumps({"divergence": [d.to_dict() for d in found]}, sort_keys=True) + "\n",
            )
        return found

    # -- after a stall ------------------------------------------------------------------------
    def publish_stall(self, phase: str | None, what: str | None, *, own: bool) -> None:
        """This rank's phase when its workload was stopped: its own stall (`own`) or a peer's."""
        if self.feed is not None:
            self.feed.read()
            with contextlib.suppress(OSError):
                self.publish()
        data = {"rank": self.rank, "phase": phase, "what": what, "own": own}
        with contextlib.suppress(OSError):
            self.dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(
                self.dir / f"rank-{self.rank}.stall.json", json.dumps(data, sort_keys=True) + "\n"
            )

    def wait_for_phases(self, wait_s: float) -> dict[int, dict[str, Any]]:
        """The ranks' published stall phases, once every rank's is there or after `wait_s`."""
        deadline = time.monotonic() + wait_s
        while True:
            phases = self._read_ranks(_STALL_FILE)
            if len(phases) >= self.world_size or time.monotonic() >= deadline:
                return phases
            time.sleep(0.2)

    def stall_summary(self, wait_s: float = STALL_WAIT_S) -> dict[str, Any] | None:
        """Rank 0, after a stall: which rank stopped first and what it was doing; waits up to
        `wait_s` for every rank's phase. None when no rank published a stall."""
        phases = self.wait_for_phases(wait_s)
        if not phases:
            return None
        progress = {}
        for rank, data in self._read_ranks().items():
            steps, executions, last = (
                data.get("steps"),
                data.get("executions"),
                data.get("last_progress"),
            )
            if not isinstance(last, (int, float)) or isinstance(last, bool):
                continue
            count: Any = steps if is_number(steps) and steps else executions
            phase = phases.get(rank, {})
            progress[rank] = first_stopped.RankProgress(
                int(count) if is_number(count) else 0,
                float(last),
                _text(phase.get("phase")),
                _text(phase.get("what")),
            )
        return first_stopped.first_stopped(progress)

    # -- the job report -----------------------------------------------------------------------
    def annotate(self, report: Any, *, stalled: bool) -> None:
        """Rank 0's job report: `divergence` and, after a stall, `stall`."""
        found = self.compare() if self.rank == 0 else self.found
        if found:
            report.details["divergence"] = [d.to_dict() for d in found]
            for d in found:
                if d.line() not in report.summary:
                    report.summary.append(d.line())
            if self.require_same_program:
                text = (
                    f"--require-same-program: the ranks compiled different programs "
                    f"({', '.join(sorted({d.module for d in found}))}); pgle stopped the job"
                )
                report.reasons.append(text + ".")
                report.exit_code = EXIT_NOT_VERIFIED
        if stalled:
            summary = self.stall_summary()
            if summary is not None:
                report.details["stall"] = {**(report.details.get("stall") or {}), **summary}
                report.summary.append(first_stopped.line(summary))


def _text(v: Any) -> str | None:
    return v[:500] if isinstance(v, str) else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_bytes_nofollow(path, "fleet file", MAX_FILE_BYTES))
    except (OSError, ValueError, RecursionError, BadInput):
        return None
    return data if isinstance(data, dict) else None


def dumped_phase(run_path: Path) -> stacks.Phase | None:
    """The phase of this rank's main process from the stacks it dumped (a rank stopped because
    a peer failed dumps them, pgle.launch.stall), or None when it dumped none."""
    run = Path(run_path)
    main = None
    for event in EventTail(run / "events.jsonl", (Stacks,)).read():
        main = event.main_thread if isinstance(event, Stacks) else main
    try:
        text = (run / schema.STACKS_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    threads = stacks.parse(text)
    if not threads:
        return None
    last: dict[str, stacks.Thread] = {}
    for t in threads:  # several dumps: each thread's last
        last[t.ident] = t
    return stacks.phase(list(last.values()), main)
