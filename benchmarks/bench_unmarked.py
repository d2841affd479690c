"""`pgle collect` on an unmarked script against the same script run plainly (issue 13, case 1).

The script (tests/workloads/real/stax_mlp.py: jax's stax idiom, no StepTraceAnnotation) runs
--steps steps. Before the execution window, collect profiled the whole run (a 10k-step flax
example: 4 min 07 s against 28 s, 13.2 GB). Now collect profiles 5 executions of the
most-executed jax.jit function and lets the rest of the run go unprofiled, so it must stay
within 1.5x the plain run's wall time, with bounded memory.

The anchor is the plain run, `python stax_mlp.py --steps N`: what the user runs without pgle.
Both whole processes through the harness (benchmarks/harness.py): alternating pairs, per-pair
ratios of wall time and of peak RSS (pgle's side: the largest of pgle and its workload).
Writes benchmarks/results/bench_unmarked.json.
Runtime: ~2 minutes on 2 cores (development estimate).

    python benchmarks/bench_unmarked.py [--steps 10000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

SCRIPT = str(h.ROOT / "tests" / "workloads" / "real" / "stax_mlp.py")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5, help="alternating pairs (>= 5)")
    ap.add_argument("--steps", type=int, default=10000)
    args = ap.parse_args()
    rec = h.Recorder("bench_unmarked")
    env = h.python_env(PYTHONWARNINGS="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        plain = h.Side("python stax_mlp.py", [sys.executable, SCRIPT, "--steps", str(args.steps)],
                       env=env, cwd=tmp)
        collect = h.Side("pgle collect", h.pgle_argv("collect", "-o", "p.pb", "--allow-empty", "--force",
                                                     SCRIPT, "--", "--steps", str(args.steps)),
                         env=env, cwd=tmp)
        res = h.compare(plain, collect, pairs=args.pairs)
    what = f"`pgle collect` of an unmarked {args.steps:,}-step script (stax MLP on CPU)"
    rec.figure("unmarked_collect", what=what, anchor="the same script run plainly", goal="<= 1.5×",
               value=res["ratio"], met=res["ratio"]["median"] <= 1.5, details=res)
    rec.figure("unmarked_collect_memory", what=f"{what}: peak RSS", anchor="the same script run plainly",
               goal="–", value=res["memory_ratio"], met=None, details=res)
    rec.write()


if __name__ == "__main__":
    main()
