"""A standard fd closed when pgle starts (`pgle run ... <&-`, a daemon, a batch system) reaches
the workload as /dev/null (issue 37: /dev/null put on the closed fd but not inherited survived
every test): the workload's stdin is a readable empty stream, and the first file it opens does
not become its fd 0 (where `input()` or a library reading stdin would then read a data file)."""

from __future__ import annotations

import textwrap

from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import start_pgle

CHECK = textwrap.dedent("""
    import os, stat, sys
    st = os.fstat(0)
    print("stdin", "chr" if stat.S_ISCHR(st.st_mode) else "other", os.path.realpath("/proc/self/fd/0"))
    print("reads", repr(sys.stdin.read()))
    with open(__file__) as f:
        print("next fd", f.fileno())
""")


def test_a_closed_stdin_reaches_the_workload_as_dev_null(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "fds.py"
    script.write_text(CHECK)
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), cwd=project,
                      env=pgle_env(), setup="os.close(0)")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    log = (project / "run" / "workload.log").read_text()
    assert "stdin chr /dev/null" in log, log
    assert "reads ''" in log
    fd = int(log.split("next fd ")[1].split()[0])
    assert fd > 2, log
