"""Test workload for `pgle tune --compare`: says what reached jax and XLA (the optimization
level jax read from JAX_OPTIMIZATION_LEVEL, XLA_FLAGS), then trains a few unmarked steps."""
import json
import os

import jax
import jax.numpy as jnp

print("ARM " + json.dumps({"level": str(jax.config.jax_optimization_level),
                           "xla_flags": os.environ.get("XLA_FLAGS", "")}), flush=True)


@jax.jit
def train_step(w, x):
    return w - 0.01 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)


w, x = jnp.eye(64), jnp.ones((32, 64))
for _ in range(int(os.environ.get("ARM_STEPS", "12"))):
    w = train_step(w, x)
    float(w[0, 0])
