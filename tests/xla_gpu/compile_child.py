"""Child process of the XLA:GPU deviceless lane (tests/xla_gpu/lane.py).

Runs inside a virtual environment holding jax, jaxlib, jax-cuda12-plugin and
jax-cuda12-pjrt of one version, on a machine without a GPU. It builds a compile-only
topology of 8 H100s from a text GpuTargetConfigProto and compiles small programs with
the real XLA:GPU pipeline (SPMD partitioner, async collectives, latency-hiding scheduler,
PGLE estimator and accuracy checker). XLA's log goes to stderr untouched; stdout carries
one line per compiled module, `MODULE <json>`, and a last line `RESULT <json>`.

Everything it needs comes from its arguments and the environment that lane.py sets
(JAX_PLATFORMS, TF_CPP_*, XLA_FLAGS). Options:
  --programs a,b,c,d     which programs to compile (default a,b,c,d, in that order; e-h:
                         ring/all-to-all/send-recv, while loop, no collectives, GSPMD;
                         j: the shared demo's all-gather + small psum; k: the same with
                         nothing to overlap the all-gather)
  --config FILE          text GpuTargetConfigProto (default: the H100 SXM one in lane.py)
  --dump DIR             XLA dump directory lane.py already put into XLA_FLAGS; used to
                         read the optimized HLO where `Compiled.as_text()` is None (jax<=0.5)
  --fdo-profile FILE     hand FILE's bytes to XLA as CompileOptions.fdo_profile (what JAX's
                         automatic PGLE does), through compile(compiler_options=...) where
                         this jax accepts it, else by patching jax's get_compile_options
  --gpu-alias            map the `gpu` platform alias to `cuda` (jax 0.4.35 lowers for
                         `gpu` and asks for a live backend to canonicalize it)
  --threads N            compile the modules from N Python threads at once (interleaved logs)
  --raise                let a failed compile raise: Python's own traceback ends the process
  --hlo-out DIR          also write each compiled module's optimized, scheduled HLO text (the
                         executed module: what a trace of it names) to DIR/<module>.txt
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import threading
import time

NDEV = 8


def _pgle_file(name: str, *parts: str):
    """A stdlib-only module of pgle, loaded by its path: this child runs in the lane's venv,
    where pgle is not installed."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pgle", *parts)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while it loads
    spec.loader.exec_module(mod)
    return mod


def build_topology(cfg: str):
    """get_topology_desc for 1x1x8 CUDA devices, dropping each field the jaxlib rejects: pgle
    estimate's own compile child does it (one reading of XLA's refusal)."""
    return _pgle_file("pgle_estimate_child", "estimate", "compile_child.py").topology(cfg, NDEV)


# ----------------------------------------------------------------------------- HLO text
def hlo_text():
    """pgle's one HLO text reader (stdlib only)."""
    return _pgle_file("pgle_hlo_text", "xla", "hlo_text.py")


def module_record(name: str, text: str | None, source: str) -> dict:
    rec: dict = {"module": name, "hlo_source": source}
    if not text:
        rec["fingerprint_before_lhs"] = None
        return rec
    module = hlo_text().parse(text)
    comps = {c.name: [i.name for i in c.instructions] for c in module.computations.values()}
    entry = module.entry.name if module.entry else None
    every = [i for c in module.computations.values() for i in c.instructions]
    bodies = sorted({i.attribute("body") for i in every if i.opcode == "while"})
    conditions = sorted({i.attribute("condition") for i in every if i.opcode == "while"})
    branches = sorted({c for i in every if i.opcode == "conditional" for c in i.called})
    rec.update({
        "hlo_module_name": module.name,
        "fingerprint_before_lhs": module.fingerprint,
        "entry_computation": entry,
        "entry_instructions": comps.get(entry, []) if entry else [],
        "while_bodies": {b: comps.get(b, []) for b in bodies},
        "while_conditions": {c: comps.get(c, []) for c in conditions},
        "cond_branches": {b: comps.get(b, []) for b in branches},
        # Every other computation (calls, async wrappers, fusions, reducers): the accuracy
        # checker of jax 0.5/0.6 also asks for instructions inside `call`ed computations.
        "other_computations": {c: v for c, v in comps.items()
                               if c != entry and c not in bodies and c not in conditions
                               and c not in branches},
    })
    return rec


# ----------------------------------------------------------------------------- programs
def programs(jax, mesh):
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    try:
        shard_map = jax.shard_map            # jax >= 0.6
    except AttributeError:
        from jax.experimental.shard_map import shard_map

    def sds(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    n = NDEV
    # (a) sharded matmuls with all-gather, all-reduce (psum) and reduce-scatter
    def prog_a_collectives(x, w, v):
        def body(x, w, v):
            g = jax.lax.all_gather(v, "x", tiled=True)          # all-gather
            h = jnp.tanh(x @ w)                                  # independent compute
            h = jnp.tanh(h @ w)
            y = h @ g
            s = jax.lax.psum(y, "x")                             # all-reduce
            r = jax.lax.psum_scatter(h @ w, "x", scatter_dimension=0, tiled=True)  # reduce-scatter
            return s, r
        return shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")),
                         out_specs=(P(), P("x")))(x, w, v)
    a_args = (sds((n * 128, 512), P("x")), sds((512, 512), P()), sds((512, 512), P("x")))

    # (b) lax.cond whose branch is not taken at run time (predicate is data dependent)
    def prog_b_cond(x, w):
        def heavy(x):
            return jnp.tanh(x @ w) @ w
        def light(x):
            return x * 2.0
        y = jax.lax.cond(jnp.sum(x) > 1e30, heavy, light, x)
        return y @ w
    b_args = (sds((n * 64, 256), P("x")), sds((256, 256), P()))

    # (c) lax.scan (a while loop in HLO) over sharded matmuls
    def prog_c_scan(x, ws):
        def step(c, w):
            c = jnp.tanh(c @ w)
            return c, jnp.sum(c)
        c, ys = jax.lax.scan(step, x, ws)
        return c, ys
    c_args = (sds((n * 64, 256), P("x")), sds((4, 256, 256), P()))

    # (d) two jitted modules in one process, sharing most of their computation
    def prog_d_train(x, w):
        h = jnp.tanh(x @ w)
        return jnp.mean(h * h), w - 0.1 * (x.T @ h)
    def prog_d_eval(x, w):
        h = jnp.tanh(x @ w)
        return jnp.mean(h * h)
    d_args = (sds((n * 64, 256), P("x")), sds((256, 256), P()))

    # (e) a ring: ppermute (collective-permute) and all_to_all, and a ppermute inside a
    # fori_loop (XLA may decompose that one into send/recv)
    def prog_e_ring(x, w):
        def body(x, w):
            perm = [(i, (i + 1) % n) for i in range(n)]
            y = jax.lax.ppermute(jnp.tanh(x @ w), "x", perm)          # collective-permute
            z = jax.lax.all_to_all(y, "x", 0, 0, tiled=True)           # all-to-all

            def step(i, c):
                return jax.lax.ppermute(jnp.tanh(c @ w), "x", perm)
            return jax.lax.fori_loop(0, 3, step, z)
        return shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))(x, w)
    e_args = (sds((n * 64, 256), P("x")), sds((256, 256), P()))

    # (f) a dynamic while loop (data-dependent trip count) with a nested scan
    def prog_f_while(x, ws):
        def cond(c):
            return (c[1] < 3) & (jnp.sum(c[0]) < 1e30)

        def body(c):
            def step(h, w):
                return jnp.tanh(h @ w), None
            h, _ = jax.lax.scan(step, c[0], ws)
            return h, c[1] + 1
        return jax.lax.while_loop(cond, body, (x, 0))[0]
    f_args = (sds((n * 64, 256), P("x")), sds((2, 256, 256), P()))

    # (g) a module without collectives (replicated operands)
    def prog_g_local(x, w):
        return jnp.tanh(jnp.tanh(x @ w) @ w).sum(axis=0)
    g_args = (sds((512, 256), P()), sds((256, 256), P()))

    # (h) a GSPMD step (no shard_map): FSDP-sharded weights, the gradient of an MLP;
    # XLA's SPMD partitioner inserts all-gathers and reduce-scatters itself
    def prog_h_gspmd(x, w1, w2):
        def loss(w1, w2):
            return jnp.mean(jnp.tanh(jnp.tanh(x @ w1) @ w2) ** 2)
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2
    h_args = (sds((n * 32, 256), P("x")), sds((256, 512), P("x")), sds((512, 256), P(None, "x")))

    # (i) send/recv: jax.lax.psend/precv (jax >= 0.7; absent before: no program i there)
    def prog_i_sendrecv(x, w):
        def body(x, w):
            perm = [(i, i + 1) for i in range(n - 1)]  # a pipeline: XLA rejects cycles
            h = jnp.tanh(x @ w)
            token = jax.lax.psend(h, "x", perm)
            got = jax.lax.precv(token, jax.ShapeDtypeStruct(h.shape, h.dtype), "x", perm)
            return got @ w
        return shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))(x, w)
    i_args = (sds((n * 64, 256), P("x")), sds((256, 256), P()))

    # (j) the shared demo's program (/work/shared/tools/deviceless_pgle_demo.py): an all-gather
    # and a small psum. jax >= 0.11 compiles the psum as an async Triton collective fusion
    # (fusion-start/-done, fusion_backend_config.kind "__triton_collective"), and under ERROR
    # strictness the all-gather XLA makes synchronous fails the HLO verifier (issue 32).
    def prog_j_demo(x, w, v):
        def body(x, w, v):
            g = jax.lax.all_gather(v, "x", tiled=True)
            h = jnp.tanh(x @ w)
            h = jnp.tanh(h @ w)
            return jax.lax.psum(h @ g, "x")
        return shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P())(x, w, v)
    j_args = (sds((n * 256, 1024), P("x")), sds((1024, 1024), P()), sds((1024, 1024), P("x")))

    # (k) the same, but nothing to overlap the all-gather with: XLA makes it synchronous after
    # scheduling (jax >= 0.11.1 renames it, all-gather-start -> all_gather.N.M).
    def prog_k_sync(x, w, v):
        def body(x, w, v):
            g = jax.lax.all_gather(v, "x", tiled=True)
            h = jnp.tanh(x @ g)
            h = jnp.tanh(h @ w)
            return jax.lax.psum(h @ w, "x")
        return shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P())(x, w, v)

    return {
        **({"i": [(prog_i_sendrecv, i_args)]} if hasattr(jax.lax, "psend") else {}),
        "j": [(prog_j_demo, j_args)],
        "k": [(prog_k_sync, j_args)],
        "a": [(prog_a_collectives, a_args)],
        "b": [(prog_b_cond, b_args)],
        "c": [(prog_c_scan, c_args)],
        "d": [(prog_d_train, d_args), (prog_d_eval, d_args)],
        "e": [(prog_e_ring, e_args)],
        "f": [(prog_f_while, f_args)],
        "g": [(prog_g_local, g_args)],
        "h": [(prog_h_gspmd, h_args)],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", default="a,b,c,d")
    ap.add_argument("--config", required=True)
    ap.add_argument("--dump")
    ap.add_argument("--fdo-profile")
    ap.add_argument("--gpu-alias", action="store_true")
    ap.add_argument("--threads", type=int, default=1,
                    help="compile the modules from this many Python threads at once")
    ap.add_argument("--raise", dest="raise_errors", action="store_true",
                    help="let a failed compile raise (Python prints its traceback, exit 1)")
    ap.add_argument("--hlo-out", help="write each module's scheduled HLO text to DIR/<module>.txt")
    ns = ap.parse_args()
    cfg = open(ns.config).read()

    t0 = time.time()
    import jax
    result: dict = {"jax": jax.__version__, "modules": [], "ok": False}
    try:
        import jaxlib
        result["jaxlib"] = getattr(jaxlib, "__version__", None)
    except Exception:  # noqa: BLE001
        pass
    from jax.experimental import topologies

    if ns.gpu_alias:
        from jax._src import xla_bridge as xb
        canon = xb.canonicalize_platform

        def canonicalize_platform(platform):
            try:
                return canon(platform)
            except RuntimeError:
                if platform == "gpu":
                    return "cuda"
                raise
        xb.canonicalize_platform = canonicalize_platform

    fdo = open(ns.fdo_profile, "rb").read() if ns.fdo_profile else None
    fdo_mode = None
    if fdo is not None:
        # Since jax 0.4.2x pxla pops "fdo_profile" out of compiler_options into
        # CompileOptions; older ones would pass it on as an XLA debug option.
        import inspect
        from jax._src.interpreters import pxla
        if 'pop("fdo_profile"' in inspect.getsource(pxla):
            fdo_mode = "compiler_options"
        else:
            fdo_mode = "patched get_compile_options"
            from jax._src import compiler as _c
            orig = _c.get_compile_options

            def with_fdo(*a, **k):
                k["fdo_profile"] = fdo
                return orig(*a, **k)
            _c.get_compile_options = with_fdo
    result["fdo_mode"] = fdo_mode

    topo, dropped = build_topology(cfg)
    result["dropped_config_fields"] = dropped
    result["device_kind"] = topo.devices[0].device_kind
    mesh = topologies.make_mesh(topo, (NDEV,), ("x",))
    progs = programs(jax, mesh)
    result["import_s"] = round(time.time() - t0, 2)

    wanted = [p.strip() for p in ns.programs.split(",") if p.strip()]
    jobs = [(key, fn, args) for key in wanted for fn, args in progs[key]]

    def compile_one(key, fn, args) -> dict:
        name = "jit_" + fn.__name__
        rec: dict = {"program": key}
        t1 = time.time()
        try:
            lowered = jax.jit(fn).lower(*args)
            if fdo_mode == "compiler_options":
                compiled = lowered.compile(compiler_options={"fdo_profile": fdo})
            else:
                compiled = lowered.compile()
        except Exception as e:  # noqa: BLE001 - the failure is the observation
            if ns.raise_errors:
                raise  # Python's own traceback, as a user's script shows it
            msg = str(e).splitlines()[0] if str(e) else ""
            line = f"{type(e).__name__}: {msg}"
            # One greppable line on stderr, the same as Python's traceback summary.
            sys.stderr.write(f"LANE-COMPILE-FAILED {name}: {line}\n")
            sys.stderr.flush()
            rec.update({"module": name, "compile_failed": True, "error": line[:2000]})
            return rec
        text = compiled.as_text()
        source = "as_text"
        if not text and ns.dump:
            files = sorted(glob.glob(os.path.join(ns.dump, f"*.{name}.*after_optimizations.txt")))
            if files:
                text = open(files[-1]).read()
                source = "dump:" + os.path.basename(files[-1])
        rec.update(module_record(name, text, source if text else "none"))
        if ns.hlo_out and text:
            os.makedirs(ns.hlo_out, exist_ok=True)
            with open(os.path.join(ns.hlo_out, f"{name}.txt"), "w") as fh:
                fh.write(text)
        rec["compile_failed"] = False
        rec["compile_s"] = round(time.time() - t1, 2)
        rec["thread"] = threading.get_native_id()
        return rec

    if ns.threads > 1:
        # Several jitted functions compiled at once from Python threads (what a data loader
        # thread, or `jax.jit(...).lower().compile()` from a thread pool, does): XLA compiles
        # each in its calling thread, so the scheduler's lines interleave in the log.
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=ns.threads) as pool:
            recs = list(pool.map(lambda job: compile_one(*job), jobs))
    else:
        recs = [compile_one(*job) for job in jobs]
    for rec in recs:
        print("MODULE " + json.dumps(rec), flush=True)
        result["modules"].append(rec)
    result["ok"] = not any(m.get("compile_failed") for m in result["modules"])
    result["total_s"] = round(time.time() - t0, 2)
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
