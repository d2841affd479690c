"""What the harness sees of JAX's auto PGLE (jax_internals.observe_pgle), on real jax (CPU) in
a process of its own (it patches jax for the process): each execution auto PGLE profiles is
one `pgle_profiled` record naming its module, which of the profiled runs it was and the
profile's size; a profiling session that cannot start (the script's own trace holds the
profiler) is one `pgle_session_error`; every execution jax dispatches through the profiler's
hook is counted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.pgle_testing import REPO, pgle_env, pythonpath

SCRIPT = textwrap.dedent("""
    import json, sys, threading
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_pgle", True)
    jax.config.update("jax_pgle_profiling_runs", 2)
    from pgle.launch import jax_internals
    x = jnp.ones((8, 8))
    written, executions = [], [0]

    def counted():
        executions[0] += 1

    out = {"installed": jax_internals.observe_pgle(
        lambda kind, **fields: written.append([kind, fields]), counted)}
    again = []  # a second install is none: its write is never called
    out["again"] = jax_internals.observe_pgle(lambda kind, **fields: again.append(kind))

    @jax.jit
    def step(a):
        return jnp.tanh(a @ a)

    for _ in range(4):
        x = step(x)
    x.block_until_ready()
    jax.profiler.start_trace(sys.argv[1])  # the script's own trace holds the profiler

    @jax.jit
    def other(a):
        return a * 2.0

    try:
        other(x).block_until_ready()
    except Exception as e:
        out["raised"] = str(e).splitlines()[0]
    jax.profiler.stop_trace()
    out["written"] = [w for w in written if w[1]["module"] in ("jit_step", "jit_other")]
    out["executions"] = executions[0]
    out["written_again"] = again
    out["thread"] = threading.get_native_id()
    print(json.dumps(out))
""")


def test_auto_pgles_profiled_executions_and_a_refused_session_are_recorded(
        tmp_path: Path) -> None:
    script = tmp_path / "observed.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "trace")], cwd=tmp_path,
                          env=pgle_env(PYTHONPATH=pythonpath(str(REPO))),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["installed"], out["again"], out["written_again"]) == (True, True, [])
    me = out["thread"]
    busy = "ALREADY_EXISTS: Another profiling session active."
    assert out["raised"] == busy  # jax's own error still reaches the script
    assert out["written"] == [
        # CPU: the profiler records no device kernels, so each profile is empty
        ["pgle_profiled", {"module": "jit_step", "index": 1, "runs": 2, "profile_bytes": 0,
                           "thread": me}],
        ["pgle_profiled", {"module": "jit_step", "index": 2, "runs": 2, "profile_bytes": 0,
                           "thread": me}],
        ["pgle_session_error", {"module": "jit_other", "thread": me, "error": busy,
                                "holder_module": None, "holder_thread": None}],
    ], out["written"]
    assert out["executions"] >= 4, out  # at least step's own, each counted as it is dispatched
