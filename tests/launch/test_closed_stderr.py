"""pgle started with its stderr closed (`pgle run ... 2>&-`, a daemon, a batch system that
closes it) still says what happens to the run on stdout, the stream that works: where the
workload's stderr went, and that the stall watchdog stopped it (issue 37's independent
mutants: with stderr closed pgle's own lines were lost, and nothing said so)."""

from __future__ import annotations

from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import start_pgle


def test_with_stderr_closed_pgle_s_lines_go_to_stdout(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "hang.py"
    script.write_text("import time\nprint('workload started', flush=True)\ntime.sleep(600)\n")
    proc = start_pgle("run", "--stall-timeout", "3s", "--profile", "p.pb", "--run-dir", "run",
                      str(script), cwd=project, env=pgle_env(), setup="os.close(2)")
    out, _ = proc.communicate(timeout=300)
    text = out.decode()
    assert "workload started" in text
    log = project / "run" / "workload.log"
    assert (f"pgle: warning: pgle's stderr is closed; the workload's stderr goes to its log "
            f"only ({log})") in text, text
    # The watchdog's line (pgle.launch.streams.say): on stdout, since stderr is gone.
    assert ("pgle: the workload made no progress for 3 s (--stall-timeout 3 s): writing its "
            "Python stacks, then stopping it") in text, text
    assert proc.returncode != 0
