"""`jax.experimental.pjit.pjit` under the harness's hook (`_hook_pjit`): its calls counted as
jit, and what importing it warned. argv[1]: a folder for the events file. Run by
tests/launch/test_harness_units.py (this jax) and tests/xla_gpu/test_observe_pgle_versions.py
(the lane's jax on both sides of pjit's deprecation)."""
import json, os, sys, warnings
import jax, jax.numpy as jnp
from pgle.launch import harness
events = harness.Events(os.path.join(sys.argv[1], "events.jsonl"))
counter = harness.JitCounter()
harness._hook_pjit(counter, harness.ProfilerWindow(None, events, None))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from jax.experimental.pjit import pjit

def step(a):
    return a * 2.0

f = pjit(step)
outs = [f(jnp.ones(3)).tolist() for _ in range(3)]
# As the harness does at exit: a watcher thread left waiting inside jaxlib while the
# interpreter tears down aborted the process (jax 0.8.3, 1 run in 5: "exception not rethrown").
counter.watcher.finish(30.0)
events.close()
print(json.dumps({"warned": [c.category.__name__ for c in caught], "outs": outs,
                  "functions": [[s["function"], s["executions"]] for s in counter.snapshot()]}))
