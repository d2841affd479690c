"""pgle started with its stderr closed (`pgle run ... 2>&-`, a daemon, a batch system that
closes it) says where the workload's stderr went, on stdout, the stream that works (issue 37's
independent mutants: with stderr closed the line was lost, and nothing said so)."""

from __future__ import annotations

from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import start_pgle


def test_with_stderr_closed_the_launch_warning_goes_to_stdout(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "hello.py"
    script.write_text("import jax.numpy as jnp\nprint('workload says', float(jnp.ones(3).sum()))\n")
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), cwd=project,
                      env=pgle_env(), setup="os.close(2)")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out.decode()[-3000:]
    text = out.decode()
    assert "workload says 3.0" in text
    # The workload's stderr now goes to its log only: said where the user can see it.
    log = project / "run" / "workload.log"
    assert f"pgle: warning: pgle's stderr is closed; the workload's stderr goes to its log only ({log})" in text, text
