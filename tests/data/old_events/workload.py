"""The workload whose events.jsonl (pgle 0.x, before steps.bin: step edges as JSON lines) is
kept here: marked steps with int, None and string step numbers, two step names, a warning
inside a step."""

import warnings

import jax
import jax.numpy as jnp

f = jax.jit(lambda x: x + 1)
x = jnp.ones(4)
Step = jax.profiler.StepTraceAnnotation
for i in range(6):
    with Step("train", step_num=i):
        x = f(x)
        if i == 3:
            warnings.warn("inside step 3")
with Step("eval", step_num=None):
    x = f(x)
with Step("eval", step_num="last"):
    x = f(x).block_until_ready()
