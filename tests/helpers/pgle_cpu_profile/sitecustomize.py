"""TEST-ONLY: hand JAX's auto PGLE a small non-empty profile on CPU.

Loaded by tests through `PYTHONPATH=tests/helpers/pgle_cpu_profile`; product
code never contains this seam.

Why: on CPU the JAX profiler records no device kernels, so
`jax._src.lib._profiler.get_fdo_profile(xspace)` returns b'' for every
profiled execution, the aggregated profile is empty, and JAX never compiles or
caches a PGLE-optimized executable. This helper replaces only that one
conversion (trace -> ProfiledInstructionsProto bytes) with a tiny valid proto
when the real one is empty. Everything else is JAX's real code: the profiler
sessions, `aggregate_profiled_instructions`, the recompilation with
`fdo_profile`, the `b"pgle profiled"` cache key, EXPECT_PGLE loads, misses and
writes. XLA:CPU ignores `fdo_profile`, so the executables are unchanged.

Checked against jax/jaxlib 0.10.2 (`jax/_src/profiler.py`: `PGLEProfiler.trace`
calls `_profiler.get_fdo_profile(xspace)`, where `_profiler` is the module
global bound by `from jax._src.lib import _profiler`).

JAX is not imported here (that would change the workload's start-up and read
JAX_* variables too early): a meta-path hook patches `jax._src.profiler` right
after the workload's own `import jax` executes it.

Knobs (environment): PGLE_TEST_CPU_PROFILE=0 turns the helper off;
PGLE_TEST_CPU_PROFILE_LOG=FILE appends one line per profile handed over.
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


_TARGET = "jax._src.profiler"


def _fake_profile() -> bytes:
    """ProfiledInstructionsProto { costs { name: "fusion.0" cost_us: 12.5 } }, hand-encoded.

    Hand-encoded so the helper needs neither protobuf nor jax at start-up:
    field 1 (costs, length-delimited) holding field 1 (name, string) and
    field 2 (cost_us, double, fixed64).
    """
    name = b"fusion.0"
    cost = b"\x0a" + bytes([len(name)]) + name + b"\x11" + struct.pack("<d", 12.5)
    return b"\x0a" + bytes([len(cost)]) + cost


class _ProfilerProxy:
    """Delegates to jaxlib's `_profiler` module except for `get_fdo_profile`."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def get_fdo_profile(self, xspace, *args, **kwargs):
        real = self._real.get_fdo_profile(xspace, *args, **kwargs)
        if real:
            return real  # a backend that really profiles keeps its own profile
        log = os.environ.get("PGLE_TEST_CPU_PROFILE_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()} handed fake profile\n")
        return _fake_profile()


def _patch(module) -> None:
    real = getattr(module, "_profiler", None)
    if real is not None and not isinstance(real, _ProfilerProxy):
        module._profiler = _ProfilerProxy(real)


if os.environ.get("PGLE_TEST_CPU_PROFILE", "1") != "0":
    _TOOLS.patch_after_import(_TARGET, _patch)

_TOOLS.chain_next_sitecustomize(__file__)
