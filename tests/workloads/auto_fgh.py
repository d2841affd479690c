"""Three tiny jitted functions executed a chosen number of times each.

The shape of JAX's own `testPersistentCachePopulatedWithAutoPgle`: `f` runs
often enough to be PGLE-optimized, `g` once, `h` not at all during prewarm.

    python auto_fgh.py --f 4 --g 1 --h 0 [--aot] [--exit N]
"""

import argparse
import sys

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
for name in ("f", "g", "h"):
    parser.add_argument(f"--{name}", type=int, default=1)
parser.add_argument("--cb", type=int, default=0, help="run a function with a host callback N times")
parser.add_argument("--aot", action="store_true", help="also run an ahead-of-time compiled function")
parser.add_argument("--exit", type=int, default=0, help="exit with this code at the end")
args = parser.parse_args()


@jax.jit
def f(x):
    return jnp.tanh(x @ x) + 1.0


@jax.jit
def g(x):
    return x + 4.0


@jax.jit
def h(x):
    return x * 42.0


x = jnp.ones((8, 8), jnp.float32)
for fn, count in ((f, args.f), (g, args.g), (h, args.h)):
    for _ in range(count):
        fn(x).block_until_ready()

@jax.jit
def with_callback(x):
    jax.debug.callback(lambda v: None, x[0, 0])
    return x * 2.0


for _ in range(args.cb):
    with_callback(x).block_until_ready()

if args.aot:
    compiled = jax.jit(lambda x: x - 1.0).lower(x).compile()
    compiled(x).block_until_ready()

print("auto_fgh done", args.f, args.g, args.h, flush=True)
sys.exit(args.exit)
