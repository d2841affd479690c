"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> projected NVTX ranges.

pgle does what nsys's `nvtx_gpu_proj_trace` recipe does for nsys-jax, in SQL + Python (sqlite3 of
the standard library): each NVTX push/pop range on a CPU thread is projected onto the GPU as the
span from the earliest start to the latest end of the GPU activities (kernels, memcpy, memset)
whose CUDA runtime launch call ran on that thread inside the range. Ranges that launched no GPU
work are dropped (their children move up). Nesting comes from the CPU-side ranges.

Tables and columns used (the export schema of nsys 2023.x-2025.x, documented by NVIDIA as
"SQLite Schema Reference"): `NVTX_EVENTS(start, end, eventType, text, textId, domainId,
globalTid)` with eventType 59 = push/pop range and 75 = domain creation (its text is the domain
name, "TSL" for XLA, which nsys-jax prefixes to range names), `StringIds(id, value)`,
`CUPTI_ACTIVITY_KIND_RUNTIME(start, end, globalTid, correlationId)`, `CUPTI_ACTIVITY_KIND_KERNEL`,
`..._MEMCPY`, `..._MEMSET` (start, end, globalPid, correlationId), and `ThreadNames(nameId,
globalTid)` for XLA's `XlaLauncher:#global=<device>...#` threads. globalTid packs the pid in bits
24-47 and the tid in bits 0-23. Tables that are absent (no memcpy in the run) are skipped.
"""

from __future__ import annotations

import bisect
import dataclasses
import pathlib
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pgle.errors import ProfileError
from pgle.profiles.nsys import LAUNCHER_RE, Range
from pgle.profiles.nsys_archive import BACKEND_RE

PUSHPOP, DOMAIN_CREATE = 59, 75
GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
_TID_BITS = 0xFFFFFF


@dataclasses.dataclass
class SqliteExport:
    ranges: list[Range]
    devices: dict[tuple[int, int], int]
    compiled: list[tuple[int, str]]


def _pid_tid(global_tid: int) -> tuple[int, int]:
    return (global_tid >> 24) & _TID_BITS, global_tid & _TID_BITS


def read_export(path: pathlib.Path) -> SqliteExport:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        raise ProfileError(f"{path} is not a SQLite database ({e}).") from None
    try:
        for needed in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"):
            if needed not in tables:
                raise ProfileError(
                    f"{path} has no {needed} table: the report was taken without "
                    f"{'NVTX' if needed == 'NVTX_EVENTS' else 'CUDA'} tracing.",
                    hint="Profile with `nsys profile -t cuda,nvtx ...`.",
                )
        strings = "StringIds" in tables
        text = "COALESCE(e.text, s.value)" if strings else "e.text"
        join = "LEFT JOIN StringIds s ON e.textId = s.id" if strings else ""
        domains = {
            d: name
            for d, name in db.execute(
                f"SELECT e.domainId, {text} FROM NVTX_EVENTS e {join} WHERE e.eventType = ?",
                (DOMAIN_CREATE,),
            )
        }
        cpu = list(
            db.execute(
                f"SELECT e.start, e.end, e.globalTid, e.domainId, {text} FROM NVTX_EVENTS e {join} "
                "WHERE e.eventType = ? AND e.end IS NOT NULL "
                "ORDER BY e.globalTid, e.start, e.end DESC",
                (PUSHPOP,),
            )
        )
        gpu_union = " UNION ALL ".join(
            f"SELECT correlationId, globalPid, start, end FROM {t}"
            for t in GPU_TABLES
            if t in tables
        )
        launches: dict[int, list[tuple[int, int, int]]] = {}
        if gpu_union:
            for tid, launch, g0, g1 in db.execute(
                f"SELECT r.globalTid, r.start, g.start, g.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                f"JOIN ({gpu_union}) g ON g.correlationId = r.correlationId "
                f"AND g.globalPid = (r.globalTid - (r.globalTid & {_TID_BITS})) "
                "ORDER BY r.globalTid, r.start"
            ):
                launches.setdefault(tid, []).append((launch, g0, g1))
        devices: dict[tuple[int, int], int] = {}
        if "ThreadNames" in tables and strings:
            for name, gtid in db.execute(
                "SELECT s.value, t.globalTid FROM ThreadNames t JOIN StringIds s ON t.nameId = s.id"
            ):
                m = LAUNCHER_RE.match(name or "")
                if m:
                    devices[_pid_tid(gtid)] = int(m.group(1))
    except sqlite3.DatabaseError as e:
        raise ProfileError(
            f"cannot read the Nsight export {path}: {e}.",
            hint="Export again with `nsys export --type sqlite` of a supported nsys.",
        ) from None
    finally:
        db.close()
    return SqliteExport(
        ranges=_project(cpu, domains, launches),
        devices=devices,
        compiled=[
            (int(m.group(2)), m.group(1))
            for row in cpu
            if (m := BACKEND_RE.match(_full_name(row, domains)))
        ],
    )


def _full_name(row: Sequence[Any], domains: Mapping[int, str]) -> str:
    domain = domains.get(row[3])
    return f"{domain}:{row[4]}" if domain else (row[4] or "")


def _project(
    cpu: Iterable[Sequence[Any]],
    domains: Mapping[int, str],
    launches: Mapping[int, list[tuple[int, int, int]]],
) -> list[Range]:
    out: list[Range] = []
    rid = 0
    by_thread: dict[int, list[Any]] = {}
    for row in cpu:
        by_thread.setdefault(row[2], []).append(row)
    for gtid, rows in by_thread.items():
        pid, tid = _pid_tid(gtid)
        calls = launches.get(gtid, [])
        times = [c[0] for c in calls]
        stack: list[
            tuple[int, int | None]
        ] = []  # (cpu end, rid of the kept range or of its kept ancestor)
        for row in rows:
            start, end = row[0], row[1]
            while stack and stack[-1][0] <= start:
                stack.pop()
            parent = stack[-1][1] if stack else None
            lo, hi = bisect.bisect_left(times, start), bisect.bisect_right(times, end)
            if lo < hi:
                g0 = min(c[1] for c in calls[lo:hi])
                g1 = max(c[2] for c in calls[lo:hi])
                rid += 1
                out.append(
                    Range(
                        rid=rid,
                        name=_full_name(row, domains),
                        start=g0,
                        duration=g1 - g0,
                        pid=pid,
                        tid=tid,
                        parent=parent,
                        gpu_ops=hi - lo,
                    )
                )
                stack.append((end, rid))
            else:
                stack.append((end, parent))  # no GPU work: children attach to the kept ancestor
    return out
