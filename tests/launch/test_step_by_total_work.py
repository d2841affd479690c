"""The step is the jitted function whose executions add up to the most work, not the one whose
single execution is the heaviest: a training loop's step runs many times, while an evaluation or
a checkpoint conversion may run a few times and cost more each time (issue 37's independent
mutants: the mean picked the evaluation)."""

from __future__ import annotations

import textwrap

from helpers.pgle_testing import report_of, run_pgle

WORKLOAD = textwrap.dedent("""
    import jax, jax.numpy as jnp

    @jax.jit
    def evaluate(x):  # heavy each time (~8x a step), run 3 times: 3 x 8 = 24 step-units
        for _ in range(8):
            x = jnp.tanh(x @ x) / 512
        return x

    @jax.jit
    def train_step(x):  # one unit each time, run 120 times: 120 units
        return jnp.tanh(x @ x) / 512

    x = jnp.ones((512, 512))
    for i in range(120):
        x = train_step(x)
        if i % 40 == 0:
            x = evaluate(x)
    x.block_until_ready()
""")


def test_the_step_is_the_function_with_the_most_work_in_all(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(WORKLOAD)
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", "--run-dir", "c",
                    str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    window = report_of(proc)["window"]
    assert window["function"] == "jit(train_step)", window
