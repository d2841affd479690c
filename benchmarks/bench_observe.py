"""What the harness's per-module observation adds to a compile: pgle's own hook
(pgle/launch/jax_internals.py `observe_modules`: FLOPs, memory, and the scheduled HLO text of
modules with async ops), installed as the harness installs it, around jax's real
`compile_or_get_cached`.

The HLO-text branch (to_string() of the scheduled module, written under the run folder) runs
on XLA:GPU for every module with async collectives; XLA:CPU emits none (a CPU collective is
synchronous), so on CPU the hook would never take it. `--branch text` (the default here) makes
the hook's async check answer yes, so every module takes that branch, which is the cost on a
GPU; `--branch plain` leaves it as it is on CPU. Nothing else of the hook is replaced.

Both sides in one process (stated: the quantity is a per-compile cost, which a whole process
would drown in JAX's import): the same realistic module (a 24-layer MLP block stack, a few
thousand HLO instructions) compiled through `compiler.compile_or_get_cached` with and without
the hook, caches cleared before each compile, alternating order, warm-up, >= 5 pairs, per-pair
ratios. Writes benchmarks/results/bench_observe.json. Runtime: ~3 minutes on 2 cores.

    python benchmarks/bench_observe.py [--pairs 7] [--layers 24] [--branch text|plain]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--branch", choices=("text", "plain"), default="text")
    args = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rec = h.Recorder("bench_observe")
    import jax
    import jax.numpy as jnp
    from jax._src import compiler

    from pgle.launch import jax_internals

    def model(params, x):
        for w1, w2, g in params:
            y = x * g / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
            x = x + jax.nn.gelu(y @ w1) @ w2
        return jnp.sum(x)

    def step(params, x):
        loss, grads = jax.value_and_grad(model)(params, x)
        return loss, jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)

    key = jax.random.PRNGKey(0)
    params = [(jax.random.normal(key, (256, 1024)), jax.random.normal(key, (1024, 256)),
               jnp.ones((256,))) for _ in range(args.layers)]
    x = jnp.ones((32, 256))

    events: list[tuple] = []
    hlo_dir = tempfile.mkdtemp(prefix="bench-observe-hlo-")
    plain = compiler.compile_or_get_cached
    if not jax_internals.observe_modules(lambda kind, **f: events.append((kind, f)), hlo_dir):
        raise SystemExit("pgle's observe_modules hook did not install on this jax")
    hooked = compiler.compile_or_get_cached
    if args.branch == "text":
        # The GPU answer of the async check for every module: the hook writes its HLO text.
        jax_internals._has_async_ops = lambda module: True

    def compile_with(fn) -> float:
        compiler.compile_or_get_cached = fn
        jax.clear_caches()
        t0 = time.perf_counter()
        jax.jit(step).lower(params, x).compile()
        return time.perf_counter() - t0

    compile_with(plain)  # warm-up, both ways
    compile_with(hooked)
    rows = []
    for i in range(args.pairs):
        order = (plain, hooked) if i % 2 == 0 else (hooked, plain)
        got = {fn: compile_with(fn) for fn in order}
        rows.append((h.Run(got[plain], 0.0, 0), h.Run(got[hooked], 0.0, 0)))
    compiler.compile_or_get_cached = plain
    res = h.summarize("compile", "compile + pgle's observation", rows)
    written = sorted(Path(hlo_dir).glob("*.txt"))
    observed = [f for kind, f in events if kind == "module_compiled"]
    if not observed or (args.branch == "text" and not all(f.get("hlo_file") for f in observed)):
        raise SystemExit("the hook did not observe the compiles as expected")
    res["modules_observed"] = len(observed)
    res["hlo_files"] = len(written)
    res["hlo_text_chars"] = written[-1].stat().st_size if written else 0
    res["instructions"] = written[-1].read_text().count("\n  ") if written else None
    branch = ("the scheduled-HLO text written for every module, as on a GPU for modules with "
              "async collectives" if args.branch == "text" else "no HLO text (CPU: no async ops)")
    rec.figure(f"observe_compile_{args.branch}",
               what=f"compile of a {args.layers}-layer training step plus pgle's real per-module "
                    f"hook ({branch}; in-process)", anchor="the same compile without the hook",
               goal="– (a fixed cost per compiled module)", value=res["ratio"], met=None, details=res)
    rec.write()


if __name__ == "__main__":
    main()
