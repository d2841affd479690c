"""`pgle verify LOG` against `grep -c -E '<six pre-filter words>' LOG | cat`, both whole
processes (benchmarks/harness.py), on a realistic 1 GiB XLA:GPU log.

The log: absl-prefixed INFO lines and workload prints, 1% of lines from the profiler
(`profiler_session.cc`, `Profile collection...`: they hold the word "profile"), 0.1% from the
scheduler that are not evidence (`gpu_hlo_schedule.cc ... Using unified latency estimator`, as
jax >= 0.7.2 logs for every module: they hold the scanner's pre-filter literal), and PGLE
evidence for 200 modules scattered through it. grep looks for the six words the scanner's
pre-filter used before (PATTERN); grep for the scanner's present literals (pgle.evidence.logscan
ANCHORS) was measured slower here, so the older words are the stricter anchor. Goals (issue 16):
>= 1 GB/s, <= 2x grep, memory flat.

A second log (issue 35, `verify_vs_grep_xla_noise`): the same, plus 1% of lines that the
XLA:GPU scheduler prints about the profile but no handler reads (`Profile:` before its dump,
the binary/text parse attempts: real wordings, tests/data/xla_gpu/0.7.0 and 0.10.2). They hold
the scheduler's file name, the pre-filter's literal, so a pre-filter on the file name alone
hands each to Python; the one of issue 35 reads on to the message and keeps only the lines a
handler reads. Writes benchmarks/results/bench_logscan.json.
Runtime: ~6 minutes on 2 cores (development estimate).

    python benchmarks/bench_logscan.py [--size-mb 1024] [--pairs 5] [--keep FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

NOISE = [
    "I1122 04:33:12.{us:06d}  {tid} pjrt_client.cc:579] PjRt-IFRT device count: total=8, addressable=8",
    "I1122 04:33:12.{us:06d}  {tid} gpu_compiler.cc:2301] Compiled module jit_step_{n} in 0.12s",
    "W1122 04:33:12.{us:06d}  {tid} nvptx_compiler.cc:742] The NVIDIA driver's CUDA version is 12.2",
    "step {n:6d}  loss 5.8112  40.19 ms",
    "I1122 04:33:12.{us:06d}  {tid} buffer_assignment.cc:1222] Assigned {n} buffers for allocation",
]
# 1% of lines: the profiler's own lines, which hold the pre-filter word "profile".
PROFILER = [
    "I1122 04:33:12.{us:06d}  {tid} profiler_session.cc:110] Profiler session collecting data {n}",
    "I1122 04:33:12.{us:06d}  {tid} device_tracer_cuda.cc:88] Profile collection for step {n} done",
]


# 0.1% of lines: the scheduler's own lines that are not evidence (real wording, jax >= 0.7.2).
SCHEDULER = "I1122 04:33:12.{us:06d}  {tid} gpu_hlo_schedule.cc:{n}] Using unified latency estimator"


# 1% of lines in the second log: the scheduler's lines about the profile that say nothing
# the verdict reads (jax 0.7.0 and 0.10.2 print them in every compile that reads a profile).
XLA_NOISE = [
    "I1122 04:33:12.{us:06d}  {tid} gpu_hlo_schedule.cc:524] Profile:",
    "I1122 04:33:12.{us:06d}  {tid} gpu_hlo_schedule.cc:342] Attempting to parse as a binary proto.",
    "I1122 04:33:12.{us:06d}  {tid} gpu_hlo_schedule.cc:347] Not a binary proto, attempt to parse it as a text proto.",
]


def generate(path: str, size: int, xla_noise: float = 0.0) -> None:
    rng = random.Random(0)
    written, module = 0, 0
    with open(path, "w") as f:
        while written < size:
            chunk = []
            for _ in range(20000):
                r = rng.random()
                pool = (PROFILER if r < 0.01 else [SCHEDULER] if r < 0.011
                        else XLA_NOISE if r < 0.011 + xla_noise else NOISE)
                chunk.append(rng.choice(pool).format(us=rng.randrange(10**6), tid=rng.randrange(100, 999),
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


def _verdict_given(code: int) -> None:
    if code not in (0, 3):  # 3: a verdict other than applied is still a full scan
        raise SystemExit(f"pgle verify failed with exit status {code}")


PATTERN = "profile|PGLE|Fingerprint before LHS|CUPTI_ERROR|in XLA_FLAGS|latency estimator"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    h.pairs_arg(ap)
    ap.add_argument("--keep", default=None, help="keep the generated log at this path")
    args = ap.parse_args()
    rec = h.Recorder("bench_logscan")
    path = args.keep or tempfile.mktemp(suffix=".log")
    try:
        res, mb = _measure(path, args.size_mb, 0.0, args.pairs)
        rec.figure("verify_vs_grep", what=f"`pgle verify`, {mb:.0f} MB realistic log (1% profiler lines, 0.1% scheduler lines)",
                   anchor="`grep -c -E` through a pipe", goal="<= 2×", value=res["ratio"],
                   met=res["ratio"]["median"] <= 2.0, details=res)
        speed = {k: mb / v for k, v in res["subject_s"].items()}
        speed = {"min": speed["max"], "median": speed["median"], "max": speed["min"]}
        rec.figure("verify_speed", what="`pgle verify` throughput (whole process)", anchor="–",
                   goal=">= 1000 MB/s", unit="MB/s", value=speed, met=speed["median"] >= 1000)
        rec.figure("verify_memory", what="`pgle verify` peak RSS on that log", anchor="–",
                   goal="flat (independent of log size)", unit="MB", value=res["subject_rss_mb"],
                   met=None)
        noisy = path + ".xla-noise"
        try:
            res, mb = _measure(noisy, args.size_mb, 0.01, args.pairs)
        finally:
            if not args.keep and os.path.exists(noisy):
                os.unlink(noisy)
        rec.figure("verify_vs_grep_xla_noise",
                   what=f"`pgle verify`, {mb:.0f} MB log as above plus 1% XLA:GPU scheduler lines no handler reads",
                   anchor="`grep -c -E` through a pipe", goal="<= 2×", value=res["ratio"],
                   met=res["ratio"]["median"] <= 2.0, details=res)
    finally:
        if not args.keep and os.path.exists(path):
            os.unlink(path)
    rec.write()


def _measure(path: str, size_mb: int, xla_noise: float, pairs: int) -> tuple[dict, float]:
    """The log at `path` (made unless it exists), then grep and pgle verify on it, alternating."""
    if not os.path.exists(path):
        t = time.perf_counter()
        generate(path, size_mb << 20, xla_noise)
        print(f"generated {path} in {time.perf_counter() - t:.1f} s")
    mb = os.path.getsize(path) / 1e6
    # Output to a pipe: GNU grep stops at the first match when stdout is /dev/null.
    grep = h.Side("grep -c -E | cat", f"grep -c -E '{PATTERN}' '{path}' | cat", shell=True)
    pgle = h.Side("pgle verify", h.pgle_argv("verify", path, "--json"), env=h.python_env(),
                  check=_verdict_given)
    return h.compare(grep, pgle, pairs=pairs), mb


if __name__ == "__main__":
    main()
