"""pgle report's trace reader on the traces users have, whole processes (benchmarks/harness.py;
pgle installed as users install it, `user_install`):

- `report_gpu`: a GPU-shaped trace (tests/helpers/gpu_trace.py: 8 devices, stream lines, ops
  run as several kernels sharing a scope_range_id, NCCL kernels on their own stream, host
  copies, CUPTI's stats) read and analysed by the report (exposed communication, idle gaps,
  host copies), against pgle's trace converter on the same run folder (`pgle convert RUN DIR/`,
  which reads the same events): the report must read at least at the converter's speed;
- `report_gpu_memory`: what reading that trace adds to the process's peak RSS (over the
  RSS after the imports), over the size of its largest plane: the reader holds one plane's
  bytes and columns at a time, not the file (the old reader held the file and a parsed plane,
  ~2.8x the trace);
- `report_overlap`: exposed communication of a trace in the shape xprof reads ("XLA Ops"
  lines with async start/done pairs, 8 device planes; xprof cannot read raw GPU kernel
  streams, tests/analysis/test_report.py::test_xprof_finds_nothing_in_gpu_kernel_streams)
  against xprof's own `analyze_async_overlap` (the reference implementation, xprof 2.24, in
  this environment's python); both must agree on the totals before timing. Time and peak RSS.

Writes benchmarks/results/bench_report.json. Runtime: ~6 minutes on 2 cores.

    python benchmarks/bench_report.py [--mb 100] [--xprof-mb 10] [--pairs 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks import harness as h  # noqa: E402

READER = """
import json, resource, sys
from pgle.analysis.timeline import device_planes, host_steps
from pgle.profiles.xspace_file import TraceFile
from pgle.analysis.overlap import OverlapAccumulator
from pgle.analysis.diagnostics import TraceDiagnostics
import numpy, google.protobuf.message
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = TraceFile(sys.argv[1]); steps = host_steps(t)
acc, diag = OverlapAccumulator(steps), TraceDiagnostics(steps)
for plane in device_planes(t):
    acc.add(plane); diag.add(plane)
r = acc.result(); diag.result()
print(json.dumps({"span_ps": r["span_ps"], "exposed_ps": r["exposed_ps"],
                  "base_kb": base, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
XPROF = """
import json, sys
from xprof.cli.tools.analyze_async_overlap_tool import analyze_async_overlap
s = json.loads(analyze_async_overlap(sys.argv[1], bypass_cache=True))["summary"]
print(json.dumps({"span_ps": s["span_ps"], "exposed_ps": s["exposed_ps"]}))
"""


def generate_xla_ops(path: Path, target_mb: float) -> Path:
    from helpers.xspace import US, TraceBuilder, add_host_steps

    b = TraceBuilder("bench-host")
    # One step pattern, ~10 bytes an event: fusions, with an all-gather and an all-reduce
    # window partly hidden behind them.
    step = [("fusion.%d" % i, i * 50 * US, 45 * US) for i in range(20)]
    step += [("all-gather-start.1", 120 * US, 2 * US), ("all-gather-done.1", 400 * US, 2 * US),
             ("all-reduce-start.2", 800 * US, 2 * US), ("all-reduce-done.2", 1020 * US, 2 * US)]
    per_step_bytes = 8 * len(step) * 11
    steps = max(int(target_mb * 1e6 / per_step_bytes), 1)
    add_host_steps(b, [(k, k * 1100 * US, 1100 * US) for k in range(steps)])
    for d in range(8):
        plane = b.device(d, "/device:TPU:")
        line = plane.plane.lines.add(id=1, name="XLA Ops", display_name="XLA Ops")
        ids = [plane.event_metadata(n).id for n, _, _ in step]
        add = line.events.add
        for k in range(steps):
            base = k * 1100 * US
            for mid, (_, lo, dur) in zip(ids, step):
                add(metadata_id=mid, offset_ps=base + lo, duration_ps=dur)
    path.mkdir(parents=True, exist_ok=True)
    out = path / "bench-host.xplane.pb"
    out.write_bytes(b.space.SerializeToString())
    return out


def generate_gpu(run: Path, target_mb: float) -> Path:
    from helpers.gpu_trace import GpuShape, write_gpu_trace

    probe = write_gpu_trace(run / "probe", GpuShape(steps=50, devices=8))
    per_step = Path(probe).stat().st_size / 50
    shutil.rmtree(run / "probe")
    steps = max(int(target_mb * 1e6 / per_step), 10)
    return Path(write_gpu_trace(run, GpuShape(steps=steps, devices=8, idle_us=20)))


def largest_plane(path: Path) -> int:
    from pgle.profiles.xspace_file import TraceFile

    return max(ref.size for ref in TraceFile(str(path)).planes)


def answer(side: h.Side) -> dict:
    return json.loads(subprocess.run(side.argv, env=side.env, cwd=side.cwd, capture_output=True,
                                     check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--xprof-mb", type=float, default=10)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--keep")
    ap.add_argument("--generate", nargs=3, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.generate:
        kind, path, mb = ns.generate
        print(generate_gpu(Path(path), float(mb)) if kind == "gpu" else
              generate_xla_ops(Path(path), float(mb)))
        return 0
    user = h.user_install()
    rec = h.Recorder("bench_report")
    folder = Path(ns.keep or tempfile.mkdtemp(prefix="bench-report-"))
    try:
        env = user.env()
        # In subprocesses: the harness refuses to measure from a process that peaked high.
        gpu = Path(subprocess.run([sys.executable, __file__, "--generate", "gpu", str(folder / "gpu"),
                                   str(ns.mb)], capture_output=True, text=True,
                                  check=True).stdout.split()[-1])
        mb = gpu.stat().st_size / 1e6
        out = folder / "profiles"
        reader = h.Side("pgle report's reader", [user.python, "-c", READER, str(gpu)], env=env,
                        cwd=user.cwd)
        converter = h.Side("pgle convert RUN DIR/", user.pgle_argv("convert", str(gpu.parent), f"{out}/"),
                           env=env, cwd=user.cwd, before=lambda: shutil.rmtree(out, ignore_errors=True))
        res = h.compare(converter, reader, pairs=ns.pairs)
        seen = answer(reader)
        plane_mb = largest_plane(gpu) / 2**20
        grew = [(seen["peak_kb"] - seen["base_kb"]) / 1024 / plane_mb]
        for _ in range(2):
            again = answer(reader)
            grew.append((again["peak_kb"] - again["base_kb"]) / 1024 / plane_mb)
        details = dict(res, trace_mb=round(mb, 1), largest_plane_mb=round(plane_mb, 1))
        rec.figure("report_gpu", what=f"pgle report's trace reading and analysis, {mb:.0f} MB "
                   "GPU kernel trace (8 devices, several kernels per op; whole process)",
                   anchor="pgle's trace converter `pgle convert RUN DIR/` on the same trace",
                   goal="<= 1.0×", value=res["ratio"], met=res["ratio"]["median"] <= 1.0,
                   details=details)
        rec.figure("report_gpu_memory", what="what reading that trace adds to the reader's peak "
                   "RSS (over the RSS after its imports), over the trace's largest plane",
                   anchor="the largest plane's bytes", goal="<= 4× (a plane's bytes, columns and decoding temporaries)",
                   value=h.spread(grew), unit="x-size", met=h.spread(grew)["median"] <= 4,
                   details={"runs": grew, "trace_mb": round(mb, 1), "largest_plane_mb": round(plane_mb, 1),
                            "peak_rss_mb": round(seen["peak_kb"] / 1024, 1)})
        shutil.rmtree(folder / "gpu", ignore_errors=True)

        trace = Path(subprocess.run([sys.executable, __file__, "--generate", "xla_ops",
                                     str(folder / "xla_ops"), str(ns.xprof_mb)], capture_output=True,
                                    text=True, check=True).stdout.split()[-1])
        xmb = trace.stat().st_size / 1e6
        pgle = h.Side("pgle report reader", [user.python, "-c", READER, str(trace)], env=env,
                      cwd=user.cwd)
        # xprof is an optional extra: the environment's own python has it.
        xprof = h.Side("xprof analyze_async_overlap", [sys.executable, "-c", XPROF, str(trace)],
                       env=env, cwd=user.cwd)
        ours, theirs = answer(pgle), answer(xprof)
        if (ours["span_ps"], ours["exposed_ps"]) != (theirs["span_ps"], theirs["exposed_ps"]):
            raise SystemExit(f"pgle and xprof disagree: {ours} != {theirs}")
        res = h.compare(xprof, pgle, pairs=ns.pairs)
    finally:
        if not ns.keep:
            shutil.rmtree(folder, ignore_errors=True)
    what = f"exposed communication of a {xmb:.0f} MB trace (8 devices), pgle report's reader"
    anchor = "xprof `analyze_async_overlap` in `python -c`"
    rec.figure("report_overlap", what=what, anchor=anchor, goal="–", value=res["ratio"], met=None,
               details=dict(res, trace_mb=round(xmb, 1)))
    rec.figure("report_overlap_memory", what=f"{what}: peak RSS", anchor=anchor, goal="–",
               value=res["memory_ratio"], met=None, details=dict(res, trace_mb=round(xmb, 1)))
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
