"""The step's XLA module is named as jax names it (pgle.launch.step_rule.module_of) for every
character a function's name may hold: a step named `train-step` (a `__name__` set by a library
or by hand) compiles as `jit_train-step` (jax 0.10.2 keeps `-` and `.`), and pgle finds that
compile (issue 37's independent mutants: `-` became `_` and the step had no module)."""

from __future__ import annotations

import json
import textwrap

from helpers.pgle_testing import run_pgle

WORKLOAD = textwrap.dedent("""
    import jax, jax.numpy as jnp

    def step(x):
        return jnp.tanh(x @ x) / 8

    step.__name__ = step.__qualname__ = "train-step.v2"
    train = jax.jit(step)
    x = jnp.ones((32, 32))
    for _ in range(8):
        x = train(x)
    x.block_until_ready()
""")


def _collected(tmp_path, text):
    """`pgle collect` of the workload `text`: its jit_functions record and the modules that
    compiled."""
    script = tmp_path / "w.py"
    script.write_text(text)
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", "--run-dir", "c",
                    str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    events = [json.loads(ln) for ln in (tmp_path / "c" / "events.jsonl").read_text().splitlines()
              if ln.strip()]
    jit = next(r for r in events if r["kind"] == "jit_functions")
    return jit, {r["module"] for r in events if r["kind"] == "module_compiled"}


def test_a_step_named_with_dash_and_dot_has_its_module(tmp_path):
    jit, compiled = _collected(tmp_path, WORKLOAD)
    assert jit["step"] == "jit(train-step.v2)"
    assert jit["module"] == "jit_train-step.v2" and jit["module"] in compiled, (jit, compiled)


RENAMED = textwrap.dedent("""
    import jax, jax.numpy as jnp

    def step(x):
        return jnp.tanh(x @ x) / 8

    train = jax.jit(step)
    step.__name__ = "renamed_later"  # after jax.jit: jax names the module at its first trace
    x = jnp.ones((32, 32))
    for _ in range(8):
        x = train(x)
    x.block_until_ready()
""")


def test_a_step_renamed_after_jit_has_the_module_its_first_compile_named(tmp_path):
    """pgle names the call when jax.jit wraps it (`jit(step)`), jax names the module when it
    first traces it: the step's module is the one that compile produced."""
    jit, compiled = _collected(tmp_path, RENAMED)
    assert (jit["step"], jit["module"]) == ("jit(step)", "jit_renamed_later")
    assert jit["module"] in compiled, compiled
