"""A workload for `pgle tune --compare` on the real XLA:GPU compiler without a GPU: it compiles
one sharded step (an all-gather the compute does not need, then a psum) for 8 H100s,
deviceless (../../shared/reference/xla-gpu-deviceless.md), as `jax.jit(f).lower(...).compile()`,
and "runs" it a few times on the CPU backend so that pgle sees steps.

It appends to XLA_FLAGS (never assigns), so whatever pgle and the arm set reaches XLA; the
harness keeps the scheduled HLO of the compiled module in the run folder (hlo/), which is
what the lane test compares across arms. Run under a lane venv (jax + the CUDA plugin).
"""
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"  # lets the CUDA plugin register without a driver
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "helpers"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import topologies  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from deviceless_schedule import H100  # noqa: E402

print(f"JAX_OPTIMIZATION_LEVEL={os.environ.get('JAX_OPTIMIZATION_LEVEL', '')} "
      f"jax_optimization_level={jax.config.jax_optimization_level}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)
topo = topologies.get_topology_desc(platform="cuda", target_config=H100, topology="1x1x8")
mesh = topologies.make_mesh(topo, (8,), ("x",))


def body(x, w, v):
    g = jax.lax.all_gather(v, "x", tiled=True)  # communication ...
    h = jnp.tanh(x @ w)                          # ... and compute that does not need it
    h = jnp.tanh(h @ w)
    return jax.lax.psum(h @ g, "x")              # an all-reduce


s = lambda spec: NamedSharding(mesh, spec)  # noqa: E731
args = (jax.ShapeDtypeStruct((8 * 256, 1024), jnp.float32, sharding=s(P("x"))),
        jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=s(P())),
        jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=s(P("x"))))
compiled = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")),
                                 out_specs=P())).lower(*args).compile()
print("compiled for", compiled.as_text().count("all-gather-start"), "all-gather(s)", flush=True)


@jax.jit
def step(x):  # a CPU step, so that tune has step times to report
    return jnp.tanh(x @ x.T).sum()


x = jnp.ones((64, 64))
for _ in range(8):
    step(x).block_until_ready()
print("done", flush=True)
