"""Auto PGLE observed by pgle's jax_internals.observe_pgle, in a process of its own (it
patches jax for the process): `step` profiled twice, then `other` refused a profiling session
while the script's own trace (argv[1]) holds the profiler. Prints one JSON line of what the
observer wrote (tests/helpers/observed_pgle.py reads it)."""
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
