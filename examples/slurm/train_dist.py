"""examples/train.py as one process of a multi-process job: `jax.distributed.initialize()` first.

Every process runs the same training steps on its share of the global device mesh; the
collectives cross processes (NCCL on GPUs, gloo on CPUs). Under SLURM, jax reads the rank, the
process count and the coordinator from the step's variables, so no argument is needed:

    srun -n 2 python examples/slurm/train_dist.py --steps 20
    srun -n 2 pgle run --profile profile.pb examples/slurm/train_dist.py -- --steps 20

Arguments are examples/train.py's (on a CPU, --devices N gives each process N devices).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import train  # noqa: E402  (examples/train.py)


def main(argv=None) -> None:
    args = train.parse_args(argv)
    train.emulate_cpu_devices(args.devices)  # before jax starts its backend

    import jax

    # CPUs have no cross-process collectives unless told which implementation to use.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()
    train.main(argv)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
