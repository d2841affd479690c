"""What pgle runs in the workload's thread per marked step, counted in frames (issue 33).

On a short marked step that calls one jitted function, each Python frame pgle adds costs
several times what it costs in a bare loop of the hooks (the execution in between evicts the
interpreter's state from the caches): with the step hooks in frames of their own and a
jitted call's count, pgle ran five frames a step. A real `pgle run` of a real jax script on
CPU; the script counts the Python calls its own thread makes (sys.setprofile, per thread)
over steps taken after the count-only path began (LIGHT_AFTER_STEPS), and the step records
and execution counts must stay exact."""

from __future__ import annotations

import json

from helpers import step_records
from helpers.pgle_testing import run_pgle, write_profile

from pgle.launch.harness import LIGHT_AFTER_STEPS

WARM = 2 * LIGHT_AFTER_STEPS
COUNTED = 50

SCRIPT = f"""
import collections, json, sys
import jax, jax.numpy as jnp

jax.config.update("jax_cpu_enable_async_dispatch", False)
step = jax.jit(lambda x: jnp.tanh(x @ x.T).sum(axis=0))
x = jnp.ones((8, 8))
calls = collections.Counter()

def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.endswith("harness.py"):
        calls[frame.f_code.co_qualname] += 1

for i in range({WARM} + {COUNTED}):
    if i == {WARM}:
        sys.setprofile(profile)
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        step(x).block_until_ready()
sys.setprofile(None)
with open(sys.argv[1], "w") as f:
    json.dump(calls, f)
"""


def test_a_short_marked_step_runs_three_pgle_frames(tmp_path):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    (tmp_path / "w.py").write_text(SCRIPT)
    proc = run_pgle(
        "run", "--profile", "p.pb", "--run-dir", "r", "w.py", "calls.json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    calls = json.loads((tmp_path / "calls.json").read_text())
    # The marker's two methods (the hooks inline) and the jitted call's count, once each.
    assert calls == {
        "Harness.step_class.<locals>.StepTraceAnnotation.__init__": COUNTED,
        "Harness.step_class.<locals>.StepTraceAnnotation.__exit__": COUNTED,
        "_counted_call": COUNTED,
    }
    events = step_records.old_lines(tmp_path / "r" / "events.jsonl")
    enters = [e for e in events if e["kind"] == "step_enter"]
    exits = [e for e in events if e["kind"] == "step_exit"]
    assert [e["step_num"] for e in enters] == list(range(WARM + COUNTED))
    assert [e["index"] for e in exits] == list(range(WARM + COUNTED))
    (jit,) = [e for e in events if e["kind"] == "jit_functions"]
    assert [(f["function"], f["executions"]) for f in jit["functions"]] == [
        ("jit(<lambda>)", WARM + COUNTED)
    ]
