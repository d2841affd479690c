"""Test workload: real JAX work with no step annotations, long enough for a time window."""
import sys
import time

import jax
import jax.numpy as jnp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
f = jax.jit(lambda x: jnp.tanh(x @ x).sum())
x = jnp.ones((64, 64))
end = time.time() + seconds
n = 0
while time.time() < end:
    f(x).block_until_ready()
    n += 1
print(f"ran {n} times")
