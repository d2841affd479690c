"""Merge 256 profiles of 20,000 instructions: pgle vs jaxlib's aggregate_profiled_instructions.

Both start from the same serialized profiles and end with serialized bytes, so the
comparison includes parsing and encoding. Prints times and their ratio from one run;
asserts only that both give the same costs.

    python benchmarks/bench_merge.py [--profiles 256] [--instructions 20000] [--percentile 90]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pgle.profiles.files import BINARY, Profile, encode_profile, parse_profile  # noqa: E402
from pgle.profiles.merge import merge_profiles  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=int, default=256)
    ap.add_argument("--instructions", type=int, default=20_000)
    ap.add_argument("--percentile", type=int, default=90)
    args = ap.parse_args()

    rng = random.Random(0)
    names = [f"fusion.{i}" for i in range(args.instructions)]
    blobs = [encode_profile(Profile([(n, rng.random() * 100) for n in names]), BINARY)
             for _ in range(args.profiles)]
    mb = sum(map(len, blobs)) / 1e6

    from jax._src.lib import _profiler  # no public API; checked with jaxlib 0.10.2

    t0 = time.perf_counter()
    theirs = _profiler.aggregate_profiled_instructions(blobs, args.percentile)
    t_jaxlib = time.perf_counter() - t0

    t0 = time.perf_counter()
    parsed = [parse_profile(b, BINARY, f"rank{i}") for i, b in enumerate(blobs)]
    t_parse = time.perf_counter() - t0
    t1 = time.perf_counter()
    merged = merge_profiles(parsed, percentile=args.percentile)
    t_merge = time.perf_counter() - t1
    t1 = time.perf_counter()
    ours = encode_profile(merged, BINARY)
    t_encode = time.perf_counter() - t1
    t_pgle = time.perf_counter() - t0

    same = dict(parse_profile(theirs, BINARY, "jaxlib").costs) == dict(parse_profile(ours, BINARY, "pgle").costs)
    print(f"inputs: {args.profiles} profiles x {args.instructions} instructions ({mb:.1f} MB), "
          f"percentile {args.percentile}")
    print(f"jaxlib aggregate_profiled_instructions: {t_jaxlib:8.3f} s")
    print(f"pgle parse + merge + encode:            {t_pgle:8.3f} s "
          f"(parse {t_parse:.3f}, merge {t_merge:.3f}, encode {t_encode:.3f})")
    print(f"ratio pgle / jaxlib: {t_pgle / t_jaxlib:.2f}x; identical costs: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
