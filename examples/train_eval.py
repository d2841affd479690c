"""Two jitted programs that share instruction names: a train step and an eval step.

jaxlib's converter pools every event of an instruction name (`fusion.3`, ...)
across modules into one mean, so a single profile.pb blends the two programs.
This workload makes that visible: compare

    pgle collect examples/train_eval.py -o blended.pb
    pgle collect examples/train_eval.py --per-module -o per-module/

Every --eval-every steps the eval step runs on held-out data. Steps are marked
with `jax.profiler.StepTraceAnnotation("train", ...)`; eval steps with
`StepTraceAnnotation("eval", ...)`, so `--step-name train` counts only training.
On a CPU, `--devices N` (default 8) emulates N devices.
"""

from __future__ import annotations

import argparse
import os


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--devices", type=int, default=8, help="CPU only: emulated devices")
    args = p.parse_args(argv)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.devices}".strip()

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    mesh = Mesh(devices, ("data",))
    batch_sharding = NamedSharding(mesh, P("data", None))
    if args.batch % len(devices):
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {len(devices)} devices")

    def forward(w, x):
        h = jax.nn.relu(x @ w["a"])
        return jnp.tanh(h @ w["b"])

    def loss(w, x):
        return jnp.mean((forward(w, x) - x) ** 2)

    @jax.jit
    def train_step(w, x):
        value, grads = jax.value_and_grad(loss)(w, x)
        return jax.tree.map(lambda p, g: p - 1e-2 * g, w, grads), value

    @jax.jit
    def eval_step(w, x):
        return loss(w, x)

    key = jax.random.key(0)
    ka, kb = jax.random.split(key)
    w = {"a": jax.random.normal(ka, (args.dim, args.dim)) / args.dim ** 0.5,
         "b": jax.random.normal(kb, (args.dim, args.dim)) / args.dim ** 0.5}
    for step in range(args.steps):
        x = jax.device_put(jax.random.normal(jax.random.fold_in(key, step), (args.batch, args.dim)),
                           batch_sharding)
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            w, value = train_step(w, x)
            value = float(value)
        line = f"step {step:4d}  train loss {value:.4f}"
        if (step + 1) % args.eval_every == 0:
            with jax.profiler.StepTraceAnnotation("eval", step_num=step):
                line += f"  eval loss {float(eval_step(w, x + 0.1)):.4f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
