"""TEST-ONLY: give each rank's `pgle collect` a small non-empty profile on CPU.

Loaded by tests/test_multiprocess_collect.py through `PYTHONPATH`; product code never contains
this seam. On CPU the JAX profiler records no device kernels, so jaxlib's
`get_profiled_instructions_proto(run_folder)` (called by pgle/trace.py in pgle's own process,
after the workload's real profiled window) returns an empty profile. This helper wraps that one
conversion: when the real result is empty it returns a tiny valid ProfiledInstructionsProto that
depends on the rank (SLURM_PROCID), so the merge on rank 0 has real numbers to combine.
Everything else is real: the two JAX processes, the profiler window, the trace on disk, the job
folder, the merge.

Knobs (environment):
  PGLE_TEST_EMPTY_RANKS=1,2         these ranks keep the real (empty) profile
  PGLE_TEST_OTHER_PROGRAM_RANKS=1   these ranks get names no other rank has
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import struct
import sys

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


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


if _TARGET in sys.modules:
    _patch(sys.modules[_TARGET])
else:
    sys.meta_path.insert(0, _Finder())

# Run the sitecustomize this file shadows, if any.
_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None and _spec.origin != os.path.abspath(__file__):
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
