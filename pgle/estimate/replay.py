"""pgle's simulator: one schedule replayed with a table of costs, the way XLA's latency-hiding
scheduler prices a schedule (LatencyHidingScheduler::LatencyHidingStatistics,
latency_hiding_scheduler.cc, read 2026-11 and checked against its printed totals on jax 0.10.2):

- walk the schedule in order; every instruction adds its node cost to the clock (an async
  collective's start and done cost 1 cycle each: ProfileGuidedLatencyEstimator::NodeCost's
  kLowCost; XLA's cycles are the profile's microseconds, 1 cycle per us on GPU);
- an async start is issued at the clock's time; its done waits until start + latency (the
  profile's cost of the start), and that wait is the "wasted" (exposed) time;
- resource limits: at most `limit` async collectives of one family in flight (XLA:GPU's
  default parallel collective overlap limit is 1); a start issued while the family is full
  waits for the oldest to finish. A schedule XLA made respects the limit, so this changes
  nothing there; it prices hand-made or reordered schedules honestly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from pgle.estimate import kinds
from pgle.xla.hlo_text import Instruction

LOW_COST = 1.0  # XLA's kLowCost for async collective starts and dones


@dataclasses.dataclass
class Replay:
    total: float
    wasted: float  # exposed async time (communication the schedule did not hide)
    wasted_by_family: dict[str, float]
    missing: list[str]  # instructions the cost table did not price (counted as 0)


def is_async_start(ins: Instruction) -> bool:
    return ins.opcode.endswith("-start") or ins.opcode in ("send", "recv")


def is_async_done(ins: Instruction) -> bool:
    return ins.opcode.endswith("-done") or ins.opcode in ("send-done", "recv-done")


def node_cost(ins: Instruction, costs: Mapping[str, float], missing: list[str]) -> float:
    if kinds.kind_of(ins) == kinds.COLLECTIVE and (is_async_start(ins) or is_async_done(ins)):
        return LOW_COST
    if is_async_done(ins) or ins.opcode in kinds.NOPS:
        return costs.get(ins.name, 0.0)
    if ins.name not in costs:
        missing.append(ins.name)
        return 0.0
    return costs[ins.name]


def replay(
    schedule: Sequence[Instruction], costs: Mapping[str, float], *, limit: int | None = 1
) -> Replay:
    now = 0.0
    wasted = 0.0
    by_family: dict[str, float] = {}
    missing: list[str] = []
    issued: dict[str, tuple[float, str]] = {}  # start name -> (issue time, family)
    in_flight: dict[str, list[float]] = {}  # family -> finish times of its open starts
    names = {i.name: i for i in schedule}
    for ins in schedule:
        now += node_cost(ins, costs, missing)
        if is_async_start(ins):
            fam = kinds.family(ins) or ins.opcode
            t = now
            open_ = in_flight.setdefault(fam, [])
            if limit is not None and len(open_) >= limit:
                t = max(t, sorted(open_)[len(open_) - limit])
            issued[ins.name] = (t, fam)
            open_.append(t + costs.get(ins.name, 0.0))
        elif is_async_done(ins) and ins.operands and ins.operands[0] in issued:
            start = names[ins.operands[0]]
            t, fam = issued.pop(start.name)
            latency = costs.get(start.name, 0.0)
            wait = max(0.0, latency - (now - t))
            finish = t + latency
            open_ = in_flight.get(fam, [])
            if finish in open_:
                open_.remove(finish)
            wasted += wait
            by_family[fam] = by_family.get(fam, 0.0) + wait
            now += wait
    return Replay(now, wasted, by_family, missing)
