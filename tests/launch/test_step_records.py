"""What a marked step leaves in `events.jsonl` (issue 25: a step's edges are kept as int64 in
one array until written out, and after LIGHT_AFTER_STEPS marked steps a jitted call only
counts its execution). Real `pgle run` of real jax scripts on CPU; the file is read line by
line with `json.loads`, in its order."""

from __future__ import annotations


from helpers import step_records
from helpers.pgle_testing import report_of, run_pgle, write_profile

from pgle.launch.harness import LIGHT_AFTER_STEPS, SYNCED_EVERY

STEPS = 3 * LIGHT_AFTER_STEPS

COUNTED = f"""
import jax, jax.numpy as jnp

@jax.jit
def train_step(x):
    return jnp.tanh(x @ x.T).sum(axis=0)

@jax.jit
def eval_step(x):
    return x.mean()

x = jnp.ones((8, 8))
for i in range({STEPS}):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        train_step(x).block_until_ready()
        if i % 10 == 9:
            eval_step(x).block_until_ready()
"""


def _events(folder):
    """The run's events, its steps.bin records as the step lines pgle wrote before issue 35,
    each at its place (tests/helpers/step_records.py)."""
    return step_records.old_lines(folder / "events.jsonl")


def test_executions_are_counted_whole_after_the_step_markers_take_over(tmp_path):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    (tmp_path / "w.py").write_text(COUNTED)
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", "w.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    assert report["steps"]["source"] == "markers"
    assert report["steps"]["function"] == "jit(train_step)"
    # Timed by completion (issue 33): step 0 (the compile) and step 9 (eval_step's compile) out;
    # after SYNCED_STREAK steps ready by their marker's end one in SYNCED_EVERY is checked, so
    # the steps after the last check have no time.
    assert report["steps"]["step_time_source"] == "completion"
    assert STEPS - 2 - SYNCED_EVERY <= report["step_times"]["count"] <= STEPS - 2
    (jit,) = [r for r in _events(tmp_path / "r") if r["kind"] == "jit_functions"]
    executions = {f["function"]: f["executions"] for f in jit["functions"]}
    assert executions == {"jit(train_step)": STEPS, "jit(eval_step)": STEPS // 10}
    # Start times are kept only while they could be the step times (no markers yet).
    assert len(jit["starts"]) <= LIGHT_AFTER_STEPS + 1


FORMS = """
import warnings
import numpy as np
import jax

nums = [0, "warmup", None, 3, np.int64(4), 2**70, 6]
for i, num in enumerate(nums):
    with jax.profiler.StepTraceAnnotation("eval" if i == 5 else "train", step_num=num):
        if i == 2:
            warnings.warn("inside step 2")
"""


def test_step_lines_keep_their_values_and_their_order(tmp_path):
    """Integer step numbers, the ones that are not (a string, None, a numpy integer, an int
    beyond int64) and a line of another kind written inside a step: every line in the order
    it happened, with the values the script gave."""
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    (tmp_path / "w.py").write_text(FORMS)
    proc = run_pgle("run", "--profile", "p.pb", "--run-dir", "r", "w.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    events = _events(tmp_path / "r")
    steps = [r for r in events if r["kind"] in ("step_enter", "step_exit", "warning")]
    kinds = [r["kind"] for r in steps]
    assert kinds == ["step_enter", "step_exit"] * 2 + ["step_enter", "warning", "step_exit"] + [
        "step_enter", "step_exit"] * 4
    enters = [r for r in steps if r["kind"] == "step_enter"]
    assert [r["index"] for r in enters] == list(range(7))
    assert [r["step_num"] for r in enters] == [0, "warmup", None, 3, "4", 2**70, 6]
    assert [r["name"] for r in enters] == ["train"] * 5 + ["eval", "train"]
    assert [r["index"] for r in steps if r["kind"] == "step_exit"] == list(range(7))
    times = [r["t"] for r in steps]
    assert times == sorted(times)
    assert "inside step 2" in next(r for r in steps if r["kind"] == "warning")["message"]
