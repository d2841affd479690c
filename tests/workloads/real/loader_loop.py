"""A training loop with a data loader on the host and no sync per step (issue 33): a jitted
helper slices each batch, the host then works on it for a while (augmentation, tokenizing),
and the step, far longer on the device, is dispatched without waiting: the loss is read once,
at the end. At the step's third call the device is still on the first steps, so the step's
work is not known yet, and the helper holds the host time. pgle's window must profile the
step, not the helper.

Usage: loader_loop.py [--steps N] [--loader-ms MS]
"""
import argparse
import functools
import time

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--loader-ms", type=float, default=20.0)
args = parser.parse_args()

N = 1024


def loss_fn(w, x):  # a residual MLP of 4 layers sharing one weight
    return jnp.mean(functools.reduce(lambda h, _: h + jnp.tanh(h @ w), range(4), x) ** 2)


@jax.jit
def next_batch(data, i):
    return jax.lax.dynamic_slice_in_dim(data, i % 4 * N, N) * 1.0


@jax.jit
def train_step(w, x):
    loss, g = jax.value_and_grad(loss_fn)(w, x)
    return w - 0.1 * g, loss


data = jax.random.normal(jax.random.PRNGKey(0), (4 * N, N))
w = jnp.eye(N) * 0.5
start = time.perf_counter()
for step in range(args.steps):
    x = next_batch(data, step)
    time.sleep(args.loader_ms / 1000)  # the host's share of loading the batch
    w, loss = train_step(w, x)
print(f"loss {float(loss):.4f} after {args.steps} steps in {time.perf_counter() - start:.2f} s")
