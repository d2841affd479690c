"""`pgle collect` on an unmarked 10k-step script against the plain run (issue 13, case 1).

The script (tests/workloads/real/stax_mlp.py: jax's stax idiom, no StepTraceAnnotation) runs
10,000 steps. Before the execution window, collect profiled the whole run (a 10k-step flax
example: 4 min 07 s against 28 s, 13.2 GB). Now collect profiles 5 executions of the
most-executed jax.jit function and lets the rest of the run go unprofiled, so it must stay
within 1.5x the plain run's wall time with bounded memory.

Whole processes, alternating plain / collect, >= 5 pairs; prints min/median/max of the
per-pair wall-time ratios and the peak RSS (ru_maxrss of the children, KiB) of each side.

    python benchmarks/bench_unmarked.py [--steps 10000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = str(REPO / "tests" / "workloads" / "real" / "stax_mlp.py")


def measure(argv, cwd, env) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB of the largest process of the tree) of one whole run."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    # pgle's own RSS and its workload's: the workload is a grandchild of this process for the
    # collect side, so take the children's maximum after each run.
    return wall, max(usage.ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "TF_CPP_"))}
    env["PYTHONWARNINGS"] = "ignore"
    plain = [sys.executable, SCRIPT, "--steps", str(args.steps)]
    ratios, walls, rss = [], {"plain": [], "collect": []}, {"plain": [], "collect": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = ["plain", "collect"] if i % 2 == 0 else ["collect", "plain"]
            pair = {}
            for side in order:
                argv = plain if side == "plain" else [
                    sys.executable, "-m", "pgle", "collect", "-o", f"p{i}.pb", "--allow-empty",
                    "--force", SCRIPT, "--", "--steps", str(args.steps)]
                pair[side], peak = measure(argv, tmp, env)
                walls[side].append(pair[side])
                rss[side].append(peak)
            ratios.append(pair["collect"] / pair["plain"])
            print(f"pair {i + 1}: plain {pair['plain']:.1f} s, collect {pair['collect']:.1f} s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
    print(f"ratio collect/plain over {args.pairs} pairs: min {min(ratios):.3f}, median "
          f"{statistics.median(ratios):.3f}, max {max(ratios):.3f} (goal <= 1.5)")
    for side in ("plain", "collect"):
        print(f"{side}: wall median {statistics.median(walls[side]):.1f} s, peak RSS "
              f"{max(rss[side]) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
