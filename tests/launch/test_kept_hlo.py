"""Which compiled modules the harness keeps the scheduled HLO of (pgle/launch/jax_internals.py
`_has_async_ops`): those with async ops, and those with a synchronous collective, which is what
an async collective becomes when XLA makes it synchronous after scheduling on jax >= 0.11.1
(`all-reduce.6`: no `-start` left; pgle/verdicts/sync_converted.py needs that module's HLO).
Real JAX on 8 CPU devices, every collective JAX offers, in a subprocess (the device count is
fixed when jax starts)."""
from __future__ import annotations

import json
import subprocess
import sys

from helpers.pgle_testing import REPO, pgle_env, pythonpath

CODE = r"""
import json
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from pgle.launch.jax_internals import _has_async_ops
mesh = jax.make_mesh((8,), ("x",))
x = jax.device_put(jnp.ones((64, 8)), NamedSharding(mesh, P("x")))
bodies = {
    "psum": (lambda v: jax.lax.psum(v, "x"), P()),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v, "x", tiled=True), P("x")),
    "all_gather": (lambda v: jax.lax.all_gather(v, "x", tiled=True), P("x")),
    "ppermute": (lambda v: jax.lax.ppermute(v, "x", [(i, (i + 1) % 8) for i in range(8)]), P("x")),
    "all_to_all": (lambda v: jax.lax.all_to_all(v, "x", 0, 0, tiled=True), P("x")),
    "none": (lambda v: jnp.tanh(v) * 2.0 + v.sum(), P("x")),
}
out = {}
for name, (body, spec) in bodies.items():
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=spec))
    module = f.lower(x).compile().runtime_executable().hlo_modules()[0]
    out[name] = [_has_async_ops(module), sorted({i.opcode.name for c in module.computations()
                                                 for i in c.instructions()})]
print(json.dumps(out))
"""


def test_modules_with_a_synchronous_collective_keep_their_hlo():
    env = pgle_env(XLA_FLAGS="--xla_force_host_platform_device_count=8", PYTHONPATH=pythonpath(str(REPO)))
    proc = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, check=False,
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    collective = {"kAllReduce", "kReduceScatter", "kAllGather", "kCollectivePermute", "kAllToAll"}
    for name, (kept, opcodes) in out.items():
        has = bool(collective & set(opcodes))
        assert has == (name != "none"), (name, opcodes)  # XLA:CPU runs them synchronously
        assert kept == has, (name, opcodes)
