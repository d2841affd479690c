"""GPU-shaped JAX profiler traces of any size, written straight in the wire format.

What a `<host>.xplane.pb` of a JAX training job on NVIDIA GPUs holds where pgle's readers
care (tsl/profiler/utils/xplane_schema.h names; XLA's CUPTI collector):

- one `/device:GPU:N` plane per GPU; one line per CUDA stream, named `Stream #N(...)`
  (compute kernels, NCCL kernels on their own stream, memory copies on a copy stream);
- one event per *kernel*: an HLO op often runs as several kernels (a fusion plus its
  reduction, a gemm and its epilogue) that share the op's `scope_range_id`; each kernel
  carries `hlo_op` and `hlo_module` (references to stat metadata, as TSL interns them),
  `program_id`, `scope_range_id`, CUPTI's `correlation_id` and a `kernel_details` string;
  the event's metadata name is the kernel's name (`loop_add_fusion_kernel`,
  `ncclDevKernel_AllGather_RING_LL`, `MemcpyH2D`);
- optionally the lines xprof derives ("XLA Modules", "XLA Ops" with `-start`/`-done` ops,
  "Async XLA Ops"): events named by module or op, without hlo_op stats (so converters that
  count kernels do not count them twice);
- `/host:CPU` with the Python thread's `StepTraceAnnotation` events (`step_num`) among
  other TraceMe events, `/host:metadata` with each module's HloProto (a real one, so
  jaxlib's converter reads it) and "Task Environment" with the profile start time.

Why by hand: building millions of events through protobuf's Python objects takes minutes;
these bytes are what protobuf would write (tests parse them with protobuf and with jaxlib).
Per step and device the timeline is known (see `GpuShape`), so tests can check totals.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random

from helpers.xspace import hlo_proto_bytes
from pgle.profiles.proto import xplane_class

US = 1_000_000  # picoseconds per microsecond
PROFILE_START_NS = 1_700_000_000_000_000_000
KERNEL_NAMES = ("loop_add_fusion_kernel", "input_reduce_fusion_kernel",
                "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize1x1x1",
                "loop_multiply_fusion_kernel", "triton_softmax_kernel", "wrapped_transpose_kernel")
NCCL_KERNELS = {"all-gather": "ncclDevKernel_AllGather_RING_LL",
                "all-reduce": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                "reduce-scatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"}


@dataclasses.dataclass(frozen=True)
class GpuShape:
    """Per step and device: `compute_ops` fusions back to back on the compute stream, each
    `op_us` long and run as 1..`kernels_per_op` kernels; one collective per entry of
    `collectives`, on the NCCL stream, the k-th starting at (k + 0.5) * op_us and lasting
    `collective_us` (partly hidden behind the fusions, partly exposed after them); with
    `host_copy`, one MemcpyH2D per step on the copy stream; `idle_us` of idle device time
    before every step but the first."""

    steps: int = 100
    devices: int = 8
    compute_ops: int = 6
    op_us: int = 100
    kernels_per_op: int = 3
    collectives: tuple[str, ...] = ("all-gather", "all-reduce")
    collective_us: int = 150
    host_copy: bool = True
    idle_us: int = 0
    derived_lines: bool = False
    host_noise: int = 3  # other host TraceMe events per step
    seed: int = 0

    @property
    def busy_us(self) -> int:
        return max(self.compute_ops * self.op_us,
                   int((len(self.collectives) - 0.5) * self.op_us) + self.collective_us)

    @property
    def step_us(self) -> int:
        return self.busy_us + 50

    def step_start_ps(self, k: int) -> int:
        return k * (self.step_us + self.idle_us) * US


MODULE, PROGRAM_ID, FINGERPRINT = "jit_train_step", 7, "5" * 32


def _v(n: int) -> bytes:
    """A protobuf varint (negative int64 as its 10-byte two's complement)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_vc = functools.lru_cache(maxsize=1 << 16)(_v)


def _len_field(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _v(len(body)) + body


class _PlaneWriter:
    """A plane's metadata through protobuf (small), its lines' events as bytes."""

    def __init__(self, name: str, plane_id: int):
        self.plane = xplane_class()(id=plane_id, name=name)
        self.stat_ids: dict[str, int] = {}
        self.event_ids: dict[str, int] = {}
        self.lines: list[bytes] = []

    def stat(self, name: str) -> int:
        if name not in self.stat_ids:
            sid = self.stat_ids[name] = len(self.stat_ids) + 1
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self.stat_ids[name]

    def event(self, name: str) -> int:
        if name not in self.event_ids:
            eid = self.event_ids[name] = len(self.event_ids) + 1
            self.plane.event_metadata[eid].id = eid
            self.plane.event_metadata[eid].name = name
        return self.event_ids[name]

    # XStat bytes: 08 metadata_id, then ref_value (38), int64 (20), uint64 (18) or str (2a).
    def ref_stat(self, name: str, value: str) -> bytes:
        return _len_field(0x22, b"\x08" + _vc(self.stat(name)) + b"\x38" + _vc(self.stat(value)))

    def int_stat(self, name: str, value: int, tag: int = 0x20) -> bytes:
        return _len_field(0x22, b"\x08" + _vc(self.stat(name)) + bytes((tag,)) + _v(value))

    def str_stat(self, name: str, value: str) -> bytes:
        return _len_field(0x22, b"\x08" + _vc(self.stat(name)) + _len_field(0x2A, value.encode()))

    def add_line(self, line_id: int, name: str, events: list[bytes], timestamp_ns: int = 0) -> None:
        header = b"\x08" + _v(line_id) + _len_field(0x12, name.encode()) + b"\x18" + _v(timestamp_ns)
        self.lines.append(_len_field(0x1A, header + b"".join(events)))

    def bytes(self) -> bytes:
        return self.plane.SerializeToString() + b"".join(self.lines)


def _event(metadata_id: int, offset_ps: int, duration_ps: int, stats: bytes = b"") -> bytes:
    body = b"\x08" + _vc(metadata_id) + b"\x10" + _v(offset_ps) + b"\x18" + _v(duration_ps) + stats
    return b"\x22" + _vc(len(body)) + body


def device_plane(shape: GpuShape, device: int, plane_id: int) -> bytes:
    rng = random.Random(shape.seed * 1000 + device)
    w = _PlaneWriter(f"/device:GPU:{device}", plane_id)
    const = w.ref_stat("hlo_module", MODULE) + w.int_stat("program_id", PROGRAM_ID)
    compute, nccl, copies = [], [], []
    ops_line, async_line, modules_line = [], [], []
    correlation = 1000 * device
    scope = 0
    op_stats = {}
    for k in range(shape.steps):
        base = shape.step_start_ps(k)
        for i in range(shape.compute_ops):
            op = f"fusion.{i}"
            if op not in op_stats:
                op_stats[op] = w.ref_stat("hlo_op", op) + const
            lo, hi = base + i * shape.op_us * US, base + (i + 1) * shape.op_us * US
            kernels = rng.randint(1, shape.kernels_per_op)
            scope += 1
            # The op's span cut into its kernels, with launch gaps of 1-3 us between them.
            cuts = sorted(rng.sample(range(lo + US, hi - US, US), kernels - 1)) if kernels > 1 else []
            edges = [lo, *cuts, hi]
            for a, b in zip(edges, edges[1:]):
                gap = min(rng.randint(1, 3) * US, (b - a) // 2) if b != hi else 0
                correlation += 1
                name = KERNEL_NAMES[(i + a // US) % len(KERNEL_NAMES)]
                compute.append(_event(w.event(name), a, b - a - gap, op_stats[op]
                                      + w.int_stat("scope_range_id", scope)
                                      + w.int_stat("correlation_id", correlation, 0x18)
                                      + w.str_stat("kernel_details", "regs:96 static_shared:0 "
                                                   "dynamic_shared:49152 grid:132,1,1 block:384,1,1")))
            if shape.derived_lines:
                ops_line.append(_event(w.event(op), lo, hi - lo))
        for c, kind in enumerate(shape.collectives):
            op = f"{kind}-start.{c + 1}"
            if op not in op_stats:
                op_stats[op] = w.ref_stat("hlo_op", op) + const
            lo = base + int((c + 0.5) * shape.op_us) * US
            hi = lo + shape.collective_us * US
            correlation += 1
            scope += 1
            nccl.append(_event(w.event(NCCL_KERNELS[kind]), lo, hi - lo, op_stats[op]
                               + w.int_stat("scope_range_id", scope)
                               + w.int_stat("correlation_id", correlation, 0x18)))
            if shape.derived_lines:
                ops_line.append(_event(w.event(op), lo, 2 * US))
                ops_line.append(_event(w.event(f"{kind}-done.{c + 1}"), hi - 2 * US, 2 * US))
                async_line.append(_event(w.event(op), lo, hi - lo))
        if shape.host_copy:
            correlation += 1
            copies.append(_event(w.event("MemcpyH2D"), base + shape.busy_us * US, 20 * US,
                                 w.int_stat("correlation_id", correlation, 0x18)
                                 + w.str_stat("memcpy_details", "kind_src:pinned kind_dst:device "
                                              "size:1048576 dest:0 async:1")))
        if shape.derived_lines:
            modules_line.append(_event(w.event(f"{MODULE}({PROGRAM_ID})"), base, shape.busy_us * US))
    w.add_line(13, "Stream #13(Compute)", compute)
    w.add_line(20, "Stream #20(Nccl)", nccl)
    if shape.host_copy:
        w.add_line(15, "Stream #15(MemcpyH2D)", copies)
    if shape.derived_lines:
        w.add_line(1001, "XLA Modules", modules_line)
        w.add_line(1002, "XLA Ops", ops_line)
        w.add_line(1003, "Async XLA Ops", async_line)
    return w.bytes()


def host_plane(shape: GpuShape, plane_id: int) -> bytes:
    w = _PlaneWriter("/host:CPU", plane_id)
    steps, noise = [], []
    names = ("PjitFunction(train_step)", "ExecuteOnDevice", "ThunkExecutor::Execute")
    for k in range(shape.steps):
        base = shape.step_start_ps(k)
        steps.append(_event(w.event("train"), base, shape.step_us * US,
                            w.int_stat("step_num", k) + w.int_stat("group_id", k)))
        for j in range(shape.host_noise):
            noise.append(_event(w.event(names[j % len(names)]), base + j * 5 * US, 4 * US))
    w.add_line(1, "python3", steps + noise[: len(noise) // 2])
    w.add_line(2, "tf_pjrt_thread", noise[len(noise) // 2:])
    return w.bytes()


def write_gpu_trace(run_dir: os.PathLike | str, shape: GpuShape, host: str = "gpu-host") -> str:
    """`<run_dir>/<host>.xplane.pb` of this shape; returns its path. Writes plane by plane:
    memory follows one plane, so traces of gigabytes can be made."""
    planes_meta = []
    env = xplane_class()(id=0, name="Task Environment")
    env.stat_metadata[1].id = 1
    env.stat_metadata[1].name = "profile_start_time"
    env.stats.add(metadata_id=1, uint64_value=PROFILE_START_NS)
    planes_meta.append(env.SerializeToString())
    md = _PlaneWriter("/host:metadata", 1)
    em = md.plane.event_metadata[md.event(f"{MODULE}({PROGRAM_ID})")]
    em.stats.add(metadata_id=md.stat("Hlo Proto"),
                 bytes_value=hlo_proto_bytes(MODULE, PROGRAM_ID, FINGERPRINT, "module"))
    em.stats.add(metadata_id=md.stat("program_id"), uint64_value=PROGRAM_ID)
    planes_meta.append(md.bytes())
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(os.fspath(run_dir), f"{host}.xplane.pb")
    with open(path, "wb") as f:
        f.write(_len_field(0x22, host.encode()))  # hostnames
        for plane in planes_meta:
            f.write(_len_field(0x0A, plane))
        f.write(_len_field(0x0A, host_plane(shape, 2)))
        for d in range(shape.devices):
            f.write(_len_field(0x0A, device_plane(shape, d, 10 + d)))
    return path
