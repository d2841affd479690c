"""Inside the workload, for `pgle estimate`: each jitted function that reaches the step rule's
minimum of executions (pgle.launch.step_rule) is exported for CUDA with the arguments of that
call, so that XLA:GPU can compile the user's own step without a GPU (pgle.estimate).

`jax.export.export(jitted, platforms=["cuda"])` traces and lowers on any backend (checked with
jax 0.10.2 on 8 emulated CPU devices); the arguments go in as ShapeDtypeStructs with their
shardings. The `Exported` is pickled (its `serialize()` needs the flatbuffers package, which
jax does not install): a concrete `Mesh` (CPU devices, which do not pickle) is written as its
axis names and shape, and the compile child builds the same mesh from the GPU topology's
devices (pgle.estimate.compile_child). Writes `<dir>/<n>.pkl` and one line per function to
`<dir>/index.jsonl`: `{"function", "file"}` or `{"function", "error"}`. Stdlib and jax only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import threading
from collections.abc import Callable
from typing import Any

INDEX = "index.jsonl"
MESH_TAG = "pgle-mesh"
SHARDING_TAG = "pgle-hlo-sharding"  # jax <= 0.8.3 keeps HloShardings, which do not pickle


class Exporter:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.count = 0
        os.makedirs(folder, exist_ok=True)

    def __call__(
        self, name: str, jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        with self.lock:
            self.count += 1
            number = self.count
        record: dict[str, Any] = {"function": name}
        try:
            exported = export(jitted, args, kwargs)
            path = os.path.join(self.folder, f"{number}.pkl")
            with open(path, "wb") as fh:
                _Pickler(fh).dump(exported)
            record["file"] = os.path.basename(path)
            record["nr_devices"] = getattr(exported, "nr_devices", None)
        except Exception as e:
            record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        with self.lock, open(os.path.join(self.folder, INDEX), "a") as fh:
            fh.write(json.dumps(record) + "\n")


def export(jitted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import jax

    # jax's ShapeDtypeStruct.__init__ is unannotated (jax 0.10.2): called through a typed name.
    shape_dtype: Callable[..., Any] = jax.ShapeDtypeStruct

    def spec(x: Any) -> Any:
        if isinstance(x, jax.Array):
            return shape_dtype(x.shape, x.dtype, sharding=x.sharding)
        return x

    args, kwargs = jax.tree_util.tree_map(spec, (args, kwargs))
    exported = jax.export.export(jitted, platforms=["cuda"])(*args, **kwargs)
    # The VJP builder is a closure over the workload's function: not picklable, not needed.
    return dataclasses.replace(exported, _get_vjp=None)


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        from jax.sharding import Mesh

        if isinstance(obj, Mesh):
            return (MESH_TAG, tuple(obj.axis_names), tuple(obj.devices.shape))
        if type(obj).__name__ == "HloSharding" and hasattr(obj, "to_proto"):
            return (SHARDING_TAG, obj.to_proto().SerializeToString())
        return None
