"""Two or more JAX processes, one real cross-process collective.

Run under a launcher, e.g. `srun -n 2 python tests/workloads/dist_psum.py`.
Each process calls `jax.distributed.initialize()`, builds a mesh over every
device of every process, and sums over it with `psum` inside `shard_map`; the
CPU backend does the cross-process part with gloo. Each process prints one
JSON line `DIST_PSUM {...}` with what it saw, so a test can check every rank.

Options:
  --explicit        pass coordinator, process count and id to initialize()
                    (coordinator from JAX_COORDINATOR_ADDRESS, or
                    127.0.0.1:<port from SLURM_JOB_ID>; count and id from
                    SLURM_NTASKS / SLURM_PROCID) instead of letting jax detect
                    the SLURM environment itself.
  --crash-rank R    process R exits with code 3 right after initialize(),
                    before the collective (for failure-handling tests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--explicit", action="store_true")
    parser.add_argument("--crash-rank", type=int, default=None)
    args = parser.parse_args()

    import jax

    # The CPU backend has no cross-process collectives unless told which
    # implementation to use; without this the psum below fails to compile.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")

    if args.explicit:
        coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS")
        if not coordinator:
            # Same port rule as jax's own SLURM detection, so that two test
            # jobs running at once do not collide.
            port = int(os.environ["SLURM_JOB_ID"]) % 4096 + 61440
            coordinator = f"127.0.0.1:{port}"
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=int(os.environ["SLURM_NTASKS"]),
            process_id=int(os.environ["SLURM_PROCID"]),
            initialization_timeout=60,
        )
    else:
        jax.distributed.initialize(initialization_timeout=60)

    rank = jax.process_index()
    if args.crash_rank is not None and rank == args.crash_rank:
        print(f"dist_psum: rank {rank} crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    # Each device holds (its process index + 1); the global sum therefore
    # needs data from every process: sum over ranks of (rank+1) * local devices.
    local = np.full((jax.local_device_count(),), rank + 1.0, dtype=np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    total = jax.jit(
        jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    )(x)
    value = float(np.asarray(total.addressable_data(0))[0])
    expected = float(sum((r + 1) * jax.local_device_count() for r in range(jax.process_count())))

    print(
        "DIST_PSUM "
        + json.dumps(
            {
                "process_index": rank,
                "process_count": jax.process_count(),
                "slurm_procid": os.environ.get("SLURM_PROCID"),
                "local_devices": jax.local_device_count(),
                "global_devices": jax.device_count(),
                "psum": value,
                "expected": expected,
                "backend": jax.default_backend(),
            }
        ),
        flush=True,
    )
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
