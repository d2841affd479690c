"""TEST-ONLY: give `pgle collect --per-module` a small non-empty profile per module on CPU.

Loaded into pgle's own process (not the workload's) through `PYTHONPATH`; product code never
contains this seam. On CPU the JAX profiler records no device kernels and XLA:CPU logs no
module fingerprints, so pgle's per-module converter (`pgle.profiles.convert.
convert_trace_detailed`) returns no profile. This helper wraps that one conversion: when the
real result holds no profile, it returns one profile per `Fingerprint before LHS` line of the
run's own log (tests/workloads/replay_xla_log.py, scenario `lookup`, prints XLA:GPU's exact
line), with cost PGLE_TEST_STORE_COST (default 10.0) so a test can tell runs apart.
Everything else is real: the workload process, its events (jax version, backend, device kind),
the trace, the store, the view XLA is pointed at.
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
    real = module.convert_trace_detailed
    if getattr(real, "_pgle_test", False):
        return

    def convert_trace_detailed(run_dir, *args, per_module, log_path=None, **kwargs):
        conv = real(run_dir, *args, per_module=per_module, log_path=log_path, **kwargs)
        if not per_module or conv.profiles or log_path is None:
            return conv
        from pgle.profiles.files import Profile

        cost = float(os.environ.get("PGLE_TEST_STORE_COST", "10.0"))
        fps, _ = module.read_log_fingerprints(log_path)
        conv.profiles = {fp: Profile(costs=[("fusion.0", cost), ("all-reduce.1", 2 * cost)])
                         for fp in fps.values()}
        conv.modules = [module.ModuleSummary(name, pid, fp, "log", 2, 2)
                        for (name, pid), fp in sorted(fps.items())]
        return conv

    convert_trace_detailed._pgle_test = True
    module.convert_trace_detailed = convert_trace_detailed


_TOOLS.patch_after_import("pgle.profiles.convert", _patch)
_TOOLS.chain_next_sitecustomize(__file__)
