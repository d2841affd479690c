"""`pgle prewarm` against the same run set up by hand (issue 16: <= 3% over it).

By hand: `python auto_train.py --steps N` with the JAX variables `pgle prewarm` sets
(`JAX_ENABLE_PGLE`, `JAX_PGLE_PROFILING_RUNS=3`, `JAX_PGLE_AGGREGATION_PERCENTILE=90`, the
compilation cache on, in DIR, with min compile time 0 and no min entry size), the variables
taken from pgle's own functions so both sides run the same configuration. pgle:
`pgle prewarm --cache-dir DIR --runs 3 auto_train.py -- --steps N`.

Both sides do identical work on identical state: before every run (untimed) its cache folder
and pgle's run folder are removed, so each run starts with an empty cache, profiles 3
executions, recompiles with the profile and writes the same cache entries. On CPU both
workloads load the test-only helper tests/helpers/pgle_cpu_profile (PYTHONPATH on both sides)
so JAX's auto PGLE gets a non-empty profile and recompiles and caches as it does on a GPU.
Whole processes through the harness (benchmarks/harness.py), stdout and stderr to /dev/null on
both. The workload is tests/workloads/auto_train.py (a jitted MLP train step).
Writes benchmarks/results/bench_prewarm.json.
Runtime: ~4 minutes on 2 cores (development estimate).

    python benchmarks/bench_prewarm.py [--pairs 5] [--steps 1500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

WORKLOAD = h.ROOT / "tests" / "workloads" / "auto_train.py"
HELPER = h.ROOT / "tests" / "helpers" / "pgle_cpu_profile"


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args()
    rec = h.Recorder("bench_prewarm")
    from pgle.commands.auto_env import pgle_variables
    from pgle.commands.auto_env import cache_variables

    runs, percentile = 3, 90
    env = h.python_env(JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(HELPER), env["PYTHONPATH"]])
    with tempfile.TemporaryDirectory() as d:
        hand_cache, pgle_cache = Path(d) / "hand-cache", Path(d) / "pgle-cache"
        run_dir = Path(d) / "run"

        def fresh(*paths: Path):
            def clear() -> None:
                for p in paths:
                    shutil.rmtree(p, ignore_errors=True)
            return clear

        hand_env = dict(env, **pgle_variables(runs, percentile),
                        **cache_variables(str(hand_cache), relocatable=False))
        hand = h.Side("by hand", [sys.executable, str(WORKLOAD), "--steps", str(args.steps)],
                      env=hand_env, cwd=d, before=fresh(hand_cache))
        pgle = h.Side("pgle prewarm",
                      h.pgle_argv("prewarm", "--cache-dir", str(pgle_cache), "--runs", str(runs),
                                  "--percentile", str(percentile), "--run-dir", str(run_dir),
                                  str(WORKLOAD), "--", "--steps", str(args.steps)),
                      env=env, cwd=d, before=fresh(pgle_cache, run_dir))
        # Same work on both sides: the by-hand run fills its cache as pgle's does.
        h.run_once(hand)
        h.run_once(pgle)
        hand_entries = sorted(p.name for p in hand_cache.iterdir() if not p.name.startswith("pgle-"))
        pgle_entries = sorted(p.name for p in pgle_cache.iterdir() if not p.name.startswith("pgle-"))
        if len(hand_entries) != len(pgle_entries):
            raise SystemExit(f"the two sides wrote different caches: {hand_entries} vs {pgle_entries}")
        res = h.compare(hand, pgle, pairs=args.pairs)
    pct = h.percent(res)
    rec.figure("prewarm_overhead",
               what=f"`pgle prewarm` (auto PGLE, 3 profiled runs, empty cache each run; "
                    f"auto_train.py, {args.steps} steps)",
               anchor="the same run with the JAX variables set by hand", goal="<= +3%", unit="%",
               value=pct, met=pct["median"] <= 3.0,
               details=dict(res, steps=args.steps, cache_entries=len(hand_entries),
                            anchor_median_s=statistics.median(a for a, _ in res["pairs_s"])))
    rec.write()


if __name__ == "__main__":
    main()
