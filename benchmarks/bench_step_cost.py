"""Per marked step: what `pgle run` adds to each `jax.profiler.StepTraceAnnotation` (issue 25).

Short steps show it where long ones hide it (small models, pipelined micro-steps): two
workloads, each timing its own loop of marked steps (after warm-up steps, from the first timed
step to the last) and writing that time to a file:
- `empty`: `with StepTraceAnnotation("train", step_num=i): pass`, the hooks' cost alone;
- `micro`: each step runs a small jitted function and waits for its result (~16 µs on CPU),
  with XLA:CPU's asynchronous dispatch off (`jax_cpu_enable_async_dispatch`, jax >= 0.4.32):
  with it on, each execution is handed to a worker thread, and whether that thread shares a
  core with the main thread moved a plain step between ~25 and ~70 µs from run to run on the
  2-vCPU VM (21 µs steady when pinned to one core), ten times the goal, so the old row's
  spread (-10 / 56 / 173 µs) measured the scheduler, not pgle.
Whole processes through the harness (benchmarks/harness.py): `python w.py` against
`pgle run --profile p.pb w.py`, alternating; per pair, (the loop's own time under pgle - the
same plain) / steps, in microseconds. The plain side gets no XLA log variables (what pgle
turns on is part of its cost); on CPU XLA ignores the profile.
Writes benchmarks/results/bench_step_cost.json.

    python benchmarks/bench_step_cost.py [--pairs 7] [--steps 20000] [--micro-steps 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

WORKLOAD = """
import sys, time
import jax, jax.numpy as jnp
kind, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
Step = jax.profiler.StepTraceAnnotation
if kind == "micro":
    # Executed on the calling thread: see the module docstring.
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum(axis=0))
    x = jnp.ones((64, 64))
    work = lambda: f(x).block_until_ready()
else:
    work = lambda: None
for i in range(200):  # warm-up: compiles, caches
    with Step("train", step_num=i):
        work()
t0 = time.perf_counter()
for i in range(200, 200 + steps):
    with Step("train", step_num=i):
        work()
elapsed = time.perf_counter() - t0
with open(out, "w") as f:
    f.write(repr(elapsed))
"""
GOAL_US = 5.0


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--steps", type=int, default=20000, help="empty steps per run")
    ap.add_argument("--micro-steps", type=int, default=20000, help="short steps per run")
    args = ap.parse_args()
    rec = h.Recorder("bench_step_cost")
    from pgle.profiles.files import Profile, write_profile

    env = h.python_env(JAX_PLATFORMS="cpu")
    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        script = Path(d) / "steps.py"
        script.write_text(WORKLOAD)
        run_dir = Path(d) / "run"

        def fresh() -> None:
            import shutil
            shutil.rmtree(run_dir, ignore_errors=True)

        for kind, steps, what in (
            ("empty", args.steps, "empty marked steps (the hooks alone)"),
            ("micro", args.micro_steps, "short marked steps (a small jitted function each, synchronous dispatch)"),
        ):
            own = {side: Path(d) / f"own-{kind}-{side}.txt" for side in ("plain", "pgle")}
            seen: dict[str, list[float]] = {"plain": [], "pgle": []}

            def reader(side: str, seen=seen, own=own):
                def read() -> float:
                    seen[side].append(float(own[side].read_text()))
                    return seen[side][-1]
                return read

            argv = [str(script), kind, str(steps)]
            plain = h.Side("python w.py", [sys.executable, *argv, str(own["plain"])], env=env,
                           cwd=d, own_time=reader("plain"))
            pgle = h.Side("pgle run w.py",
                          h.pgle_argv("run", "--profile", "p.pb", "--run-dir", str(run_dir),
                                      *argv, str(own["pgle"])),
                          env=env, cwd=d, before=fresh, own_time=reader("pgle"))
            res = h.compare(plain, pgle, pairs=args.pairs)
            # compare() ran one warm-up of each side first; the pairs follow in order.
            a_s, s_s = seen["plain"][1:], seen["pgle"][1:]
            per_step = [(s - a) / steps * 1e6 for a, s in zip(a_s, s_s)]
            plain_us = statistics.median(a / steps * 1e6 for a in a_s)
            details = dict(res, steps=steps, plain_step_us_median=plain_us, plain_own_s=a_s,
                           pgle_own_s=s_s,
                           method="per pair: (the loop's own time under `pgle run` - under "
                                  "plain python) / steps")
            rec.figure(f"steps_{kind}",
                       what=f"`pgle run` per marked step: {what}, {steps} steps",
                       anchor=f"plain `python w.py` ({plain_us:.1f} µs a step)",
                       goal=f"<= {GOAL_US:g} µs", unit="µs", value=h.spread(per_step),
                       met=statistics.median(per_step) <= GOAL_US, details=details)
    rec.write()


if __name__ == "__main__":
    main()
