"""A small GPT-style model trained with optax that starts its own profiler the way MaxText
(`profiler: xplane`) and levanter (`--profiler`) do: jax.profiler.start_trace at one step,
stop_trace a few steps later. No step markers.
Usage: optax_gpt_profiler.py --profile-dir DIR [--steps N] [--profile-start S] [--profile-steps K]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax

parser = argparse.ArgumentParser()
parser.add_argument("--profile-dir", required=True)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--profile-start", type=int, default=3)
parser.add_argument("--profile-steps", type=int, default=3)
args = parser.parse_args()

V, D, T = 32, 16, 8
# The weights are drawn by numpy: jax.random.normal's eager compiles (one per shape) cost
# ~1.5 s of CPU a run (jax 0.10.2, XLA:CPU); the tokens below keep jax.random's idiom.
rng = np.random.default_rng(0)
params = {name: jnp.asarray((rng.standard_normal(shape) * 0.1).astype(np.float32))
          for name, shape in (("emb", (V, D)), ("attn", (D, 3 * D)), ("out", (D, V)))}


def forward(p, tokens):
    h = p["emb"][tokens]
    q, k, v = jnp.split(h @ p["attn"], 3, axis=-1)
    att = jnp.where(jnp.tril(jnp.ones((T, T))), q @ k.swapaxes(-1, -2) / D ** 0.5, -1e9)
    h = h + jax.nn.softmax(att) @ v
    return h @ p["out"]


def loss_fn(p, tokens):
    logits = forward(p, tokens[:, :-1])
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()


opt = optax.adamw(1e-2)
opt_state = opt.init(params)


@jax.jit
def train_step(params, opt_state, tokens):
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


tokens = jax.random.randint(jax.random.PRNGKey(1), (4, T + 1), 0, V)
for step in range(args.steps):
    if step == args.profile_start:
        jax.profiler.start_trace(args.profile_dir)
    params, opt_state, loss = train_step(params, opt_state, tokens)
    if step == args.profile_start + args.profile_steps - 1:
        jax.block_until_ready(loss)
        jax.profiler.stop_trace()
    print(f"step {step} loss {float(loss):.4f}")
