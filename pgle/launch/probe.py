"""What jax sees in a given environment, from a short child process (jax is never imported
into pgle's own process): platform, device kinds and count, jax version, why a backend failed.

`pgle doctor` shows it; `--store` runs use it to pick the store's view before the workload
starts (XLA reads the profile directory at the workload's first compile, before the harness
can report the backend), and then check it against the run's own backend event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def backend_info(environ: dict[str, str]) -> dict:
    env = dict(environ)
    # Flags are checked on their own; a removed one would abort this child.
    env.pop("XLA_FLAGS", None)
    # Starting a GPU client must not grab 75% of a GPU another job may be using.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    try:
        proc = subprocess.run([sys.executable, "-c", _BACKEND_CHILD], env=env,
                              capture_output=True, text=True, errors="replace",
                              timeout=BACKEND_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              cwd=os.path.abspath(os.sep))  # no local jax.py shadows jax
    except subprocess.TimeoutExpired:
        return {"error": f"jax did not list its devices within {BACKEND_TIMEOUT_S:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {"error": f"the jax process died (exit code {proc.returncode}): "
                     f"{tail[-1][:300] if tail else 'no output'}"}
