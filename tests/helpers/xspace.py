"""Build synthetic JAX profiler traces (`<host>.xplane.pb`) from the XSpace schema.

Why synthetic: PGLE traces come from NVIDIA GPUs and CI has none. These traces
have what a GPU trace has where it matters to the converters: `/device:GPU:N`
planes with stream lines and an "Async XLA Ops" line, kernel events carrying
`hlo_op` / `hlo_module` / `program_id` / `scope_range_id` stats (as references
or strings, on the event or on its metadata), a `/host:metadata` plane holding
each module's HloProto (a real one compiled by jax on CPU, so jaxlib's own
converter accepts it) and the "Task Environment" plane with the profile start.

The same files are read by jaxlib's `get_profiled_instructions_proto` and by
pgle's converter, so a test can compare both on identical input.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from pgle.profiles.proto import hlo_proto_class, xspace_class

FINGERPRINT_ATTR = "fingerprint_before_lhs"


@functools.cache
def real_hlo_module_bytes() -> bytes:
    """A valid serialized HloModuleProto (jaxlib rebuilds the module to read its ROOT attributes)."""
    import jax
    import jax.numpy as jnp

    compiled = jax.jit(lambda x: x * 2.0 + 1.0).lower(jnp.ones(4)).compile()
    return compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()


def hlo_proto_bytes(name: str, module_id: int, fingerprint: str | None, where: str | None) -> bytes:
    """HloProto for module `name`/`module_id`, with the fingerprint at `where` ('module' | 'root' | None)."""
    HloProto = hlo_proto_class()
    proto = HloProto()
    proto.hlo_module.MergeFromString(real_hlo_module_bytes())  # unknown fields survive
    mod = proto.hlo_module
    mod.name = name
    mod.id = module_id
    if fingerprint and where == "module":
        mod.frontend_attributes.map[FINGERPRINT_ATTR] = fingerprint
    elif fingerprint and where == "root":
        entry = next(c for c in mod.computations if c.id == mod.entry_computation_id)
        root = next(i for i in entry.instructions if i.id == entry.root_id)
        root.frontend_attributes.map[FINGERPRINT_ATTR] = fingerprint
    return proto.SerializeToString()


@dataclasses.dataclass
class Event:
    op: str | None
    module: str | None
    program_id: int | None
    start_ps: int  # from the line's start
    duration_ps: int
    scope_range_id: int | None = None
    # 'event': stats on the event (kernel events); 'metadata': on its XEventMetadata.
    stats_on: str = "event"
    as_ref: bool = True  # hlo_op / hlo_module as ref_value (what TSL writes) or str_value
    program_id_type: str = "int64"  # or 'uint64'
    metadata_name: str | None = None  # the kernel name; defaults to the op


class _Plane:
    def __init__(self, plane):
        self.plane = plane
        self._stat_ids: dict[str, int] = {}
        self._event_ids: dict[Any, int] = {}

    def stat_id(self, name: str) -> int:
        if name not in self._stat_ids:
            sid = len(self._stat_ids) + 1
            self._stat_ids[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat_ids[name]

    def event_metadata(self, name: str, key: Any = None) -> Any:
        key = key if key is not None else name
        if key not in self._event_ids:
            eid = len(self._event_ids) + 1
            self._event_ids[key] = eid
            self.plane.event_metadata[eid].id = eid
            self.plane.event_metadata[eid].name = name
        return self.plane.event_metadata[self._event_ids[key]]

    def add_stat(self, stats, name: str, value: Any, kind: str) -> None:
        st = stats.add()
        st.metadata_id = self.stat_id(name)
        if kind == "ref":
            st.ref_value = self.stat_id(value)
        elif kind == "str":
            st.str_value = value
        elif kind == "int64":
            st.int64_value = value
        elif kind == "uint64":
            st.uint64_value = value
        elif kind == "bytes":
            st.bytes_value = value
        else:
            raise ValueError(kind)


class TraceBuilder:
    """One host's XSpace. `line()` returns a list to append `Event`s to."""

    def __init__(self, host: str = "host0", profile_start_ns: int = 1_700_000_000_000_000_000):
        self.host = host
        self.space = xspace_class()()
        self.space.hostnames.append(host)
        self.profile_start_ns = profile_start_ns
        self._metadata: _Plane | None = None
        self._devices: dict[int, _Plane] = {}
        self._lines: list[tuple[_Plane, Any, list[Event]]] = []
        env = _Plane(self.space.planes.add(name="Task Environment", id=len(self.space.planes)))
        env.add_stat(env.plane.stats, "profile_start_time", profile_start_ns, "uint64")

    def add_module(self, name: str, module_id: int, fingerprint: str | None = None,
                   where: str | None = "module") -> None:
        if self._metadata is None:
            self._metadata = _Plane(self.space.planes.add(name="/host:metadata", id=len(self.space.planes)))
        md = self._metadata.event_metadata(f"{name}({module_id})")
        self._metadata.add_stat(md.stats, "Hlo Proto", hlo_proto_bytes(name, module_id, fingerprint, where),
                                "bytes")
        self._metadata.add_stat(md.stats, "program_id", module_id, "uint64")

    def device(self, index: int, prefix: str = "/device:GPU:") -> _Plane:
        if index not in self._devices:
            self._devices[index] = _Plane(self.space.planes.add(name=f"{prefix}{index}",
                                                                id=len(self.space.planes)))
        return self._devices[index]

    def line(self, device: int, name: str, timestamp_ns: int = 0, display_name: str = "",
             prefix: str = "/device:GPU:") -> list[Event]:
        plane = self.device(device, prefix)
        line = plane.plane.lines.add(id=len(plane.plane.lines) + 1, name=name,
                                     display_name=display_name, timestamp_ns=timestamp_ns)
        events: list[Event] = []
        self._lines.append((plane, line, events))
        return events

    def serialize(self) -> bytes:
        for plane, line, events in self._lines:
            del line.events[:]
            for e in events:
                self._add_event(plane, line, e)
        return self.space.SerializeToString()

    def _add_event(self, plane: _Plane, line, e: Event) -> None:
        name = e.metadata_name or e.op or "kernel"
        kind = "ref" if e.as_ref else "str"
        if e.stats_on == "metadata":
            md = plane.event_metadata(name, key=(name, e.op, e.module, e.program_id, "md"))
            if not md.stats:
                self._op_stats(plane, md.stats, e, kind)
            target = None
        else:
            md = plane.event_metadata(name)
            target = True
        ev = line.events.add(metadata_id=md.id, offset_ps=e.start_ps, duration_ps=e.duration_ps)
        if target:
            plane.add_stat(ev.stats, "correlation_id", 12345, "uint64")  # noise, like CUPTI's
            self._op_stats(plane, ev.stats, e, kind)

    @staticmethod
    def _op_stats(plane: _Plane, stats, e: Event, kind: str) -> None:
        if e.op is not None:
            plane.add_stat(stats, "hlo_op", e.op, kind)
        if e.module is not None:
            plane.add_stat(stats, "hlo_module", e.module, kind)
        if e.program_id is not None:
            plane.add_stat(stats, "program_id", e.program_id, e.program_id_type)
        if e.scope_range_id is not None:
            plane.add_stat(stats, "scope_range_id", e.scope_range_id, "int64")

    def write(self, run_dir: os.PathLike | str) -> str:
        os.makedirs(run_dir, exist_ok=True)
        path = os.path.join(os.fspath(run_dir), f"{self.host}.xplane.pb")
        with open(path, "wb") as f:
            f.write(self.serialize())
        return path


# --- traces with known communication/compute overlap (pgle report) ----------------------------

def add_host_steps(builder: TraceBuilder, steps: list[tuple[int, int, int]], name: str = "train",
                   timestamp_ns: int = 0) -> None:
    """StepTraceAnnotation events on a `/host:CPU` plane: (step_num, start_ps, duration_ps)."""
    plane = _Plane(builder.space.planes.add(name="/host:CPU", id=len(builder.space.planes)))
    line = plane.plane.lines.add(id=1, name="python", timestamp_ns=timestamp_ns)
    md = plane.event_metadata(name)
    for num, start, dur in steps:
        ev = line.events.add(metadata_id=md.id, offset_ps=start, duration_ps=dur)
        plane.add_stat(ev.stats, "step_num", num, "int64")


def add_xla_ops_plane(builder: TraceBuilder, device: int, ops: list[tuple[str, int, int]],
                      async_ops: list[tuple[str, int, int]] | None = None) -> None:
    """A device plane in the shape xprof analyses (TPU, or post-processed): an "XLA Ops" line
    of (name, start_ps, duration_ps) and, optionally, an "Async XLA Ops" line."""
    plane = builder.device(device, "/device:TPU:")
    for line_name, events in (("XLA Ops", ops), ("Async XLA Ops", async_ops or [])):
        if not events:
            continue
        line = plane.plane.lines.add(id=len(plane.plane.lines) + 1, name=line_name,
                                     display_name=line_name, timestamp_ns=0)
        for name, start, dur in events:
            md = plane.event_metadata(name)
            line.events.add(metadata_id=md.id, offset_ps=start, duration_ps=dur)


US = 1_000_000  # picoseconds per microsecond


def gpu_overlap_trace(steps: int = 4, devices: int = 2, step_us: int = 1000,
                      idle_before_step_us: int = 0, host_copy: bool = False) -> TraceBuilder:
    """A GPU trace of `steps` steps on `devices` devices with known overlap, per step:

    compute stream: fusion.1 [0, 300) us, fusion.2 [400, 700) us (relative to the step)
    comm stream:    all-gather-start.1 [250, 450) -> 50 hidden, 100 exposed, 50 hidden
                    all-reduce-start.2 [700, 800) -> 100 exposed
    so 300 us of communication per device and step, 200 us of it exposed, 100 us hidden.
    With `idle_before_step_us`, every step after the first starts that much later (an idle
    device gap at each boundary); with `host_copy`, one 20 us MemcpyH2D per step.
    """
    b = TraceBuilder()
    b.add_module("jit_train_step", 7)
    starts = [k * (step_us + idle_before_step_us) * US for k in range(steps)]
    add_host_steps(b, [(k, s, step_us * US) for k, s in enumerate(starts)])
    for d in range(devices):
        compute = b.line(d, "Stream #13(compute)")
        comm = b.line(d, "Stream #20(nccl)")
        copies = b.line(d, "Memcpy H2D") if host_copy else None
        for s in starts:
            ev = lambda op, lo, hi, name=None: Event(op, "jit_train_step", 7, s + lo * US,
                                                     (hi - lo) * US, metadata_name=name)
            compute += [ev("fusion.1", 0, 300), ev("fusion.2", 400, 700)]
            comm += [ev("all-gather-start.1", 250, 450, "ncclDevKernel_AllGather_RING_LL"),
                     ev("all-reduce-start.2", 700, 800, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")]
            if copies is not None:
                copies.append(Event(None, None, None, s + 800 * US, 20 * US,
                                    metadata_name="MemcpyH2D"))
    return b
