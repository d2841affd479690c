"""What jax sees in a given environment, from a short child process (jax is never imported
into pgle's own process): platform, device kinds and count, jax version, why a backend failed.

`pgle doctor` shows it; `--store` runs use it to pick the store's view before the workload
starts (XLA reads the profile directory at the workload's first compile, before the harness
can report the backend), and then check it against the run's own backend event.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from pgle.xla import flag_probe

BACKEND_TIMEOUT_S = 30.0
_MARK = "PGLE_BACKEND_PROBE"
_BACKEND_CHILD = f"""
import json
out = {{}}
try:
    import jax
    devs = jax.devices()
    out = {{"platform": devs[0].platform, "kinds": sorted({{d.device_kind for d in devs}}),
           "count": len(devs), "jax": jax.__version__}}
    try:
        out["platform_version"] = devs[0].client.platform_version
    except Exception:
        pass
    try:
        # No public API names why a backend failed to start (jax 0.4.31-0.10.2).
        from jax._src import xla_bridge
        out["backend_errors"] = dict(getattr(xla_bridge, "_backend_errors", {{}}))
    except Exception:
        pass
except Exception as e:
    lines = str(e).strip().splitlines() or [""]
    out = {{"error": (type(e).__name__ + ": " + lines[0])[:300]}}
print("{_MARK} " + json.dumps(out), flush=True)
"""


def backend_info(environ: dict[str, str]) -> dict[str, Any]:
    proc = _run_child(_BACKEND_CHILD, environ, BACKEND_TIMEOUT_S)
    if proc is None:
        return {"error": f"jax did not list its devices within {BACKEND_TIMEOUT_S:g} s"}
    return _result(proc, _MARK, "the jax process")


def _run_child(
    code: str, environ: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """A short jax child (pgle.xla.flag_probe.run_child), None when it outlives `timeout`.
    Without XLA_FLAGS: flags are checked on their own, and a removed one would abort it."""
    env = dict(environ)
    env.pop("XLA_FLAGS", None)
    # Starting a GPU client must not grab 75% of a GPU another job may be using.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return flag_probe.run_child(code, env, timeout)


def _result(proc: subprocess.CompletedProcess[str], mark: str, who: str) -> dict[str, Any]:
    """The JSON the child printed after `mark`, or {error} with the last line it wrote."""
    for line in proc.stdout.splitlines():
        if line.startswith(mark):
            info: dict[str, Any] = json.loads(line[len(mark) :])  # the child prints an object
            return info
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {
        "error": f"{who} died (exit code {proc.returncode}): "
        f"{tail[-1][:300] if tail else 'no output'}"
    }


# -- `pgle doctor --probe`: can the JAX profiler trace this GPU? ------------------------------
#
# CUPTI admits one subscriber per process and, with some drivers, per GPU: a DCGM profiling
# module or another profiler attached to the GPU makes every trace come back without kernels
# (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED in XLA's log), so `pgle collect` and auto
# PGLE get empty profiles on every host, found only after the job. The probe traces a jitted
# matmul for about a second in a child, as `pgle collect` does, and asks jaxlib for the PGLE
# profile of that trace (jax.experimental.profiler.get_profiled_instructions_proto): non-empty
# means the trace held device events PGLE can use.
CUPTI_TIMEOUT_S = 120.0
CUPTI_TRACE_S = 1.0
_CUPTI_MARK = "PGLE_CUPTI_PROBE"
_CUPTI_CHILD = f"""
import glob, json, os, sys, tempfile, time
out = {{}}
try:
    import jax, jax.numpy as jnp
    from jax.experimental import profiler as jax_profiler
    out["platform"] = jax.devices()[0].platform
    if out["platform"] in ("gpu", "cuda"):
        f = jax.jit(lambda a: a @ a)
        x = jnp.ones((1024, 1024), jnp.float32)
        f(x).block_until_ready()
        folder = tempfile.mkdtemp(prefix="pgle-cupti-")
        jax.profiler.start_trace(folder)
        t0 = time.time()
        n = 0
        while time.time() - t0 < {CUPTI_TRACE_S}:
            f(x).block_until_ready()
            n += 1
        jax.profiler.stop_trace()
        runs = sorted(glob.glob(os.path.join(folder, "plugins", "profile", "*")))
        out["executions"] = n
        out["trace"] = runs[-1] if runs else None
        out["profile_bytes"] = len(jax_profiler.get_profiled_instructions_proto(runs[-1])) \\
            if runs else 0
except Exception as e:
    lines = str(e).strip().splitlines() or [""]
    out["error"] = (type(e).__name__ + ": " + lines[0])[:300]
print("{_CUPTI_MARK} " + json.dumps(out), flush=True)
"""
CUPTI_ERRORS = ("CUPTI_ERROR", "cupti", "CUPTI")


def cupti_trace(environ: dict[str, str]) -> dict[str, Any]:
    """{platform, executions, profile_bytes, trace, cupti_lines} from a one-second trace in a
    child, or {error}."""
    # auto PGLE's session would collide with the probe's
    env = {k: v for k, v in environ.items() if k != "JAX_ENABLE_PGLE"}
    proc = _run_child(_CUPTI_CHILD, env, CUPTI_TIMEOUT_S)
    if proc is None:
        return {"error": f"the one-second trace did not finish within {CUPTI_TIMEOUT_S:g} s"}
    cupti = [
        ln.strip()[:300] for ln in proc.stderr.splitlines() if any(m in ln for m in CUPTI_ERRORS)
    ]
    return {**_result(proc, _CUPTI_MARK, "the tracing process"), "cupti_lines": cupti[:5]}
