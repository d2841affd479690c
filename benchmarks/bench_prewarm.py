"""Prewarm overhead: `pgle prewarm` vs the same run with the JAX variables set by hand.

Both runs use auto PGLE (3 profiled executions) and a fresh persistent cache with
min compile time 0 and no min entry size; on CPU both load the test-only helper
(tests/helpers/pgle_cpu_profile) so JAX recompiles and writes PGLE-optimized
entries as it would on a GPU. The workload is tests/workloads/auto_train.py.
Runs alternate (by hand, pgle, by hand, ...) to spread machine noise; prints, for
each, the median and best wall time and the median CPU time (user+sys of all
child processes, which other load on a shared machine disturbs less), and the
ratios. Goal: pgle within 3% of by hand.

    python benchmarks/bench_prewarm.py [--steps 1500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "workloads" / "auto_train.py"
HELPER = ROOT / "tests" / "helpers" / "pgle_cpu_profile"


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "TF_CPP_"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(HELPER))
    return env


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def by_hand(cache: Path, steps: int) -> float:
    env = base_env()
    env.update(JAX_ENABLE_PGLE="true", JAX_PGLE_PROFILING_RUNS="3",
               JAX_PGLE_AGGREGATION_PERCENTILE="90", JAX_ENABLE_COMPILATION_CACHE="true",
               JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(WORKLOAD), "--steps", str(steps)], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def with_pgle(cache: Path, steps: int, project: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pgle", "prewarm", "--cache-dir", str(cache),
                    "--runs", "3", str(WORKLOAD), "--", "--steps", str(steps)],
                   env=base_env(), cwd=project, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    hand, pgle, hand_cpu, pgle_cpu = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(args.repeat):
            for name in ("hand", "pgle"):
                cache = tmp / f"{name}-{i}"
                c0 = cpu_seconds()
                if name == "hand":
                    hand.append(by_hand(cache, args.steps))
                    hand_cpu.append(cpu_seconds() - c0)
                else:
                    pgle.append(with_pgle(cache, args.steps, tmp))
                    pgle_cpu.append(cpu_seconds() - c0)
                shutil.rmtree(cache, ignore_errors=True)
    med = statistics.median
    print(f"auto_train.py --steps {args.steps}, {args.repeat} alternating runs each:")
    print(f"  by hand (JAX variables set): wall median {med(hand):6.2f} s, best {min(hand):6.2f} s, "
          f"CPU median {med(hand_cpu):6.2f} s")
    print(f"  pgle prewarm:                wall median {med(pgle):6.2f} s, best {min(pgle):6.2f} s, "
          f"CPU median {med(pgle_cpu):6.2f} s")
    for what, p, h in (("wall median", med(pgle), med(hand)), ("wall best", min(pgle), min(hand)),
                       ("CPU median", med(pgle_cpu), med(hand_cpu))):
        print(f"  ratio pgle / by hand, {what:<11}: {p / h:.3f} ({(p / h - 1) * 100:+.1f}%)")
    print("  goal: <= +3%")


if __name__ == "__main__":
    main()
