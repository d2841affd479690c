"""pgle's own line never lands in the middle of the workload's: said while the workload's stderr
is mid-line, it waits for the line's end, and where the workload ends without one (its last
`print(..., end="")`), it goes on a line of its own (issue 37's independent mutants: it was glued
to the workload's text)."""

from __future__ import annotations

import textwrap

from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import start_pgle

WORKLOAD = textwrap.dedent("""
    import sys, time
    seen = sys.argv[1]
    sys.stderr.write("progress 50%")  # no newline: a progress bar's line
    sys.stderr.flush()
    deadline = time.monotonic() + 120
    while "progress 50%" not in open(seen).read():  # pgle passed it on to its stderr
        assert time.monotonic() < deadline
        time.sleep(0.02)
    print("result", flush=True)  # to a full disk: pgle says so on stderr, mid-line there
    time.sleep(0)
""")


def test_pgle_s_line_after_an_unfinished_workload_line_starts_its_own_line(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "bar.py"
    script.write_text(WORKLOAD)
    err_path = project / "stderr.txt"
    with open(err_path, "wb") as err, open("/dev/full", "wb") as full:
        proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), "--",
                          str(err_path), cwd=project, env=pgle_env(), stdout=full, stderr=err)
        proc.wait(timeout=300)
    text = err_path.read_text()
    assert "progress 50%" in text, text
    after = text.split("progress 50%", 1)[1]
    # The next thing on stderr is pgle's line, on a line of its own.
    assert after.startswith("\npgle: "), text[-2000:]
