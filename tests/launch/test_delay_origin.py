"""`--delay` counts from the workload's start, not from when JAX came up (README "collect": the
time window): a script that spends its first seconds before `import jax` (data loading) gets
its window as soon as the backend is up once the delay has passed, not a second delay later."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.pgle_testing import report_of, run_pgle

SCRIPT = """\
import time
time.sleep(4)  # before jax: longer than --delay
import jax
import jax.numpy as jnp
f = jax.jit(lambda x: x + 1)
t = time.time()
while time.time() - t < 4:
    f(jnp.ones(4)).block_until_ready()
"""


def test_delay_counts_from_the_workloads_start(project):
    (project / "late_jax.py").write_text(SCRIPT)
    proc = run_pgle("collect", "--delay", "3", "--duration", "0.5", "-o", "p.pb", "--allow-empty",
                    "--json", "late_jax.py", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    run = Path(report_of(proc)["run_dir"])
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    t = {e["kind"]: e["t"] for e in reversed(events)}  # the first of each kind
    # The delay had passed when the backend came up (4 s of sleep > 3 s): the window opens
    # then. Counted from the backend instead, it would open 3 s (by time.sleep, at least) later.
    assert t["trace_start"] - t["start"] >= 3.0
    assert t["backend"] - t["start"] >= 4.0
    assert t["trace_start"] - t["backend"] < 3.0, (t["trace_start"] - t["backend"])
