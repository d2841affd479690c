"""How long `pgle doctor` (no --probe) takes, end to end as a user runs it. Goal: < 2 s.

    python benchmarks/bench_doctor.py [--runs N]

Runs the CLI in a fresh process each time (Python start, pgle, the jax child
that lists devices, nsys/ldconfig look-ups) and prints each wall time and the
median; exits 1 when the median misses the goal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_S = 2.0
REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workflow", default="manual")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    times = []
    for i in range(args.runs + 1):  # the first run warms the file cache and is not counted
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pgle", "doctor", "--json",
                               "--workflow", args.workflow], env=env, cwd=REPO,
                              capture_output=True, timeout=120)
        elapsed = time.perf_counter() - start
        if proc.returncode not in (0, 1):  # 1: a check found an error, still a full run
            print(proc.stderr.decode(), file=sys.stderr)
            return 2
        if i:
            times.append(elapsed)
            print(f"run {i}: {elapsed:.3f} s")
    median = statistics.median(times)
    print(f"pgle doctor --workflow {args.workflow}: median {median:.3f} s, min {min(times):.3f} s, "
          f"max {max(times):.3f} s over {len(times)} runs (goal < {GOAL_S:g} s)")
    return 0 if median < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
