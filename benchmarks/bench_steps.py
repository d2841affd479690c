"""A run of a million marked steps under `pgle run` (issue 25): how long pgle takes once the
workload has finished, and how much memory pgle itself needs, with pgle installed as users
install it (benchmarks/harness.py `user_install`).

The workload (tests/workloads/many_steps.py) compiles once, then opens and closes
`jax.profiler.StepTraceAnnotation` a million times (two steps.bin records a step, ~64 MB),
and writes the time of its last statement to a file. `pgle run` runs in an interpreter that
records, at its own exit, the time and its own peak RSS (`RUSAGE_SELF`: pgle's process only;
the workload is a child and not counted). Figures, min / median / max over the runs:
- seconds from the workload's last statement to pgle's exit (reading the events, the step
  summary, the log scan and the verdict; goal <= 2 s);
- pgle's peak RSS (goal <= 200 MB; the reader that kept every record peaked at 1.33 GB).
One warm-up run, then `--runs` runs. Writes benchmarks/results/bench_steps.json.
Runtime: ~3 minutes on 2 cores (most of it the workload's own steps).

    python benchmarks/bench_steps.py [--runs 5] [--steps 1000000]
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

from benchmarks import harness as h  # noqa: E402

WORKLOAD = ROOT / "tests" / "workloads" / "many_steps.py"
# pgle's own entry point, recording its exit time and its own peak RSS at exit.
WRAPPER = """
import atexit, resource, runpy, sys, time
out = sys.argv.pop(1)
def record():
    with open(out, "w") as f:
        f.write(f"{time.time()!r} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
atexit.register(record)
sys.argv[0] = "pgle"
runpy.run_module("pgle", run_name="__main__", alter_sys=True)
"""


def one_run(user, folder: Path, steps: int) -> tuple[float, float]:
    profile = folder / "p.pbtxt"
    profile.write_text('costs {\n  name: "fusion.1"\n  cost_us: 1.0\n}\n')
    ended, workload_end = folder / "pgle_end.txt", folder / "workload_end.txt"
    run = folder / "run"
    shutil.rmtree(run, ignore_errors=True)
    p = subprocess.run([user.python, "-c", WRAPPER, str(ended), "run", "--profile", str(profile),
                        "--run-dir", str(run), str(WORKLOAD), "--", str(steps),
                        "--exit-time", str(workload_end)],
                       env=user.env(JAX_PLATFORMS="cpu"), cwd=user.cwd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"pgle run failed ({p.returncode}): {p.stderr[-2000:]}")
    pgle_end, rss_kb = ended.read_text().split()
    return float(pgle_end) - float(workload_end.read_text()), int(rss_kb) / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1_000_000)
    args = ap.parse_args()
    user = h.user_install()
    rec = h.Recorder("bench_steps")
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as d:
        one_run(user, Path(d), args.steps)  # warm-up
        rows = [one_run(user, Path(d), args.steps) for _ in range(args.runs)]
    after = h.spread([r[0] for r in rows])
    rss = h.spread([r[1] for r in rows])
    details = {"runs": [{"after_workload_s": round(a, 3), "pgle_peak_rss_mb": round(m, 1)}
                        for a, m in rows], "steps": args.steps}
    rec.figure("steps_after_workload", what=f"`pgle run` of {args.steps:,} marked steps: from the "
               "workload's last statement to pgle's exit (events, step times, verdict)",
               anchor="–", goal="<= 2 s", value=after, unit="s", met=after["median"] <= 2.0,
               details=details)
    rec.figure("steps_memory", what=f"`pgle run` of {args.steps:,} marked steps: pgle's own peak "
               "RSS (the workload not counted)", anchor="–", goal="<= 200 MB", value=rss, unit="MB",
               met=rss["median"] <= 200, details=details)
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
