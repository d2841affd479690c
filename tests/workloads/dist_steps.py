"""JAX processes joined by jax.distributed, as pgle runs them: one process per rank.

The rank and the number of processes come from PGLE_RANK / PGLE_WORLD_SIZE (a local job the
test starts itself) or SLURM_PROCID / SLURM_NTASKS (under srun); the coordinator is
JAX_COORDINATOR_ADDRESS, or 127.0.0.1 with a port from DIST_PORT (or SLURM_JOB_ID, as jax's
own SLURM detection picks it).

By default every process runs --steps marked steps of a small jitted matmul (whose first
step is a real cross-process collective: a psum over every process's devices, through gloo)
and exits 0. The hangs a cluster job meets:
  --hang barrier R   process R blocks in its own code (on an Event nobody sets) and never
                     reaches the barrier; the others wait in
                     jax.experimental.multihost_utils.sync_global_devices
  --hang callback    every process blocks in a host callback (jax.pure_callback) that waits
                     on an Event
  --shutdown         call jax.distributed.shutdown() at the end, as many scripts do
"""

from __future__ import annotations

import argparse
import os
import sys
import threading


def _env_int(*names: str) -> int:
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    raise SystemExit(f"dist_steps: none of {names} is set")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hang", nargs="+", default=None)
    parser.add_argument("--shutdown", action="store_true")
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

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=size,
                               process_id=rank, initialization_timeout=120)
    print(f"dist_steps: rank {rank} of {size} joined", flush=True)

    if args.hang and args.hang[0] == "barrier":
        from jax.experimental import multihost_utils

        if rank == int(args.hang[1]):
            print(f"dist_steps: rank {rank} stuck before the barrier", flush=True)
            threading.Event().wait()
        multihost_utils.sync_global_devices("dist_steps barrier")
        return 0
    if args.hang and args.hang[0] == "callback":
        gate = threading.Event()

        def host_side(x):
            gate.wait()
            return x

        @jax.jit
        def with_callback(x):
            return jax.pure_callback(host_side, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

        print(f"dist_steps: rank {rank} calls its host callback", flush=True)
        print(with_callback(jnp.ones(4)))
        return 0

    from jax.experimental import multihost_utils

    total = multihost_utils.process_allgather(jnp.array([rank + 1.0]))
    print(f"dist_steps: rank {rank} allgather {total.tolist()}", flush=True)

    @jax.jit
    def train_step(x):
        return jnp.tanh(x @ x) / x.shape[0]

    x = jnp.ones((64, 64)) * (rank + 1)
    for i in range(args.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x = train_step(x)
    x.block_until_ready()
    print(f"dist_steps: rank {rank} done", flush=True)
    if args.shutdown:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
