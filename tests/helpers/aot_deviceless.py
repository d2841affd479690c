"""Child process for tests/profiles/test_aot.py: the real XLA:GPU compiler, deviceless, for an H100.

Run with a Python that has jax + jaxlib + jax-cuda12-plugin/pjrt (PGLE_XLA_GPU_PYTHON) and
PYTHONPATH=<repo>, JAX_PLATFORMS=cpu, TF_CPP_MIN_LOG_LEVEL=0. argv[1] = mode:
  fit      fdo_profile (text) naming every instruction of the compiled module -> must be used
  partial  only the first instruction -> used, and the accuracy checker names the missing ones
  binary   the same profile in binary form (built without protobuf, wire format by hand)
  garbage  bytes that are no profile -> XLA's "Unable to parse fdo_profile"
Prints one JSON line: the verdict of pgle.aot.compile_with_profile.
"""

import json
import os
import re
import struct
import sys
import tempfile

# H100 SXM, from XLA's xla/backends/gpu/target_config/specs/h100_sxm.txtpb, trimmed to the fields
# jaxlib 0.10.2's GpuTargetConfigProto parser knows (see shared reference xla-gpu-deviceless.md).
H100 = """
gpu_device_info {
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 threads_per_core_limit: 2048 core_count: 132 fpus_per_core: 128
  block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000 l2_cache_size: 52428800 clock_rate_ghz: 1.98
  device_memory_size: 84942979072 shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536 registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 8 minor: 9 patch: 4 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""


def binary_profile(costs):
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    msg = b""
    for name, us in costs:
        raw = name.encode()
        inner = b"\x0a" + varint(len(raw)) + raw + b"\x11" + struct.pack("<d", us)
        msg += b"\x0a" + varint(len(inner)) + inner
    return msg


def main(mode):
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import NamedSharding, PartitionSpec as P

    from pgle.aot import compile_with_profile

    topo = topologies.get_topology_desc(platform="cuda", target_config=H100, topology="1x1x2")
    mesh = topologies.make_mesh(topo, (2,), ("x",))

    def body(x, w, v):
        g = jax.lax.all_gather(v, "x", tiled=True)
        h = jnp.tanh(x @ w)
        return jax.lax.psum(h @ g, "x")

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P()))
    s = lambda spec: NamedSharding(mesh, spec)
    args = (jax.ShapeDtypeStruct((512, 512), jnp.float32, sharding=s(P("x"))),
            jax.ShapeDtypeStruct((512, 512), jnp.float32, sharding=s(P())),
            jax.ShapeDtypeStruct((512, 512), jnp.float32, sharding=s(P("x"))))
    # Names of the scheduled instructions, from a compile without a profile.
    text = f.lower(*args).compile().as_text()
    entry = text[text.index("ENTRY "):]
    names = sorted(set(re.findall(r"^\s*(?:ROOT )?%?([\w.-]+) = ", entry, re.M)))
    costs = [(n, 10.0) for n in names]
    if mode == "fit":
        profile = "".join(f'costs {{ name: "{n}" cost_us: {c} }}\n' for n, c in costs).encode()
    elif mode == "partial":
        profile = "".join(f'costs {{ name: "{n}" cost_us: {c} }}\n' for n, c in costs[:1]).encode()
    elif mode == "binary":
        profile = binary_profile(costs)
    else:
        profile = b"\xff\xfe definitely not a profile"
    _, verdict = compile_with_profile(f, *args, profile=profile)
    print(json.dumps({"used": verdict.used, "status": verdict.status, "format": verdict.profile_format,
                      "modules": verdict.modules, "reasons": verdict.reasons, "names": len(names)}))


if __name__ == "__main__":
    main(sys.argv[1])
