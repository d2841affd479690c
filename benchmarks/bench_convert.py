"""Trace -> per-module profiles: `pgle convert RUN DIR/` against jaxlib's converter (issues 16, 25).

Generates one `<host>.xplane.pb` shaped like a GPU trace (tests/helpers/gpu_trace.py), about
200 MB: 8 device planes, stream lines of kernel events (ops run as several kernels sharing a
scope_range_id, NCCL kernels on their own stream, host copies) carrying CUPTI's
correlation_id and kernel_details and hlo_op / hlo_module (references, as TSL writes them) /
program_id / scope_range_id, the metadata plane with the module's HloProto and fingerprint,
the Task Environment plane. Both sides are whole processes through the harness
(benchmarks/harness.py; both installed as users install them, `user_install`): the anchor is
jaxlib's `get_profiled_instructions_proto` in `python -c` (import included) writing its
profile, the subject `pgle convert RUN DIR/` as a user types it (one median profile per module,
fragments merged, written atomically, read back for the report). Before timing,
`pgle convert --stat mean RUN one.pb` is checked to hold exactly jaxlib's costs. Time and peak
RSS (`ru_maxrss`) per pair; and what the conversion adds to the RSS after its imports, over the
trace's largest plane (the reader holds one plane at a time, issue 25).
Writes benchmarks/results/bench_convert.json. Runtime: ~5 minutes on 2 cores.

    python benchmarks/bench_convert.py [--pairs 5] [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks import harness as h  # noqa: E402

def generate(run_dir: Path, target_mb: float) -> Path:
    from helpers.gpu_trace import GpuShape, write_gpu_trace

    probe = Path(write_gpu_trace(run_dir / "probe", GpuShape(steps=50, devices=8)))
    per_step = probe.stat().st_size / 50
    shutil.rmtree(run_dir / "probe")
    steps = max(int(target_mb * 1e6 / per_step), 10)
    return Path(write_gpu_trace(run_dir, GpuShape(steps=steps, devices=8), host="bench-host"))


MEASURE = """
import resource, sys
from pgle.profiles.convert import convert_trace_detailed
import numpy, google.protobuf.message
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
convert_trace_detailed(sys.argv[1], per_module=True)
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


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
    user = h.user_install()
    rec = h.Recorder("bench_convert")
    env = user.env()
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
                        [user.python, "-c", JAXLIB, str(run_dir), str(theirs)], env=env, cwd=user.cwd)
        pgle = h.Side("pgle convert RUN DIR/", user.pgle_argv("convert", str(run_dir), f"{ours}/"),
                      env=env, cwd=user.cwd, before=lambda: shutil.rmtree(ours, ignore_errors=True))
        # Same costs as jaxlib where pgle computes what jaxlib computes (one file, mean, every
        # kernel a sample): checked once before timing, through the same command.
        h.run_once(jaxlib)
        h.run_once(h.Side("pgle convert --stat mean", user.pgle_argv(
            "convert", "--stat", "mean", "--force", str(run_dir), str(one)), env=env, cwd=user.cwd))
        from pgle.profiles.files import read_profile
        from pgle.profiles.xspace_file import TraceFile

        if dict(read_profile(one).costs) != dict(read_profile(theirs).costs):
            raise SystemExit("pgle convert --stat mean and jaxlib disagree on the trace")
        res = h.compare(jaxlib, pgle, pairs=args.pairs)
        plane_mb = max(ref.size for ref in TraceFile(str(trace)).planes) / 2**20
        grew = []
        for _ in range(3):
            base, peak = map(int, subprocess.run([user.python, "-c", MEASURE, str(run_dir)], env=env,
                                                 cwd=user.cwd, capture_output=True, text=True,
                                                 check=True).stdout.split())
            grew.append((peak - base) / 1024 / plane_mb)
    what = (f"`pgle convert RUN DIR/`: {mb:.0f} MB GPU trace (8 devices), per-module median "
            "profiles (whole process)")
    details = dict(res, trace_mb=round(mb, 1), largest_plane_mb=round(plane_mb, 1))
    rec.figure("convert_per_module", what=what,
               anchor="jaxlib `get_profiled_instructions_proto` in `python -c` (one pooled mean)",
               goal="<= 1.0×", value=res["ratio"], met=res["ratio"]["median"] <= 1.0, details=details)
    rec.figure("convert_memory", what=f"peak RSS of that conversion ({mb:.0f} MB trace)",
               anchor="jaxlib `get_profiled_instructions_proto`", goal="<= 0.25×",
               value=res["memory_ratio"], met=res["memory_ratio"]["median"] <= 0.25, details=details)
    rec.figure("convert_memory_plane", what="what that conversion adds to its RSS after the imports, "
               "over the trace's largest plane", anchor="the largest plane's bytes",
               goal="<= 4× (a plane's bytes, columns and decoding temporaries)", value=h.spread(grew), unit="x-size",
               met=h.spread(grew)["median"] <= 4, details={"runs": grew, "largest_plane_mb": round(plane_mb, 1)})
    rec.write()


if __name__ == "__main__":
    main()
