"""Device and host events of a kept trace (`<host>.xplane.pb`), read plane by plane.

The trace is read by `pgle.profiles.xspace_file.TraceFile` (pgle's own reader: the CLI stays
free of jax, xprof is not needed, and only one plane's bytes are held at a time). A plane's
events come back as numpy columns, decoded from the bytes by `pgle.profiles.xplane_columns`
(a GPU trace has several kernels per op on several streams: millions of events, which Python
objects per event read at ~9 MB/s, issue 25).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from pgle.errors import BadInput
from pgle.profiles.xspace_file import DEVICE_PREFIXES, PlaneBytes, TraceFile

log = logging.getLogger(__name__)
# Stats whose value names the HLO instruction / module of a device event (TSL xplane_schema).
_OP_STATS = ("hlo_op",)
_MODULE_STATS = ("hlo_module",)
_OP, _MODULE = 0, 1
# Starts are int64 picoseconds from the plane's earliest line: lines further apart than this
# (about 53 days) are not a trace pgle can read.
_SPAN_LIMIT = 1 << 62


def _span_too_long(name: str) -> BadInput:
    """Both readers of a plane refuse the same way (times are int64 picoseconds)."""
    return BadInput(
        f"device plane {name!r} spans more time than pgle can represent "
        "(event times over 53 days apart)."
    )


@dataclasses.dataclass
class DevicePlane:
    """One device plane's events as parallel numpy columns, in plane order (line by line)."""

    name: str
    host: str
    origin_ps: int  # absolute time (ps) of start 0: starts are relative to it (int64 range)
    line_names: list[str]
    texts: list[str]  # op and module names, each once
    line: np.ndarray  # int64: index into line_names
    op: np.ndarray  # int64: index into texts (the hlo_op stat, else the event's name)
    module: np.ndarray  # int64: index into texts, -1 for none
    start: np.ndarray  # int64 ps, relative to origin_ps
    duration: np.ndarray  # int64 ps

    def __len__(self) -> int:
        return int(self.start.size)


@dataclasses.dataclass
class HostStep:
    name: str
    step_num: int
    start_ps: int
    end_ps: int


def relative_ps(times: list[int], origin_ps: int) -> np.ndarray:
    """Absolute picoseconds (Python ints) relative to a plane's origin, clamped to int64: every
    event time of a plane lies well inside the clamp, so comparisons with them keep their order."""
    limit, half = _SPAN_LIMIT, _SPAN_LIMIT >> 1
    if times and abs(origin_ps) < half and max(times) < half and min(times) > -half:
        return np.clip(np.array(times, np.int64) - origin_ps, -limit, limit)
    return np.array([min(max(t - origin_ps, -limit), limit) for t in times], np.int64)


def _stat_value(st, ref_names: dict[int, str]):
    kind = st.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(st.ref_value, "")
    if kind is None:
        return None
    return getattr(st, kind)


def host_steps(trace: TraceFile) -> list[HostStep]:
    """The host's StepTraceAnnotation events, in time order."""
    steps: list[HostStep] = []
    for i in trace.host_plane_indices():
        layout, skeleton = trace.layout(i, trace.read(i))
        got = _host_steps_columns(layout, skeleton)
        if got is None:
            # No protobuf path here (issue 35): of the real jax.profiler captures at hand (CPU,
            # jax 0.10.2), none had a host plane the column reader could not decode.
            log.warning(
                f"{trace.path}: the events of host plane {trace.planes[i].name!r} are in a "
                "layout pgle does not read; its steps are left out."
            )
            got = []
        steps += got
    steps.sort(key=lambda s: s.start_ps)
    return steps


def device_planes(trace: TraceFile) -> Iterator[DevicePlane]:
    """Each device plane's events, one plane at a time (memory follows one plane)."""
    for i, ref in enumerate(trace.planes):
        if ref.name.startswith(DEVICE_PREFIXES):
            data = trace.read(i)
            layout, skeleton = trace.layout(i, data)
            plane = _device_plane_columns(layout, skeleton, ref.name, trace.host)
            del layout, skeleton
            if plane is None:
                # Kept (issue 35): no real GPU capture was at hand to count how often one
                # needs it; layouts the column reader leaves out (string-valued hlo_op stats,
                # num_occurrences) are read through protobuf's objects, with the same result.
                plane = _device_plane(trace.parse(i, data), ref.name, trace.host)
            del data
            yield plane


class _Texts:
    """Strings numbered in first-seen order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids))

    def list(self) -> list[str]:
        return list(self.ids)


def _origin(timestamps_ns: list[int]) -> int:
    """Absolute ps of the plane's earliest line: starts are kept relative to it in int64."""
    return min(timestamps_ns) * 1000 if timestamps_ns else 0


def _plane_of(
    plane: Any, name: str, host: str, origin_ps: int, texts: _Texts, *columns: np.ndarray
) -> DevicePlane:
    """Both readers' result: `columns` are line, op, module, start and duration."""
    line_names = [line.display_name or line.name for line in plane.lines]
    return DevicePlane(name, host, origin_ps, line_names, texts.list(), *columns)


def _device_plane_columns(layout: PlaneBytes, plane, name: str, host: str) -> DevicePlane | None:
    """The plane's events from the column reader; None for layouts it does not decode (the
    caller then reads the plane's protobuf objects)."""
    from pgle.profiles.xplane_columns import REF, event_columns, small_ids

    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    codes = {k: _OP for k, v in plane.stat_metadata.items() if v.name in _OP_STATS}
    codes.update({k: _MODULE for k, v in plane.stat_metadata.items() if v.name in _MODULE_STATS})
    cols = event_columns(layout, list(range(len(plane.lines))), codes)
    if cols is None:
        return None
    n = cols.metadata_id.size
    zero = (np.zeros(n, np.int8), np.zeros(n, np.int64))
    op_kind, op_value = cols.stats.get(_OP, zero)
    module_kind, module_value = cols.stats.get(_MODULE, zero)
    if not (np.isin(op_kind, (0, REF)).all() and np.isin(module_kind, (0, REF)).all()):
        return None  # string- or number-valued op/module stats: the protobuf path reads them

    texts = _Texts()
    op_ids, module_ids = _op_module_ids(plane)
    # Per metadata id of the events: its name, and the op/module its own stats give
    # (events' stats override them).
    ids, inv = small_ids(cols.metadata_id)
    md_name = np.empty(ids.size, np.int64)
    md_op = np.full(ids.size, -1, np.int64)
    md_module = np.full(ids.size, -1, np.int64)
    for j, mid in enumerate(ids.tolist()):
        md = plane.event_metadata.get(mid)
        md_name[j] = texts((md.display_name or md.name) if md is not None else "")
        if md is None:
            continue
        op, module = _op_module(md.stats, op_ids, module_ids, ref_names, (None, None))
        if any(v is not None and not isinstance(v, str) for v in (op, module)):
            return None  # a number-valued op or module: the protobuf path
        if op:  # "" falls back to the event's name, as None does
            md_op[j] = texts(op)
        if module is not None:
            md_module[j] = texts(module)

    def ref_text(kind: np.ndarray, value: np.ndarray, base: np.ndarray) -> np.ndarray:
        out = base[inv]
        is_ref = np.flatnonzero(kind == REF)
        if is_ref.size:
            refs, rinv = small_ids(value[is_ref])
            out[is_ref] = np.array(
                [texts(ref_names.get(int(r) & 0xFFFFFFFFFFFFFFFF, "")) for r in refs.tolist()],
                np.int64,
            )[rinv]
        return out

    op = ref_text(op_kind, op_value, md_op)
    empty = texts.ids.get("")
    if empty is not None:
        op[op == empty] = -1
    missing = op < 0
    op[missing] = md_name[inv][missing]
    module = ref_text(module_kind, module_value, md_module)

    line_ts = [line.timestamp_ns for line in plane.lines]
    origin_ps = _origin(line_ts)
    line_base = (
        np.array([ts * 1000 - origin_ps for ts in line_ts], np.int64)
        if line_ts
        else np.zeros(0, np.int64)
    )
    if n and (
        int(np.abs(line_base).max())
        + int(np.abs(cols.offset_ps).max())
        + int(np.abs(cols.duration_ps).max())
        >= _SPAN_LIMIT
    ):
        raise _span_too_long(name)
    start = line_base[cols.line] + cols.offset_ps
    return _plane_of(
        plane, name, host, origin_ps, texts, cols.line, op, module, start, cols.duration_ps
    )


def _op_module_ids(plane: Any) -> tuple[set[int], set[int]]:
    """The plane's stat metadata ids of the op and of the module stats."""
    op_ids = {k for k, v in plane.stat_metadata.items() if v.name in _OP_STATS}
    module_ids = {k for k, v in plane.stat_metadata.items() if v.name in _MODULE_STATS}
    return op_ids, module_ids


def _op_module(
    stats: Any, op_ids: set[int], module_ids: set[int], ref_names: dict[int, str], base: Any
) -> tuple[Any, Any]:
    """(op, module) that these stats (of an event or its metadata) give over `base`."""
    op, module = base
    for st in stats:
        if st.metadata_id in op_ids:
            op = _stat_value(st, ref_names)
        elif st.metadata_id in module_ids:
            module = _stat_value(st, ref_names)
    return op, module


def _device_plane(plane, name: str, host: str) -> DevicePlane:
    """The same columns through protobuf's objects, event by event (any layout)."""
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    op_ids, module_ids = _op_module_ids(plane)
    md_names: dict[int, str] = {}
    md_op: dict[int, tuple[Any, Any]] = {}
    for mid, md in plane.event_metadata.items():
        md_names[mid] = md.display_name or md.name
        md_op[mid] = _op_module(md.stats, op_ids, module_ids, ref_names, (None, None))
    texts = _Texts()
    line_ids, ops, modules, starts, durations = [], [], [], [], []
    line_ts = [line.timestamp_ns for line in plane.lines]
    origin_ps = _origin(line_ts)
    for k, line in enumerate(plane.lines):
        base = line.timestamp_ns * 1000 - origin_ps
        for ev in line.events:
            base_op = md_op.get(ev.metadata_id, (None, None))
            op, module = _op_module(ev.stats, op_ids, module_ids, ref_names, base_op)
            line_ids.append(k)
            # A number-valued op or module is shown as its digits.
            ops.append(texts(str(op or md_names.get(ev.metadata_id, ""))))
            modules.append(-1 if module is None else texts(str(module)))
            starts.append(base + ev.offset_ps)
            durations.append(ev.duration_ps)
    if any(abs(x) >= _SPAN_LIMIT for x in starts) or any(abs(x) >= _SPAN_LIMIT for x in durations):
        raise _span_too_long(name)
    columns = (np.array(c, np.int64) for c in (line_ids, ops, modules, starts, durations))
    return _plane_of(plane, name, host, origin_ps, texts, *columns)


def _host_steps_columns(layout: PlaneBytes, plane) -> list[HostStep] | None:
    """StepTraceAnnotation events: host events carrying an integer `step_num` stat (a
    reference to a name that is a number counts too); None where the column reader does not
    decode the plane's layout."""
    from pgle.profiles.xplane_columns import INT64, REF, UINT64, event_columns

    step_ids = {k for k, v in plane.stat_metadata.items() if v.name == "step_num"}
    if not step_ids:
        return []
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    cols = event_columns(layout, list(range(len(plane.lines))), {k: 0 for k in step_ids})
    if cols is None:
        return None
    kind, value = cols.stats[0]
    # An event's last step_num stat with a value counts (TSL writes one per step event, an
    # int64). A string or double step number (no jax.profiler capture has one) is no step.
    hit = np.flatnonzero(np.isin(kind, (REF, INT64, UINT64)))
    out = []
    bases = [line.timestamp_ns * 1000 for line in plane.lines]
    names: dict[int, str] = {}
    for _, k, v, line, mid, offset, duration in zip(
        hit.tolist(),
        kind[hit].tolist(),
        value[hit].tolist(),
        cols.line[hit].tolist(),
        cols.metadata_id[hit].tolist(),
        cols.offset_ps[hit].tolist(),
        cols.duration_ps[hit].tolist(),
        strict=False,
    ):
        if k == REF:
            try:
                num = int(ref_names.get(v & 0xFFFFFFFFFFFFFFFF, ""))
            except ValueError:
                continue
        else:
            num = v & 0xFFFFFFFFFFFFFFFF if k == UINT64 else v
        if mid not in names:
            md = plane.event_metadata.get(mid)
            names[mid] = md.name if md is not None else ""
        start = bases[line] + offset
        out.append(HostStep(names[mid], num, start, start + duration))
    return out
