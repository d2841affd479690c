"""TEST-ONLY: give each rank's `pgle collect` a small non-empty profile on CPU.

Loaded by tests/jobs/test_multiprocess_collect.py through `PYTHONPATH`; product code never contains
this seam. On CPU the JAX profiler records no device kernels, so jaxlib's
`get_profiled_instructions_proto(run_folder)` (called by pgle/profiles/jaxlib.py in pgle's own process,
after the workload's real profiled window) returns an empty profile. This helper wraps that one
conversion: when the real result is empty it returns a tiny valid ProfiledInstructionsProto that
depends on the rank (SLURM_PROCID), so the merge on rank 0 has real numbers to combine.
Everything else is real: the two JAX processes, the profiler window, the trace on disk, the job
folder, the merge.

Knobs (environment):
  PGLE_TEST_EMPTY_RANKS=1,2         these ranks keep the real (empty) profile
  PGLE_TEST_OTHER_PROGRAM_RANKS=1   these ranks get names no other rank has
"""

import importlib.util
import os
import struct

def _tools():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "sitecustomize_tools.py")
    spec = importlib.util.spec_from_file_location("_pgle_sitecustomize_tools", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TOOLS = _tools()


_TARGET = "jax.experimental.profiler"


def _ranks(var):
    return {int(x) for x in os.environ.get(var, "").split(",") if x.strip()}


def _encode(costs):
    """ProfiledInstructionsProto { costs { name, cost_us } ... }, hand-encoded (field 1 of
    field 1 is the name, field 2 a double)."""
    out = b""
    for name, cost in costs:
        raw = name.encode()
        entry = b"\x0a" + bytes([len(raw)]) + raw + b"\x11" + struct.pack("<d", cost)
        out += b"\x0a" + bytes([len(entry)]) + entry
    return out


def _fake(rank):
    if rank in _ranks("PGLE_TEST_OTHER_PROGRAM_RANKS"):
        return _encode([("convolution.7", 3.0), ("custom-call.9", 4.0), ("copy.3", 1.0)])
    return _encode([("fusion.0", 10.0 * (rank + 1)), ("all-reduce.1", 100.0 * (rank + 1)),
                    ("fusion.2", 5.0)])


def _patch(module):
    real = module.get_profiled_instructions_proto
    if getattr(real, "_pgle_test", False):
        return

    def get_profiled_instructions_proto(tensorboard_dir, *args, **kwargs):
        data = real(tensorboard_dir, *args, **kwargs)
        rank = int(os.environ.get("SLURM_PROCID", "0"))
        if data or rank in _ranks("PGLE_TEST_EMPTY_RANKS"):
            return data
        return _fake(rank)

    get_profiled_instructions_proto._pgle_test = True
    module.get_profiled_instructions_proto = get_profiled_instructions_proto


def _patch_plane_check(module):
    # pgle skips the conversion of a trace without a GPU plane (all of them on CPU); this
    # helper's fake conversion stands for a GPU trace, so the check must say there is one.
    module.has_gpu_plane = lambda run_folder, *a, **k: True


_TOOLS.patch_after_import(_TARGET, _patch)
_TOOLS.patch_after_import("pgle.profiles.jaxlib", _patch_plane_check)
_TOOLS.chain_next_sitecustomize(__file__)
