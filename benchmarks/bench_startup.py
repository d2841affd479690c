"""`pgle --help` start-up time (goal: under 0.3 s), against a bare `python -c pass`.

    python benchmarks/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    runs = ap.parse_args().runs
    bare = timed([sys.executable, "-c", "pass"], runs)
    helps = timed([sys.executable, "-m", "pgle", "--help"], runs)
    sub = timed([sys.executable, "-m", "pgle", "collect", "--help"], runs)
    b, h, s = statistics.median(bare), statistics.median(helps), statistics.median(sub)
    print(f"python -c pass:     median {b * 1e3:6.1f} ms")
    print(f"pgle --help:        median {h * 1e3:6.1f} ms (ratio to bare python {h / b:.2f})")
    print(f"pgle collect --help: median {s * 1e3:6.1f} ms (ratio to bare python {s / b:.2f})")
    print(f"goal < 300 ms: {'met' if max(h, s) < 0.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
