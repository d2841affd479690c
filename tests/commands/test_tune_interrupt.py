"""Ctrl-C anywhere in `tune` (issue 31): whichever launch it reaches (phase 1, phase 2, an arm
of `--compare`) or pgle between two launches, tune stops with 130 once the workload has
stopped, whatever the workload's own exit code, and no later launch starts.

Real pgle processes, real JAX on CPU, real SIGINT. The workload counts its starts in a file,
so the test knows which launch it is in and can see that no later one began. (Phase 1 on
Ctrl-C is tests/launch/test_signals.py's.)
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest
from helpers.pgle_testing import pgle_env
from helpers.processes import start_pgle, wait_until

# Launch `wait_at` (1-based) waits for Ctrl-C, catches it and exits 0, as a training loop that
# saves a checkpoint on KeyboardInterrupt does; every other launch runs 8 steps and exits 0.
WORKLOAD = """
import os, sys, time
import jax, jax.numpy as jnp
with open({starts!r}, "a") as f:
    f.write("start\\n")
n = len(open({starts!r}).read().split())
step = jax.jit(lambda x: x * 2 + 1)
x = jnp.ones(8)
for i in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = step(x).block_until_ready()
if n != {wait_at}:
    sys.exit(0)
try:
    open({ready!r}, "w").close()
    time.sleep(300)
except KeyboardInterrupt:
    print("interrupted: checkpoint saved", flush=True)
    sys.exit(0)
"""


def _script(project: Path, wait_at: int) -> tuple[Path, Path, Path]:
    starts, ready, script = project / "starts", project / "ready", project / "train.py"
    script.write_text(textwrap.dedent(WORKLOAD.format(starts=str(starts), ready=str(ready),
                                                      wait_at=wait_at)))
    return script, starts, ready


def _interrupted(proc, starts: Path, launches: int) -> str:
    out, err = proc.communicate(timeout=300)
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    assert starts.read_text().split() == ["start"] * launches, "a later launch started"
    return text + out.decode(errors="replace")


@pytest.mark.parametrize(("args", "wait_at"), [
    (("tune",), 2),  # phase 2 (on CPU: the one run without a profile)
    (("tune", "--compare", "default,o1"), 2),  # arm default's run
    (("tune", "--compare", "default,o1"), 3),  # arm o1's run
], ids=["phase-2", "compare-first-arm", "compare-second-arm"])
def test_ctrl_c_in_a_later_launch_stops_tune_with_130(tmp_path, args, wait_at):
    script, starts, ready = _script(tmp_path, wait_at)
    proc = start_pgle(*args, str(script), cwd=tmp_path, env=pgle_env())
    try:
        wait_until(ready.exists, f"launch {wait_at}'s workload", proc=proc, timeout=600)
        os.kill(proc.pid, signal.SIGINT)
        text = _interrupted(proc, starts, wait_at)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "checkpoint saved" in text  # the workload handled it and exited 0
    assert "interrupted by SIGINT (Ctrl-C)" in text, text[-4000:]


def test_ctrl_c_between_two_launches_stops_tune_with_130(tmp_path):
    """Phase 1's workload leaves a process behind (its own session, its output closed) that
    sends pgle SIGINT once the workload has exited: pgle is then between two launches
    (converting phase 1's trace, or starting phase 2), and stops there with 130."""
    starts = tmp_path / "starts"
    script = tmp_path / "train.py"
    sender = tmp_path / "sender.py"
    sender.write_text(textwrap.dedent("""
        import os, signal, sys, time
        workload, pgle = int(sys.argv[1]), int(sys.argv[2])
        deadline = time.monotonic() + 120
        while os.path.exists(f"/proc/{workload}") and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(pgle, signal.SIGINT)
    """))
    script.write_text(textwrap.dedent(f"""
        import os, subprocess, sys
        import jax, jax.numpy as jnp
        with open({str(starts)!r}, "a") as f:
            f.write("start\\n")
        step = jax.jit(lambda x: x * 2 + 1)
        x = jnp.ones(8)
        for i in range(8):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = step(x).block_until_ready()
        if len(open({str(starts)!r}).read().split()) == 1:
            subprocess.Popen([sys.executable, {str(sender)!r}, str(os.getpid()),
                              str(os.getppid())], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    """))
    proc = start_pgle("tune", str(script), cwd=tmp_path, env=pgle_env())
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    # The signal reached pgle after phase 1's workload had exited: phase 2's workload, if pgle
    # had started it already, got it before its first line (it never counted a start).
    assert starts.read_text().split() == ["start"], text[-4000:]
