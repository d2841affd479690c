"""Device and host events of a kept trace (`<host>.xplane.pb`), read plane by plane.

pgle's own reader (pgle/profiles/proto.py declares the XSpace schema): the CLI stays free
of jax, and xprof (an optional extra) is not needed to read a trace. Only one plane's bytes
are held at a time (`pgle.profiles.xspace_file`): memory follows the largest plane, not the
file. A plane's events come back as numpy columns, decoded from the bytes by
`pgle.profiles.xplane_columns` (a GPU trace has several kernels per op on several streams:
millions of events, which Python objects per event read at ~9 MB/s, issue 25); layouts that
reader does not decode exactly (string-valued op stats, ...) take protobuf's objects, with
the same result.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from pgle.errors import BadInput
from pgle.profiles.proto import WireError, xline_class, xplane_class
from pgle.profiles.xspace_file import PlaneBytes, XSpaceFile

DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:", "/device:CUSTOM:")
HOST_PREFIX = "/host:"
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


def find_xplane_files(trace_dir: os.PathLike | str) -> list[str]:
    """`*.xplane.pb` under a trace folder (its `plugins/profile/<stamp>/`, newest stamp)."""
    trace_dir = os.fspath(trace_dir)
    if os.path.isfile(trace_dir):
        return [trace_dir]
    candidates = [trace_dir]
    nested = os.path.join(trace_dir, "plugins", "profile")
    if os.path.isdir(nested):
        candidates = [os.path.join(nested, d) for d in sorted(os.listdir(nested), reverse=True)]
    for folder in candidates:
        if os.path.isdir(folder):
            files = sorted(
                os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".xplane.pb")
            )
            if files:
                return files
    return []


def _corrupt(path: str, what: str) -> BadInput:
    return BadInput(f"trace {path} is not a valid XSpace protobuf ({what}).")


def _stat_value(st, ref_names: dict[int, str]):
    kind = st.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(st.ref_value, "")
    if kind is None:
        return None
    return getattr(st, kind)


class TraceFile:
    """One `<host>.xplane.pb`: where its planes lie; each read from the file only while read."""

    def __init__(self, path: str):
        self.path = path
        self.host = os.path.basename(path).removesuffix(".xplane.pb")
        try:
            self.file = XSpaceFile(path)
        except OSError as e:
            raise BadInput(f"cannot read trace {path}: {e.strerror or e}.") from None
        except WireError as e:
            raise _corrupt(path, str(e)) from None
        self.planes = self.file.planes

    def _bytes(self, index: int) -> bytes:
        try:
            return self.file.read(index)
        except OSError as e:
            raise BadInput(f"cannot read trace {self.path}: {e.strerror or e}.") from None
        except WireError as e:
            raise _corrupt(self.path, str(e)) from None

    def _layout(self, index: int, data: bytes) -> tuple[PlaneBytes, Any]:
        """The plane walked once and its skeleton parsed; every event checked by protobuf."""
        from google.protobuf.message import DecodeError

        name = self.file.planes[index].name
        try:
            layout = PlaneBytes(data)
            skeleton = xplane_class().FromString(layout.skeleton)
            layout.validate(xline_class)
        except (WireError, DecodeError):
            raise _corrupt(self.path, f"plane {name!r}") from None
        return layout, skeleton

    def _parse(self, index: int, data: bytes):
        from google.protobuf.message import DecodeError

        try:
            return xplane_class().FromString(data)
        except DecodeError:
            raise _corrupt(self.path, f"plane {self.file.planes[index].name!r}") from None

    def host_steps(self) -> list[HostStep]:
        """The host's StepTraceAnnotation events, in time order."""
        steps: list[HostStep] = []
        for i, ref in enumerate(self.file.planes):
            if ref.name.startswith(HOST_PREFIX) and ref.name != "/host:metadata":
                data = self._bytes(i)
                layout, skeleton = self._layout(i, data)
                got = _host_steps_columns(layout, skeleton)
                if got is None:
                    got = _host_steps(self._parse(i, data))
                steps += got
        steps.sort(key=lambda s: s.start_ps)
        return steps

    def device_planes(self) -> Iterator[DevicePlane]:
        """Each device plane's events, one plane at a time (memory follows one plane)."""
        for i, ref in enumerate(self.file.planes):
            if ref.name.startswith(DEVICE_PREFIXES):
                data = self._bytes(i)
                layout, skeleton = self._layout(i, data)
                plane = _device_plane_columns(layout, skeleton, ref.name, self.host)
                del layout, skeleton
                if plane is None:
                    plane = _device_plane(self._parse(i, data), ref.name, self.host)
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
    op_ids, module_ids = set(), set()
    for k, v in plane.stat_metadata.items():
        if v.name in _OP_STATS:
            op_ids.add(k)
        elif v.name in _MODULE_STATS:
            module_ids.add(k)
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
        op = module = None
        for st in md.stats:
            if st.metadata_id in op_ids:
                op = _stat_value(st, ref_names)
            elif st.metadata_id in module_ids:
                module = _stat_value(st, ref_names)
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
    return DevicePlane(
        name=name,
        host=host,
        origin_ps=origin_ps,
        line_names=[line.display_name or line.name for line in plane.lines],
        texts=texts.list(),
        line=cols.line,
        op=op,
        module=module,
        start=line_base[cols.line] + cols.offset_ps,
        duration=cols.duration_ps,
    )


def _device_plane(plane, name: str, host: str) -> DevicePlane:
    """The same columns through protobuf's objects, event by event (any layout)."""
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    op_ids = {k for k, v in plane.stat_metadata.items() if v.name in _OP_STATS}
    module_ids = {k for k, v in plane.stat_metadata.items() if v.name in _MODULE_STATS}
    md_names: dict[int, str] = {}
    md_op: dict[int, tuple[Any, Any]] = {}
    for mid, md in plane.event_metadata.items():
        md_names[mid] = md.display_name or md.name
        op = module = None
        for st in md.stats:
            if st.metadata_id in op_ids:
                op = _stat_value(st, ref_names)
            elif st.metadata_id in module_ids:
                module = _stat_value(st, ref_names)
        md_op[mid] = (op, module)
    texts = _Texts()
    line_ids, ops, modules, starts, durations = [], [], [], [], []
    line_ts = [line.timestamp_ns for line in plane.lines]
    origin_ps = _origin(line_ts)
    for k, line in enumerate(plane.lines):
        base = line.timestamp_ns * 1000 - origin_ps
        for ev in line.events:
            op, module = md_op.get(ev.metadata_id, (None, None))
            for st in ev.stats:
                if st.metadata_id in op_ids:
                    op = _stat_value(st, ref_names)
                elif st.metadata_id in module_ids:
                    module = _stat_value(st, ref_names)
            line_ids.append(k)
            # A number-valued op or module is shown as its digits.
            ops.append(texts(str(op or md_names.get(ev.metadata_id, ""))))
            modules.append(-1 if module is None else texts(str(module)))
            starts.append(base + ev.offset_ps)
            durations.append(ev.duration_ps)
    if any(abs(x) >= _SPAN_LIMIT for x in starts) or any(abs(x) >= _SPAN_LIMIT for x in durations):
        raise _span_too_long(name)
    return DevicePlane(
        name=name,
        host=host,
        origin_ps=origin_ps,
        line_names=[line.display_name or line.name for line in plane.lines],
        texts=texts.list(),
        line=np.array(line_ids, np.int64),
        op=np.array(ops, np.int64),
        module=np.array(modules, np.int64),
        start=np.array(starts, np.int64),
        duration=np.array(durations, np.int64),
    )


def _host_steps_columns(layout: PlaneBytes, plane) -> list[HostStep] | None:
    """StepTraceAnnotation events from the column reader; None where it cannot tell (the
    caller then reads the plane's protobuf objects)."""
    from pgle.profiles.xplane_columns import INT64, REF, UINT64, event_columns

    step_ids = {k for k, v in plane.stat_metadata.items() if v.name == "step_num"}
    if not step_ids:
        return []
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    cols = event_columns(layout, list(range(len(plane.lines))), {k: 0 for k in step_ids})
    if cols is None:
        return None
    kind, value = cols.stats[0]
    if not np.isin(kind, (0, REF, INT64, UINT64)).all():
        return None  # a string or double step number: int() of it is the protobuf path's
    # An event's last step_num stat with a value counts (TSL writes one per step event).
    hit = np.flatnonzero(kind != 0)
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


def _host_steps(plane) -> list[HostStep]:
    """StepTraceAnnotation events: host events carrying a `step_num` stat."""
    step_ids = {k for k, v in plane.stat_metadata.items() if v.name == "step_num"}
    if not step_ids:
        return []
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    out = []
    for line in plane.lines:
        base = line.timestamp_ns * 1000
        for ev in line.events:
            for st in ev.stats:
                if st.metadata_id in step_ids:
                    value = _stat_value(st, ref_names)
                    try:
                        num = int(value)
                    except (TypeError, ValueError):
                        continue
                    md = plane.event_metadata.get(ev.metadata_id)
                    start = base + ev.offset_ps
                    out.append(HostStep(md.name if md else "", num, start, start + ev.duration_ps))
                    break
    return out
