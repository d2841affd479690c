"""Exposed-communication analysis of a large trace: pgle report's reader vs xprof's own
`analyze_async_overlap` (xprof 2.24, offline on an .xplane.pb), whole processes.

The anchor is xprof's tool: the reference implementation of the same analysis, run as
`python -c` the way pgle's reader is, each importing what it needs. The trace has the shape
xprof reads ("XLA Ops" lines with async start/done pairs on 8 device planes; xprof cannot read
raw GPU kernel-stream traces, see
tests/analysis/test_report.py::test_xprof_finds_nothing_in_gpu_kernel_streams), so both analyse
the same bytes; before timing, both are run once and must agree on the totals. Through the
harness (benchmarks/harness.py): alternating pairs, per-pair ratios of time and of peak RSS.
Writes benchmarks/results/bench_report.json.

    python benchmarks/bench_report.py [--mb 10] [--pairs 5] [--keep DIR]
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


def answer(side: h.Side) -> dict:
    return json.loads(subprocess.run(side.argv, env=side.env, cwd=side.cwd, capture_output=True,
                                     check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--keep")
    ns = ap.parse_args()
    rec = h.Recorder("bench_report")
    folder = Path(ns.keep or tempfile.mkdtemp(prefix="bench-report-"))
    try:
        trace = generate(folder, ns.mb)
        mb = trace.stat().st_size / 1e6
        env = h.python_env()
        pgle = h.Side("pgle report reader", [sys.executable, "-c", PGLE, str(trace)], env=env, cwd=ROOT)
        xprof = h.Side("xprof analyze_async_overlap", [sys.executable, "-c", XPROF, str(trace)],
                       env=env, cwd=ROOT)
        if answer(pgle) != answer(xprof):
            raise SystemExit(f"pgle and xprof disagree: {answer(pgle)} != {answer(xprof)}")
        res = h.compare(xprof, pgle, pairs=ns.pairs)
    finally:
        if not ns.keep:
            shutil.rmtree(folder, ignore_errors=True)
    what = f"exposed communication of a {mb:.0f} MB trace (8 devices), pgle report's reader"
    anchor = "xprof `analyze_async_overlap` in `python -c`"
    rec.figure("report_overlap", what=what, anchor=anchor, goal="–", value=res["ratio"], met=None,
               details=dict(res, trace_mb=round(mb, 1)))
    rec.figure("report_overlap_memory", what=f"{what}: peak RSS", anchor=anchor, goal="–",
               value=res["memory_ratio"], met=None, details=dict(res, trace_mb=round(mb, 1)))
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
