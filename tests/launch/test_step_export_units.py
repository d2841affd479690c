"""`pgle estimate`'s export of the step for CUDA (pgle.launch.step_export), in process on this
machine's real jax: each function's record in the index, numbered files, the mesh written as
its names and shape (CPU devices do not pickle), a function that cannot export said in one
line (issue 37: it ran only inside estimate's workload process)."""

from __future__ import annotations

import io
import json
import pickle

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pgle.launch import step_export


class _Reader(pickle.Unpickler):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.tags: list[tuple] = []

    def persistent_load(self, pid):
        self.tags.append(pid)
        tag, names, shape = pid
        return Mesh(np.array(jax.devices()[:1]).reshape(shape), names)


def test_each_function_is_exported_for_cuda_and_indexed(tmp_path):
    folder = tmp_path / "export"
    exporter = step_export.Exporter(str(folder))
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    x = jax.device_put(jnp.ones((4, 4)), NamedSharding(mesh, PartitionSpec("data", None)))
    exporter("jit(step)", jax.jit(lambda a, b: a @ a * b), (x,), {"b": 2.0})
    exporter("plain(f)", lambda a: a, (x,), {})  # not jitted: jax.export refuses it
    lines = [json.loads(l) for l in (folder / step_export.INDEX).read_text().splitlines()]
    assert lines[0] == {"function": "jit(step)", "file": "1.pkl", "nr_devices": 1}
    assert lines[1]["function"] == "plain(f)" and set(lines[1]) == {"function", "error"}
    assert lines[1]["error"].startswith(
        "ValueError: Function to be exported must be the result of `jit`")
    assert sorted(p.name for p in folder.iterdir()) == ["1.pkl", step_export.INDEX]
    reader = _Reader((folder / "1.pkl").read_bytes())
    exported = reader.load()
    # A concrete mesh (CPU devices do not pickle) is written as its names and shape.
    pickler = step_export._Pickler(io.BytesIO())
    assert pickler.persistent_id(mesh) == ("pgle-mesh", ("data", "model"), (1, 1))
    assert pickler.persistent_id(x.sharding) is None and pickler.persistent_id(3) is None
    assert exported.platforms == ("cuda",) and exported._get_vjp is None
    assert [a.shape for a in exported.in_avals] == [(4, 4), ()]
    assert exporter.count == 2


def test_an_empty_error_message_is_the_exception_name(tmp_path):
    exporter = step_export.Exporter(str(tmp_path / "e"))

    class Quiet(Exception):
        def __str__(self) -> str:
            return ""

    def refuses(*a, **k):
        raise Quiet()

    exporter("jit(q)", jax.jit(refuses), (jnp.ones(2),), {})  # raises while it is traced
    (line,) = (tmp_path / "e" / step_export.INDEX).read_text().splitlines()
    assert json.loads(line) == {"function": "jit(q)", "error": "Quiet: "}
    # A message of several lines: its first.
    exporter2 = step_export.Exporter(str(tmp_path / "m"))

    def loud(a):
        raise RuntimeError("first line\nsecond line")

    exporter2("jit(l)", jax.jit(loud), (jnp.ones(2),), {})
    (line,) = (tmp_path / "m" / step_export.INDEX).read_text().splitlines()
    assert json.loads(line) == {"function": "jit(l)", "error": "RuntimeError: first line"}


def test_an_hlo_sharding_is_written_as_its_proto_and_the_folder_may_exist(tmp_path):
    from jax._src.lib import xla_client

    sharding = xla_client.HloSharding.replicate()  # what jax <= 0.8.3 keeps in an Exported
    pickler = step_export._Pickler(io.BytesIO())
    assert pickler.persistent_id(sharding) == (
        "pgle-hlo-sharding", sharding.to_proto().SerializeToString())

    class Proto:  # another object with a to_proto (an OpSharding-like): pickled as it is
        def to_proto(self) -> bytes:
            raise AssertionError("not an HloSharding: never turned into a proto")

    assert pickler.persistent_id(Proto()) is None
    (tmp_path / "there").mkdir()
    step_export.Exporter(str(tmp_path / "there"))  # a folder already there is used


def test_each_arguments_sharding_goes_into_the_export(tmp_path):
    """The step is compiled for the GPU as the workload placed its arguments: an array kept in
    pinned host memory (host offload) stays there in the exported module, and its partition
    spec names the mesh axis (issue 37: arguments exported without their shardings passed)."""
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    on_host = NamedSharding(mesh, PartitionSpec("data", None), memory_kind="pinned_host")
    x = jax.device_put(jnp.ones((4, 4)), on_host)
    exported = step_export.export(jax.jit(lambda a: a * 2), (x,), {})
    (main,) = [line for line in exported.mlir_module().splitlines()
               if "func public @main" in line]
    argument = main.split("%arg0:", 1)[1].split(" loc(", 1)[0]
    assert 'mhlo.memory_kind = "pinned_host"' in argument, main
    assert '"data"' in argument, main
    assert exported.in_avals[0].shape == (4, 4)
