"""A run that loads some executables from jax's persistent cache and compiles others says
`mixed` (issue 33's labels; issue 37's independent mutants): real `pgle run`, real JAX on CPU,
the user's real cache."""

from __future__ import annotations

from helpers.pgle_testing import pgle_env, run_pgle, write_profile

WORKLOAD = """
import sys
import jax, jax.numpy as jnp

@jax.jit
def first(x):
    return jnp.sin(x) @ x

@jax.jit
def second(x):
    return jnp.cos(x) @ x.T

x = jnp.ones((64, 64))
for _ in range(4):
    x = first(x) / 64
    if sys.argv[1] == "both":
        x = second(x) / 64
x.block_until_ready()
"""


def test_a_run_with_some_executables_cached_says_mixed(tmp_path):
    from pgle.evidence import compiles
    from pgle.evidence.events import read_events

    script = tmp_path / "two.py"
    script.write_text(WORKLOAD)
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    env = pgle_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    labels = {}
    for folder, arg in (("r1", "first"), ("r2", "both")):
        proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", folder, str(script),
                        "--", arg, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        rows = compiles.executables(read_events(tmp_path / folder / "events.jsonl"))
        labels[folder] = (compiles.label(rows), compiles.label(rows, "jit_first"),
                          compiles.label(rows, "jit_second"))
    # The first run compiled `first`; the second loaded it and compiled `second`.
    assert labels["r1"][:2] == ("compiled", "compiled"), labels
    assert labels["r2"] == ("mixed", "cached", "compiled"), labels

