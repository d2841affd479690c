"""Child process of `pgle estimate`: one deviceless XLA:GPU compile of an exported step.

`python compile_child.py --exported F.pkl --config SPEC.txtpb --devices N --hlo-out OUT.txt`,
with the arm's XLA_FLAGS, JAX_PLATFORMS=cpu (the CUDA plugin then registers without a driver,
jax 0.10.2) and TF_CPP_VMODULE=latency_hiding_scheduler=1 set by the parent. It makes a
compile-only topology of N GPUs from XLA's target spec (jax.experimental.topologies; a field
this jaxlib's parser rejects, `has no field named "X"`, is dropped and the parse retried),
rebuilds the step's meshes on its devices, and compiles `jax.jit(exported.call)` for them:
XLA runs its whole GPU pipeline, the latency-hiding scheduler included, and logs on fd 2. The
scheduled module goes to --hlo-out; stdout's last line is `RESULT {json}`. Stdlib and jax only:
run by file path. Exit 3: the compile failed (its one-line reason in RESULT).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
import tempfile
from typing import Any

MESH_TAG = "pgle-mesh"  # pgle.launch.step_export
SHARDING_TAG = "pgle-hlo-sharding"


def drop_field(cfg: str, field: str) -> str:
    out, depth = [], 0
    for line in cfg.splitlines():
        t = line.strip()
        if depth:
            depth += t.count("{") - t.count("}")
            continue
        if t.startswith((field + ":", field + " {", field + "{")):
            depth = t.count("{") - t.count("}")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def topology(cfg: str, devices: int):
    from jax.experimental import topologies

    dropped: list[str] = []
    err: Exception | None = None
    for _ in range(60):
        tmp = tempfile.TemporaryFile()  # noqa: SIM115 - read back after fd 2 is restored
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(tmp.fileno(), 2)  # the text-proto parser names the bad field on fd 2
        try:
            topo = topologies.get_topology_desc(
                platform="cuda", target_config=cfg, topology=f"1x1x{devices}"
            )
            return topo, dropped
        except Exception as e:
            err = e
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        captured = tmp.read().decode("utf-8", "replace")
        m = re.search(r'has no field named "(\w+)"', captured)
        if not m or "GpuTargetConfigProto" not in str(err):
            sys.stderr.write(captured)
            raise err
        dropped.append(m.group(1))
        cfg = drop_field(cfg, m.group(1))
    assert err is not None
    raise err


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exported", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--hlo-out", required=True)
    ns = ap.parse_args()
    result: dict = {"ok": False}
    try:
        import jax
        from jax.experimental import topologies
        from jax.sharding import NamedSharding

        result["jax"] = jax.__version__
        with open(ns.config) as fh:
            topo, dropped = topology(fh.read(), ns.devices)
        result["dropped_config_fields"] = dropped
        result["device_kind"] = topo.devices[0].device_kind
        meshes: dict = {}

        def mesh(names, shape):
            key = (tuple(names), tuple(shape))
            if key not in meshes:
                meshes[key] = topologies.make_mesh(topo, tuple(shape), tuple(names))
            return meshes[key]

        class Unpickler(pickle.Unpickler):
            def persistent_load(self, pid):
                if isinstance(pid, tuple) and len(pid) == 3 and pid[0] == MESH_TAG:
                    return mesh(pid[1], pid[2])
                if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == SHARDING_TAG:
                    from jax._src.lib import xla_client

                    proto = xla_client.OpSharding()
                    proto.ParseFromString(pid[1])
                    return xla_client.HloSharding.from_proto(proto)
                raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")

        with open(ns.exported, "rb") as blob:
            exported = Unpickler(blob).load()
        result["function"] = exported.fun_name
        named = getattr(exported, "_in_named_shardings", None) or ()
        if named and any(s is not None for s in named):
            shardings: list[Any] = []
            for s in named:
                if s is None:
                    shardings.append(None)
                    continue
                m = s.mesh
                sizes = tuple(m.shape[n] for n in m.axis_names)
                shardings.append(NamedSharding(mesh(m.axis_names, sizes), s.spec))
        else:
            flat = mesh(("pgle_devices",), (ns.devices,))
            shardings = list(exported.in_shardings_jax(flat))
        args = [
            jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s) if s is not None
            else jax.ShapeDtypeStruct(a.shape, a.dtype)
            for a, s in zip(exported.in_avals, shardings, strict=True)
        ]  # fmt: skip
        # The step's own argument structure (a train state, a batch dict): Exported.call
        # checks it against in_tree (jax 0.10.2), so the flat avals are refolded first.
        call_args, call_kwargs = jax.tree_util.tree_unflatten(exported.in_tree, args)
        compiled = jax.jit(exported.call).lower(*call_args, **call_kwargs).compile()
        text = compiled.as_text()
        if not text:
            raise RuntimeError("this jax gives no scheduled HLO (Compiled.as_text() is None)")
        with open(ns.hlo_out, "w") as fh:
            fh.write(text)
        result["ok"] = True
    except Exception as e:
        msg = str(e).strip().splitlines()
        result["error"] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:2000]
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
