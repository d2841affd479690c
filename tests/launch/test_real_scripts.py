"""pgle on scripts it did not write (issue 13): real-style workloads in the idioms of flax nnx,
equinox, optax and jax's stax (tests/workloads/real/), real JAX on CPU, real pgle processes.

Each test reproduces one case of the issue: no step markers, the script's own profiler, a
script that assigns XLA_FLAGS, tqdm-style progress, an eval loop between train steps, an early
exit; and what pgle printed about each.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile

REAL = WORKLOADS / "real"
FLAX = str(REAL / "flax_nnx_mlp.py")
EQX = str(REAL / "equinox_rnn.py")
GPT = str(REAL / "optax_gpt_profiler.py")
STAX = str(REAL / "stax_mlp.py")


def _manifest(project, name="p.pb"):
    return json.loads((project / f"{name}.manifest.json").read_text())


def test_flax_script_without_markers_that_assigns_xla_flags(project):
    """Case 1 + 3 (+ tqdm output, eval loop): the window is 5 executions of the train step
    after 2 (the eval step runs less often), said before the run; the assigned XLA_FLAGS
    dropped pgle's flag: warned while it ran, a reason, the manifest has what XLA saw."""
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", FLAX, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    err = proc.stderr.decode()
    report = report_of(proc)
    window = report["window"]
    assert window["purpose"] == "executions" and "train_step" in window["function"]
    assert (window["first_execution"], window["executions"]) == (2, 5)
    assert "profiling window:" in err and "executions 2..6 of its step function" in err
    assert "train 12/12" in err  # (--json: the workload's \r progress passed through
    # Said while the workload ran (before its last output), and again as a reason.
    early = err.index("pgle: warning: the workload replaced XLA_FLAGS")
    assert early < err.index("pgle: trace kept")
    # said live once, at the first compile (XLA read XLA_FLAGS as the backend came up), not at
    # each compile; then once as a reason
    assert err.count("pgle: warning: the workload replaced XLA_FLAGS") == 2
    assert any("replaced XLA_FLAGS" in r and "--xla_gpu_enable_command_buffer" in r
               for r in report["reasons"])
    man = _manifest(project)
    assert man["effective_xla_flags"] == "--xla_cpu_use_thunk_runtime=true"
    assert "--xla_gpu_enable_command_buffer=''" in man["child_xla_flags"]
    assert report["conversion"].startswith("skipped: the trace holds no GPU plane")


def test_a_script_that_appends_to_xla_flags_keeps_pgles(project):
    """Case 3's documented fix (docs/guide/real-scripts.md): append, don't assign."""
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", FLAX, "--", "--append",
                    cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "replaced XLA_FLAGS" not in proc.stderr.decode()
    effective = _manifest(project)["effective_xla_flags"].split()
    assert "--xla_gpu_enable_command_buffer=''" in effective
    assert "--xla_cpu_use_thunk_runtime=true" in effective


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """`pgle tune --json SCRIPT -- ARGS` in a project of its own, once per module for each
    script and arguments (a tune is two workload runs): the tests that read the same tune
    share it. Returns (the finished process, its project folder)."""
    done = {}

    def tune(script, *args):
        key = (script, *args)
        if key not in done:
            project = tmp_path_factory.mktemp("tune") / "proj ü"
            project.mkdir()
            proc = run_pgle("tune", "--json", script, "--", *args, cwd=project)
            assert proc.returncode == 0, proc.stderr.decode()
            done[key] = (proc, project)
        return done[key]

    return tune


GPT_TUNE = ["--profile-dir", "own-trace", "--steps", "16"]


def test_collect_uses_the_scripts_own_profiler_window(tuned):
    """Case 2: a MaxText-style start_trace/stop_trace no longer dies on 'Profile has already
    been started'; pgle's window gives way and the profile comes from the script's trace.
    Read from tune's collect phase (pgle's collect, in the tune run of the GPT script below)."""
    proc, project = tuned(GPT, *GPT_TUNE)
    report = report_of(proc)["phases"]["collect"]
    assert report["workload_exit_code"] == 0
    assert report["window"]["purpose"] == "script"  # not pgle's own window
    script = report["window"]["script_trace"]
    assert re.search(r"optax_gpt_profiler\.py:\d+$", script["site"])
    assert script["dir"] == "own-trace"
    assert report["trace_dir"] and list((project / "own-trace").rglob("*.xplane.pb"))
    # The script ran to its end, in both phases (--json: on stderr).
    assert proc.stderr.decode().count("step 15") == 2


def test_the_scripts_trace_context_yields_what_jax_yields(project):
    """`with jax.profiler.trace(d) as s:` under pgle's window: the script gets what jax gives
    it without pgle (jax >= 0.12: its ProfileSession; older: None), the trace lands in d, and
    the call site is the script's `trace(` line. The ProfileSession API itself (jax >= 0.12)
    is tested on the lane's jax 0.12 (tests/xla_gpu/test_profile_session.py)."""
    import subprocess
    import sys

    script = str(REAL / "profile_session_script.py")
    plain = subprocess.run([sys.executable, script, "--mode", "trace", "--profile-dir",
                            str(project / "plain")], cwd=project, capture_output=True,
                           text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    yielded = re.search(r"trace yielded: .*", plain.stdout).group(0)
    own = project / "own"
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", script, "--",
                    "--mode", "trace", "--profile-dir", str(own), cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert yielded in proc.stderr.decode()
    site = report_of(proc)["window"]["script_trace"]["site"]
    line = int(site.rsplit(":", 1)[1])
    assert "jax.profiler.trace(" in open(script).read().splitlines()[line - 1]
    assert list(own.rglob("*.xplane.pb"))


def test_auto_claims_no_collision_when_the_scripts_profiler_ran_after_profiling(project):
    """Case 2 under auto, the script's trace from step 3 on: auto PGLE had profiled train_step
    3 times by then, so nothing collided, and pgle claims nothing (issue 23: it used to)."""
    proc = run_pgle("auto", "--json", GPT, "--", "--profile-dir", str(project / "own"),
                    "--steps", "6", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert not any("profiler" in r for r in report["reasons"]), report["reasons"]
    step = next(m for m in report["modules"] if m["module"] == "jit_train_step")
    assert step["profiled_executions"] == 3 and "collision" not in step
    assert "collision" not in report


def test_auto_names_the_scripts_profiler_when_it_held_the_session(project):
    """The script's trace from step 0 on holds the profiler when auto PGLE profiles
    train_step: that collision is the reason (where the script starts it, and the fix),
    train_step carries it and is not lumped with one-shot code; setup modules keep theirs."""
    proc = run_pgle("auto", "--json", GPT, "--", "--profile-dir", str(project / "own"),
                    "--steps", "6", "--profile-start", "0", cwd=project)
    report = report_of(proc)
    assert any("its own profiler" in r and "optax_gpt_profiler.py:" in r
               for r in report["reasons"]), report["reasons"]
    assert report["collision"]["kind"] == "script"
    rows = {m["module"]: m for m in report["modules"]}
    assert rows["jit_train_step"]["collision"] == "script"
    assert "run more steps" not in (rows["jit_train_step"].get("fix") or "")
    assert "collision" not in rows["jit__randint"]
    one_shot = next(s for s in report["summary"] if "executed only once" in s)
    assert "jit_train_step" not in one_shot


def test_steps_on_a_script_without_markers_says_so_early(project):
    """Case 1: --steps cannot be met without markers; said during the run, pointing at the ways
    out, and the run goes on unprofiled (also: stax's RuntimeWarning prints as without pgle)."""
    proc = run_pgle("collect", "--steps", "2:3", "-o", "p.pb", "--allow-empty", "--json", STAX,
                    "--", "--steps", "24", cwd=project)
    assert proc.returncode == 1, proc.stderr.decode()  # nothing profiled: a pgle failure
    err = proc.stderr.decode()
    said = err.index("--steps 2:3 cannot be met")
    assert said < err.index("24/24")  # before the workload finished
    for way in ("--step-name", "--delay/--duration", "StepTraceAnnotation("):
        assert way in err
    assert any("cannot be met" in r for r in report_of(proc)["reasons"])
    assert err.count("RuntimeWarning: learning rate schedule is constant") == 1


def test_an_early_exit_cuts_the_execution_window_short_and_says_so(project):
    """The equinox script stops after 4 steps: executions 2 and 3 were profiled, not 5."""
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", EQX, "--",
                    "--stop-after", "4", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["window"]["executions"] == 2
    assert any("cut short" in w and "2 profiled executions" in w for w in report["warnings"])


def test_terminal_is_quiet_log_is_complete_and_tracebacks_are_the_workloads(project):
    """Case 5: XLA's INFO lines pgle turned on reach workload.log, not the terminal (unless
    --verbose); a workload's traceback starts in the workload, as under plain python."""
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    proc = run_pgle("run", "--profile", "p.pb", EQX, "--", "--stop-after", "3", "--crash",
                    cwd=project, env=pgle_env())
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert not re.search(r"^I\d{4} ", err, re.M), err[:2000]
    log = next(project.glob(".pgle/runs/*-run-*/workload.log")).read_text()
    assert re.search(r"^I\d{4} .*pjrt_client", log, re.M)
    tb = err[err.index("Traceback"):]
    assert "harness.py" not in tb and "runpy" not in tb
    assert "equinox_rnn.py" in tb and "FloatingPointError: loss diverged at step 2" in tb
    # --verbose lets them through: any jax program logs them (a tiny one: the equinox
    # script's compiles cost ~8 s of CPU and say nothing more here).
    (project / "tiny.py").write_text("import jax.numpy as jnp\nprint(jnp.ones(2).sum())\n")
    verbose = run_pgle("run", "--verbose", "--profile", "p.pb", "tiny.py", cwd=project,
                       env=pgle_env())
    assert verbose.returncode == 0, verbose.stderr.decode()
    assert re.search(r"^I\d{4} .*pjrt_client", verbose.stderr.decode(), re.M)


@pytest.mark.parametrize("script,args,function", [
    (FLAX, ["--steps", "16"], "jit(train_step)"),
    (GPT, GPT_TUNE, "jit(train_step)"),
    (STAX, ["--steps", "16"], None),  # 16: the kept trace and the intervals that touch it
])
def test_tune_on_cpu_times_unmarked_steps_and_prints_no_ratio(tuned, script, args, function):
    """Case 4, and issue 22: none of these scripts marks steps, yet tune times the steps it
    finds (the executions of the step function), says how it found them, and on CPU prints
    the documented caveat instead of a ratio. (equinox's eqx.filter_jit step is found by the
    same rule: tests/launch/test_step_forms.py[equinox], and the early exit test above.)"""
    proc, _ = tuned(script, *args)
    times = report_of(proc)["step_times"]
    lines = pgle_lines(proc)
    assert times["ratio"] is None and times["caveat"].startswith("no step-time ratio: backend cpu")
    assert not any(re.search(r"ratio \d", line) for line in lines)
    assert any(line.startswith(f"pgle: {times['caveat']}") for line in lines)
    steps = times["steps"]
    assert steps["source"] in ("executions", "markers")
    if function is not None:
        assert steps["source"] == "executions" and steps["function"] == function
        assert f"the steps are the 16 executions of {function}" in steps["how"]
        assert any(line.startswith("pgle: steps: no step markers") for line in lines)
    # The run's steps are timed with its kept trace (the after-picture) and compile left out.
    assert times["run"]["count"] >= 5
    median = next(line for line in lines if line.startswith("pgle: median step: "))
    assert f"{times['run']['median_s'] * 1e3:.2f} ms (run)" in median


def test_pgle_folder_gitignore(project):
    """Case 7 (hygiene): .pgle/ gets a .gitignore of `*` with the first run folder."""
    from pgle.launch.runfolder import RunFolder

    import os
    cwd = os.getcwd()
    os.chdir(project)
    try:
        RunFolder.create("run")
    finally:
        os.chdir(cwd)
    assert (project / ".pgle" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_run_of_a_script_that_never_imports_jax_says_so(project, tmp_path):
    """Case 6: the reason is the missing jax import, not XLA's INFO log."""
    script = tmp_path / "no_jax.py"
    script.write_text("import math\nprint(math.sqrt(4.0))\n")
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", str(script), cwd=project)
    report = report_of(proc)
    assert proc.returncode == 0, proc.stderr.decode()  # not_applied is a verdict, not a failure
    assert report["status"] == "not_applied"
    assert any("never imported jax" in r for r in report["reasons"]), report["reasons"]
    assert not any("INFO log" in r for r in report["reasons"])
