"""Two or more JAX processes with real cross-process collectives, replaying XLA:GPU's PGLE lines.

Run under a launcher, through pgle: `srun -n 2 pgle run --profile p.pb dist_replay.py -- ...`.
Each process calls `jax.distributed.initialize()` (gloo CPU collectives), runs a few
StepTraceAnnotation steps of a jitted psum over every device of every process, then prints, on
stderr, the lines XLA:GPU prints while compiling with a PGLE profile (real lines the lane
captured from jax 0.10.2's compiler, tests/workloads/real_xla_lines.py) for the profile path it
actually got in XLA_FLAGS (nothing without one), like tests/workloads/replay_xla_log.py: a
REPLAY, counted only with tests/helpers/replayed_gpu_run (see replay_xla_log.py).

Options:
  --steps N             steps to run (default 4)
  --partial-ranks R,..  these ranks replay a partial fit for jit_train_step (5 found, 15 missing);
                        the others a full one
  --crash-rank R        process R exits with --crash-code (default 7) right after initialize()
  --orphan-rank R       process R SIGKILLs its parent (pgle) after its steps and the
                        distributed shutdown, as an OOM killer would: that rank's pgle never
                        reports
  --sleep-rank R:S      process R sleeps S seconds before exiting
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def replay(path: str, partial: bool) -> list[str]:
    """The real lines of tests/workloads/real_xla_lines.py (jax 0.10.2's, as captured by the
    XLA:GPU lane) for this process's two modules, from two threads."""
    import threading

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import real_xla_lines

    cap = real_xla_lines.Captured("0.10.2")
    t1 = threading.get_native_id()  # the replay's own (compiling) thread, and a second one
    t2 = t1 + 1
    missing = [f"fusion.{i}" for i in range(15)] if partial else []
    train = real_xla_lines.module_read(cap, path=path, module="jit_train_step", module_id=1,
                                       fp="fe8bd59d0f5f8ed3e9de8db97e1ec5eb", found=5,
                                       missing=missing)
    evals = real_xla_lines.module_read(cap, path=path, module="jit_eval_step", module_id=2,
                                       fp="5b555cdb08fb9a8f6afa7168fd9efe6c")
    out = []
    for i in range(max(len(train), len(evals))):
        out += [(t1, ln) for ln in train[i:i + 1]] + [(t2, ln) for ln in evals[i:i + 1]]
    return [text for text in (ln.render(tid) for tid, ln in out) if text is not None]


def ranks(text: str | None) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()} if text else set()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--partial-ranks", default="")
    parser.add_argument("--crash-rank", type=int, default=None)
    parser.add_argument("--crash-code", type=int, default=7)
    parser.add_argument("--orphan-rank", type=int, default=None)
    parser.add_argument("--sleep-rank", default=None)
    args = parser.parse_args()

    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(initialization_timeout=60)
    rank = jax.process_index()
    if args.crash_rank == rank:
        print(f"dist_replay: rank {rank} crashing on purpose", file=sys.stderr, flush=True)
        os._exit(args.crash_code)

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("x",))
    sharding = NamedSharding(mesh, P("x"))

    @jax.jit
    def train_step(a):
        return jax.shard_map(lambda b: jax.lax.psum(b, "x"), mesh=mesh, in_specs=P("x"),
                             out_specs=P())(a)

    @jax.jit
    def eval_step(a):
        return jnp.tanh(a).mean()

    local = np.full((jax.local_device_count(), 8), rank + 1.0, dtype=np.float32)
    x = jax.make_array_from_process_local_data(sharding, local)
    for i in range(args.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            total = train_step(x)
            total.block_until_ready()
    eval_step(x).block_until_ready()
    value = float(np.asarray(total.addressable_data(0))[0, 0])

    import re

    m = re.search(r"--xla_gpu_pgle_profile_file_or_directory_path=(\"[^\"]*\"|'[^']*'|\S+)",
                  os.environ.get("XLA_FLAGS", ""))
    if m:
        print("\n".join(replay(m.group(1).strip("\"'"), rank in ranks(args.partial_ranks))),
              file=sys.stderr, flush=True)
    print(f"dist_replay: rank {rank} of {jax.process_count()} psum {value}", flush=True)
    if args.sleep_rank:
        r, s = args.sleep_rank.split(":")
        if int(r) == rank:
            time.sleep(float(s))
    jax.distributed.shutdown()
    if args.orphan_rank == rank:
        # After shutdown: pgle's harness kills this workload as soon as its pgle dies, and a
        # rank that died before the shutdown barrier made rank 0's jax abort (exit 134) or not,
        # depending on timing. The other ranks' runs are then what they would be anyway.
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(5)  # killed here by the harness's parent watch
    return 0


if __name__ == "__main__":
    sys.exit(main())
