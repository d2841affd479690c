"""Output pass-through: `pgle run ... | cat` against `python w.py | cat` (issue 12, case 3).

Two workloads, each printing what made pgle quadratic before: 100 MB without a
newline, and 10 MB of tqdm-style `\\r` progress updates (one flush per update).
Whole processes, run in alternating order (plain first in even pairs, pgle
first in odd ones), >= 5 pairs; prints min/median/max of the per-pair ratios.

A third side isolates the output handling: `python -c "launcher.launch(...)" | cat`,
pgle's launcher alone (pumps and log, no harness, no verdict; the log scan
after the run is benchmarks/bench_logscan.py's business).

Per workload: min/median/max of the per-pair ratios (whole wall time, pgle's
fixed start-up included), and the seconds each side adds over its own run of
an empty script (measured in the same alternating rounds): the cost of moving
the bytes. pgle's start-up is benchmarks/bench_startup.py's business.

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
LAUNCHER = """
import os, sys
sys.path.insert(0, sys.argv[1])
from pgle.launch import launcher
r = launcher.launch([sys.executable, sys.argv[2]], dict(os.environ), sys.argv[3])
sys.exit(r.exit_code)
"""


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
                tag = f"{abs(hash(name))}-{i}"
                wrapped = [sys.executable, "-m", "pgle", "run", "--profile", "p.pb",
                           "--run-dir", str(Path(d) / "runs" / tag), str(path)]
                launcher = [sys.executable, "-c", LAUNCHER, str(REPO), str(path),
                            str(Path(d) / f"launcher-{tag}.log")]
                sides = [(0, plain), (1, wrapped), (2, launcher)]
                times = {}
                for k, argv in (sides if i % 2 == 0 else sides[::-1]):
                    times[k] = wall(argv, d, env)
                results[name].append((times[0], times[1], times[2]))
        empty = results.pop("empty")
        print(f"{'workload':30} {'plain|cat':>10} {'pgle run|cat':>13} {'launcher|cat':>13}"
              "  (median s)")
        for name, rows in [("empty script", empty), *results.items()]:
            print(f"{name:30} " + " ".join(f"{statistics.median(r[k] for r in rows):{w}.2f}"
                                          for k, w in ((0, 10), (1, 13), (2, 13))))
        for name, rows in results.items():
            print(f"{name}: per-pair ratios against plain python | cat")
            for k, label in ((1, "pgle run"), (2, "launcher")):
                print(f"    {label:9} whole: {ratios([(r[0], r[k]) for r in rows])}")
            # Start-up dwarfs the transfer of 100 MB through a pipe (~0.03 s), so a ratio of
            # differences is noise; the seconds each side adds over its own empty run are not.
            for k, label in ((0, "plain"), (1, "pgle run"), (2, "launcher")):
                extra = [r[k] - e[k] for r, e in zip(rows, empty)]
                print(f"    {label:9} seconds over its empty run: min {min(extra):.2f}  "
                      f"median {statistics.median(extra):.2f}  max {max(extra):.2f}")


if __name__ == "__main__":
    main()
