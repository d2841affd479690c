"""Nothing collected is lost to a crash after the window (issue 23, case 1), a crash inside it
says how to recover the trace, and a workload that exits before importing jax is named as
such with its own exit code (case 7).

Real JAX on CPU in real processes; the only stand-in is tests/helpers/dist_collect_profile,
which makes jaxlib's conversion of the (real, CPU) trace non-empty in pgle's own process, as
a GPU trace's would be.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path

from helpers.pgle_testing import TESTS, pgle_env, pgle_lines, report_of, run_pgle

FAKE_GPU_CONVERSION = str(TESTS / "helpers" / "dist_collect_profile")

STEPS = """
import os, signal, sys
import jax, jax.numpy as jnp

f = jax.jit(lambda x: jnp.tanh(x @ x) / 64)
x = jnp.ones((64, 64))
for i in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x)
x.block_until_ready()
print("steps done", flush=True)
{after}
"""


def _script(project: Path, after: str, name: str = "w.py") -> Path:
    path = project / name
    path.write_text(STEPS.format(after=textwrap.dedent(after)))
    return path


def _env() -> dict[str, str]:
    return pgle_env(PYTHONPATH=FAKE_GPU_CONVERSION)


def test_a_segfault_after_the_window_keeps_the_profile_and_exits_with_its_code(project):
    """The cuptiFinalize crash of 8xH100 runs: the window closed cleanly (trace_stop, trace on
    disk), then the process died by SIGSEGV. The profile and its manifest are written, pgle
    says so, and exits 139 as the workload did."""
    script = _script(project, "os.kill(os.getpid(), signal.SIGSEGV)")
    proc = run_pgle("collect", "-o", "p.pb", "--json", str(script), cwd=project, env=_env())
    assert proc.returncode == 139, proc.stderr.decode()
    report = report_of(proc)
    assert (report["status"], report["exit_code"], report["workload_exit_code"]) == \
        ("collected", 139, 139)
    assert report["exit_code_from"] == "workload"
    assert (project / "p.pb").stat().st_size > 0
    assert (project / "p.pb.manifest.json").is_file()
    assert report["profile"]["instructions"] > 0
    said = " ".join(pgle_lines(proc))
    assert "closed cleanly" in said and "SIGSEGV" in said and "kept the profile" in said
    assert "Traceback" not in proc.stderr.decode()


def test_a_crash_inside_the_window_names_the_trace_and_the_convert_command(project):
    """The process dies inside stop_trace, after JAX wrote the trace (where cuptiFinalize
    crashes): no trace_stop, so pgle converts nothing itself, and says exactly how to. (jax
    0.10.2's start_trace and stop_trace each call clear_metadata, stop_trace after writing the
    trace: its second call is the crash. `--trace-max-bytes 0`: no size probe, whose own
    start and stop would make those calls first.)"""
    script = _script(project, "")
    script.write_text(script.read_text().replace(
        "import jax, jax.numpy as jnp\n",
        "import jax, jax.numpy as jnp\nimport jax._src.profiler as _p\n"
        "_calls = []\n"
        "def _crash_in_stop():\n"
        "    _calls.append(1)\n"
        "    if len(_calls) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "_p.clear_metadata = _crash_in_stop\n"))
    proc = run_pgle("collect", "-o", "out.pb", "--json", "--trace-max-bytes", "0", str(script),
                    cwd=project, env=_env())
    assert proc.returncode == 139, proc.stderr.decode()
    report = report_of(proc)
    assert report["status"] == "failed" and not (project / "out.pb").exists()
    (reason,) = [r for r in report["reasons"] if "pgle convert" in r]
    assert "inside the profiling window" in reason
    command = re.search(r"`(pgle convert [^`]+)`", reason).group(1)
    words = shlex.split(command)  # paths with spaces come quoted, ready to paste
    trace = Path(words[2])
    assert list(trace.glob("*.xplane.pb")), trace  # the folder it names holds the trace
    assert words[3] == "out.pb" and "--log" in words
    # The command it names runs on that trace (on CPU it has no GPU plane: nothing to write).
    again = run_pgle(*words[1:], cwd=project, env=pgle_env())
    assert "does not exist" not in again.stderr.decode(), again.stderr.decode()
    assert "GPU" in again.stderr.decode()
    assert any("pgle convert" in line for line in pgle_lines(proc))


def test_a_crash_before_the_window_opens_recovers_nothing_and_says_so(project):
    script = project / "early.py"
    script.write_text("import os, signal, jax, jax.numpy as jnp\n"
                      "jnp.ones(3).block_until_ready()\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    proc = run_pgle("collect", "-o", "out.pb", "--json", str(script), cwd=project, env=_env())
    assert proc.returncode == 139
    (reason,) = report_of(proc)["reasons"][-1:]
    assert "before the profiling window opened" in reason and "pgle convert" not in reason


def test_a_workload_that_exits_before_importing_jax_is_named_with_its_own_code(project):
    """argparse's usage error (exit 2) is the workload's, not pgle's bad input: said in the
    message and in the JSON (exit_code_from), and no window advice."""
    script = project / "args.py"
    script.write_text("import argparse\np = argparse.ArgumentParser()\n"
                      "p.add_argument('--n', required=True)\np.parse_args()\nimport jax\n")
    proc = run_pgle("collect", "-o", "out.pb", "--json", str(script), cwd=project)
    assert proc.returncode == 2
    report = report_of(proc)
    assert (report["exit_code"], report["workload_exit_code"], report["exit_code_from"]) == \
        (2, 2, "workload")
    said = " ".join(pgle_lines(proc))
    assert "before importing jax" in said and "its own code" in said
    assert "--delay/--duration" not in proc.stderr.decode()
    # pgle's own exit 2 (bad input) says so too.
    own = run_pgle("collect", "-o", "out.pb", "--json", "missing.py", cwd=project)
    assert own.returncode == 2 and report_of(own)["exit_code_from"] == "pgle"


def test_run_and_auto_name_an_exit_before_jax_too(project):
    script = project / "args.py"
    script.write_text("import sys\nsys.exit(2)\n")
    (project / "p.pbtxt").write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    for args in (("run", "--profile", "p.pbtxt"), ("auto",)):
        proc = run_pgle(*args, "--json", str(script), cwd=project)
        assert proc.returncode == 2, proc.stderr.decode()
        report = report_of(proc)
        assert report["exit_code_from"] == "workload", args
        assert any("before importing jax" in s for s in report["summary"]), report["summary"]

