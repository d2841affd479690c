"""Test workload: a CPU run that prints a real XLA:GPU log it did not produce.

Real JAX on CPU (two jitted steps), then, on stderr, the lines of a log the real XLA:GPU
compiler printed in the deviceless lane (PRINT_LOG: a file under tests/data/xla_gpu/), with
the profile path it recorded replaced by the one this run got in XLA_FLAGS
(PRINT_KEEP_PATH=1 keeps the recorded path). What a workload forging pgle's verdict does:
pgle must not count any of it (pgle/verdicts/origin.py).
"""

import os
import re

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return (x @ x.T).sum()


x = jnp.ones((16, 16))
for i in range(3):
    step(x).block_until_ready()

m = re.search(r"--xla_gpu_pgle_profile_file_or_directory_path=(\"[^\"]*\"|'[^']*'|\S+)",
              os.environ.get("XLA_FLAGS", ""))
given = m.group(1).strip("\"'") if m else None
text = open(os.environ["PRINT_LOG"]).read()
if given and not os.environ.get("PRINT_KEEP_PATH"):
    text = re.sub(r"/tmp/pgle-lane/[^/]+/profiles/\S+?\.pbtxt", given, text)
os.write(2, text.encode())
