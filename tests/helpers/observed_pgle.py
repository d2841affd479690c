"""Auto PGLE as jax_internals.observe_pgle sees it (tests/workloads/observe_pgle_script.py), run
by any interpreter: this machine's (tests/launch/test_observe_pgle.py) and every jax of the
lane's matrix (tests/xla_gpu/test_observe_pgle_versions.py). One script, one expectation:
what the observer writes is the same on every jax version pgle supports."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.pgle_testing import WORKLOADS

SCRIPT = WORKLOADS / "observe_pgle_script.py"
BUSY = "ALREADY_EXISTS: Another profiling session active."


def run(python: str, tmp: Path, env: dict[str, str], script: Path = SCRIPT) -> dict:
    """Run `script` (argv[1]: its own trace's folder); the JSON of its last line."""
    proc = subprocess.run([python, str(script), str(tmp / "trace")], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(out: dict) -> None:
    """Each profiled execution of `step` names its module, its run and the profile's size, the
    refused session names `other`; jax's own error still reaches the script."""
    assert (out["installed"], out["again"], out["written_again"]) == (True, True, [])
    me = out["thread"]
    assert out["raised"] == BUSY
    assert out["written"] == [
        # CPU: the profiler records no device kernels, so each profile is empty
        ["pgle_profiled", {"module": "jit_step", "index": 1, "runs": 2, "profile_bytes": 0,
                           "thread": me}],
        ["pgle_profiled", {"module": "jit_step", "index": 2, "runs": 2, "profile_bytes": 0,
                           "thread": me}],
        ["pgle_session_error", {"module": "jit_other", "thread": me, "error": BUSY,
                                "holder_module": None, "holder_thread": None}],
    ], out["written"]
    assert out["executions"] >= 4, out  # at least step's own, each counted as it is dispatched
