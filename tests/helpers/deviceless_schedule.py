"""Compile one sharded program for 8 H100s with the real XLA:GPU compiler, on a CPU machine
(deviceless; ../shared/reference/xla-gpu-deviceless.md), and print its scheduled HLO text.

Run in a venv that has jax-cuda12-plugin + jax-cuda12-pjrt (PGLE_XLA_GPU_PYTHON):

    python deviceless_schedule.py OUT.txt [PROFILE.pbtxt]

With PROFILE, XLA's latency-hiding scheduler prices instructions from it (PGLE); XLA reads
XLA_FLAGS once per process, hence one process per compile. With `--names`, prints the
names of the module's instructions a profile could price, one per line, instead.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

# The H100 SXM description of XLA's xla/backends/gpu/target_config/specs/h100_sxm.txtpb,
# reduced to the fields jaxlib 0.10.2 parses (it rejects collective_memory_granularity).
H100 = """gpu_device_info {
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 threads_per_core_limit: 2048 core_count: 132
  fpus_per_core: 128 block_dim_limit_x: 2147483647 block_dim_limit_y: 65535
  block_dim_limit_z: 65535 memory_bandwidth: 3352320000000 l2_cache_size: 52428800
  clock_rate_ghz: 1.98 device_memory_size: 84942979072 shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536 registers_per_block_limit: 65536
  device_vendor: "NVIDIA Corporation" platform_version: "Compute Capability 9.0a"
  device_address_bits: 64 pcie_bandwidth: 34359738368 ecc_enabled: true
}
platform_name: "CUDA"
dnn_version_info { major: 8 minor: 9 patch: 4 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""


def main(argv: list[str]) -> int:
    names_only = "--names" in argv
    argv = [a for a in argv if a != "--names"]
    out, profile = argv[0], (argv[1] if len(argv) > 1 else None)
    flags = "--xla_gpu_enable_latency_hiding_scheduler=true"
    if profile:
        flags += f" --xla_gpu_pgle_profile_file_or_directory_path={profile}"
    os.environ["XLA_FLAGS"] = flags
    os.environ["JAX_PLATFORMS"] = "cpu"  # lets the CUDA plugin register without a driver
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import NamedSharding, PartitionSpec as P

    topo = topologies.get_topology_desc(platform="cuda", target_config=H100, topology="1x1x8")
    mesh = topologies.make_mesh(topo, (8,), ("x",))

    def body(x, w, v):
        g = jax.lax.all_gather(v, "x", tiled=True)  # communication ...
        h = jnp.tanh(x @ w)                          # ... and compute that does not need it
        h = jnp.tanh(h @ w)
        return jax.lax.psum(h @ g, "x")              # an all-reduce

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P()))
    s = lambda spec: NamedSharding(mesh, spec)
    args = (jax.ShapeDtypeStruct((8 * 256, 1024), jnp.float32, sharding=s(P("x"))),
            jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=s(P())),
            jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=s(P("x"))))
    text = f.lower(*args).compile().as_text()
    if names_only:
        entry = text[text.index("ENTRY "):]
        text = "\n".join(n for n in re.findall(r"^\s+(?:ROOT )?%?(\S+) = ", entry, re.M)
                         if not n.endswith("-done") and not n.startswith(("param", "bitcast",
                                                                           "get-tuple", "tuple",
                                                                           "constant")))
    tmp = tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(out)) or ".",
                                      delete=False)
    tmp.write(text)
    tmp.close()
    os.replace(tmp.name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
