"""Auto PGLE's f/g/h scenario in two or more JAX processes with real cross-process collectives.

Like tests/workloads/auto_fgh.py, but every function sums over all devices of all processes
(`psum` in `shard_map`, gloo CPU collectives after `jax.distributed.initialize()`): `f` runs
often enough to be PGLE-optimized, `g` once, `h` as told.

On CPU, JAX's persistent-cache keys differ between processes (the CPU topology fingerprint is
process-local), so a module recompiled with a non-empty profile on every rank would deadlock in
JAX's FDO-profile sharing (each rank waits on its own key). Tests therefore hand the test-only
non-empty profile to rank 0 only; on a GPU the keys agree and every rank recompiles.

    srun -n 2 pgle prewarm --cache-dir C dist_auto.py -- --f 3 --g 1 --h 0
    python dist_auto.py --f 3 --g 1 --h 0 [--f-on-rank R:N]
  --f-on-rank R:N   process R runs f N times instead (a rank that runs less than the others)
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("f", "g", "h"):
        parser.add_argument(f"--{name}", type=int, default=1)
    parser.add_argument("--f-on-rank", default=None)
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(initialization_timeout=60)
    rank = jax.process_index()
    mesh = jax.make_mesh((jax.device_count(),), ("x",))

    def across(fn):
        return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("x"), out_specs=P()))

    def f(a):
        return jax.lax.psum(jnp.tanh(a) + 1.0, "x")

    def g(a):
        return jax.lax.psum(a + 4.0, "x")

    def h(a):
        return jax.lax.psum(a * 42.0, "x")

    f, g, h = across(f), across(g), across(h)
    local = np.ones((jax.local_device_count(), 8), np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    counts = {"f": args.f, "g": args.g, "h": args.h}
    if args.f_on_rank:
        r, n = args.f_on_rank.split(":")
        if int(r) == rank:
            counts["f"] = int(n)
    for name, fn in (("f", f), ("g", g), ("h", h)):
        for _ in range(counts[name]):
            fn(x).block_until_ready()
    print(f"dist_auto: rank {rank} done {counts}", flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
