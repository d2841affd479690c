"""A workload that marks many short steps and computes nothing per step (pgle's per-step
cost and events.jsonl at scale): `python many_steps.py STEPS [--exit-time FILE]` opens and
closes `jax.profiler.StepTraceAnnotation("train", step_num=i)` STEPS times after one real
compile; with --exit-time, the time of its last statement goes to FILE (benchmarks measure
how long pgle takes after the workload ends)."""

import sys
import time

import jax
import jax.numpy as jnp

steps = int(sys.argv[1])
jax.jit(lambda x: x + 1)(jnp.ones(4)).block_until_ready()
annotate = jax.profiler.StepTraceAnnotation
for i in range(steps):
    with annotate("train", step_num=i):
        pass
print(f"{steps} steps", flush=True)
if "--exit-time" in sys.argv:
    with open(sys.argv[sys.argv.index("--exit-time") + 1], "w") as f:
        f.write(repr(time.time()))
