"""Test workload: real JAX steps on CPU; reports the logging variables it received.

Prints `VMODULE_ECHO {json}` on stdout (TF_CPP_VMODULE, TF_CPP_MIN_LOG_LEVEL) and, on stderr,
the VLOG line XLA:GPU prints with TF_CPP_VMODULE=gpu_hlo_schedule=1 (exact wording of
gpu_hlo_schedule.cc, absl prefix), so a test can see that collect reads the run's log.
"""
import json
import os
import sys

# Before `import jax`: jax sets TF_CPP_MIN_LOG_LEVEL=1 itself when it is unset.
print("VMODULE_ECHO " + json.dumps({
    "TF_CPP_VMODULE": os.environ.get("TF_CPP_VMODULE"),
    "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
}), flush=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


@jax.jit
def step(x):
    return jnp.tanh(x @ x).sum()


x = jnp.ones((32, 32))
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        step(x).block_until_ready()
fp = os.environ.get("ECHO_FINGERPRINT")
if fp:
    print(f"I1122 04:33:12.000520  4101 gpu_hlo_schedule.cc:520] Fingerprint before LHS for "
          f"module jit_step(1) = {fp}", file=sys.stderr, flush=True)
