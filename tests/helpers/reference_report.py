"""The report's trace analysis as it was before issue 25 (pgle 0.1.0, commit bec513a), kept
verbatim as the reference the rewritten, columnar code must equal on every input: one
protobuf-object pass per plane into Python lists (timeline), intervals by `sorted()`
(intervals), windows and coverage per event (overlap), and the idle-gap scan that tests every
step for every gap (diagnostics). Used by tests only, never by pgle.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import statistics
from typing import Any, Iterable, Iterator

from pgle.errors import BadInput
from pgle.profiles.proto import _LEN, WireError, _skip, _varint, xplane_class

# --- pgle/profiles/proto.py (the plane splitter the old readers used) ---

def split_xspace(data: bytes) -> list[tuple[str, memoryview]]:
    """`(plane name, serialized XPlane)` for each plane of a serialized XSpace, without parsing them.

    Why: a 200 MB trace parses into well over 1 GB of message objects; walking the
    top-level framing lets a reader parse one plane at a time. Raises WireError.
    """
    view = memoryview(data)
    end = len(data)
    pos = 0
    planes = []
    while pos < end:
        tag_pos = pos
        key, pos = _varint(data, pos, end)
        field, wtype = key >> 3, key & 7
        if field == 0:
            raise WireError(tag_pos, "field number 0 (not a protobuf message)")
        if field != 1 or wtype != _LEN:
            pos = _skip(data, pos, end, wtype, field, tag_pos, 0)
            continue
        n, body = _varint(data, pos, end)
        if body + n > end:
            raise WireError(tag_pos, f"plane claims {n} bytes but only {end - body} remain")
        planes.append((_plane_name(data, body, body + n), view[body:body + n]))
        pos = body + n
    return planes


def _plane_name(data: bytes, pos: int, end: int) -> str:
    name = ""
    while pos < end:
        tag_pos = pos
        key, pos = _varint(data, pos, end)
        field, wtype = key >> 3, key & 7
        if field == 0:
            raise WireError(tag_pos, "field number 0 in a plane")
        if field == 2 and wtype == _LEN:
            n, body = _varint(data, pos, end)
            if body + n > end:
                raise WireError(tag_pos, "plane name runs past the plane")
            name = bytes(data[body:body + n]).decode("utf-8", errors="replace")  # last one wins
            pos = body + n
            continue
        pos = _skip(data, pos, end, wtype, field, tag_pos, 0)
    return name


# --- pgle/analysis/intervals.py ---

def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-empty intervals covering the same time."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if hi <= lo:
            continue
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


class Coverage:
    """How much of `[lo, hi)` fixed merged intervals cover, in O(log n) per query."""

    def __init__(self, merged: list[tuple[int, int]]):
        self.merged = merged
        self.starts = [lo for lo, _ in merged]
        self.prefix = [0]
        for lo, hi in merged:
            self.prefix.append(self.prefix[-1] + hi - lo)

    def covered(self, lo: int, hi: int) -> int:
        if hi <= lo or not self.merged:
            return 0
        first = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        last = bisect.bisect_left(self.starts, hi) - 1
        if last < first:
            return 0
        total = self.prefix[last + 1] - self.prefix[first]
        f_lo, f_hi = self.merged[first]
        total -= max(0, min(lo, f_hi) - f_lo)
        l_lo, l_hi = self.merged[last]
        total -= max(0, l_hi - max(hi, l_lo))
        return max(total, 0)


# --- pgle/analysis/timeline.py ---

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


# --- pgle/analysis/overlap.py ---

COLLECTIVE_RE = re.compile(
    r"^%?(all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all|ragged-all-to-all|"
    r"collective-broadcast|send|recv)(?:-start|-done)?(?:[.\-]\d+)*(?:\s|$)")
ASYNC_ROLE_RE = re.compile(r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$")
XLA_OPS_LINES = ("XLA Ops", "Sparse Core Ops")
ASYNC_OPS_LINE = "Async XLA Ops"
MEMCPY_RE = re.compile(r"(?i)memcpy|memset")


def collective_kind(op: str) -> str | None:
    """`all-gather` for `all-gather-start.3`; None for anything that is not a collective."""
    m = COLLECTIVE_RE.match(op)
    if m:
        return m.group(1)
    if "nccl" in op.lower():
        return "nccl"
    return None


def _instruction(name: str) -> str:
    name = name.strip()
    return name[1:].split(" = ", 1)[0].strip() if name.startswith("%") else name


def _windows(plane: DevicePlane) -> tuple[list[tuple], list[tuple[int, int]], str]:
    """(communication windows (op, module, start, end), compute intervals, source)."""
    idx = range(len(plane.ops))
    if any(plane.lines[i] in XLA_OPS_LINES for i in idx):
        ops = [i for i in idx if plane.lines[i] in XLA_OPS_LINES]
        compute = [(plane.starts[i], plane.starts[i] + plane.durations[i]) for i in ops
                   if not ASYNC_ROLE_RE.match(_instruction(plane.ops[i]))]
        asyncs = [i for i in idx if plane.lines[i] == ASYNC_OPS_LINE]
        if asyncs:
            wins = [(_instruction(plane.ops[i]), plane.modules[i], plane.starts[i],
                     plane.starts[i] + plane.durations[i]) for i in asyncs]
            return wins, compute, ASYNC_OPS_LINE
        open_: dict[str, list[int]] = {}
        wins = []
        for i in sorted(ops, key=lambda i: plane.starts[i]):
            m = ASYNC_ROLE_RE.match(_instruction(plane.ops[i]))
            if not m:
                continue
            key = m["base"] + (m["n"] or "")
            if m["role"] == "start":
                open_.setdefault(key, []).append(i)
            elif open_.get(key):
                s = open_[key].pop(0)
                wins.append((_instruction(plane.ops[s]), plane.modules[s], plane.starts[s],
                             plane.starts[i] + plane.durations[i]))
        return wins, compute, "start_done_pairs"
    wins, compute = [], []
    for i in idx:
        if plane.lines[i] == ASYNC_OPS_LINE:
            continue
        op = plane.ops[i]
        span = (plane.starts[i], plane.starts[i] + plane.durations[i])
        if collective_kind(op):
            wins.append((op, plane.modules[i], *span))
        elif not MEMCPY_RE.search(op) and not MEMCPY_RE.search(plane.lines[i]):
            compute.append(span)
    return wins, compute, "kernels"


class OverlapAccumulator:
    """Adds device planes one at a time; `result()` gives totals, per step and top ops."""

    def __init__(self, steps: list[HostStep], top: int = 10):
        self.steps = steps
        self.step_starts = [s.start_ps for s in steps]
        self.top = top
        self.planes = 0
        self.span = self.exposed = self.count = 0
        self.sources: set[str] = set()
        self.by_kind: dict[str, list[int]] = {}
        self.by_op: dict[tuple[str, str | None], list[int]] = {}
        self.per_step: dict[int, list[int]] = {}

    def _step_of(self, t: int) -> int | None:
        k = bisect.bisect_right(self.step_starts, t) - 1
        if k < 0:
            return None
        if k == len(self.steps) - 1 and t >= self.steps[k].end_ps:
            return None
        return self.steps[k].step_num

    def add(self, plane: DevicePlane) -> None:
        wins, compute, source = _windows(plane)
        self.planes += 1
        if not wins:
            return
        self.sources.add(source)
        cover = Coverage(merge(compute))
        for op, module, lo, hi in wins:
            span = hi - lo
            if span <= 0:
                continue
            exposed = span - cover.covered(lo, hi)
            kind = collective_kind(op) or (ASYNC_ROLE_RE.match(op)["base"].split(".")[0]
                                          if ASYNC_ROLE_RE.match(op) else op)
            self.count += 1
            self.span += span
            self.exposed += exposed
            for table, key in ((self.by_kind, kind), (self.by_op, (op, module))):
                row = table.setdefault(key, [0, 0, 0])
                row[0] += 1
                row[1] += span
                row[2] += exposed
            step = self._step_of(lo)
            if step is not None:
                row = self.per_step.setdefault(step, [0, 0])
                row[0] += span
                row[1] += exposed

    def result(self) -> dict[str, Any]:
        n = max(self.planes, 1)
        top = sorted(self.by_op.items(), key=lambda kv: -kv[1][2])[: self.top]
        return {
            "device_planes": self.planes,
            "window_source": sorted(self.sources),
            "collectives": self.count,
            "span_ps": self.span,
            "exposed_ps": self.exposed,
            "hidden_ps": self.span - self.exposed,
            "hidden_fraction": (1 - self.exposed / self.span) if self.span else None,
            "by_kind": {k: {"count": v[0], "span_ps": v[1], "exposed_ps": v[2]}
                        for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1][2])},
            "top_exposed": [{"op": op, "module": module, "count": v[0], "span_ps": v[1],
                             "exposed_ps": v[2]} for (op, module), v in top],
            # Per step and per device (averaged over the device planes).
            "per_step": [{"step": s, "span_ps": v[0] / n, "exposed_ps": v[1] / n}
                         for s, v in sorted(self.per_step.items())],
        }


# --- pgle/analysis/diagnostics.py ---

HOST_COPY_RE = re.compile(r"(?i)memcpy.?(h2d|d2h|htod|dtoh)|(h2d|d2h|htod|dtoh).?memcpy|"
                          r"memcpy.*(host.?to.?device|device.?to.?host)")
# A device gap counts as idle when it is longer than this share of the median step.
IDLE_FRACTION = 0.05


def recompilations(compiles: list[dict], steps: list) -> list[dict[str, Any]]:
    """Compilations that happened after the first step finished warming up (step 1 began):
    every step from then on should reuse compiled executables; one that compiles again has
    unstable shapes, retraces, or changed static arguments, and loses its PGLE schedule."""
    if len(steps) < 2:
        return []
    warm = steps[1].t_enter
    late: dict[str, dict[str, Any]] = {}
    for c in compiles:
        if c.get("t", 0) >= warm:
            row = late.setdefault(c.get("fun_name") or "?", {"function": c.get("fun_name"),
                                                            "count": 0, "seconds": 0.0})
            row["count"] += 1
            row["seconds"] += c.get("seconds") or 0.0
    return sorted(late.values(), key=lambda r: -r["seconds"])


class TraceDiagnostics:
    """Idle gaps and host copies, one device plane at a time."""

    def __init__(self, steps: list[HostStep]):
        self.steps = steps
        durations = [b.start_ps - a.start_ps for a, b in zip(steps, steps[1:])]
        self.median_step_ps = statistics.median(durations) if durations else None
        self.gaps: list[dict[str, Any]] = []
        self.idle_ps = 0
        self.window_ps = 0
        self.copies: dict[str, list[int]] = {}
        self.planes = 0

    def add(self, plane: DevicePlane) -> None:
        self.planes += 1
        if self.steps:
            lo, hi = self.steps[0].start_ps, self.steps[-1].end_ps
        elif plane.starts:
            lo, hi = min(plane.starts), max(s + d for s, d in zip(plane.starts, plane.durations))
        else:
            return
        busy = merge((s, s + d) for s, d, line in zip(plane.starts, plane.durations, plane.lines)
                     if line != "Async XLA Ops" and s + d > lo and s < hi)
        threshold = IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0
        self.window_ps += hi - lo
        if busy:
            for (_, end), (start, _) in zip(busy, busy[1:]):
                gap = start - end
                if gap > threshold:
                    self.idle_ps += gap
                    self.gaps.append({"device": plane.name, "start_ps": end, "gap_ps": gap,
                                      "between_steps": any(end <= s.start_ps <= start
                                                           for s in self.steps)})
        for op, s, d in zip(plane.ops, plane.starts, plane.durations):
            if HOST_COPY_RE.search(op) and lo <= s < hi:
                m = HOST_COPY_RE.search(op)
                kind = "host to device" if re.search(r"(?i)h2d|htod|host.?to", m.group(0)) \
                    else "device to host"
                row = self.copies.setdefault(kind, [0, 0])
                row[0] += 1
                row[1] += d

    def result(self) -> dict[str, Any]:
        steps = max(len(self.steps), 1)
        return {
            "idle_threshold_ps": IDLE_FRACTION * self.median_step_ps if self.median_step_ps else 0,
            "idle_ps": self.idle_ps,
            "idle_fraction": self.idle_ps / self.window_ps if self.window_ps else None,
            "gaps_between_steps": sum(1 for g in self.gaps if g["between_steps"]),
            "largest_gaps": sorted(self.gaps, key=lambda g: -g["gap_ps"])[:5],
            "host_copies": {k: {"count": v[0], "time_ps": v[1], "per_step": v[0] / steps}
                            for k, v in self.copies.items()},
        }
