"""The step is the jitted function whose executions add up to the most work, not the one whose
single execution is the heaviest: a training loop's step runs many times, while an evaluation or
a checkpoint conversion may run a few times and cost more each time (issue 37's independent
mutants: the mean picked the evaluation)."""

from __future__ import annotations

import textwrap

from helpers.pgle_testing import report_of, run_pgle, write_profile

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
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    # `pgle run` picks the step from every execution once the run is over.
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(script),
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    steps = report_of(proc)["steps"]
    assert steps["source"] == "executions" and steps["function"] == "jit(train_step)", steps
