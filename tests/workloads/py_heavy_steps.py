"""A workload whose steps run a jitted step and many small Python calls (a data pipeline's
shape): what the JAX profiler's Python tracer records when it is on. `python
py_heavy_steps.py STEPS [CALLS]` marks STEPS steps `train`, each one execution and CALLS Python
calls (default 2000)."""

import sys

import jax
import jax.numpy as jnp

steps = int(sys.argv[1])
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000


@jax.jit
def step(x, w):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return x


def helper(a):
    return a + 1


x = jnp.ones((128, 128))
w = jnp.ones((128, 128)) * 0.01
for i in range(steps):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = step(x, w)
        s = 0
        for _ in range(calls):
            s = helper(s)
x.block_until_ready()
print(f"{steps} steps", flush=True)
