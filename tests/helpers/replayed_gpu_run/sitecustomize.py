"""TEST-ONLY: a CPU replay workload stands in for a GPU run.

tests/workloads/replay_xla_log.py (and dist_replay.py) run real JAX on CPU and print the
XLA:GPU lines a GPU run would print, to drive pgle's workflows end to end (store serving,
per-module directories, ranks) where no real compiler can run. pgle counts XLA:GPU evidence
only from a run that compiled for a GPU (pgle/verdicts/origin.py: its harness records the
platform of every compile), so a replay alone is `not_applicable`, as it must be for any
workload that prints such lines. Loaded through PYTHONPATH into the workload's process (and
harmlessly into pgle's), this helper makes the harness record the replay's compiles as `gpu`;
everything else is real. Product code never contains this seam; the forgery test
(tests/verdicts/test_origin.py) runs the same kind of workload without it.
"""

import importlib.util
import os


def _tools():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "sitecustomize_tools.py")
    spec = importlib.util.spec_from_file_location("_pgle_sitecustomize_tools", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TOOLS = _tools()


def _patch(module):
    real = module.observe_modules
    if getattr(real, "_pgle_test", False):
        return

    def observe_modules(write, hlo_dir):
        def as_gpu(kind, **fields):
            if kind == "xla_compile":
                fields.update(platform="gpu", stand_in="tests/helpers/replayed_gpu_run")
            return write(kind, **fields)
        return real(as_gpu, hlo_dir)

    observe_modules._pgle_test = True
    module.observe_modules = observe_modules


_TOOLS.patch_after_import("pgle.launch.jax_internals", _patch)
_TOOLS.chain_next_sitecustomize(__file__)
