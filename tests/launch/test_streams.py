"""pgle's own streams and the workload's output (issue 20): a closed or failing stdout or
stderr never hangs or kills the workload, a daemon holding the pipes delays pgle's exit by
PIPE_GRACE_S at most, long lines pass in bounded memory, a deleted working directory is one
line. Real pgle processes with real closed fds, /dev/full, real daemons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import gone, kill_all, peak_rss, start_pgle

from pgle.launch import launcher

# More than any pipe holds (64 KiB by default, 1 MiB as pgle makes them): a pump that stopped
# draining leaves the workload blocked in a write, and the test times out.
LOUD = """
import sys
for i in range(20000):
    print(f"out {i:06d} " + "o" * 90)
    print(f"err {i:06d} " + "e" * 90, file=sys.stderr)
print("END", flush=True)
print("ERR-END", file=sys.stderr, flush=True)
"""


def closing(fd: int) -> str:
    return f"os.close({fd})"


def full(fd: int) -> str:
    return f"d = os.open('/dev/full', os.O_WRONLY); os.dup2(d, {fd}); os.close(d)"


def run_loud(project: Path, setup, *args: str) -> tuple[subprocess.Popen, bytes, bytes, Path]:
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "loud.py"
    script.write_text(LOUD)
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", *args, str(script),
                      cwd=project, env=pgle_env(), setup=setup)
    out, err = proc.communicate(timeout=300)
    return proc, out or b"", err or b"", project / "run" / "workload.log"


@pytest.mark.parametrize("fd, setup, says_on", [
    (1, closing(1), 2), (2, closing(2), 1), (1, full(1), 2), (2, full(2), 1),
], ids=[">&-", "2>&-", ">/dev/full", "2>/dev/full"])
def test_a_closed_or_full_stream_never_stops_the_workload(project, fd, setup, says_on):
    proc, out, err, log = run_loud(project, setup)
    stream = {1: "stdout", 2: "stderr"}[fd]
    said = (out if says_on == 1 else err).decode(errors="replace")
    assert proc.returncode == 0, (out[-2000:], err[-2000:])
    text = log.read_text()
    # The workload ran to its end and every line of both streams is in the log.
    assert "\nEND\n" in text and "\nERR-END\n" in text
    assert text.count("\nout ") + text.startswith("out ") == 20000
    assert text.count("err ") == 20000
    # pgle said so once, on the stream that still works.
    lines = [line for line in said.splitlines() if line.startswith("pgle: warning:")
             and stream in line and ("closed" in line or "cannot write" in line)]
    assert len(lines) == 1, said[-3000:]
    assert str(log) in lines[0]
    assert "Traceback" not in said
    if fd == 2:
        # pgle's own stderr is gone: its messages are not printed on the workload's stdout.
        assert [line for line in said.splitlines() if line.startswith("pgle:")] == lines


def test_json_report_and_the_run_survive_a_full_stderr(project):
    """`--json ... 2>/dev/full`: the workload runs, the report is on stdout, the exit code is
    the verdict's (it used to exit 1 without launching)."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "hello.py"
    script.write_text("print('hello from the workload')\n")
    proc = start_pgle("run", "--profile", "p.pb", "--json", str(script), cwd=project,
                      env=pgle_env(), setup=full(2))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0
    report = json.loads(out.decode())
    assert report["workload_exit_code"] == 0
    assert "hello from the workload" in Path(report["log_path"]).read_text()


def test_a_json_report_that_cannot_be_written_is_one_line(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "hello.py"
    script.write_text("print('hello')\n")
    proc = start_pgle("run", "--profile", "p.pb", "--json", str(script), cwd=project,
                      env=pgle_env(), setup=full(1))
    _, err = proc.communicate(timeout=300)
    text = err.decode(errors="replace")
    assert proc.returncode == 1, text
    errors = [line for line in text.splitlines() if line.startswith("pgle: error:")]
    assert len(errors) == 1 and "--json report" in errors[0] and "No space left" in errors[0]
    assert "Traceback" not in text and "Exception ignored" not in text


DAEMON = """
import os, subprocess, sys, time
# A daemon that inherits the workload's stdout and stderr and outlives it.
d = subprocess.Popen([sys.executable, "-c", "import time; print('daemon up', flush=True); "
                      "time.sleep(300)"], start_new_session=True)
open(sys.argv[1], "w").write(str(d.pid))
time.sleep(0.5)
print("workload done", flush=True)
open(sys.argv[1] + ".end", "w").write(repr(time.time()))
"""


def test_a_daemon_holding_the_pipes_delays_exit_by_the_grace_at_most(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "daemon.py"
    script.write_text(DAEMON)
    pid_file = project / "daemon.pid"
    proc = start_pgle("run", "--profile", "p.pb", str(script), "--", str(pid_file),
                      cwd=project, env=pgle_env())
    try:
        out, err = proc.communicate(timeout=120)  # not the daemon's 300 s
        ended = time.time()
        daemon = int(pid_file.read_text())
        assert not gone(daemon), "the test's daemon ended early"
    finally:
        if proc.poll() is None:
            proc.kill()
        if pid_file.exists():
            kill_all([int(pid_file.read_text())])
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert b"workload done" in out and b"daemon up" in out
    lines = [line for line in text.splitlines() if "still holds its output" in line]
    assert len(lines) == 1, text
    assert f"stopped waiting after {launcher.PIPE_GRACE_S:g} s" in lines[0]
    # The grace, once (issue 37: it was waited twice), plus pgle's own end on a loaded machine.
    waited = ended - float(Path(f"{pid_file}.end").read_text())
    assert launcher.PIPE_GRACE_S <= waited < 1.8 * launcher.PIPE_GRACE_S, waited


def test_a_deleted_working_directory_is_one_line(project):
    gone_dir = project / "gone"
    gone_dir.mkdir()
    script = project / "hello.py"
    script.write_text("print('hello')\n")

    enter_and_delete = f"os.chdir({str(gone_dir)!r}); os.rmdir({str(gone_dir)!r})"
    proc = start_pgle("run", str(script), cwd=project, env=pgle_env(), setup=enter_and_delete)
    _, err = proc.communicate(timeout=120)
    text = err.decode(errors="replace")
    assert proc.returncode == 2, text
    assert [line for line in text.splitlines() if not line.startswith("pgle: error:")] == []
    assert len(text.splitlines()) == 1 and "current directory" in text


PROGRESS = """
import sys
w = sys.stdout.buffer.write
frame = b"\\r" + b"#" * 99
mb = int(sys.argv[1])
if sys.argv[2] == "cr":
    for _ in range(mb * 10486):  # ~100-byte frames
        w(frame)
else:
    block = b"y" * (1 << 20)
    for _ in range(mb):
        w(block)
w(b"\\n")
"""


@pytest.mark.parametrize("shape", ["cr", "no-newline"])
def test_long_lines_pass_through_in_bounded_memory(project, shape):
    """64 MB of `\\r` progress, or 64 MB without a newline: the terminal gets every byte, the
    log too, and pgle's peak memory stays far below the line's size (docs/reliability.md
    states the bound: 2 MiB a stream in the pumps, 8 MiB for the log's scan)."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "progress.py"
    script.write_text(PROGRESS)
    sink = project / "terminal"
    report = project / "peak.json"
    with open(sink, "wb") as f:
        proc = peak_rss([sys.executable, "-m", "pgle", "run", "--profile", "p.pb", "--run-dir",
                         "run", str(script), "--", "64", shape], report, cwd=project,
                        env=pgle_env(), stdout=f, stderr=subprocess.PIPE)
        _, err_bytes = proc.communicate(timeout=300)
    err = err_bytes.decode(errors="replace")
    peak = json.loads(report.read_text())
    assert peak["status"] == 0, err
    size = sink.stat().st_size
    assert size == (64 * 10486 * 100 if shape == "cr" else 64 << 20) + 1
    assert (project / "run" / "workload.log").stat().st_size == size
    # ru_maxrss of pgle (and of the workload it waited for, which holds 1 MiB at most).
    peak_mb = peak["maxrss_kb"] / 1024
    assert peak_mb < 100, f"pgle peaked at {peak_mb:.0f} MB for a 64 MB line"
    assert "Traceback" not in err


def test_a_closed_stdout_is_not_taken_by_the_next_file_pgle_opens(project):
    """With fd 1 closed, the next file pgle opened (the run log) became fd 1, and the
    workload's stdout was written into whatever that was: /dev/null holds the place."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "once.py"
    script.write_text(textwrap.dedent("""
        import sys
        print("exactly once")
        print("to stderr", file=sys.stderr)
    """))
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), cwd=project,
                      env=pgle_env(), setup=closing(1), stdout=None)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    log = (project / "run" / "workload.log").read_text()
    assert log.count("exactly once") == 1 and log.count("to stderr") == 1



def test_the_programs_own_absl_info_lines_are_not_hidden(project):
    """pgle turns XLA's INFO log on and hides the INFO lines the user would not have seen; a
    line absl-py logged from the program (the same prefix, a `.py` file) is the program's own
    and always shows. Both are in the log."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "absl_like.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.stderr.write("I1125 12:00:00.000001  4242 train.py:12] step 1 loss 2.5\\n")
        sys.stderr.write("I1125 12:00:00.000002  4242 gpu_hlo_schedule.cc:5] xla info\\n")
        sys.stderr.write("W1125 12:00:00.000003  4242 gpu_hlo_schedule.cc:6] xla warning\\n")
    """))
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), cwd=project,
                      env=pgle_env())
    _, err = proc.communicate(timeout=300)
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "train.py:12] step 1 loss 2.5" in text
    assert "xla info" not in text and "xla warning" in text
    log = (project / "run" / "workload.log").read_text()
    assert "step 1 loss" in log and "xla info" in log and "xla warning" in log
