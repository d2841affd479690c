"""Exposed-communication analysis of a large trace: pgle report's reader vs xprof's own
`analyze_async_overlap` (xprof 2.24, offline on an .xplane.pb), whole processes.

The trace has the shape xprof reads ("XLA Ops" lines with async start/done pairs on 8
device planes; xprof cannot read raw GPU kernel-stream traces, see
tests/analysis/test_report.py::test_xprof_finds_nothing_in_gpu_kernel_streams), so both analyse the
same bytes and must agree on the totals. Alternating order, >= 5 pairs; prints wall time
and peak RSS of each process and min/median/max of the per-pair time ratios (pgle/xprof).

    python benchmarks/bench_report.py [--mb 60] [--pairs 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PGLE = """
import json, sys
from pgle.analysis.timeline import TraceFile
from pgle.analysis.overlap import OverlapAccumulator
t = TraceFile(sys.argv[1]); acc = OverlapAccumulator(t.host_steps())
for plane in t.device_planes():
    acc.add(plane)
r = acc.result(); print(json.dumps({"span_ps": r["span_ps"], "exposed_ps": r["exposed_ps"]}))
"""
XPROF = """
import json, sys
from xprof.cli.tools.analyze_async_overlap_tool import analyze_async_overlap
s = json.loads(analyze_async_overlap(sys.argv[1], bypass_cache=True))["summary"]
print(json.dumps({"span_ps": s["span_ps"], "exposed_ps": s["exposed_ps"]}))
"""


def generate(path: Path, target_mb: float) -> Path:
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


def run(code: str, trace: Path) -> tuple[float, int, dict]:
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code, str(trace)], stdout=subprocess.PIPE,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"analysis failed ({p.returncode})")
    return elapsed, usage.ru_maxrss * 1024, json.loads(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=60)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--keep")
    ns = ap.parse_args()
    folder = Path(ns.keep or tempfile.mkdtemp(prefix="bench-report-"))
    trace = generate(folder, ns.mb)
    print(f"trace {trace}: {trace.stat().st_size / 1e6:.1f} MB")
    ratios = []
    for i in range(ns.pairs):
        order = [("pgle", PGLE), ("xprof", XPROF)]
        if i % 2:
            order.reverse()
        res = {name: run(code, trace) for name, code in order}
        assert res["pgle"][2] == res["xprof"][2], res
        ratios.append(res["pgle"][0] / res["xprof"][0])
        print(" ".join(f"{n}: {res[n][0]:.2f} s {res[n][1] / 2**20:.0f} MiB" for n in ("pgle", "xprof"))
              + f"  ratio {ratios[-1]:.2f}")
    print(f"pgle/xprof time ratio over {len(ratios)} pairs: min {min(ratios):.2f} "
          f"median {statistics.median(ratios):.2f} max {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
