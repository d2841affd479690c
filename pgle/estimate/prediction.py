"""The prediction of `pgle estimate`: the `pgle` arm's schedule against the `default` arm's, both
replayed with the same costs, and when PGLE cannot help, why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgle.estimate import kinds, replay
from pgle.estimate.xla_stats import Statistics
from pgle.xla.hlo_text import Computation, Instruction, Module

PLAUSIBLE_SCALE = 2.0  # collectives up to twice their cost: the profile's plausible range
NO_GAIN = 0.999  # a ratio above this is no gain


def scheduled(module: Module) -> list[Computation]:
    """The computations XLA's latency-hiding scheduler schedules (those with async ops), entry
    last, as LatencyHidingScheduler::Run logs them."""
    out = [
        c
        for c in module.computations.values()
        if any(replay.is_async_start(i) or replay.is_async_done(i) for i in c.instructions)
        and not c.entry
    ]
    entry = module.entry
    return out + ([entry] if entry is not None else [])


def entry_stats(module: Module, stats: list[Statistics]) -> Statistics | None:
    """The entry computation's statistics: named ones by name (jax 0.9.2 prints `For
    computation: NAME, module M(ID)`; the name may differ from the final module's after later
    passes), never a `-clone` module's (jax 0.7/0.8's collective combiner), else the last (the
    entry is scheduled last)."""
    own = [s for s in stats if not (s.after.module or "").split("(")[0].endswith("-clone")]
    if not own:
        return None
    entry = module.entry
    if entry is not None:
        mine = [s for s in own if (s.after.computation or s.before.computation) == entry.name]
        if mine:
            return mine[-1]
    return own[-1]


def schedule_of(module: Module) -> list[Instruction]:
    entry = module.entry
    return list(entry.instructions) if entry is not None else []


def arm_row(name: str, arm: Mapping[str, Any]) -> dict[str, Any]:
    module: Module = arm["module_hlo"]
    st = entry_stats(module, arm["stats"])
    schedule = schedule_of(module)
    rep = replay.replay(schedule, arm["costs"])
    xla = {
        "total_cycles_before": st.before.total_cycles if st else None,
        "wasted_cycles_before": st.before.wasted_cycles if st else None,
        "total_cycles_after": st.after.total_cycles if st else None,
        "wasted_cycles_after": st.after.wasted_cycles if st else None,
    }
    row_module = {
        "module": module.name,
        "computation": module.entry.name if module.entry else None,
        "fingerprint": module.fingerprint,
        "xla": xla,
        "schedule": [{"name": i.name, "kind": kinds.kind_of(i)} for i in schedule],
        "replayed_us": round(rep.total, 4),
        "exposed_us": round(rep.wasted, 4),
        "exposed_by_collective": {k: round(v, 4) for k, v in rep.wasted_by_family.items()},
    }
    if name == "pgle" and xla["total_cycles_after"]:
        row_module["replay_vs_xla"] = round(rep.total / xla["total_cycles_after"], 4)
    return {
        "arm": name,
        "flags": arm.get("flags"),
        "env": arm.get("env") or {},
        "log": arm.get("log"),
        "hlo": arm.get("hlo"),
        "modules": [row_module],
    }


def _independent_compute(schedule: list[Instruction]) -> bool:
    """Some async collective has compute that neither feeds its start nor needs its done."""
    by = {i.name: i for i in schedule}
    users: dict[str, list[str]] = {}
    for i in schedule:
        for o in i.operands:
            users.setdefault(o, []).append(i.name)

    def closure(start: str, step: Any) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            n = todo.pop()
            for m in step(n):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    for done in schedule:
        if not replay.is_async_done(done) or not done.operands:
            continue
        start = by.get(done.operands[0])
        if start is None or kinds.kind_of(start) != kinds.COLLECTIVE:
            continue
        before = closure(start.name, lambda n: by[n].operands if n in by else ())
        after = closure(done.name, lambda n: users.get(n, ()))
        for i in schedule:
            if kinds.kind_of(i) == kinds.COMPUTE and i.name not in before and i.name not in after:
                return True
    return False


def predict(
    arms: Mapping[str, Mapping[str, Any]], cost_table: Mapping[str, float]
) -> dict[str, Any]:
    default = arms["default"]
    d_sched = schedule_of(default["module_hlo"])
    d_costs = default["costs"]
    d_rep = replay.replay(d_sched, d_costs)
    out: dict[str, Any] = {
        "default_replayed_us": round(d_rep.total, 4),
        "exposed_before_us": round(d_rep.wasted, 4),
        "ratio_to_default": None,
        "cannot_help": False,
        "why": None,
    }
    pgle = arms.get("pgle")
    if pgle is not None:
        p_sched = schedule_of(pgle["module_hlo"])
        p_rep = replay.replay(p_sched, pgle["costs"])
        out["pgle_replayed_us"] = round(p_rep.total, 4)
        out["exposed_after_us"] = round(p_rep.wasted, 4)
        out["ratio_to_default"] = round(p_rep.total / d_rep.total, 4) if d_rep.total else None
        out["schedule_changed"] = [i.name for i in p_sched] != [i.name for i in d_sched]
    for name, arm in arms.items():
        if name in ("default", "pgle"):
            continue
        rep = replay.replay(schedule_of(arm["module_hlo"]), arm["costs"])
        out[f"{name}_ratio_to_default"] = round(rep.total / d_rep.total, 4) if d_rep.total else None
    asyncs = [
        i for i in d_sched if replay.is_async_start(i) and kinds.kind_of(i) == kinds.COLLECTIVE
    ]
    why = None
    if not asyncs:
        why = "no async collective in the step module: nothing for the scheduler to overlap"
    elif not _independent_compute(d_sched):
        why = "no independent compute to overlap: every compute feeds or needs the collectives"
    else:
        heavier = {
            n: c * PLAUSIBLE_SCALE if n in {a.name for a in asyncs} else c
            for n, c in d_costs.items()
        }
        if replay.replay(d_sched, heavier).wasted <= 1e-9:
            why = (
                "its collectives are already hidden in the default schedule "
                f"(even at {PLAUSIBLE_SCALE:g}x their cost)"
            )
        elif pgle is not None and not out["schedule_changed"]:
            why = "the profile's costs do not move the schedule (XLA keeps the default order)"
        elif out["ratio_to_default"] is not None and out["ratio_to_default"] >= NO_GAIN:
            why = "PGLE's schedule replays no faster than the default with these costs"
    if why:
        out["cannot_help"] = True
        out["why"] = f"PGLE cannot help this module: {why}."
    return out


def summary_lines(
    step: str, target: str, devices: int, rows: list[dict[str, Any]], pred: Mapping[str, Any]
) -> list[str]:
    lines = [f"step module {step}, compiled by XLA:GPU for {devices} x {target} (no GPU used)"]
    for row in rows:
        m = row["modules"][0]
        xla = m["xla"]
        lines.append(
            f"  {row['arm']:8s} XLA: {_n(xla['total_cycles_after'])} cycles "
            f"({_n(xla['wasted_cycles_after'])} wasted); replayed with the costs: "
            f"{_n(m['replayed_us'])} us, {_n(m['exposed_us'])} us exposed"
        )
    if pred.get("ratio_to_default") is not None:
        lines.append(
            f"prediction: pgle / default = {pred['ratio_to_default']:.3f}; exposed communication "
            f"{_n(pred['exposed_before_us'])} -> {_n(pred.get('exposed_after_us'))} us"
        )
    if pred.get("why"):
        lines.append(str(pred["why"]))
    return lines


def _n(v: Any) -> str:
    return "?" if v is None else f"{float(v):.1f}"
