"""What the workload's user sees is the workload's (issue 23, case 7): the Python API starts
its children without a `preexec_fn` (no fork in a process that already runs JAX's threads),
and a traceback, Ctrl-C's included, shows the workload's frames and never pgle's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers.pgle_testing import pgle_env
from helpers.processes import start_pgle

API_FROM_A_JAX_PROCESS = """
import jax, jax.numpy as jnp
jnp.ones((8, 8)).sum().block_until_ready()   # JAX's threads are up
import pgle
report = pgle.run("work.py", profile="p.pbtxt")
print("STATUS", report.status, report.workload_exit_code)
"""


def test_the_python_api_from_a_jax_process_prints_no_fork_warning(project):
    (project / "work.py").write_text("import jax\nprint(jax.numpy.ones(2).sum())\n")
    (project / "p.pbtxt").write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    (project / "notebook.py").write_text(API_FROM_A_JAX_PROCESS)
    proc = subprocess.run([sys.executable, "notebook.py"], cwd=project, env=pgle_env(),
                          capture_output=True, timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "STATUS not_applicable 0" in proc.stdout.decode()
    assert "os.fork() was called" not in err and "fork" not in err.lower(), err


def test_ctrl_c_shows_the_workloads_traceback_only(project):
    (project / "loop.py").write_text(
        "import time, jax\n"
        "def train():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(120)\n"
        "train()\n")
    (project / "p.pbtxt").write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    pgle = start_pgle("run", "--profile", "p.pbtxt", "loop.py", cwd=project, env=pgle_env(),
                      own_group=True)
    try:
        deadline = time.monotonic() + 120
        out = b""
        while b"ready" not in out:
            assert time.monotonic() < deadline and pgle.poll() is None
            out += os.read(pgle.stdout.fileno(), 4096)
        os.killpg(pgle.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the whole job
        _, err = pgle.communicate(timeout=60)
    finally:
        if pgle.poll() is None:
            pgle.kill()
    text = err.decode()
    assert pgle.returncode == 130, text
    tb = text[text.index("Traceback"):]
    assert 'loop.py", line 5, in <module>' in tb and 'loop.py", line 4, in train' in tb
    assert "KeyboardInterrupt" in tb
    for frame in ("harness.py", "runpy", "tracebacks.py", "pgle/launch"):
        assert frame not in tb, tb


def test_an_error_in_a_jitted_call_shows_no_pgle_frame(project):
    """pgle counts jitted calls through a wrapper (pgle.launch.harness); an error raised
    through it is printed as without pgle."""
    (project / "bad.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "@jax.jit\n"
        "def step(x):\n"
        "    return x @ jnp.ones((5, 7))\n"
        "step(jnp.ones((2, 3)))\n")
    (project / "p.pbtxt").write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    proc = subprocess.run([sys.executable, "-m", "pgle", "run", "--profile", "p.pbtxt",
                           "bad.py"], cwd=project, env=pgle_env(), capture_output=True,
                          timeout=300)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    tb = err[err.index("Traceback"):]
    assert 'bad.py", line 5, in <module>' in tb and "TypeError" in tb
    assert "harness.py" not in tb and "runpy" not in tb, tb
