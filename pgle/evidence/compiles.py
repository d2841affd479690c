"""Whether each executable of a run was compiled or loaded from jax's persistent compilation
cache (issue 33): a warm cache turns a 0.9 s compile into a 0.1 s load, and an A/B arm that
loads another arm's executable measures the other arm.

From jax's own events, per call of `compile_or_get_cached` (the harness's COMPILE_BEGIN and
COMPILE_END around it, pgle.launch.jax_internals): jax 0.4.x-0.10.2 records the
jax.monitoring events `/jax/compilation_cache/compile_requests_use_cache` when the cache is on,
then `/jax/compilation_cache/cache_hits` when it loaded the executable (it also logs
"Persistent compilation cache hit for ..."), or `/jax/compilation_cache/cache_misses` when it
compiled and wrote the entry (entries under jax_persistent_cache_min_compile_time_secs are
compiled and not written). The seconds are jax's backend-compile duration, which spans the
load on a hit.

jax compiles in several threads at once (a thread pool warming jitted functions, AOT
`.lower().compile()` from threads): each compile's records are paired within its own thread,
which every record names (jax.monitoring calls its listeners in the compiling thread, jax
0.10.2; pgle.launch.harness). Run folders of pgle before that (only the COMPILE_BEGIN names its
thread) are paired in time order, as one compile at a time.
"""

from __future__ import annotations

from typing import Any

from pgle.evidence.event_kinds import Compile, CompileBegin, CompileEnd, JaxEvent
from pgle.evidence.events import RunEvents

USE = "/jax/compilation_cache/compile_requests_use_cache"
HIT = "/jax/compilation_cache/cache_hits"
WRITTEN = "/jax/compilation_cache/cache_misses"
KINDS = ("compiled", "cached")


def executables(events: RunEvents) -> list[dict[str, Any]]:
    """One row per executable jax produced: {module, kind: compiled|cached, cache: off|miss|
    written|hit, seconds}, in the order the compiles began. Records are taken in time order
    (the buffered kinds reach the file after the ones written at once)."""
    records = sorted(
        (r for r in events.records if isinstance(r, (CompileBegin, CompileEnd, JaxEvent, Compile))),
        key=lambda r: r.t,
    )
    # A run folder whose compile ends name their thread: every record is paired within its
    # thread. Otherwise (pgle before #33's fix) all records share one key: one compile at a time.
    threaded = any(isinstance(r, CompileEnd) and r.thread is not None for r in records)
    rows: list[dict[str, Any]] = []
    open_rows: dict[str | None, dict[str, Any]] = {}  # thread -> the compile it is in
    ended: dict[str | None, list[dict[str, Any]]] = {}  # ended, their seconds not yet seen
    for r in records:
        key = str(r.thread) if threaded and r.thread is not None else None
        open_row = open_rows.get(key)
        if isinstance(r, CompileBegin):
            open_rows[key] = {
                "module": r.module,
                "kind": "compiled",
                "cache": "off",
                "seconds": None,
            }
            rows.append(open_rows[key])
        elif isinstance(r, JaxEvent) and open_row is not None:
            if r.event == USE and open_row["cache"] == "off":
                open_row["cache"] = "miss"
            elif r.event == HIT:
                open_row["kind"], open_row["cache"] = "cached", "hit"
            elif r.event == WRITTEN:
                open_row["cache"] = "written"
        elif isinstance(r, CompileEnd):
            if open_row is not None:
                ended.setdefault(key, []).append(open_row)
            open_rows.pop(key, None)
        elif isinstance(r, Compile) and ended.get(key):
            waiting = ended[key]  # this thread's
            waiting.pop(0)["seconds"] = float(r.seconds or 0.0)
    return rows


def by_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{compiled: {count, seconds}, cached: {count, seconds}}."""
    out: dict[str, dict[str, Any]] = {k: {"count": 0, "seconds": 0.0} for k in KINDS}
    for row in rows:
        agg = out[row["kind"]]
        agg["count"] += 1
        agg["seconds"] += row["seconds"] or 0.0
    return out


def label(rows: list[dict[str, Any]], module: str | None = None) -> str:
    """`compiled`, `cached` or `mixed` (of the step module's executables when given), `-`
    when there were none."""
    kinds = {r["kind"] for r in rows if module is None or r["module"] == module}
    if not kinds:
        return "-"
    return kinds.pop() if len(kinds) == 1 else "mixed"
