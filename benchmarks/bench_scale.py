"""How pgle's analyses grow with the size of their input: 1x, 10x and 100x (issue 25).

Every analysis must be linear (or n log n) in steps, ops and ranks. Each one here is timed
at three sizes a factor 10 apart, in its own process each time (pgle installed as users
install it, benchmarks/harness.py `user_install`), three rounds; the figure is the exponent k
of time ~ size^k fitted through the three sizes, one fit per round (min / median / max). The
benchmark exits non-zero, saying which, when a median exponent is above 1.2.

- `report_trace`: pgle report's trace reading and analysis (exposed communication, idle gaps,
  host copies) of a GPU-shaped trace of 8 devices, 300 / 3,000 / 30,000 steps (timed inside
  the process: the reading and the analysis, not the interpreter's start);
- `report_run`: `pgle report RUN` as a user types it on a run folder of those steps (events
  and trace), whole process; its exponent is that of the time above the smallest run
  (start-up is a constant), and the 30,000-step run must take under 5 s;
- `schedule`: the schedule comparison of one all-gather whose span holds 3,000 / 30,000 /
  300,000 instructions;
- `events`: a run's marked steps (events.jsonl and steps.bin) of 10,000 / 100,000 /
  1,000,000 steps: read, step times, summary;
- `convert`: `convert_trace_detailed` per module of GPU-shaped traces of 100 / 1,000 / 10,000
  steps (8 devices, several kernels per op);
- `diff`: `pgle diff`'s comparison of two profiles of 2,000 / 20,000 / 200,000 names.
(merge over 8 / 80 / 800 ranks: benchmarks/bench_merge.py.)

Writes benchmarks/results/bench_scale.json. Runtime: ~6 minutes on 2 cores.

    python benchmarks/bench_scale.py [--rounds 3] [--only report_trace,events]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import harness as h  # noqa: E402

LIMIT = 1.2
REPORT_GOAL_S = 5.0

# Timed snippets: argv[1] is the input; each prints the seconds of its own work.
TIMED = {
    "report_trace": """
import sys, time
from pgle.analysis.timeline import device_planes, host_steps
from pgle.profiles.xspace_file import TraceFile
from pgle.analysis.overlap import OverlapAccumulator
from pgle.analysis.diagnostics import TraceDiagnostics
import numpy, google.protobuf
t0 = time.perf_counter()
t = TraceFile(sys.argv[1]); steps = host_steps(t)
a, d = OverlapAccumulator(steps), TraceDiagnostics(steps)
for plane in device_planes(t):
    a.add(plane); d.add(plane)
a.result(); d.result()
print(time.perf_counter() - t0)
""",
    "schedule": """
import sys, time
from pgle.analysis import schedule
before, after = open(sys.argv[1]).read().split("\\n=====\\n")
t0 = time.perf_counter()
schedule.compare(before, after)
print(time.perf_counter() - t0)
""",
    "events": """
import sys, time
from pgle.evidence.events import read_events
from pgle.evidence.steps import step_times, summarize
import numpy
t0 = time.perf_counter()
summarize(step_times(read_events(sys.argv[1]).steps))
print(time.perf_counter() - t0)
""",
    "convert": """
import sys, time
from pgle.profiles.convert import convert_trace_detailed
import numpy, google.protobuf
t0 = time.perf_counter()
convert_trace_detailed(sys.argv[1], per_module=True)
print(time.perf_counter() - t0)
""",
    "diff": """
import sys, time
from pgle.profiles.files import load_profile_source
from pgle.profiles.stats import diff_sources
a, b = (load_profile_source(p) for p in sys.argv[1].split(","))
t0 = time.perf_counter()
diff_sources(a, b)
print(time.perf_counter() - t0)
""",
}

SIZES = {"report_trace": (300, 3_000, 30_000), "report_run": (300, 3_000, 30_000),
         "schedule": (3_000, 30_000, 300_000), "events": (10_000, 100_000, 1_000_000),
         "convert": (100, 1_000, 10_000), "diff": (2_000, 20_000, 200_000)}
WHAT = {
    "report_trace": "pgle report's trace reading and analysis, GPU trace of 8 devices, "
                    "300 / 3,000 / 30,000 steps (in-process)",
    "report_run": "`pgle report RUN`, run folder of 8 GPUs' trace and events, 300 / 3,000 / "
                  "30,000 steps (whole process, time above the smallest)",
    "schedule": "schedule comparison, one all-gather spanning 3,000 / 30,000 / 300,000 "
                "instructions (in-process)",
    "events": "a run's events (steps.bin) of 10,000 / 100,000 / 1,000,000 steps: read, step times, summary "
              "(in-process)",
    "convert": "`pgle convert` per module, GPU traces of 8 devices, 100 / 1,000 / 10,000 steps "
               "(in-process)",
    "diff": "`pgle diff` of two profiles of 2,000 / 20,000 / 200,000 names (in-process)",
}


# --- inputs (made in subprocesses: the harness measures nothing from a process that peaked) ---

def make_input(kind: str, size: int, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    if kind in ("report_trace", "report_run", "convert"):
        from helpers.gpu_trace import GpuShape, write_gpu_trace

        shape = GpuShape(steps=size, devices=8, compute_ops=2, kernels_per_op=2, idle_us=20) \
            if kind != "convert" else GpuShape(steps=size, devices=8)
        run = folder / "run"
        trace = write_gpu_trace(run / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00", shape)
        if kind == "report_trace":
            return trace
        if kind == "convert":
            return str(Path(trace).parent)
        with open(run / "events.jsonl", "w") as f:
            f.write(json.dumps({"kind": "backend", "t": 1.0, "platform": "gpu", "device_count": 8,
                                "device_kind": "NVIDIA H100 80GB HBM3", "process_count": 1,
                                "process_index": 0}) + "\n")
        write_steps(run / "events.jsonl", size, step_s=shape.step_us * 1e-6, exit_s=1e-4)
        return str(run)
    if kind == "events":
        path = folder / "events.jsonl"
        path.touch()
        write_steps(path, size, step_s=1.6e-4, exit_s=5e-5, jitter_s=1e-6)
        return str(path)
    if kind == "schedule":
        path = folder / "hlo.txt"
        path.write_text(hlo_text(size, early=False) + "\n=====\n" + hlo_text(size, early=True))
        return str(path)
    if kind == "diff":
        from pgle.profiles.files import Profile, write_profile

        names = [f"fusion.{i}" for i in range(size)]
        a = write_profile(Profile([(n, float(i % 97) + 1) for i, n in enumerate(names)]), folder / "a.pb")
        b = write_profile(Profile([(n, float(i % 89) + 1) for i, n in enumerate(names[size // 100:])]),
                          folder / "b.pb")
        return f"{a},{b}"
    raise ValueError(kind)


def write_steps(events: Path, size: int, *, step_s: float, exit_s: float,
                jitter_s: float = 0.0) -> None:
    """`size` marked steps named `train` in the harness's layout (issue 35): their name as a
    `step_name` line of the events file, their edges as records of steps.bin beside it."""
    import array

    from pgle.evidence import step_file

    with open(events, "a") as f:
        f.write(json.dumps({"kind": "step_name", "t": 1_764_000_000.0, "id": 0, "name": "train",
                            "edges": 0}) + "\n")
    records = array.array("q")
    t = 1_764_000_000.0
    for i in range(size):
        t += step_s + (i % 7) * jitter_s
        records.extend((round(t * 1e9), i, i, 0, -round((t + exit_s) * 1e9), i, i, 0))
    with open(step_file.beside(events), "wb") as f:
        f.write(step_file.HEADER + step_file.encode(records))


def hlo_text(ops: int, early: bool) -> str:
    """A scheduled module: one all-gather whose start sits before (early) or in the middle of
    `ops` fusions, its done after them."""
    lines = ["HloModule jit_step, is_scheduled=true", "",
             "ENTRY %main (p: f32[8]) -> f32[64] {", "  %p = f32[8]{0} parameter(0)"]
    start = "  %all-gather-start = (f32[8]{0}, f32[64]{0}) all-gather-start(f32[8]{0} %p), dimensions={0}"
    body = [f"  %fusion.{i} = f32[8]{{0}} fusion(f32[8]{{0}} %p), kind=kLoop, calls=%fc" for i in range(ops)]
    cut = 0 if early else ops // 2
    lines += body[:cut] + [start] + body[cut:]
    lines += ["  ROOT %all-gather-done = f32[64]{0} all-gather-done((f32[8]{0}, f32[64]{0}) %all-gather-start)",
              "}"]
    return "\n".join(lines) + "\n"


# --- measuring ---------------------------------------------------------------------------

def fit(sizes, times) -> float:
    """Least-squares slope of log(time) against log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(t, 1e-6)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def increment_exponent(sizes, times) -> float:
    """The exponent of the time above the smallest size's (constant start-up cancels):
    (t100 - t1) / (t10 - t1) = (100^k - 1) / (10^k - 1) ~ 10^k."""
    grow = (times[2] - times[0]) / max(times[1] - times[0], 1e-6)
    return math.log(max(grow, 1e-6)) / math.log(sizes[2] / sizes[1])


def timed(user, kind: str, arg: str) -> float:
    out = subprocess.run([user.python, "-c", TIMED[kind], arg], capture_output=True, text=True,
                         env=user.env(), cwd=user.cwd)
    if out.returncode:
        raise SystemExit(f"{kind} failed: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


def whole(user, arg: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(user.pgle_argv("report", arg, "--json"), capture_output=True,
                       env=user.env(), cwd=user.cwd)
    seconds = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"pgle report failed: {p.stderr.decode()[-2000:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(SIZES))
    ap.add_argument("--make", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        sys.path.insert(0, str(ROOT / "tests"))
        print(make_input(args.make[0], int(args.make[1]), Path(args.make[2])))
        return 0
    user = h.user_install()
    rec = h.Recorder("bench_scale")
    failures = []
    for kind in args.only.split(","):
        sizes = SIZES[kind]
        with tempfile.TemporaryDirectory(prefix=f"bench-scale-{kind}-") as d:
            inputs = [subprocess.run([sys.executable, __file__, "--make", kind, str(s), f"{d}/{s}"],
                                     capture_output=True, text=True, check=True).stdout.split()[-1]
                      for s in sizes]
            rounds = []
            for _ in range(args.rounds):
                rounds.append([whole(user, a) if kind == "report_run" else timed(user, kind, a)
                               for a in inputs])
        exps = [increment_exponent(sizes, t) if kind == "report_run" else fit(sizes, t) for t in rounds]
        value = h.spread(exps)
        met = value["median"] <= LIMIT
        details = {"sizes": list(sizes), "seconds": rounds}
        rec.figure(f"scale_{kind}", what=WHAT[kind], anchor="–", goal=f"exponent <= {LIMIT}",
                   value=value, unit="", met=met, details=details)
        if not met:
            failures.append(f"{kind}: time grows as size^{value['median']:.2f}")
        if kind == "report_run":
            big = h.spread([t[2] for t in rounds])
            ok = big["median"] < REPORT_GOAL_S
            rec.figure("report_30k_steps", what="`pgle report RUN` on 30,000 steps × 8 GPUs (trace "
                       "and events; whole process)", anchor="–", goal=f"< {REPORT_GOAL_S:.0f} s",
                       value=big, unit="s", met=ok, details=details)
            if not ok:
                failures.append(f"pgle report on 30,000 steps took {big['median']:.1f} s")
    rec.write()
    if failures:
        print("FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
