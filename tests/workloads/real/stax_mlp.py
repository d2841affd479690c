"""jax's own examples style (jax.example_libraries.stax + optimizers, as mnist_classifier.py):
no step markers, a jitted update, an eval loop between train steps, tqdm-style progress
(\\r), and a RuntimeWarning of the user's own code raised every step.
Usage: stax_mlp.py [--steps N]
"""
import argparse
import sys
import warnings

import jax
import jax.numpy as jnp
from jax.example_libraries import optimizers, stax

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()

init_fun, predict = stax.serial(stax.Dense(32), stax.Relu, stax.Dense(4), stax.LogSoftmax)
_, params = init_fun(jax.random.PRNGKey(0), (-1, 16))
opt_init, opt_update, get_params = optimizers.momentum(0.1, mass=0.9)
x = jax.random.normal(jax.random.PRNGKey(1), (64, 16))
y = jax.nn.one_hot((x[:, 0] > 0).astype(jnp.int32), 4)


def loss(params, batch):
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


@jax.jit
def update(i, opt_state, batch):
    return opt_update(i, jax.grad(loss)(get_params(opt_state), batch), opt_state)


@jax.jit
def accuracy(params, batch):
    inputs, targets = batch
    return jnp.mean(jnp.argmax(predict(params, inputs), 1) == jnp.argmax(targets, 1))


opt_state = opt_init(params)
for i in range(args.steps):
    opt_state = update(i, opt_state, (x, y))
    warnings.warn("learning rate schedule is constant", RuntimeWarning)
    done = 20 * (i + 1) // args.steps
    sys.stderr.write(f"\r{i + 1}/{args.steps} [{'#' * done}{'.' * (20 - done)}]")
    sys.stderr.flush()
    if (i + 1) % 4 == 0:
        acc = accuracy(get_params(opt_state), (x, y))
        sys.stderr.write(f"\nepoch accuracy {float(acc):.3f}\n")
print("trained")
