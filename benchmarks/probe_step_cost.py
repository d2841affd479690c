"""Where a marked step's cost under `pgle run` goes, in one process (issue 33): not a benchmark
row (no result file), a probe to bisect with when bench_step_cost's `steps_micro` moves.

bench_step_cost subtracts the wall time of two processes; on a shared 2-core VM that
difference spread across ±40 µs. This runs the `micro` loop of bench_step_cost (a small jitted
function, synchronous dispatch, a marker around it) under `pgle run`, and alternates four
loops in many short rounds in the same process:
- bare: jax's own StepTraceAnnotation and jitted function (what plain python runs);
- hooks: pgle's marker (its step hooks) around jax's own jitted function;
- proxy: jax's own marker around pgle's counted jitted function;
- full: both, as `pgle run` runs the workload.
Per round, the workload thread's CPU time (time.thread_time_ns: another process's load
takes no CPU time from this thread, though it still slows the caches) per step; printed:
each loop's min / median / max, and each one's difference from the bare loop of the same
round. Instructions, deterministic, under valgrind (run the workload mode with
`valgrind --tool=callgrind python -m pgle.launch.harness --spec SPEC`, dumping between loops).

    python benchmarks/probe_step_cost.py [--rounds 200] [--steps 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOOPS = ("bare", "hooks", "proxy", "full")


def workload(rounds: int, steps: int) -> None:
    """In the workload under `pgle run`: the four loops, alternating."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_cpu_enable_async_dispatch", False)  # see bench_step_cost
    step = jax.profiler.StepTraceAnnotation
    ours = step.__init__.__code__.co_filename.endswith("harness.py")
    if not ours:
        sys.exit("probe_step_cost: the workload runs without pgle's harness")
    jax_step, jax_jit = step.__bases__[0], jax.jit.__wrapped__  # what the harness replaced

    def fn(x):
        return jnp.tanh(x @ x.T).sum(axis=0)

    x = jnp.ones((64, 64))

    def loop(marker, f):
        def run(first: int, n: int) -> None:
            for i in range(first, first + n):
                with marker("train", step_num=i):
                    f(x).block_until_ready()

        return run

    plain, counted = jax_jit(fn), jax.jit(fn)
    loops = {
        "bare": loop(jax_step, plain),
        "hooks": loop(step, plain),
        "proxy": loop(jax_step, counted),
        "full": loop(step, counted),
    }
    first = 0
    for run in loops.values():  # compiles; past the count-only point (LIGHT_AFTER_STEPS)
        run(first, 100)
        first += 100
    per: dict[str, list[float]] = {k: [] for k in LOOPS}
    for r in range(rounds):
        for name in LOOPS if r % 2 == 0 else reversed(LOOPS):
            t0 = time.thread_time_ns()
            loops[name](first, steps)
            per[name].append((time.thread_time_ns() - t0) / steps / 1e3)
            first += steps

    def spread(values: list[float]) -> str:
        return f"{min(values):6.2f} / {statistics.median(values):6.2f} / {max(values):6.2f}"

    print(f"thread CPU µs a step, min / median / max of {rounds} rounds of {steps} steps")
    for name in LOOPS:
        line = f"{name:6s} {spread(per[name])}"
        if name != "bare":
            diff = [a - b for a, b in zip(per[name], per["bare"])]
            line += f"   - bare: {spread(diff)}"
        print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="rounds of the four loops")
    ap.add_argument("--steps", type=int, default=200, help="marked steps a loop a round")
    ap.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.workload:
        workload(args.rounds, args.steps)
        return
    from benchmarks import harness as h
    from pgle.profiles.files import Profile, write_profile

    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        argv = ["run", "--profile", "p.pb", "--run-dir", str(Path(d) / "run")]
        me = [str(Path(__file__).resolve()), "--", "--workload", "--rounds", str(args.rounds)]
        proc = subprocess.run(
            h.pgle_argv(*argv, *me, "--steps", str(args.steps)),
            cwd=d,
            env=h.python_env(JAX_PLATFORMS="cpu"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        print("\n".join(ln for ln in proc.stdout.splitlines() if not ln.startswith("pgle: ")))
        sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
