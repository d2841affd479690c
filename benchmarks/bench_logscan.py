"""Verdict speed over a large XLA-style log, against `grep -c` on the same file.

Generates a log of --size-mb (default 1024) MB: realistic noise (absl-prefixed
INFO lines, workload prints) with PGLE evidence for 200 modules scattered
through it, then times pgle's streaming scanner (in a child process, to read
its peak memory) and `grep -c profile`. Prints MB/s and the ratio to grep.
Goal: >= 200 MB/s with flat memory.

    python benchmarks/bench_logscan.py [--size-mb 1024] [--keep FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

NOISE = [
    "I1122 04:33:12.{us:06d}  {tid} pjrt_client.cc:579] PjRt-IFRT device count: total=8, addressable=8",
    "I1122 04:33:12.{us:06d}  {tid} gpu_compiler.cc:2301] Compiled module jit_step_{n} in 0.12s",
    "W1122 04:33:12.{us:06d}  {tid} nvptx_compiler.cc:742] The NVIDIA driver's CUDA version is 12.2",
    "step {n:6d}  loss 5.8112  40.19 ms",
    "I1122 04:33:12.{us:06d}  {tid} buffer_assignment.cc:1222] Assigned {n} buffers for allocation",
]


def generate(path: str, size: int) -> None:
    rng = random.Random(0)
    written, module = 0, 0
    with open(path, "w") as f:
        while written < size:
            chunk = []
            for _ in range(20000):
                chunk.append(rng.choice(NOISE).format(us=rng.randrange(10**6), tid=rng.randrange(100, 999),
                                                      n=rng.randrange(10**6)))
            if module < 200:
                t = 5000 + module
                chunk += [
                    f"I1122 04:33:12.000001  {t} gpu_hlo_schedule.cc:538] Using PGLE profile from /p/profile.pb",
                    f"I1122 04:33:12.000002  {t} gpu_hlo_schedule.cc:612] Found profile for module jit_m{module}, using profile guided latency estimator",
                    f"W1122 04:33:12.000003  {t} profile_guided_latency_estimator.cc:301] Found 90 instructions from the profile.",
                    f"W1122 04:33:12.000004  {t} profile_guided_latency_estimator.cc:303] Missing 2 instructions from the profile.",
                    f"W1122 04:33:12.000005  {t} profile_guided_latency_estimator.cc:305]   fusion.1",
                    f"W1122 04:33:12.000006  {t} profile_guided_latency_estimator.cc:305]   fusion.2",
                ]
                module += 1
            text = "\n".join(chunk) + "\n"
            f.write(text)
            written += len(text)


SCAN = """
import resource, sys, time
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import judge
t = time.perf_counter()
v = judge(LogScanner().scan_file(sys.argv[1]))
dt = time.perf_counter() - t
print(dt, len(v.modules), v.status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--keep", default=None, help="keep the generated log at this path")
    args = ap.parse_args()
    path = args.keep or tempfile.mktemp(suffix=".log")
    try:
        if not os.path.exists(path):
            t = time.perf_counter()
            generate(path, args.size_mb << 20)
            print(f"generated {path} in {time.perf_counter() - t:.1f} s")
        size = os.path.getsize(path)
        # Warm the page cache for both contenders alike.
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
        t = time.perf_counter()
        # Output to a pipe: GNU grep stops at the first match when stdout is /dev/null.
        subprocess.run(["grep", "-c", "profile", path], stdout=subprocess.PIPE)
        grep_s = time.perf_counter() - t
        out = subprocess.run([sys.executable, "-c", SCAN, path], capture_output=True, text=True,
                             check=True).stdout.split()
        scan_s, modules, status, rss_kb = float(out[0]), int(out[1]), out[2], int(out[3])
        mb = size / 2**20
        print(f"log: {mb:.0f} MB, {modules} modules, verdict {status}")
        print(f"pgle verdict: {scan_s:.2f} s = {mb / scan_s:.0f} MB/s, peak RSS {rss_kb / 1024:.0f} MB")
        print(f"grep -c:      {grep_s:.2f} s = {mb / grep_s:.0f} MB/s")
        print(f"ratio pgle/grep time: {scan_s / grep_s:.2f}")
    finally:
        if not args.keep and os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
