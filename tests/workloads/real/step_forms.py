"""One small training loop, its step written in each way users write one (issue 22), with no
step markers: a jitted batch helper runs before every step and an eval function every few
steps, as real scripts do. pgle must find the train step in every form.

Usage: step_forms.py --form FORM [--steps N] [--only-step]
  --only-step: the loop runs the train step alone (no batch helper, no eval)
  FORM: decorator (`@jax.jit`), decorator-args (`@jax.jit(donate_argnums=0)`, jax's own SPMD
  example), partial (`functools.partial(jax.jit, static_argnums=...)`), pmap (`jax.pmap`),
  pjit (`jax.experimental.pjit.pjit`), aot (`jax.jit(f).lower(...).compile()`), flax
  (`nnx.jit`), equinox (`eqx.filter_jit`)
"""
import argparse
import functools

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
parser.add_argument("--form", required=True)
parser.add_argument("--steps", type=int, default=14)
parser.add_argument("--only-step", action="store_true")
args = parser.parse_args()


N = 256


def loss_fn(w, x):
    h = x
    for _ in range(4):
        h = jnp.tanh(h @ w)
    return jnp.mean(h ** 2)


def sgd(w, x, lr):
    return w - lr * jax.grad(loss_fn)(w, x)


@jax.jit
def next_batch(data, i):  # called before every step: as often as the step, far cheaper
    return jax.lax.dynamic_slice_in_dim(data, i % 4 * N, N) * 1.0


@jax.jit
def evaluate(w, x):
    return loss_fn(w, x)


form = args.form
if form == "decorator":
    @jax.jit
    def train_step(w, x):
        return sgd(w, x, 0.1)
elif form == "decorator-args":
    @jax.jit(donate_argnums=0)
    def train_step(w, x):
        return sgd(w, x, 0.1)
elif form == "partial":
    @functools.partial(jax.jit, static_argnums=2)
    def _step(w, x, lr):
        return sgd(w, x, lr)

    def train_step(w, x):
        return _step(w, x, 0.1)
elif form == "pmap":
    @functools.partial(jax.pmap, axis_name="d")
    def _pstep(w, x):
        return sgd(w, x, 0.1)

    def train_step(w, x):
        return _pstep(w[None], x[None])[0]
elif form == "pjit":
    from jax.experimental.pjit import pjit

    def _train(w, x):
        return sgd(w, x, 0.1)

    train_step = pjit(_train)
elif form == "aot":
    def _train(w, x):
        return sgd(w, x, 0.1)

    shape = jax.ShapeDtypeStruct((N, N), jnp.float32)
    train_step = jax.jit(_train).lower(shape, shape).compile()
elif form == "flax":
    from flax import nnx

    @nnx.jit
    def train_step(w, x):
        return sgd(w, x, 0.1)
elif form == "equinox":
    import equinox as eqx

    @eqx.filter_jit
    def train_step(w, x):
        return sgd(w, x, 0.1)
else:
    raise SystemExit(f"unknown --form {form}")

data = jax.random.normal(jax.random.PRNGKey(0), (4 * N, N))
w = jnp.eye(N) * 0.5
for step in range(args.steps):
    x = data[:N] if args.only_step else next_batch(data, step)
    w = train_step(w, x)
    if args.only_step:
        continue
    if step % 5 == 4:
        print(f"step {step + 1}: eval loss {float(evaluate(w, x)):.4f}")
    else:
        float(w[0, 0])  # the host waits for the step, as a logged loss would make it
print("done")
