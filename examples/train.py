"""A small MLP language model trained with Adam, sharded over every local device.

Parameters are sharded over the `data` axis (FSDP style) and the batch is split
over it too, so the compiled step holds all-gathers, reduce-scatters and
all-reduces: the collectives PGLE is there to schedule around. Each step is
wrapped in `jax.profiler.StepTraceAnnotation("train", step_num=i)`, the way
MaxText marks steps, so `pgle collect --steps` can count them.

On a CPU, `--devices N` (default 8) emulates N devices through
`--xla_force_host_platform_device_count`; on a GPU it is ignored.

    python examples/train.py --steps 20 --batch 64
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--batch", type=int, default=64, help="global batch size (default 64)")
    p.add_argument("--seq", type=int, default=32, help="sequence length (default 32)")
    p.add_argument("--dim", type=int, default=128, help="model width (default 128)")
    p.add_argument("--layers", type=int, default=2, help="MLP blocks (default 2)")
    p.add_argument("--vocab", type=int, default=256, help="vocabulary size (default 256)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate")
    p.add_argument("--devices", type=int, default=8,
                   help="CPU only: number of emulated devices (default 8)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def emulate_cpu_devices(n: int) -> None:
    """Ask XLA:CPU for n devices unless the user already chose a count (before jax starts)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def main(argv=None):
    args = parse_args(argv)
    emulate_cpu_devices(args.devices)

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    n = len(devices)
    if args.batch % n:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {n} devices")
    mesh = Mesh(devices, ("data",))
    shard0 = NamedSharding(mesh, P("data"))  # parameters: dim 0 split across devices
    replicated = NamedSharding(mesh, P())

    def init_params(key):
        keys = jax.random.split(key, 2 + 2 * args.layers)
        scale = args.dim ** -0.5
        params = {
            "embed": jax.random.normal(keys[0], (args.vocab, args.dim)) * scale,
            "out": jax.random.normal(keys[1], (args.dim, args.vocab)) * scale,
        }
        for i in range(args.layers):
            params[f"w_in{i}"] = jax.random.normal(keys[2 + 2 * i], (args.dim, 4 * args.dim)) * scale
            params[f"w_out{i}"] = jax.random.normal(keys[3 + 2 * i], (4 * args.dim, args.dim)) * (
                (4 * args.dim) ** -0.5)
        return params

    def param_sharding(params):
        # Split dim 0 where it divides evenly; replicate the rest.
        return {k: shard0 if v.shape[0] % n == 0 else replicated for k, v in params.items()}

    def loss_fn(params, tokens):
        x = params["embed"][tokens[:, :-1]]
        for i in range(args.layers):
            h = jax.nn.gelu(x @ params[f"w_in{i}"])
            x = x + h @ params[f"w_out{i}"]
            x = x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-6) * args.dim ** 0.5
        logits = x @ params["out"]
        labels = tokens[:, 1:]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    def adam(params, grads, state, step):
        b1, b2, eps = 0.9, 0.999, 1e-8
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
        t = step + 1
        new = jax.tree.map(
            lambda p, m, v: p - args.lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps),
            params, m, v)
        return new, {"m": m, "v": v}

    params = init_params(jax.random.key(args.seed))
    shardings = param_sharding(params)
    params = jax.device_put(params, shardings)
    state = jax.device_put({"m": jax.tree.map(jnp.zeros_like, params),
                            "v": jax.tree.map(jnp.zeros_like, params)},
                           {"m": shardings, "v": shardings})
    batch_sharding = NamedSharding(mesh, P("data", None))

    @jax.jit
    def train_step(params, state, tokens, step):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        params, state = adam(params, grads, state, step)
        return params, state, loss

    data_key = jax.random.key(args.seed + 1)
    times = []
    print(f"training on {n} {devices[0].platform} device(s): {args.steps} steps, batch {args.batch}",
          flush=True)
    for step in range(args.steps):
        tokens = jax.device_put(
            jax.random.randint(jax.random.fold_in(data_key, step), (args.batch, args.seq + 1), 0,
                               args.vocab), batch_sharding)
        start = time.perf_counter()
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            params, state, loss = train_step(params, state, tokens, step)
            loss = float(loss)  # waits for the step: the time below is the step's own
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        print(f"step {step:4d}  loss {loss:.4f}  {elapsed * 1e3:8.2f} ms", flush=True)
    if len(times) > 1:
        steady = times[1:]
        print(f"median step time {statistics.median(steady) * 1e3:.2f} ms over {len(steady)} steps "
              "(step 0 compiles)", flush=True)


if __name__ == "__main__":
    main()
