"""Which compiled modules the harness keeps the scheduled HLO of (pgle/launch/jax_internals.py
`_has_async_ops`): those with async ops, and those with a synchronous collective, which is what
an async collective becomes when XLA makes it synchronous after scheduling on jax >= 0.11.1
(`all-reduce.6`: no `-start` left; pgle/verdicts/sync_converted.py needs that module's HLO).
Real JAX on 8 CPU devices, every collective JAX offers, in a subprocess (the device count is
fixed when jax starts).

And what the harness records of each compile (`observe_modules`, in a process of its own: it
patches jax's compile for the process): the platform once per compiling thread, each compile's
begin and end in its thread (a failed one too), and each compiled module's cost, memory and,
for a module with a collective, its scheduled HLO kept under the run's hlo/ folder. `pgle
report` and the schedule comparison read these records."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.pgle_testing import REPO, pgle_env, pythonpath, script_json

CODE = r"""
import json
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from pgle.launch.jax_internals import _has_async_ops
mesh = jax.make_mesh((8,), ("x",))
x = jax.device_put(jnp.ones((64, 8)), NamedSharding(mesh, P("x")))
bodies = {
    "psum": (lambda v: jax.lax.psum(v, "x"), P()),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v, "x", tiled=True), P("x")),
    "all_gather": (lambda v: jax.lax.all_gather(v, "x", tiled=True), P("x")),
    "ppermute": (lambda v: jax.lax.ppermute(v, "x", [(i, (i + 1) % 8) for i in range(8)]), P("x")),
    "all_to_all": (lambda v: jax.lax.all_to_all(v, "x", 0, 0, tiled=True), P("x")),
    "none": (lambda v: jnp.tanh(v) * 2.0 + v.sum(), P("x")),
}
out = {}
for name, (body, spec) in bodies.items():
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=spec))
    module = f.lower(x).compile().runtime_executable().hlo_modules()[0]
    out[name] = [_has_async_ops(module), sorted({i.opcode.name for c in module.computations()
                                                 for i in c.instructions()})]
print(json.dumps(out))
"""


def test_modules_with_a_synchronous_collective_keep_their_hlo():
    env = pgle_env(XLA_FLAGS="--xla_force_host_platform_device_count=8", PYTHONPATH=pythonpath(str(REPO)))
    proc = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, check=False,
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    collective = {"kAllReduce", "kReduceScatter", "kAllGather", "kCollectivePermute", "kAllToAll"}
    for name, (kept, opcodes) in out.items():
        has = bool(collective & set(opcodes))
        assert has == (name != "none"), (name, opcodes)  # XLA:CPU runs them synchronously
        assert kept == has, (name, opcodes)


OBSERVED = textwrap.dedent("""
    import json, os, sys, threading
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    from pgle.launch import jax_internals
    written = []
    installed = [jax_internals.observe_modules(lambda kind, **f: written.append([kind, f]),
                                               sys.argv[1]) for _ in range(2)]
    x = jnp.ones((4, 4))

    def matmul(a):
        return jnp.tanh(a @ a)

    jax.jit(matmul)(x).block_until_ready()
    mesh = jax.sharding.Mesh(jax.devices(), ("d",))
    summed = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "d"), mesh=mesh,
                                   in_specs=P("d"), out_specs=P()), )
    summed(jnp.ones((2, 4))).block_until_ready()
    summed(jnp.ones((2, 8))).block_until_ready()  # another shape: a second module kept
    other = []
    t = threading.Thread(target=lambda: other.append(
        (threading.get_native_id(), jax.jit(lambda a: a + 1)(x).block_until_ready())))
    t.start(); t.join()
    try:  # XLA refuses it: a custom call no handler is registered for
        jax.jit(lambda a: jax.ffi.ffi_call("pgle_no_such_target",
                                           jax.ShapeDtypeStruct(a.shape, a.dtype))(a))(x)
    except Exception as e:
        failed = type(e).__name__
    print(json.dumps({"installed": installed, "written": written, "pid": os.getpid(),
                      "main": threading.get_native_id(), "other": other[0][0],
                      "failed": failed}))
""")


def test_each_compile_is_recorded_with_its_thread_cost_memory_and_kept_schedule(
        tmp_path: Path) -> None:
    hlo = tmp_path / "hlo"
    out = script_json(tmp_path, "compiles.py", OBSERVED, str(hlo), timeout=120)
    assert out["installed"] == [True, True] and out["failed"] == "JaxRuntimeError"
    main, other = str(out["main"]), str(out["other"])
    written = out["written"]
    # the platform once per thread that compiles, with the process
    assert [f for k, f in written if k == "xla_compile"] == [
        {"platform": "cpu", "thread": main, "pid": out["pid"]},
        {"platform": "cpu", "thread": other, "pid": out["pid"]}]
    # each compile's begin and end, in its thread; the last one failed
    compiles = [(k, f["module"], f["thread"], f.get("fdo"), f.get("ok")) for k, f in written
                if k in ("compile_begin", "compile_end")]
    assert compiles[-2:] == [("compile_begin", "jit__lambda", main, False, None),
                             ("compile_end", "jit__lambda", main, None, False)]
    assert ("compile_begin", "jit_matmul", main, False, None) in compiles
    assert ("compile_end", "jit_matmul", main, None, True) in compiles
    assert ("compile_end", "jit__lambda", other, None, True) in compiles
    assert all(f["fdo"] is False for k, f in written if k == "compile_begin")
    modules = [f for k, f in written if k == "module_compiled"]
    assert len(modules) == sum(c[0] == "compile_end" and c[4] for c in compiles)
    (matmul,) = [m for m in modules if m["module"] == "jit_matmul"]
    # XLA's own figures for tanh of a 4x4 f32 matmul: 2*4*4*4 flops, 16 tanh, and at least
    # its 64-byte input read twice and its output written
    assert (matmul["flops"], matmul["transcendentals"], matmul["hlo_file"]) == (128.0, 16.0, None)
    assert matmul["bytes_accessed"] >= 192
    assert matmul["memory"]["argument_size_in_bytes"] == 64
    assert matmul["memory"]["output_size_in_bytes"] == 64
    assert set(matmul["memory"]) == {"argument_size_in_bytes", "output_size_in_bytes",
                                     "alias_size_in_bytes", "temp_size_in_bytes",
                                     "generated_code_size_in_bytes", "peak_memory_in_bytes"}
    # only the module with a collective keeps its schedule, numbered in compile order
    kept = [m for m in modules if m["hlo_file"]]
    assert [(m["module"], m["hlo_file"]) for m in kept] == [
        ("jit__lambda", str(hlo / "001-jit__lambda.txt")),
        ("jit__lambda", str(hlo / "002-jit__lambda.txt"))]
    for m in kept:
        text = Path(m["hlo_file"]).read_text(encoding="utf-8")
        assert text.startswith("HloModule jit__lambda") and "all-reduce" in text
    assert sorted(os.listdir(hlo)) == ["001-jit__lambda.txt", "002-jit__lambda.txt"]


RANK = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    rank, port, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=rank)
    from pgle.launch import jax_internals

    def lowered(fn):
        return jax.jit(fn).lower(jnp.ones(4)).compiler_ir()

    out = {"double": jax_internals.module_identity(lowered(lambda a: a * 2.0), folder),
           "none": jax_internals.module_identity(None, folder)}
    # this rank's own step differs (a rank that took another branch)
    mine = lowered((lambda a: a * 2.0) if rank == 0 else (lambda a: a * 3.0))
    out["mine"] = jax_internals.module_identity(mine, folder)
    out["mine_text"] = mine.operation.get_asm(enable_debug_info=False)
    blocked = folder + "-file"
    open(blocked, "w").close()  # its folder cannot be made: the identity without its text
    out["unwritable"] = jax_internals.module_identity(lowered(lambda a: a * 7.0), blocked)
    jax_internals.IDENTITY_TEXT_MAX_BYTES = out["mine"]["bytes"]  # at the cap: kept
    out["at_cap"] = jax_internals.module_identity(lowered(lambda a: a * 5.0), folder)
    jax_internals.IDENTITY_TEXT_MAX_BYTES = 10  # a module over the cap: no text kept
    out["big"] = jax_internals.module_identity(lowered(lambda a: a - 1.0), folder)
    # and as the harness records it: each compile's identity, named by its module
    jax_internals.IDENTITY_TEXT_MAX_BYTES = 1 << 20
    seen = []
    jax_internals.observe_modules(lambda kind, **f: seen.append([kind, f]), folder + "-hlo")
    jax.jit(lambda a: a * 2.0)(jnp.ones(4)).block_until_ready()
    out["observed"] = [f for k, f in seen if k == "module_identity"]
    print(json.dumps(out))
""")


def test_each_rank_names_its_modules_by_a_fingerprint_and_keeps_their_text(
        tmp_path: Path) -> None:
    """In a job of two processes (a real jax.distributed service), each module jax is about to
    compile gets an identity: the same fingerprint on every rank for the same program, another
    for another, its size, and its text (MLIR without locations) kept once under the folder,
    up to the size cap. A process outside a job, or a compile with no module, gets none."""
    import socket

    import jax
    import jax.numpy as jnp

    from pgle.launch import jax_internals

    alone = jax.jit(lambda a: a * 2.0).lower(jnp.ones(4)).compiler_ir()
    assert jax_internals.module_identity(alone, str(tmp_path)) is None  # one process
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(port),
                               str(tmp_path / f"ids-{rank}")], cwd=tmp_path,
                              env=pgle_env(PYTHONPATH=pythonpath(str(REPO))),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    zero, one = outs
    assert zero["none"] is None and zero["double"]["fingerprint"] == one["double"]["fingerprint"]
    assert zero["mine"]["fingerprint"] != one["mine"]["fingerprint"]
    for rank, out in enumerate(outs):
        fingerprint = out["mine"]["fingerprint"]
        assert len(fingerprint) == 32 and int(fingerprint, 16) >= 0
        kept = tmp_path / f"ids-{rank}" / f"module-{fingerprint}.mlir"
        assert out["mine"]["text_file"] == str(kept)
        assert kept.read_text(encoding="utf-8") == out["mine_text"]
        assert out["mine"]["bytes"] > 0 and out["big"]["text_file"] is None
        assert out["unwritable"]["text_file"] is None
        assert out["unwritable"]["bytes"] == out["mine"]["bytes"]
        assert out["big"]["bytes"] > 10 and len(out["big"]["fingerprint"]) == 32
        # one file per program (rank 0's own step is `double` again); the same size as
        # `mine` (a * 5.0 against a * 2.0 or 3.0): at the cap, kept
        assert out["at_cap"]["bytes"] == out["mine"]["bytes"] and out["at_cap"]["text_file"]
        assert sorted(os.listdir(tmp_path / f"ids-{rank}")) == sorted(
            {f"module-{out[k]['fingerprint']}.mlir" for k in ("double", "mine", "at_cap")})
        # the compile hook's record: the module's name and the identity of the same program
        fingerprint = zero["double"]["fingerprint"]
        assert [(r["module"], r["fingerprint"], r["text_file"]) for r in out["observed"]
                if r["module"] == "jit__lambda"] == [
            ("jit__lambda", fingerprint,
             str(tmp_path / f"ids-{rank}-hlo" / f"module-{fingerprint}.mlir"))]


def test_a_compile_is_said_to_hold_a_profile_only_when_its_options_carry_one():
    """Auto PGLE's recompile hands XLA the aggregated profile in
    `executable_build_options.fdo_profile` (jax 0.4.31-0.12); options without one, with an
    empty one, or of another shape (a jax that moved it) are compiles without a profile."""
    from types import SimpleNamespace

    from pgle.launch.jax_internals import _has_fdo_profile

    def options(fdo: object) -> object:
        return SimpleNamespace(executable_build_options=SimpleNamespace(fdo_profile=fdo))

    assert _has_fdo_profile(options(b"\x08\x01")) is True
    assert [_has_fdo_profile(o) for o in (options(b""), options(None), object(), None)] == [
        False] * 4


class _TextOnly:
    """A compiled module of a jaxlib whose HloModule has no `computations()`: only its text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def to_string(self) -> str:
        return self.text


def test_a_module_known_only_by_its_text_is_kept_for_its_async_pairs_or_a_collective():
    """Lines as XLA prints a scheduled module: an async pair's start or its done alone (the
    other half renamed, as a fusion can), or a synchronous collective, keep the module; a
    module of compute alone, or one that only names a collective in an attribute, is not."""
    from pgle.launch.jax_internals import _has_async_ops

    start = "  %all-gather-start = (f32[8]{0}, f32[16]{0}) all-gather-start(f32[8]{0} %p)"
    done = "  %ag.2 = f32[16]{0} all-gather-done((f32[8]{0}, f32[16]{0}) %ag.1)"
    sync = "  %all-reduce = f32[8]{0} all-reduce(f32[8]{0} %p), to_apply=%add"
    compute = "  %fusion = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop, calls=%fused_tanh"
    named = '  %add.1 = f32[] add(f32[] %a, f32[] %b), metadata={op_name="all-reduce"}'
    kept = {name: _has_async_ops(_TextOnly(f"HloModule m\n{compute}\n{line}\n"))
            for name, line in (("start", start), ("done", done), ("sync", sync),
                               ("compute", compute), ("named", named))}
    assert kept == {"start": True, "done": True, "sync": True, "compute": False,
                    "named": False}


FDO = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    from jax._src import compiler, xla_bridge  # the compile auto PGLE's recompile goes through
    from jax._src.lib import xla_client as xc
    from pgle.launch import jax_internals
    written = []
    jax_internals.observe_modules(lambda kind, **f: written.append([kind, f]), sys.argv[1])
    lowered = jax.jit(lambda a: jnp.tanh(a) * 2.0).lower(jnp.ones(4))
    devices = np.array(jax.devices()[:1])
    for fdo in (b"", open(sys.argv[2], "rb").read()):
        options = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                               device_assignment=devices.reshape(1, 1))
        options.executable_build_options.fdo_profile = fdo
        compiler.compile_or_get_cached(xla_bridge.get_backend("cpu"),
                                       lowered.compiler_ir("stablehlo"), devices, options, [],
                                       xc.DeviceList(tuple(devices.flat)))
    print(json.dumps([f["fdo"] for k, f in written
                      if k == "compile_begin" and f["module"].startswith("jit__lambda")]))
""")


def test_a_compile_handed_a_profile_is_recorded_as_one(tmp_path):
    """jax's compile as auto PGLE's recompile calls it (jax 0.10.2: the options fourth and
    positional), once without a profile and once with one (a real profile.pb's bytes):
    the compile's begin record says which (the auto verdict reads it)."""
    from helpers.pgle_testing import write_profile

    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    assert script_json(tmp_path, "fdo.py", FDO, str(tmp_path / "hlo"),
                       str(tmp_path / "p.pb"), timeout=120) == [False, True]
