"""collect / run / tune end to end: real pgle, real JAX on CPU, real subprocesses (examples/train.py
as a test copy with a smaller model, compiled at -O0: tests/helpers/cheap_train.py)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from helpers.cheap_train import write_cheap_train
from pgle.launch.workload import Workload
from helpers.pgle_testing import EXAMPLES, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile

REPLAY = str(WORKLOADS / "replay_xla_log.py")


def test_collect_step_window_writes_trace_and_manifest(project):
    TRAIN = str(write_cheap_train(project, small=True))
    proc = run_pgle("collect", TRAIN, "--steps", "2:3", "-o", "prof.pb", "--allow-empty", "--json",
                    "--", "--steps", "7", cwd=project,
                    env=pgle_env(XLA_FLAGS="--xla_gpu_enable_command_buffer=''"))
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["command"] == "collect" and report["status"] == "empty"
    # The trace folder is kept and holds the xplane.
    trace_dir = Path(report["trace_dir"])
    assert list(trace_dir.glob("plugins/profile/*/*.xplane.pb"))
    assert any("trace kept at" in l for l in pgle_lines(proc))
    # The diagnosis names the backend.
    assert any("backend cpu" in w for w in report["warnings"])
    profile = project / "prof.pb"
    assert profile.exists() and profile.read_bytes() == b""
    manifest = json.loads((project / "prof.pb.manifest.json").read_text())
    assert manifest["backend"] == "cpu" and manifest["device_count"] == 8
    assert manifest["jax_version"] and manifest["jaxlib_version"]
    assert manifest["xla_flags"] == "--xla_gpu_enable_command_buffer=''"
    assert manifest["argv"] == [TRAIN, "--steps", "7"]
    assert manifest["window"]["first_step"] == 2 and manifest["window"]["steps"] == 3
    assert manifest["window"]["seconds"] > 0
    assert manifest["profile"]["sha256"] == hashlib.sha256(b"").hexdigest()
    assert manifest["profile"]["instructions"] == 0
    assert manifest["environment"]["JAX_PLATFORMS"] == "cpu"


def test_collect_empty_profile_is_an_error_with_diagnosis(project):
    TRAIN = str(write_cheap_train(project, small=True))
    proc = run_pgle("collect", TRAIN, "--steps", "1:1", "-o", "prof.pb", "--keep-trace", "no",
                    "--json", "--", "--steps", "3", cwd=project)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "the profile is empty" in err and "backend cpu" in err
    assert "--allow-empty" in err
    assert not (project / "prof.pb").exists()
    # Issue 13 case 7: a failed extraction keeps the trace even with --keep-trace no: it is
    # what is left to look at.
    assert "trace_deleted" not in report_of(proc)
    assert list(Path(report_of(proc)["trace_dir"]).glob("plugins/profile/*/*.xplane.pb"))


def test_collect_window_that_sees_no_step(project):
    TRAIN = str(write_cheap_train(project, small=True))
    proc = run_pgle("collect", TRAIN, "--steps", "50:2", "-o", "prof.pb", "--json", "--",
                    "--steps", "3", cwd=project)
    assert proc.returncode == 1
    report = report_of(proc)
    assert any("never opened" in r for r in report["reasons"]), report["reasons"]


@pytest.mark.parametrize("style", ["absl", "tsl"])
def test_run_applied_per_module(project, style):
    """The replay prints real captured lines (jax 0.10.2 absl, jax 0.6.2 tsl) of two modules
    compiling in parallel threads. jax < 0.7.0 names a module only in the VLOG fingerprint
    line (so the tsl case asks for it, as the lane does); its tsl prefix has thread ids only
    with TF_CPP_LOG_THREAD_ID, which `pgle run` sets: without it the interleaved checker
    block would be given to the wrong module."""
    write_profile(project / "p.pb", {"fusion.1": 10.0, "all-reduce-start.2": 30.0})
    # The absl run has XLA log the eval step's block first (issue 22: the step still leads).
    extra = {"TF_CPP_VMODULE": "gpu_hlo_schedule=1"} if style == "tsl" else \
        {"REPLAY_EVAL_FIRST": "1"}
    proc = run_pgle("run", "--profile", "p.pb", "--json", REPLAY, cwd=project,
                    env=pgle_env(REPLAY_SCENARIO="applied", REPLAY_PREFIX=style, **extra))
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    log = Path(report["log_path"]).read_text()
    if style == "tsl":
        assert re.search(r"^\d{4}-\d\d-\d\d [\d:.]+: W +\d+ external/xla/xla/service/"
                         r"profile_guided_latency_estimator\.cc:\d+\] Missing 2 ", log, re.M)
    assert report["status"] == "applied"
    modules = {m["module"]: m for m in report["modules"]}
    assert modules["jit_train_step"]["instructions_found"] == 38
    assert modules["jit_train_step"]["instructions_missing"] == 2
    assert modules["jit_train_step"]["coverage"] == pytest.approx(0.95)
    assert modules["jit_train_step"]["missing_instructions"] == ["fusion.0", "fusion.1"]
    assert modules["jit_eval_step"]["coverage"] == 1.0
    assert modules["jit_eval_step"]["status"] == "applied"
    # XLA got a content-addressed copy, not the user's path.
    given = report["profile"]["given_to_xla"]
    assert Path(given).name.startswith("profile-") and Path(given).read_bytes() == (project / "p.pb").read_bytes()
    assert report["workload_exit_code"] == 0 and report["exit_code"] == 0
    assert Path(report["log_path"]).exists()
    # Issue 22: the train step (executed 3 times, eval once) is the step, and leads the JSON
    # rows and the summary lines whatever order XLA logged them in.
    assert [m["module"] for m in report["modules"]] == ["jit_train_step", "jit_eval_step"]
    assert [m["executions"] for m in report["modules"]] == [3, 1]
    assert report["steps"]["source"] == "markers" and report["steps"]["module"] == "jit_train_step"
    lines = [l for l in pgle_lines(proc) if l.startswith("pgle:   jit_")]
    assert lines[0].startswith("pgle:   jit_train_step:")


def test_run_partial_below_threshold_fails_require_applied(project):
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    proc = run_pgle("run", "--profile", "p.pb", "--require-applied", "--json", REPLAY,
                    cwd=project, env=pgle_env(REPLAY_SCENARIO="partial"))
    assert proc.returncode == 3
    report = report_of(proc)
    assert report["status"] == "partial" and report["exit_code"] == 3
    train = next(m for m in report["modules"] if m["module"] == "jit_train_step")
    assert train["status"] == "partial" and train["coverage"] == pytest.approx(0.25)
    # A lower bar accepts the same evidence.
    proc = run_pgle("run", "--profile", "p.pb", "--require-applied", "--min-coverage", "0.2",
                    REPLAY, cwd=project, env=pgle_env(REPLAY_SCENARIO="partial"))
    assert proc.returncode == 0


def test_run_a_missing_collective_is_never_applied_and_require_names_the_module(project):
    # Issue 22: 95 % coverage, but the one all-gather the profile misses is what PGLE is for.
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    env = pgle_env(REPLAY_SCENARIO="collectives")
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--require", "jit_eval_step", REPLAY,
                    cwd=project, env=env)
    report = report_of(proc)
    train = next(m for m in report["modules"] if m["module"] == "jit_train_step")
    assert train["status"] == "partial" and train["rule"] == "collectives"
    assert train["coverage"] == pytest.approx(0.95)
    assert train["collectives_missing"] == ["all-gather-start.1"]
    # --require judges the named module only: the eval step applied it, so exit 0.
    assert report["status"] == "partial" and proc.returncode == 0, proc.stderr.decode()
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--require", "jit_train*", REPLAY,
                    cwd=project, env=env)
    assert proc.returncode == 3
    assert any("jit_train_step is partial" in r for r in report_of(proc)["reasons"])


def test_run_reads_the_executed_hlo_for_collectives_xla_made_synchronous(project):
    # jax >= 0.11.1 turns an async collective nothing overlaps into a new synchronous
    # instruction after scheduling (all-reduce-start -> all-reduce.6): the accuracy checker
    # lists all-reduce-start, which no profile can hold. `pgle run` keeps the executed HLO of
    # every module with a collective (here the train step's psum over 8 CPU devices, a
    # synchronous all-reduce) and sees the module does not run all-reduce-start: not counted.
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    flags = "--xla_force_host_platform_device_count=8"
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--require-applied", REPLAY,
                    cwd=project, env=pgle_env(REPLAY_SCENARIO="sync_converted", REPLAY_PSUM="1",
                                              XLA_FLAGS=flags))
    report = report_of(proc)
    assert (report["status"], proc.returncode) == ("applied", 0), proc.stderr.decode()
    train = next(m for m in report["modules"] if m["module"] == "jit_train_step")
    assert train["collectives_converted"] == [{"scheduled": "all-reduce-start", "executed": None}]
    assert train["collectives_missing"] == [] and train["coverage"] == pytest.approx(38 / 39)
    assert any("not in the executed module" in n and "executed HLO" in n for n in train["notes"])
    # The same log where the executed module kept no HLO (no collective: nothing shows what
    # it ran): this jax (0.10.2) keeps the name of a pair it makes synchronous, so a profile of
    # the run would hold all-reduce-start: missing, partial.
    proc = run_pgle("run", "--profile", "p.pb", "--json", REPLAY, cwd=project,
                    env=pgle_env(REPLAY_SCENARIO="sync_converted", XLA_FLAGS=flags))
    train = next(m for m in report_of(proc)["modules"] if m["module"] == "jit_train_step")
    assert (train["status"], train["rule"]) == ("partial", "collectives"), train
    assert train["collectives_missing"] == ["all-reduce-start"]


@pytest.mark.parametrize("scenario,status,words", [
    ("parse_error", "error", "could not parse"),
    ("file_missing", "error", "no profile file"),
])  # ("none", "not_applicable", "backend cpu"): test_regenerated_profile_gets_a_new_path
def test_run_negative_verdicts(project, scenario, status, words):
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", REPLAY, cwd=project,
                    env=pgle_env(REPLAY_SCENARIO=scenario))
    report = report_of(proc)
    assert report["status"] == status
    assert any(words in r for r in report["reasons"]), report["reasons"]
    assert proc.returncode == 0  # only --require-applied turns a verdict into a failure


def test_regenerated_profile_gets_a_new_path(project):
    """A profile rewritten at the same path must never reach XLA under the same flag string."""
    reports = []
    for cost in (10.0, 99.0):
        write_profile(project / "p.pb", {"fusion.1": cost})
        proc = run_pgle("run", "--profile", "p.pb", "--json", REPLAY, cwd=project,
                        env=pgle_env(REPLAY_SCENARIO="none"))
        reports.append(report_of(proc))
        # No XLA:GPU line at all: the negative verdict of a CPU run, still exit 0.
        assert reports[-1]["status"] == "not_applicable"
        assert any("backend cpu" in r for r in reports[-1]["reasons"]), reports[-1]["reasons"]
        assert proc.returncode == 0
    first, second = reports
    assert first["profile"]["given_to_xla"] != second["profile"]["given_to_xla"]


def _manifest(project, name="prof.pb"):
    return json.loads((project / f"{name}.manifest.json").read_text())


def test_default_window_is_steps_2_to_6_when_the_script_marks_steps(project):
    TRAIN = str(write_cheap_train(project, small=True))
    # The same run is issue 13 case 7's: --keep-trace no deletes the trace once the profile
    # is written, and says so (the failed extraction that keeps it: the empty-profile test).
    proc = run_pgle("collect", TRAIN, "-o", "prof.pb", "--allow-empty", "--keep-trace", "no",
                    "--json", "--", "--steps", "9", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    window = _manifest(project)["window"]
    assert window["mode"] == "auto" and window["first_step"] == 2 and window["steps"] == 5
    trace_dir = Path(report_of(proc)["trace_deleted"])
    assert trace_dir.name == "trace" and not trace_dir.exists() and trace_dir.parent.is_dir()
    assert (project / "prof.pb").exists() and (trace_dir.parent / "workload.log").exists()
    assert any("deleted the trace" in l and "--no-keep-trace" in l for l in pgle_lines(proc))


def test_default_window_without_steps_is_a_few_executions_of_the_jitted_function(project):
    proc = run_pgle("collect", str(WORKLOADS / "no_steps.py"), "-o", "prof.pb", "--allow-empty",
                    cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    window = _manifest(project)["window"]
    assert window["mode"] == "auto" and window["steps"] is None
    assert window["purpose"] == "executions" and window["function"] == "jit(<lambda>)"
    assert window["first_execution"] == 2 and window["executions"] == 5
    assert not list((project / ".pgle").rglob(".executions"))  # moved into place


def test_time_window(project):
    proc = run_pgle("collect", str(WORKLOADS / "no_steps.py"), "--delay", "0", "--duration",
                    "0.5", "-o", "prof.pb", "--allow-empty", "--", "3", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    window = _manifest(project)["window"]
    assert window["mode"] == "time" and 0.4 < window["seconds"] < 2.5


def test_run_with_a_directory_verifies_per_module(project):
    fp_train, fp_eval, fp_unused = "a" * 32, "b" * 32, "c" * 32
    d = project / "profiles"
    d.mkdir()
    write_profile(d / f"{fp_train}.pb", {"fusion.1": 3.0})
    write_profile(d / f"{fp_unused}.pb", {"fusion.9": 3.0})
    # XLA names a module whose file is missing only in its VLOG fingerprint line.
    proc = run_pgle("run", "--profile", "profiles", "--json", REPLAY, cwd=project,
                    env=pgle_env(REPLAY_SCENARIO="directory", REPLAY_FP_TRAIN=fp_train,
                                 REPLAY_FP_EVAL=fp_eval, TF_CPP_VMODULE="gpu_hlo_schedule=1"))
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["status"] == "partial"
    modules = {m["module"]: m for m in report["modules"]}
    assert modules["jit_train_step"]["status"] == "applied"
    assert modules["jit_train_step"]["fingerprint"] == fp_train
    assert modules["jit_eval_step"]["status"] == "not_applied"
    assert report["directory"] == {"found": [fp_train], "looked_up_missing": [fp_eval],
                                   "unused": [fp_unused]}
    # XLA was given a content-addressed copy of the directory.
    given = Path(report["profile"]["given_to_xla"])
    assert given.is_dir() and (given / f"{fp_train}.pb").exists()


def test_step_name_counts_only_those_steps(project):
    proc = run_pgle("collect", str(EXAMPLES / "train_eval.py"), "--step-name", "train",
                    "--steps", "2:3", "-o", "prof.pb", "--allow-empty", "--json", "--",
                    "--steps", "8", "--eval-every", "2", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    window = report_of(proc)["window"]
    # 8 train steps and 4 eval steps ran; only the train steps count.
    assert window["steps_seen"] == 8 and window["first_step"] == 2 and window["steps"] == 3


SLOW_STEPS = """
import time, jax, jax.numpy as jnp
f = jax.jit(lambda x: x * 2)
x = jnp.ones(4)
for i in range(4):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        f(x).block_until_ready()
        if i in (1, 2):  # the window's two steps: 14 s, past the first 10 s progress line
            time.sleep(7)
"""


def test_collect_prints_plain_progress_lines_during_the_window(project):
    """Issue 13 case 7: a long window says how it goes, in plain `pgle:` lines (no \\r), at
    most one every 10 s."""
    script = project / "slow.py"
    script.write_text(SLOW_STEPS)
    proc = run_pgle("collect", str(script), "--steps", "1:2", "-o", "p.pb", "--allow-empty",
                    cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    err = proc.stderr.decode()
    progress = [l for l in pgle_lines(proc) if "profiling window open for" in l]
    assert progress and re.search(r"\b(1 step|\d+ steps) entered", progress[0]), pgle_lines(proc)
    assert not any(" -0 s" in line for line in progress)
    assert len(progress) <= 3  # the window lasts about 14 s: rate-limited, not every poll
    assert "\r" not in err


def test_a_variable_the_run_sets_replaces_the_users_own(project, monkeypatch):
    """tune's o1 arm runs `pgle run` with JAX_OPTIMIZATION_LEVEL set for the workload: it
    replaces the user's own value (with a notice), or the arm would measure the user's level
    and its ratio would compare default with default."""
    import os

    from pgle.commands import run as run_command
    from pgle.jobs import driver
    from pgle.launch.workload import Workload

    write_profile(project / "p.pb", {"fusion.0": 1.0})
    script = project / "seen.py"
    script.write_text("import os\nopen('seen', 'w').write(os.environ['JAX_OPTIMIZATION_LEVEL'])\n")
    monkeypatch.chdir(project)
    opts = run_command.RunOptions(Workload(str(script), None, ()), "p.pb",
                                  env=(("JAX_OPTIMIZATION_LEVEL", "O1"),))
    wf = driver.Workflow("run", run_command.request, run_command.body, run_command.combine)
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_OPTIMIZATION_LEVEL": "O0"}
    report = driver.run(wf, opts, environ=environ)
    assert report.workload_exit_code == 0, report.reasons
    assert (project / "seen").read_text() == "O1"


def _cached_run_folder(root: Path, *, hits: tuple[bool, ...]) -> Path:
    """A GPU run's folder whose executables jax compiled (False) or loaded from its persistent
    cache (True), as the harness records them; XLA logged nothing."""
    run = root / "run"
    run.mkdir(parents=True)
    use, hit = "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_hits"
    recs = [{"kind": "start", "t": 1.0}, {"kind": "jax_imported", "t": 1.5, "version": "0.10.2"},
            {"kind": "backend", "t": 2.0, "platform": "gpu", "device_count": 1,
             "device_kind": "NVIDIA H100", "process_count": 1}]
    for i, cached in enumerate(hits):
        t, module = 10.0 + i, f"jit_f{i}"
        recs += [{"kind": "compile_begin", "t": t, "module": module, "thread": "1", "fdo": False},
                 {"kind": "jax_event", "t": t + 0.1, "event": use, "thread": "1"}]
        if cached:
            recs.append({"kind": "jax_event", "t": t + 0.2, "event": hit, "thread": "1"})
        recs.append({"kind": "compile_end", "t": t + 0.3, "module": module, "ok": True,
                     "thread": "1"})
    recs.append({"kind": "exit", "t": 20.0, "code": 0})
    (run / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "workload.log").write_text("")
    return run


def test_run_whose_every_executable_came_from_the_cache_says_xla_compiled_nothing(tmp_path):
    # Issue 31's rule as `pgle run` applies it to its run folder (in process: no CPU run can
    # compile for a GPU): XLA compiled nothing, so the log cannot tell, an error that says so;
    # one executable compiled anew and the silent log is `not_applied` again.
    from helpers.run_folder import execution_from_run_folder
    from pgle.commands.run import RunOptions, finish_run

    opts = RunOptions(workload=Workload(str(WORKLOADS / "train.py"), None, ()), profile="p.pb")
    warm = finish_run(opts, execution_from_run_folder(
        _cached_run_folder(tmp_path / "warm", hits=(True, True))), None, None, [])
    assert warm.status == "error", warm.reasons
    assert "XLA compiled nothing" in warm.reasons[0], warm.reasons
    mixed = finish_run(opts, execution_from_run_folder(
        _cached_run_folder(tmp_path / "mixed", hits=(True, False))), None, None, [])
    assert mixed.status == "not_applied", mixed.reasons
