"""The rank that stopped first (issue 36): in a hung job every rank stops making progress, but
all except one are merely waiting for it in a collective.

Each rank publishes its step count and when it last made progress (pgle.jobs.fleet); on a
stall each rank names its phase from its Python stacks (pgle.evidence.stacks). The first rank
is, among the ranks not waiting for a peer (a collective, a barrier, auto PGLE's shared
profile), the one with the fewest steps, then the earliest last progress; when every rank
waits for a peer (a device that hangs everywhere, a collective no rank left), among all of
them. Clocks of different hosts are compared only to break a tie in steps.

A pure function of plain data: the callers read and validate the files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# stacks.Phase names that mean "waiting for another rank" (pgle.evidence.stacks).
WAITING = frozenset({"collective", "barrier", "fdo_profile_wait"})


@dataclasses.dataclass(frozen=True)
class RankProgress:
    steps: int  # steps entered (StepTraceAnnotation), else executions of jitted functions
    last_progress: float  # wall-clock time of its last progress (time.time())
    phase: str | None = None  # stacks.Phase name, when it dumped its stacks
    what: str | None = None  # the phase's phrase


def first_stopped(ranks: Mapping[int, RankProgress]) -> dict[str, Any] | None:
    """`{"first_rank", "phase", "what", "steps", "waiting": [ranks], "ranks": [...]}`, or None
    for no ranks."""
    if not ranks:
        return None
    waiting = sorted(r for r, p in ranks.items() if p.phase in WAITING)
    candidates = [r for r in ranks if r not in waiting] or list(ranks)
    first = min(candidates, key=lambda r: (ranks[r].steps, ranks[r].last_progress, r))
    p = ranks[first]
    return {
        "first_rank": first,
        "phase": p.phase,
        "what": p.what,
        "steps": p.steps,
        "waiting": [r for r in waiting if r != first],
        "ranks": [
            {
                "rank": r,
                "steps": q.steps,
                "last_progress": round(q.last_progress, 3),
                "phase": q.phase,
            }
            for r, q in sorted(ranks.items())
        ],
    }


def line(found: Mapping[str, Any]) -> str:
    """The stall's sentence for the job report."""
    from pgle.phrases import ranks_phrase

    text = f"rank {found['first_rank']} stopped progressing first (after {found['steps']} steps"
    text += f"): {found['what']}" if found.get("what") else ")"
    if found.get("waiting"):
        text += f"; {ranks_phrase(found['waiting'])} waited for it in a collective"
    return text
