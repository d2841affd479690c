"""Trace -> per-module profiles: `pgle convert RUN DIR/` against jaxlib's converter (issue 16).

Generates one `<host>.xplane.pb` shaped like a GPU trace, about 200 MB (8 device planes,
stream lines of kernel events carrying a CUPTI-like correlation_id and hlo_op / hlo_module
(references, as TSL writes them) / program_id / scope_range_id stats, two modules sharing
instruction names, ~2,000 distinct instructions, the metadata plane with both modules'
HloProtos and fingerprints, the Task Environment plane). Both sides are whole processes
through the harness (benchmarks/harness.py): the anchor is jaxlib's
`get_profiled_instructions_proto` in `python -c` (import included) writing its profile, the
subject `pgle convert RUN DIR/` as a user types it (one median profile per module, fragments
merged, written atomically, read back for the report). Before timing, `pgle convert --stat mean
RUN one.pb` is checked to hold exactly jaxlib's costs. Time and peak RSS (`ru_maxrss`) per pair.
Writes benchmarks/results/bench_convert.json.

    python benchmarks/bench_convert.py [--pairs 5] [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks import harness as h  # noqa: E402

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


JAXLIB = """
import sys
from jax.experimental.profiler import get_profiled_instructions_proto
data = get_profiled_instructions_proto(sys.argv[1])
with open(sys.argv[2], "wb") as f:
    f.write(data)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--keep", type=Path, default=None, help="Write the trace here and keep it.")
    ap.add_argument("--generate", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        generate(args.generate, args.mb)
        return
    rec = h.Recorder("bench_convert")
    env = h.python_env()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        trace = run_dir / "bench-host.xplane.pb"
        if not trace.exists():
            # In a subprocess: the harness's sides would inherit this process's peak RSS
            # (benchmarks/harness.py, OWN_PEAK_LIMIT_MB).
            subprocess.run([sys.executable, __file__, "--generate", str(run_dir), "--mb",
                            str(args.mb)], check=True)
        mb = trace.stat().st_size / 1e6
        theirs, ours, one = Path(tmp) / "jaxlib.pb", Path(tmp) / "profiles", Path(tmp) / "mean.pb"
        jaxlib = h.Side("jaxlib get_profiled_instructions_proto",
                        [sys.executable, "-c", JAXLIB, str(run_dir), str(theirs)], env=env)
        pgle = h.Side("pgle convert RUN DIR/", h.pgle_argv("convert", str(run_dir), f"{ours}/"),
                      env=env, before=lambda: shutil.rmtree(ours, ignore_errors=True))
        # Same costs as jaxlib where pgle computes what jaxlib computes (one file, mean, every
        # kernel a sample): checked once before timing, through the same command.
        h.run_once(jaxlib)
        h.run_once(h.Side("pgle convert --stat mean", h.pgle_argv(
            "convert", "--stat", "mean", "--force", str(run_dir), str(one)), env=env))
        from pgle.profiles.files import read_profile

        if dict(read_profile(one).costs) != dict(read_profile(theirs).costs):
            raise SystemExit("pgle convert --stat mean and jaxlib disagree on the trace")
        res = h.compare(jaxlib, pgle, pairs=args.pairs)
    what = (f"`pgle convert RUN DIR/`: {mb:.0f} MB GPU trace (8 devices), per-module median "
            "profiles (whole process)")
    details = dict(res, trace_mb=round(mb, 1))
    rec.figure("convert_per_module", what=what,
               anchor="jaxlib `get_profiled_instructions_proto` in `python -c` (one pooled mean)",
               goal="<= 1.0×", value=res["ratio"], met=res["ratio"]["median"] <= 1.0, details=details)
    rec.figure("convert_memory", what=f"peak RSS of that conversion ({mb:.0f} MB trace)",
               anchor="jaxlib `get_profiled_instructions_proto`", goal="<= 0.25×",
               value=res["memory_ratio"], met=res["memory_ratio"]["median"] <= 0.25, details=details)
    rec.write()


if __name__ == "__main__":
    main()
