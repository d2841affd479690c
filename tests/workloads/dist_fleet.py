"""JAX processes joined by jax.distributed (gloo on CPU) whose every step is a real
cross-process collective (the sum of an array sharded over every process's devices), for
pgle's fleet forensics (issue 36).

Rank and size: PGLE_RANK / PGLE_WORLD_SIZE, else SLURM_PROCID / SLURM_NTASKS; coordinator:
JAX_COORDINATOR_ADDRESS, else 127.0.0.1 with DIST_PORT (or a port from SLURM_JOB_ID).

  --steps N          steps to run (default 6)
  --diverge R        rank R's step program differs from the others' (another constant)
  --hang-after       every rank then blocks in its own code (a hang pgle must not wait for)
  --stop R N         rank R stops stepping after N steps (blocks in its own code); the others
                     go on into the next step and wait for it in the collective
  --late R S         before that step rank R prints a line S seconds late (output is progress:
                     its stall bound runs out S seconds after the stopped rank's)
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time


def _env_int(*names: str) -> int:
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    raise SystemExit(f"dist_fleet: none of {names} is set")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--diverge", type=int, default=None)
    parser.add_argument("--hang-after", action="store_true")
    parser.add_argument("--stop", type=int, nargs=2, default=None)
    parser.add_argument("--late", type=float, nargs=2, default=None)
    args = parser.parse_args()
    rank = _env_int("PGLE_RANK", "SLURM_PROCID")
    size = _env_int("PGLE_WORLD_SIZE", "SLURM_NTASKS")
    coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS")
    if not coordinator:
        port = int(os.environ["DIST_PORT"]) if os.environ.get("DIST_PORT") else \
            int(os.environ["SLURM_JOB_ID"]) % 4096 + 61440
        coordinator = f"127.0.0.1:{port}"

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=size,
                               process_id=rank, initialization_timeout=120)
    print(f"dist_fleet: rank {rank} of {size} joined", flush=True)
    mesh = jax.make_mesh((jax.device_count(),), ("d",))
    sharding = NamedSharding(mesh, PartitionSpec("d"))
    local = np.full((jax.local_device_count(), 8), rank + 1.0, dtype=np.float32)
    x = jax.make_array_from_process_local_data(sharding, local)
    scale = 3.0 if args.diverge == rank else 2.0

    @jax.jit
    def train_step(x):
        # jnp.sum over the sharded axis: an all-reduce across the processes.
        return jnp.tanh(x * scale) + jnp.sum(x) / x.size

    for i in range(args.steps):
        if args.stop and args.late and int(args.late[0]) == rank and i == args.stop[1]:
            time.sleep(args.late[1])
            print(f"dist_fleet: rank {rank} enters step {i} late", flush=True)
        if args.stop and args.stop[0] == rank and i == args.stop[1]:
            print(f"dist_fleet: rank {rank} stops stepping at step {i}", flush=True)
            threading.Event().wait()
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x = train_step(x)
            x.block_until_ready()
    print(f"dist_fleet: rank {rank} done", flush=True)
    if args.hang_after:
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
