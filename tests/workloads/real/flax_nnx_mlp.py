"""A flax nnx training script as the flax examples write it (tests/launch/test_real_scripts.py).

Like flax's nnx examples it ASSIGNS XLA_FLAGS before importing jax (unless --append), marks no
steps, runs an eval loop between train steps and prints a tqdm-style progress line (\\r).
Usage: flax_nnx_mlp.py [--steps N] [--eval-every K] [--append]
"""
import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--eval-every", type=int, default=4)
parser.add_argument("--append", action="store_true",
                    help="append to XLA_FLAGS (the documented fix) instead of assigning")
args = parser.parse_args()
if args.append:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_thunk_runtime=true"
else:
    os.environ["XLA_FLAGS"] = "--xla_cpu_use_thunk_runtime=true"  # as flax's examples do

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(16, 32, rngs=rngs)
        self.l2 = nnx.Linear(32, 4, rngs=rngs)

    def __call__(self, x):
        return self.l2(nnx.relu(self.l1(x)))


model = MLP(nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def eval_step(model, x, y):
    return (model(x).argmax(-1) == y).mean()


key = jax.random.PRNGKey(0)
x = jax.random.normal(key, (64, 16))
y = (x[:, 0] > 0).astype(jnp.int32)
for step in range(args.steps):
    loss = train_step(model, optimizer, x, y)
    sys.stdout.write(f"\rtrain {step + 1}/{args.steps} loss {float(loss):.4f}")
    sys.stdout.flush()
    if (step + 1) % args.eval_every == 0:
        acc = sum(float(eval_step(model, x, y)) for _ in range(2)) / 2
        sys.stdout.write(f"\neval at {step + 1}: accuracy {acc:.3f}\n")
print("\ndone")
