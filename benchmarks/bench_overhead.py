"""`pgle run` against the plain `python w.py` (issues 16 and 25): its fixed cost, measured
directly, and its share of a realistic step.

Fixed cost (`overhead_fixed`): a small jax program that compiles and runs one function and
marks three steps (tests the hooks once, not per step), `python small.py` against
`pgle run --profile p.pb small.py`; per pair, wall(pgle) - wall(plain), whole processes through
the harness (benchmarks/harness.py). That is pgle's start-up, the child-environment checks,
the harness's start-up and per-module observation, the launcher and the verdict. (It used to
be derived from train.py's runs as the wall difference less the per-step difference times the
steps: two noisy numbers subtracted, with +/-0.3 s of noise in a 0.3 s goal; issue 25.)

Per step on a realistic step (`overhead_per_step`): examples/train.py (an MLP language model
with Adam, sharded over 8 emulated CPU devices, every step inside
`jax.profiler.StepTraceAnnotation`), which prints the median of its own step times; the
workload's own median under pgle over the same without it, per pair. A step of ~80 ms hides a
per-step cost of microseconds: `benchmarks/bench_step_cost.py` measures that one on short steps.

The plain sides get no XLA log variables: the logging pgle turns on is part of its cost; on
CPU XLA ignores the profile. Writes benchmarks/results/bench_overhead.json.

    python benchmarks/bench_overhead.py [--pairs 11] [--steps 100] [--fixed-pairs 11]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

TRAIN = h.ROOT / "examples" / "train.py"
MEDIAN_RE = re.compile(r"median step time ([0-9.]+) ms over (\d+) steps")


SMALL = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
x = jnp.ones((64, 64))
for i in range(3):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        f(x).block_until_ready()
"""
FIXED_GOAL_S = 0.25


def main() -> None:
    ap = argparse.ArgumentParser()
    # Single runs of the same 100 steps differ by several percent on a shared 2-core machine,
    # more than the 1% goal: more pairs narrow the median of the per-pair ratios.
    h.pairs_arg(ap, default=11)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--fixed-pairs", type=int, default=11)
    args = ap.parse_args()
    rec = h.Recorder("bench_overhead")
    from pgle.profiles.files import Profile, write_profile

    env = h.python_env(JAX_PLATFORMS="cpu")
    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        run_dir = Path(d) / "run"

        def fresh():
            import shutil
            shutil.rmtree(run_dir, ignore_errors=True)

        small = Path(d) / "small.py"
        small.write_text(SMALL)
        plain = h.Side("python small.py", [sys.executable, str(small)], env=env, cwd=d)
        pgle = h.Side("pgle run small.py",
                      h.pgle_argv("run", "--profile", "p.pb", "--run-dir", str(run_dir),
                                  str(small)), env=env, cwd=d, before=fresh)
        res = h.compare(plain, pgle, pairs=args.fixed_pairs)
        fixed = [s - a for a, s in res["pairs_s"]]
        details = dict(res, method="per pair: wall(`pgle run small.py`) - wall(`python "
                                   "small.py`), whole processes, output to /dev/null")
        rec.figure("overhead_fixed",
                   what="`pgle run` fixed cost: wall time added to a small jax program "
                        "(start-up, child environment, harness, launcher, verdict)",
                   anchor="`python small.py` (one jitted function, 3 marked steps)",
                   goal=f"<= {FIXED_GOAL_S:g} s", unit="s", value=h.spread(fixed),
                   met=statistics.median(fixed) <= FIXED_GOAL_S, details=details)

        step_ms: dict[str, list[float]] = {"plain": [], "pgle": []}

        def reader(side: str, out: Path):
            def check(code: int) -> None:
                text = out.read_text()
                m = MEDIAN_RE.search(text)
                if code != 0 or not m:
                    raise SystemExit(f"{side} run failed (exit {code}):\n{text[-2000:]}")
                step_ms[side].append(float(m.group(1)))
            return check

        q = lambda a: "'" + str(a) + "'"  # noqa: E731
        plain_out, pgle_out = Path(d) / "plain.out", Path(d) / "pgle.out"
        plain = h.Side("python train.py",
                       f"{q(sys.executable)} {q(TRAIN)} --steps {args.steps} > {q(plain_out)} 2>/dev/null",
                       shell=True, env=env, cwd=d, check=reader("plain", plain_out))
        pgle = h.Side("pgle run train.py",
                      " ".join(q(a) for a in h.pgle_argv("run", "--profile", "p.pb", "--run-dir",
                                                         str(run_dir), str(TRAIN), "--",
                                                         "--steps", str(args.steps)))
                      + f" > {q(pgle_out)} 2>/dev/null",
                      shell=True, env=env, cwd=d, before=fresh, check=reader("pgle", pgle_out))
        res = h.compare(plain, pgle, pairs=args.pairs)
    # compare() ran one warm-up of each side first; pairs follow in order on both lists.
    a_ms, s_ms = step_ms["plain"][1:], step_ms["pgle"][1:]
    per_step = [(s / a - 1) * 100 for a, s in zip(a_ms, s_ms)]
    details = dict(res)
    details.update(steps=args.steps, plain_step_ms=a_ms, pgle_step_ms=s_ms,
                   plain_step_ms_median=statistics.median(a_ms),
                   method="per step: the workload's own median step time (printed by "
                          "examples/train.py) per pair")
    rec.figure("overhead_per_step",
               what=f"`pgle run` per step: examples/train.py's own median step time "
                    f"({args.steps} steps, 8 emulated CPU devices)",
               anchor="`python train.py` (same steps)", goal="<= +1%", unit="%",
               value=h.spread(per_step), met=statistics.median(per_step) <= 1.0, details=details)
    rec.write()


if __name__ == "__main__":
    main()
