"""An equinox RNN as equinox's examples write it: eqx.filter_jit, no step markers, and an
early exit once the loss is low enough (`--stop-after K` forces it after K steps; with
`--crash` it raises there instead).
Usage: equinox_rnn.py [--steps N] [--stop-after K] [--crash]
"""
import argparse
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--stop-after", type=int, default=None)
parser.add_argument("--crash", action="store_true", help="raise instead of exiting early")
args = parser.parse_args()


class RNN(eqx.Module):
    cell: eqx.nn.GRUCell
    head: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.cell = eqx.nn.GRUCell(2, 8, key=k1)
        self.head = eqx.nn.Linear(8, 1, key=k2)

    def __call__(self, xs):
        def scan(h, x):
            return self.cell(x, h), None

        h, _ = jax.lax.scan(scan, jnp.zeros(8), xs)
        return jax.nn.sigmoid(self.head(h))[0]


model = RNN(jax.random.PRNGKey(0))
optim = optax.adam(3e-3)
opt_state = optim.init(eqx.filter(model, eqx.is_array))


@eqx.filter_jit
def make_step(model, opt_state, xs, ys):
    def loss(model):
        pred = jax.vmap(model)(xs)
        return -jnp.mean(ys * jnp.log(pred + 1e-6) + (1 - ys) * jnp.log(1 - pred + 1e-6))

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return value, eqx.apply_updates(model, updates), opt_state


xs = jax.random.normal(jax.random.PRNGKey(1), (16, 10, 2))
ys = (xs[:, :, 0].sum(1) > 0).astype(jnp.float32)
for step in range(args.steps):
    value, model, opt_state = make_step(model, opt_state, xs, ys)
    print(f"step={step} loss={float(value):.4f}")
    if args.stop_after is not None and step + 1 >= args.stop_after:
        if args.crash:
            raise FloatingPointError(f"loss diverged at step {step}")
        print("loss is low enough, stopping early")
        sys.exit(0)
