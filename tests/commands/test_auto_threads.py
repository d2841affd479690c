"""`pgle auto` on a script whose threads run jitted functions at once (a data-loader or eval
thread beside the training loop, issue 23 case 4): auto PGLE profiles one execution at a time
per process, so one thread's profiled execution fails with ALREADY_EXISTS while the other's is
profiled. pgle names it as such, with the fix, never as "the script's own profiler"."""

from __future__ import annotations

from helpers.pgle_testing import pgle_lines, report_of, run_pgle

TWO_THREADS = """
import threading
import jax, jax.numpy as jnp

@jax.jit
def train_step(x):
    return (jnp.sin(x) @ x) / 256

@jax.jit
def eval_step(x):
    return (jnp.cos(x) @ x) / 256

x = jnp.ones((256, 256))

# Both threads start each execution together, so their profiled executions overlap whatever
# the machine's load (without it a busy scheduler could run them one after the other). The
# thread whose execution fails breaks the barrier: the other then runs on alone.
together = threading.Barrier(2)

def loop(fn):
    y = x
    for _ in range(30):
        try:
            together.wait(timeout=60)
        except threading.BrokenBarrierError:
            pass
        try:
            y = fn(y)  # no eager op here: only the two steps can collide
        except BaseException:
            together.abort()
            raise
    y.block_until_ready()

threads = [threading.Thread(target=loop, args=(fn,)) for fn in (train_step, eval_step)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("both loops done")
"""


def test_concurrent_sessions_from_threads_are_named_with_the_fix(project):
    script = project / "two_threads.py"
    script.write_text(TWO_THREADS)
    proc = run_pgle("auto", "--runs", "10", "--json", str(script), cwd=project, timeout=300)
    report = report_of(proc)
    assert report["collision"]["kind"] == "threads", report["reasons"]
    (reason,) = [r for r in report["reasons"] if "ALREADY_EXISTS" in r]
    assert "several threads" in reason and "thread" in reason
    assert "jit_train_step" in reason and "jit_eval_step" in reason
    assert "pgle tune" in reason and "pgle collect" in reason and "ahead of time" in reason
    assert "own profiler" not in " ".join(report["reasons"])
    collided = [m for m in report["modules"] if m.get("collision")]
    assert collided and {m["collision"] for m in collided} == {"threads"}
    assert set(report["collision"]["modules"]) == {m["module"] for m in collided}
    for m in collided:
        assert "another thread's profiling session" in m["reason"]
        assert not any(m["module"] in s for s in report["summary"] if "executed only once" in s)
    # The failing thread's traceback is the workload's: no pgle frame in it.
    err = proc.stderr.decode()
    assert "ALREADY_EXISTS" in err and "two_threads.py" in err
    assert "jax_internals.py" not in err and "harness.py" not in err
    assert any("several threads" in line for line in pgle_lines(proc))
