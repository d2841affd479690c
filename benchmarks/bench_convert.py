"""Trace -> profile on a generated ~200 MB GPU trace: pgle's converter vs jaxlib's.

Generates one `<host>.xplane.pb` shaped like a GPU trace (8 device planes, stream
lines of kernel events with hlo_op / hlo_module / program_id / scope_range_id
stats, two modules sharing instruction names, a metadata plane), then runs each
converter in its own process and reports wall time and peak memory (max RSS).
Prints the numbers of one run; asserts only that the mean single-file outputs agree.

    python benchmarks/bench_convert.py [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

EVENTS_PER_LINE = 50_000


def generate(run_dir: Path, target_mb: float) -> Path:
    from helpers.xspace import Event, TraceBuilder

    rng = random.Random(0)
    t = TraceBuilder("bench-host")
    t.add_module("jit_train_step", 7, "a" * 32, "module")
    t.add_module("jit_eval_step", 9, "b" * 32, "module")
    template = t.line(0, "Stream #13(compute)")
    ts = 0
    for i in range(EVENTS_PER_LINE):
        module, pid = ("jit_train_step", 7) if i % 4 else ("jit_eval_step", 9)
        op = f"fusion.{rng.randrange(2000)}" if i % 10 else f"all-reduce-start.{rng.randrange(50)}"
        dur = rng.randrange(1_000_000, 50_000_000)
        t_ev = Event(op, module, pid, ts, dur, scope_range_id=i)
        template.append(t_ev)
        ts += dur + 100_000
    data = t.serialize()  # fills the template line
    space = t.space
    plane0 = next(p for p in space.planes if p.name == "/device:GPU:0")
    line_bytes = len(plane0.lines[0].SerializeToString())
    copies = max(1, int(target_mb * 1e6 / line_bytes))
    planes = [plane0] + [space.planes.add() for _ in range(7)]
    for d, plane in enumerate(planes[1:], start=1):
        plane.CopyFrom(plane0)
        plane.name = f"/device:GPU:{d}"
        plane.id = 100 + d
        del plane.lines[:]
    for c in range(copies - 1):
        plane = planes[(c + 1) % len(planes)]
        line = plane.lines.add()
        line.CopyFrom(plane0.lines[0])
        line.id = c + 2
        line.timestamp_ns = (c + 1) * 10_000_000
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "bench-host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    del data
    return path


def peak_rss_mb() -> float:
    """VmHWM of this process image (ru_maxrss would include the parent's peak before exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(which: str, run_dir: str) -> None:
    t0 = time.perf_counter()
    if which == "jaxlib":
        from jax.experimental.profiler import get_profiled_instructions_proto

        t0 = time.perf_counter()  # import time is not conversion time
        data = get_profiled_instructions_proto(run_dir)
        from pgle.profiles.files import parse_profile

        costs = dict(parse_profile(data, "binary", "jaxlib").costs)
    else:
        from pgle.profiles.convert import convert_trace

        per_module = which == "pgle-per-module"
        profiles = convert_trace(run_dir, per_module=per_module, stat="median" if per_module else "mean")
        costs = dict(profiles[""].costs) if "" in profiles else {k: len(v.costs) for k, v in profiles.items()}
    seconds = time.perf_counter() - t0
    rss_mb = peak_rss_mb()
    print(json.dumps({"seconds": seconds, "max_rss_mb": rss_mb, "costs": costs}))


def run_child(which: str, run_dir: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", which, str(run_dir)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--keep", type=Path, default=None, help="Write the trace here and keep it.")
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "RUN_DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        t0 = time.perf_counter()
        path = generate(run_dir, args.mb)
        size = path.stat().st_size / 1e6
        print(f"generated {path.name}: {size:.0f} MB in {time.perf_counter() - t0:.1f} s")
        results = {w: run_child(w, run_dir) for w in ("jaxlib", "pgle", "pgle-per-module")}
        j = results["jaxlib"]
        for name, r in results.items():
            print(f"{name:16s} {r['seconds']:8.2f} s  peak RSS {r['max_rss_mb']:8.0f} MB  "
                  f"time ratio vs jaxlib {r['seconds'] / j['seconds']:.2f}x")
        same = results["pgle"]["costs"] == j["costs"]
        print(f"pgle (mean, single file) equals jaxlib: {same}; "
              f"per-module profiles: {results['pgle-per-module']['costs']}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
