"""A data/tensor-parallel step: an all-gather of sharded weights and a psum, 8 devices."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("x",))
try:
    shard_map = jax.shard_map
except AttributeError:
    from jax.experimental.shard_map import shard_map


def body(x, w, v):
    g = jax.lax.all_gather(v, "x", tiled=True)
    h = jnp.tanh(x @ w)
    h = jnp.tanh(h @ w)
    return jax.lax.psum(h @ g, "x")


@jax.jit
def train_step(x, w, v):
    return shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P())(x, w, v)


n = jax.device_count()
x = jax.device_put(jnp.ones((n * 64, 512)), NamedSharding(mesh, P("x")))
w = jax.device_put(jnp.ones((512, 512)) * 0.01, NamedSharding(mesh, P()))
v = jax.device_put(jnp.ones((512, 512)) * 0.01, NamedSharding(mesh, P("x")))
for _ in range(4):
    y = train_step(x, w, v)
print("done", float(y.sum()))
