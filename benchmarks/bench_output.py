"""Output pass-through: `pgle run ... | cat` against `python w.py | cat` (issue 12, case 3).

Two workloads, each printing what made pgle quadratic before: 100 MB without a
newline, and 10 MB of tqdm-style `\\r` progress updates (one flush per update).
Whole processes, run in alternating order (plain first in even pairs, pgle
first in odd ones), >= 5 pairs; prints min/median/max of the per-pair ratios.

Two ratios per pair:
- whole: pgle's wall time over plain's, pgle's fixed start-up included
  (importing jax to read versions, the harness, the log scan);
- output: the same with each side's time for an empty workload subtracted
  (measured in the same alternating pairs), i.e. the cost of moving the bytes.
The goal "within 2x of cat" is about the output ratio: pgle's start-up is
measured by benchmarks/bench_startup.py and bench_overhead.py.

    python benchmarks/bench_output.py [--pairs 5] [--mb 100] [--cr-mb 10]
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

NO_NEWLINE = """
import sys
chunk = b"x" * (1 << 20)
for _ in range({mb}):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
"""
CARRIAGE_RETURNS = """
import sys
total = {cr_bytes}
bar = 0
i = 0
while bar < total:
    line = f"\\r{{i:9d}} it [" + "#" * (i % 40) + " " * (40 - i % 40) + "]"
    sys.stdout.write(line)
    sys.stdout.flush()  # tqdm flushes every update
    bar += len(line)
    i += 1
sys.stdout.write("\\n")
"""
EMPTY = "pass\n"


def wall(argv: list[str], cwd: str, env: dict[str, str]) -> float:
    """Seconds for `argv | cat > /dev/null`, the whole pipeline."""
    t = time.perf_counter()
    producer = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    cat = subprocess.Popen(["cat"], stdin=producer.stdout, stdout=subprocess.DEVNULL)
    producer.stdout.close()
    cat.wait()
    if producer.wait() != 0:
        raise SystemExit(f"{argv} failed")
    return time.perf_counter() - t


def ratios(pairs: list[tuple[float, float]]) -> str:
    r = [b / a for a, b in pairs]
    return f"min {min(r):.2f}  median {statistics.median(r):.2f}  max {max(r):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--cr-mb", type=int, default=10)
    args = ap.parse_args()
    if args.pairs < 5:
        raise SystemExit("--pairs must be at least 5")
    sys.path.insert(0, str(REPO))
    from pgle.profiles.files import Profile, write_profile

    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "TF_CPP_"))}
    env["JAX_PLATFORMS"] = "cpu"
    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        scripts = {
            "empty": EMPTY,
            f"{args.mb} MB without a newline": NO_NEWLINE.format(mb=args.mb),
            f"{args.cr_mb} MB of \\r updates": CARRIAGE_RETURNS.format(cr_bytes=args.cr_mb << 20),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in scripts}
        for name, text in scripts.items():
            path = Path(d) / f"w{len(results[name])}_{abs(hash(name))}.py"
            path.write_text(text)
            plain = [sys.executable, str(path)]
            # Each run gets its own run folder (pgle refuses to reuse one).
            for i in range(args.pairs):
                wrapped = [sys.executable, "-m", "pgle", "run", "--profile", "p.pb",
                           "--run-dir", str(Path(d) / "runs" / f"{abs(hash(name))}-{i}"), str(path)]
                if i % 2 == 0:
                    a = wall(plain, d, env)
                    b = wall(wrapped, d, env)
                else:
                    b = wall(wrapped, d, env)
                    a = wall(plain, d, env)
                results[name].append((a, b))
        empty = results.pop("empty")
        print(f"{'workload':32} {'plain | cat (median s)':>24} {'pgle run | cat':>16}   ratios")
        print(f"{'empty script':32} {statistics.median(a for a, _ in empty):24.2f} "
              f"{statistics.median(b for _, b in empty):16.2f}")
        for name, pairs in results.items():
            net = [(a - ea, b - eb) for (a, b), (ea, eb) in zip(pairs, empty)]
            print(f"{name:32} {statistics.median(a for a, _ in pairs):24.2f} "
                  f"{statistics.median(b for _, b in pairs):16.2f}")
            print(f"    whole: {ratios(pairs)}")
            print(f"    output (start-up subtracted): {ratios(net)}")


if __name__ == "__main__":
    main()
