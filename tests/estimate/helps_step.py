"""A step where PGLE should help: a large all-gather and a small all-reduce share XLA:GPU's one
collective stream (one in flight), and a chain of matmuls is independent of both. Issued in the
default order, the small all-reduce takes the compute and the all-gather is exposed; with costs
that make the all-gather expensive the scheduler gives it the compute instead."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("x",))
try:
    shard_map = jax.shard_map
except AttributeError:
    from jax.experimental.shard_map import shard_map


def body(x, w, v, s):
    g = jax.lax.all_gather(v, "x", tiled=True)  # large: needed by the last matmul only
    r = jax.lax.psum(s, "x")  # small: needed at the very end
    h = x
    for _ in range(6):  # independent of both collectives
        h = jnp.tanh(h @ w)
    return h @ g + r


@jax.jit
def train_step(x, w, v, s):
    return shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x"), P("x")), out_specs=P("x"))(
        x, w, v, s
    )


n = jax.device_count()
x = jax.device_put(jnp.ones((n * 64, 256)), NamedSharding(mesh, P("x")))
w = jax.device_put(jnp.ones((256, 256)) * 0.01, NamedSharding(mesh, P()))
v = jax.device_put(jnp.ones((256, 256)) * 0.01, NamedSharding(mesh, P("x")))
s = jax.device_put(jnp.ones((n * 64, 256)), NamedSharding(mesh, P("x")))
for _ in range(4):
    y = train_step(x, w, v, s)
print("done", float(y.sum()))
