"""What pgle promises about launching: flags, argv, exit codes, signals, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile
from helpers.processes import start_pgle

ECHO = str(WORKLOADS / "echo_env.py")


def echoed(proc) -> dict:
    for line in proc.stdout.decode().splitlines() + proc.stderr.decode().splitlines():
        if line.startswith("ECHO "):
            return json.loads(line[5:])
    raise AssertionError(f"no ECHO line in {proc.stdout!r} {proc.stderr!r}")


def test_user_xla_flags_survive_and_argv_is_untouched(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    # The last flag is not in pgle's table: the installed jaxlib is asked, and accepts it.
    user_flags = ("--xla_gpu_enable_command_buffer='' --xla_dump_to=\"/tmp/a dir\" "
                  "--xla_gpu_exhaustive_tiling_search=true")
    args = ["a b", "--", "--steps", "ü", ""]
    proc = run_pgle("run", "--profile", "p.pb", ECHO, "--", *args, cwd=project,
                    env=pgle_env(XLA_FLAGS=user_flags))
    assert proc.returncode == 0, proc.stderr.decode()
    got = echoed(proc)
    assert got["argv"] == [ECHO, *args]
    assert got["name"] == "__main__"
    assert got["path0"] == str(WORKLOADS)  # as under `python script.py`
    # The user's flags come first, unchanged; pgle's follow.
    assert got["xla_flags"].startswith(user_flags + " ")
    assert "--xla_gpu_pgle_profile_file_or_directory_path=" in got["xla_flags"]
    assert got["tf_cpp_min_log_level"] == "0"


def test_conflicting_user_flag_is_replaced_with_a_notice(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project,
                    env=pgle_env(XLA_FLAGS="--xla_gpu_pgle_profile_file_or_directory_path=/old.pb "
                                         "--xla_dump_hlo_as_text"))
    got = echoed(proc)
    assert "/old.pb" not in got["xla_flags"] and got["xla_flags"].endswith("--xla_dump_hlo_as_text")
    assert any("replacing your --xla_gpu_pgle_profile_file_or_directory_path=/old.pb" in l
               for l in pgle_lines(proc))


def test_module_workload(project):
    pkg = project / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(Path(ECHO).read_text())
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "-m", "mypkg.job", "--", "x", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    got = echoed(proc)
    assert got["argv"][1:] == ["x"] and got["argv"][0].endswith("job.py")
    assert got["path0"] == str(project)


def test_child_exit_code_propagates(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", ECHO, cwd=project,
                    env=pgle_env(ECHO_EXIT="7"))
    assert proc.returncode == 7
    report = report_of(proc)
    assert report["workload_exit_code"] == 7 and report["exit_code"] == 7


@pytest.mark.parametrize("command", ["collect", "tune"])
def test_collect_and_tune_exit_with_the_workloads_own_code(project, command):
    """README "Exit codes": a workload that fails makes pgle exit with its own code (issue
    26: collect and tune returning 1 instead passed every suite)."""
    proc = run_pgle(command, "--json", ECHO, cwd=project, env=pgle_env(ECHO_EXIT="7"))
    assert proc.returncode == 7, proc.stderr.decode()
    report = report_of(proc)
    assert report["workload_exit_code"] == 7 and report["exit_code"] == 7


PHASED = """
import os, sys
import jax, jax.numpy as jnp
counter = sys.argv[1]
runs = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(runs + 1))
step = jax.jit(lambda x: x * 2 + 1)
x = jnp.ones(8)
for i in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = step(x).block_until_ready()
sys.exit(9 if runs == 1 else 0)
"""


def test_tune_exits_with_the_code_of_a_workload_failing_in_phase_2(project):
    """Phase 1 succeeds (on CPU: an empty profile, and tune goes on); the next run of the
    workload exits 9: tune stops there and exits 9."""
    script = project / "phased.py"
    script.write_text(PHASED)
    proc = run_pgle("tune", "--json", str(script), "--", str(project / "runs"), cwd=project)
    assert proc.returncode == 9, proc.stderr.decode()
    report = report_of(proc)
    assert report["workload_exit_code"] == 9 and report["exit_code"] == 9
    assert (project / "runs").read_text() == "2"


def test_sigint_is_forwarded_and_exit_is_130(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    ready = project / "ready"
    proc = start_pgle("run", "--profile", "p.pb", str(WORKLOADS / "wait_for_signal.py"),
                      cwd=project, env=pgle_env(READY_FILE=str(ready)))
    deadline = time.time() + 60
    while not ready.exists():
        assert time.time() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() is not None else "timeout"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert (project / "ready.interrupted").read_text() == "yes"


# --- bad input: one line, exit 2, nothing touched ------------------------------------------

def _one_error_line(proc) -> str:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    lines = [l for l in err.splitlines() if l.startswith("pgle: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_script(project):
    proc = run_pgle("collect", "nope.py", cwd=project)
    assert proc.returncode == 2
    assert "script nope.py does not exist" in _one_error_line(proc)


def test_corrupt_profile(project):
    (project / "bad.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    proc = run_pgle("run", "--profile", "bad.pb", ECHO, cwd=project)
    assert proc.returncode == 2
    assert "bad.pb" in _one_error_line(proc)
    assert not (project / ".pgle" / "runs").exists()  # nothing launched


def test_wrong_extension(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    (project / "p.bin").write_bytes((project / "p.pb").read_bytes())
    proc = run_pgle("run", "--profile", "p.bin", ECHO, cwd=project)
    assert proc.returncode == 2
    assert ".bin" in _one_error_line(proc) or "extension" in _one_error_line(proc)
    proc = run_pgle("collect", ECHO, "-o", "out.bin", cwd=project)
    assert proc.returncode == 2 and not (project / "out.bin").exists()


def test_empty_profile_refused_by_run(project):
    (project / "empty.pb").write_bytes(b"")
    proc = run_pgle("run", "--profile", "empty.pb", ECHO, cwd=project)
    assert proc.returncode == 2
    assert "empty" in _one_error_line(proc)


def test_removed_xla_flag(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project,
                    env=pgle_env(XLA_FLAGS="--xla_gpu_enable_async_all_reduce=true"))
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "xla_gpu_enable_async_all_reduce" in line and "xla_gpu_disable_async_collectives" in line


def test_existing_output_is_not_overwritten(project):
    (project / "prof.pb").write_bytes(b"precious")
    proc = run_pgle("collect", ECHO, "-o", "prof.pb", cwd=project)
    assert proc.returncode == 2
    assert "--force" in _one_error_line(proc)
    assert (project / "prof.pb").read_bytes() == b"precious"


@pytest.mark.unprivileged
@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere (CI reruns `-m unprivileged` "
                                              "as a non-root user)")
def test_unwritable_output_dir_nonroot(project):
    ro = project / "ro"
    ro.mkdir(mode=0o500)
    proc = run_pgle("collect", ECHO, "-o", str(ro / "p.pb"), cwd=project)
    assert proc.returncode == 2


def test_unwritable_output(project):
    (project / "file").write_text("not a dir")
    proc = run_pgle("collect", ECHO, "-o", "file/p.pb", cwd=project)
    assert proc.returncode == 2
    assert "not a directory" in _one_error_line(proc)


def test_jax_enable_pgle_refused_by_collect(project):
    proc = run_pgle("collect", ECHO, cwd=project, env=pgle_env(JAX_ENABLE_PGLE="true"))
    assert proc.returncode == 2
    assert "JAX_ENABLE_PGLE" in _one_error_line(proc)


def test_bad_steps_option(project):
    proc = run_pgle("collect", ECHO, "--steps", "3", cwd=project)
    assert proc.returncode == 2 and "START:COUNT" in _one_error_line(proc)


def test_debug_shows_traceback(project):
    proc = run_pgle("collect", "nope.py", "--debug", cwd=project)
    assert proc.returncode == 2 and "Traceback" in proc.stderr.decode()


def test_json_error_report(project):
    proc = run_pgle("collect", "nope.py", "--json", cwd=project)
    assert proc.returncode == 2
    assert report_of(proc) == {"status": "error", "exit_code": 2, "exit_code_from": "pgle",
                               "error": "script nope.py does not exist."}


def test_help_does_not_import_jax():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from pgle.cli.commands import COMMANDS\n"
        "from pgle.cli.main import cli\n"
        "r = CliRunner()\n"
        "assert r.invoke(cli, ['--help']).exit_code == 0\n"
        "for name in COMMANDS:\n"
        "    res = r.invoke(cli, [name, '--help'])\n"
        "    assert res.exit_code == 0, (name, res.output)\n"
        "bad = [m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jaxlib'))]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()


def test_unknown_option_is_one_line_with_a_hint(project):
    proc = run_pgle("collect", ECHO, "--batch", "64", cwd=project)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "--batch" in line and "after --" in line


def test_drift_from_the_collect_manifest_is_warned(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    (project / "p.pb.manifest.json").write_text(json.dumps({
        "jax_version": "0.0.1", "xla_flags": "--xla_gpu_exhaustive_tiling_search=true --xla_dump_to=/a",
        "device_count": 512}))
    proc = run_pgle("run", "--profile", "p.pb", "--json", ECHO, cwd=project,
                    env=pgle_env(XLA_FLAGS="--xla_gpu_exhaustive_tiling_search=false --xla_dump_to=/b"))
    assert proc.returncode == 0, proc.stderr.decode()
    warnings = report_of(proc)["warnings"]
    assert any("jax 0.0.1 collected the profile" in w for w in warnings)
    assert any("--xla_gpu_exhaustive_tiling_search was 'true' when collecting, now 'false'" in w for w in warnings)
    assert not any("xla_dump_to" in w for w in warnings)  # output-only flags never drift


def test_users_log_level_is_kept_with_a_warning(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", ECHO, cwd=project,
                    env=pgle_env(TF_CPP_MIN_LOG_LEVEL="1"))
    assert echoed(proc)["tf_cpp_min_log_level"] == "1"
    assert any("TF_CPP_MIN_LOG_LEVEL=1 hides" in w for w in report_of(proc)["warnings"])


@pytest.mark.parametrize("user", [None, "0"])
def test_run_asks_for_thread_ids_unless_the_user_chose(project, user):
    """jax < 0.7.2 (tsl prefix) logs thread ids only with TF_CPP_LOG_THREAD_ID: `pgle run` sets
    it, so the checker blocks of parallel compiles can be told apart; a user's value stays."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    extra = {} if user is None else {"TF_CPP_LOG_THREAD_ID": user}
    proc = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project, env=pgle_env(**extra))
    assert proc.returncode == 0, proc.stderr.decode()
    assert echoed(proc)["tf_cpp_log_thread_id"] == (user or "1")


def test_workload_is_not_forced_unbuffered_on_a_pipe(project):
    """Piped or logged, a Python program block-buffers without pgle; pgle leaves it so (forcing
    PYTHONUNBUFFERED made a program printing in lines 3x slower, issue 16)."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    env = {k: v for k, v in pgle_env().items() if k != "PYTHONUNBUFFERED"}
    proc = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert echoed(proc)["unbuffered"] is None
    mine = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project, env=pgle_env(PYTHONUNBUFFERED="1"))
    assert echoed(mine)["unbuffered"] == "1"  # the user's own choice is kept
