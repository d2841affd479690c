"""What the harness's per-module observation (pgle/launch/jax_internals.py observe_modules:
FLOPs, memory, and the scheduled HLO text of modules with async ops) adds to a compile.

Both sides in one process (stated: the quantity is a per-compile cost, which a whole process
would drown in JAX's import): the same realistic module (a 24-layer MLP block stack, a few
thousand HLO instructions) compiled with `compile_or_get_cached` plain and with pgle's hook,
caches cleared before each compile, alternating order, warm-up, >= 5 pairs, per-pair ratios.
Writes benchmarks/results/bench_observe.json.

    python benchmarks/bench_observe.py [--pairs 7] [--layers 24]
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
    args = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rec = h.Recorder("bench_observe")
    import jax
    import jax.numpy as jnp
    
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
    # Each pair: one compile (caches cleared), then pgle's observation of that executable, the
    # calls observe_modules makes (jax_internals._describe: hlo_modules, cost_analysis, memory
    # stats, the async check; the text only for modules with async ops, none on CPU). The
    # ratio is (compile + observation) / compile, both from the same pair. Alternating whole
    # compiles with and without the hook was tried: compile time on the shared machine varied by
    # more than 2x between neighbouring runs, far more than the observation costs.
    jax.jit(step).lower(params, x).compile()  # warm-up
    rows, parts = [], []
    for _ in range(args.pairs):
        jax.clear_caches()
        t0 = time.perf_counter()
        exe = jax.jit(step).lower(params, x).compile()._executable.xla_executable
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        module = exe.hlo_modules()[0]
        t1 = time.perf_counter()
        exe.cost_analysis()
        exe.get_compiled_memory_stats()
        t2 = time.perf_counter()
        if jax_internals._has_async_ops(module):  # as _describe does: text only for async ones
            module.to_string()
        t3 = time.perf_counter()
        parts.append({"hlo_modules_s": t1 - t0, "cost_and_memory_s": t2 - t1, "async_check_s": t3 - t2})
        rows.append((h.Run(compile_s, 0.0, 0), h.Run(compile_s + (t3 - t0), 0.0, 0)))
    res = h.summarize("compile", "compile + pgle's observation", rows)
    res["parts"] = parts
    text = module.to_string()
    res["hlo_text_chars"] = len(text)
    res["instructions"] = text.count("\n  ")
    t0 = time.perf_counter()
    module.to_string()
    res["to_string_s_once"] = time.perf_counter() - t0  # what every compile paid before
    rec.figure("observe_compile", what=f"compile of a {args.layers}-layer training step "
               f"({res['instructions']} HLO instructions) plus pgle's per-module observation (in-process)", anchor="the same compile without it",
               goal="– (a fixed cost per compiled module)", value=res["ratio"], met=None, details=res)
    rec.write()


if __name__ == "__main__":
    main()
