"""Wrapper overhead: `pgle run --profile` against plain `python` on examples/train.py.

Runs the two alternately (--repeats each, default 3) so machine noise hits both
alike, and prints the median wall time of each and their ratio. The goal is
<= 2% of a ~30 s run; pick --steps so one run takes about that long here.
On CPU the profile is ignored by XLA, so the difference is pgle's own cost:
start-up, the harness in the process, the output pumps, the log scan.

    python benchmarks/bench_overhead.py [--steps 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAIN = str(REPO / "examples" / "train.py")


def wall(argv, cwd, env) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from pgle.profiles.files import Profile, write_profile

    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "TF_CPP_"))}
    env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        plain = [sys.executable, TRAIN, "--steps", str(args.steps)]
        wrapped = [sys.executable, "-m", "pgle", "run", "--profile", "p.pb", TRAIN, "--",
                   "--steps", str(args.steps)]
        # pgle turns XLA's INFO log on; give plain python the same so only pgle differs.
        plain_env = dict(env, TF_CPP_MIN_LOG_LEVEL="0")
        a, b = [], []
        for _ in range(args.repeats):
            a.append(wall(plain, d, plain_env))
            b.append(wall(wrapped, d, env))
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"plain python: median {ma:.2f} s  ({', '.join(f'{x:.2f}' for x in a)})")
        print(f"pgle run:     median {mb:.2f} s  ({', '.join(f'{x:.2f}' for x in b)})")
        print(f"ratio pgle/plain: {mb / ma:.4f}  (overhead {100 * (mb / ma - 1):+.2f}%, goal <= 2%)")


if __name__ == "__main__":
    main()
