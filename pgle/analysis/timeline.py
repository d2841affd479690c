"""Device and host events of a kept trace (`<host>.xplane.pb`), read plane by plane.

pgle's own reader (pgle/profiles/proto.py declares the XSpace schema): the CLI stays free
of jax, and xprof (an optional extra) is not needed to read a trace. A device plane is
parsed only while it is being read, so memory follows the largest plane, not the file.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterator

from pgle.errors import BadInput
from pgle.profiles.proto import WireError, split_xspace, xplane_class

DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:", "/device:CUSTOM:")
HOST_PREFIX = "/host:"
# Stats whose value names the HLO instruction / module of a device event (TSL xplane_schema).
_OP_STATS = ("hlo_op",)
_MODULE_STATS = ("hlo_module",)


@dataclasses.dataclass
class DevicePlane:
    name: str
    host: str
    # Parallel lists, one entry per event: line name, op (HLO instruction or event name),
    # module, absolute start (ps), duration (ps).
    lines: list[str]
    ops: list[str]
    modules: list[str | None]
    starts: list[int]
    durations: list[int]


@dataclasses.dataclass
class HostStep:
    name: str
    step_num: int
    start_ps: int
    end_ps: int


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
            files = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                           if n.endswith(".xplane.pb"))
            if files:
                return files
    return []


def _read(path: str):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadInput(f"cannot read trace {path}: {e.strerror or e}.") from None
    try:
        return split_xspace(data)
    except WireError as e:
        raise BadInput(f"trace {path} is not a valid XSpace protobuf ({e}).") from None


def _parse(path: str, name: str, raw):
    from google.protobuf.message import DecodeError

    try:
        return xplane_class().FromString(raw)
    except DecodeError:
        raise BadInput(f"trace {path} is not a valid XSpace protobuf (plane {name!r}).") from None


def _stat_value(st, ref_names: dict[int, str]):
    kind = st.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(st.ref_value, "")
    if kind is None:
        return None
    return getattr(st, kind)


class TraceFile:
    """One `<host>.xplane.pb`: planes split from the bytes, each parsed only while read."""

    def __init__(self, path: str):
        self.path = path
        self.host = os.path.basename(path).removesuffix(".xplane.pb")
        self.planes = _read(path)

    def host_steps(self) -> list[HostStep]:
        """The host's StepTraceAnnotation events, in time order."""
        steps: list[HostStep] = []
        for name, raw in self.planes:
            if name.startswith(HOST_PREFIX) and name != "/host:metadata":
                steps += _host_steps(_parse(self.path, name, raw))
        steps.sort(key=lambda s: s.start_ps)
        return steps

    def device_planes(self) -> Iterator[DevicePlane]:
        """Each device plane's events, one plane at a time (memory follows one plane)."""
        for name, raw in self.planes:
            if name.startswith(DEVICE_PREFIXES):
                yield _device_plane(_parse(self.path, name, raw), name, self.host)


def _device_plane(plane, name: str, host: str) -> DevicePlane:
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    op_ids = {k for k, v in plane.stat_metadata.items() if v.name in _OP_STATS}
    module_ids = {k for k, v in plane.stat_metadata.items() if v.name in _MODULE_STATS}
    md_names: dict[int, str] = {}
    md_op: dict[int, tuple[str | None, str | None]] = {}
    for mid, md in plane.event_metadata.items():
        md_names[mid] = md.display_name or md.name
        op = module = None
        for st in md.stats:
            if st.metadata_id in op_ids:
                op = _stat_value(st, ref_names)
            elif st.metadata_id in module_ids:
                module = _stat_value(st, ref_names)
        md_op[mid] = (op, module)
    out = DevicePlane(name, host, [], [], [], [], [])
    for line in plane.lines:
        line_name = line.display_name or line.name
        base = line.timestamp_ns * 1000
        for ev in line.events:
            op, module = md_op.get(ev.metadata_id, (None, None))
            for st in ev.stats:
                if st.metadata_id in op_ids:
                    op = _stat_value(st, ref_names)
                elif st.metadata_id in module_ids:
                    module = _stat_value(st, ref_names)
            out.lines.append(line_name)
            out.ops.append(op or md_names.get(ev.metadata_id, ""))
            out.modules.append(module)
            out.starts.append(base + ev.offset_ps)
            out.durations.append(ev.duration_ps)
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
