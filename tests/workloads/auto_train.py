"""A small MLP training loop: one jitted train step, marked with StepTraceAnnotation.

    python auto_train.py [--steps 50] [--width 512] [--batch 256]

Sized so a few hundred steps take seconds on CPU (benchmarks/bench_prewarm.py).
"""

import argparse

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--width", type=int, default=512)
parser.add_argument("--batch", type=int, default=256)
args = parser.parse_args()

key = jax.random.PRNGKey(0)
k1, k2, k3 = jax.random.split(key, 3)
params = {
    "w1": jax.random.normal(k1, (args.width, args.width)) * 0.02,
    "w2": jax.random.normal(k2, (args.width, args.width)) * 0.02,
    "w3": jax.random.normal(k3, (args.width, 1)) * 0.02,
}
x = jax.random.normal(key, (args.batch, args.width))
y = jnp.sum(x, axis=1, keepdims=True)


def loss(p, x, y):
    h = jnp.tanh(x @ p["w1"])
    h = jnp.tanh(h @ p["w2"])
    return jnp.mean((h @ p["w3"] - y) ** 2)


@jax.jit
def train_step(p, x, y):
    value, grads = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 1e-3 * g, p, grads), value


for step in range(args.steps):
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
        params, value = train_step(params, x, y)
value.block_until_ready()
print(f"auto_train done: {args.steps} steps, loss {float(value):.4f}", flush=True)
