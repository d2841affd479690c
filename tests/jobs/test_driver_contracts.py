"""The contracts of the job driver's layer: options refused before anything launches,
--report on errors and its placeholders, one boolean-env rule for collect and doctor (and
jax), --allow-empty across ranks, the CLI's help table, and the Python API giving the CLI's
verdicts. Real pgle subprocesses, real jax."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.pgle_testing import (EXAMPLES, WORKLOADS, marked_steps_script, pgle_env, pgle_lines,
                                  report_of, run_pgle, write_profile)
from pgle.commands import doctor
from pgle.errors import BadInput
from pgle.xla import env as env_rule

TRAIN = str(EXAMPLES / "train.py")
REPLAY = str(WORKLOADS / "replay_xla_log.py")


STEPS = marked_steps_script(3, 16)


def nothing_launched(project) -> bool:
    return not (project / ".pgle").exists()


# -- bad options: exit 2 before any launch ------------------------------------------------

@pytest.mark.parametrize("args", [
    ["tune", "--min-coverage", "2", TRAIN],
    ["run", "--profile", "p.pb", "--min-coverage", "-0.1", TRAIN],
    ["collect", "--steps", "1:2", "--delay", "1", TRAIN],
    ["collect", "--stat", "p50", TRAIN],
    ["auto", "--runs", "0", TRAIN],
    ["prewarm", "--cache-dir", "c", "--percentile", "101", TRAIN],
    ["run", "--profile", "p.pb", "--gather-timeout", "-1", TRAIN],
])
def test_bad_options_are_refused_before_anything_launches(project, args):
    write_profile(project / "p.pb", {"fusion.0": 1.0})
    proc = run_pgle(*args, cwd=project)
    assert proc.returncode == 2, proc.stderr.decode()
    (line,) = pgle_lines(proc)
    assert line.startswith("pgle: error: ")
    assert nothing_launched(project)  # no run folder: the workload never started
    assert b"Traceback" not in proc.stderr


def test_min_coverage_in_the_python_api_is_refused_on_construction():
    import pgle

    # Named as the Python caller named it (the CLI says --min-coverage: test_api.py).
    with pytest.raises(BadInput, match="^min_coverage 2 is not between 0 and 1"):
        pgle.tune(TRAIN, min_coverage=2)


# -- --report: placeholders checked up front, written on errors -------------------------------

def test_report_is_written_on_errors_with_the_error(project):
    proc = run_pgle("run", "--profile", "missing.pb", "--report", "rep.json", "--json", TRAIN,
                    cwd=project)
    assert proc.returncode == 2
    written = json.loads((project / "rep.json").read_text())
    assert written == report_of(proc)
    assert (written["status"], written["exit_code"]) == ("error", 2)
    assert "missing.pb" in written["error"]


def test_report_with_a_bad_placeholder_is_refused_before_the_run(project):
    proc = run_pgle("collect", "--report", "rep-%x.json", TRAIN, cwd=project)
    assert proc.returncode == 2
    (line,) = pgle_lines(proc)
    assert line.startswith("pgle: error: --report rep-%x.json:")
    assert nothing_launched(project) and not list(project.glob("rep*"))


def test_report_placeholders_are_filled_in(project):
    write_profile(project / "p.pb", {"fusion.0": 1.0})
    proc = run_pgle("inspect", "p.pb", "--report", "inspect-%r-%%.json", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads((project / "inspect-0-%.json").read_text())["command"] == "inspect"


# -- one boolean-env rule: jax's, collect's guard and doctor agree -----------------------------

VALUES = ["1", "t", "T", "y", "yes", "true", "TRUE", "on", "0", "f", "n", "no", "false", "off",
          "maybe", "", " 1"]


@pytest.mark.parametrize("value", VALUES)
def test_bool_env_rule_is_jaxs(value):
    from jax._src.config import bool_env as jax_bool_env  # jax 0.10.2, jax/_src/config.py

    import os

    os.environ["PGLE_TEST_BOOL"] = value
    try:
        try:
            expected = jax_bool_env("PGLE_TEST_BOOL", False)
        except ValueError:
            expected = ValueError
    finally:
        del os.environ["PGLE_TEST_BOOL"]
    try:
        ours = env_rule.bool_env({"PGLE_TEST_BOOL": value}, "PGLE_TEST_BOOL")
    except env_rule.NotABoolean:
        ours = ValueError
    assert ours == expected


@pytest.mark.parametrize("value", ["t", "y", "YES", "On", "1", "0", "f", "no", "maybe"])
def test_collect_refuses_exactly_what_doctor_calls_an_error(project, value):
    # The guard is decided before the launch: a workload without jax (no steps, so a collect
    # that is not refused fails with 1) tells refused from launched as well as a training does.
    script = project / "no_jax.py"
    script.write_text("print('launched')\n")
    env = pgle_env(JAX_ENABLE_PGLE=value)
    proc = run_pgle("collect", str(script), "--steps", "1:1", "-o", "p.pb", cwd=project,
                    env=env, timeout=300)
    checks = doctor.hazard_checks(doctor.Context.detect("manual", env))
    (check,) = [c for c in checks if c.check == "JAX_ENABLE_PGLE"]
    refused = proc.returncode == 2 and "JAX_ENABLE_PGLE" in proc.stderr.decode()
    assert refused != (b"launched" in proc.stdout), proc.stderr.decode()[-2000:]
    assert refused == (check.status == "error"), (proc.returncode, check)
    assert refused == (value.lower() not in env_rule.FALSE_VALUES)


# -- --allow-empty across ranks ---------------------------------------------------------------

def test_allow_empty_per_rank_outputs_exit_0_like_one_process(project):
    """Two ranks through pgle's own rank variables (no SLURM): on CPU both profiles are empty;
    with --allow-empty each rank writes its own and the job exits 0, as one process does."""
    # A few marked steps of one small jitted function: what --allow-empty is about (an empty
    # profile per rank) needs no 8-device training.
    steps = project / "steps.py"
    steps.write_text(STEPS)
    args = [sys.executable, "-m", "pgle", "collect", "--allow-empty", "--json", "-o",
            "rank%r.pb", "--steps", "1:1", str(steps)]
    procs = [subprocess.Popen(args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=pgle_env(PGLE_RANK=str(r), PGLE_WORLD_SIZE="2",
                                           PGLE_JOB_ID="empty"))
             for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1].decode()[-3000:]
    job = json.loads(outs[0][0])
    assert (job["status"], job["exit_code"], job["mode"]) == ("empty", 0, "per_rank")
    assert sorted(job["profile"]["ranks"]) == ["0", "1"]
    for r in (0, 1):
        assert (project / f"rank{r}.pb").is_file()
    # One process's --allow-empty exit 0: tests/commands/test_collect_empty.py.


# -- the CLI's command table --------------------------------------------------------------

def test_the_command_table_names_each_command_and_holds_its_help_line():
    """The table is the one place a command's one-line help is written: `pgle --help` lists
    each command with it."""
    import importlib

    from click.testing import CliRunner

    from pgle.cli.commands import COMMANDS
    from pgle.cli.main import cli

    listing = CliRunner().invoke(cli, ["--help"], terminal_width=200, max_content_width=200).output
    for name, (module, attr, line) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attr)
        assert command.name == name
        assert any(row.split() == [name, *line.split()] for row in listing.splitlines()), name


# -- the Python API gives the CLI's verdicts ---------------------------------------------------

def test_python_verify_equals_the_cli(project):
    import pgle

    log = project / "x.log"
    log.write_text(
        "I1122 04:33:12.000538  4101 gpu_hlo_schedule.cc:538] Using PGLE profile from /p.pb\n"
        "I1122 04:33:12.000612  4101 gpu_hlo_schedule.cc:612] Found profile for module "
        "jit_step, using profile guided latency estimator\n")
    cli = report_of(run_pgle("verify", "--json", "--require-applied", str(log), cwd=project))
    api = pgle.verify(str(log), require_applied=True).to_dict()
    assert api == cli


def test_python_run_equals_the_cli(project, monkeypatch, caplog):
    """A partial verdict: status, exit code 3 and reasons all differ from the defaults."""
    import pgle

    write_profile(project / "p.pb", {"fusion.1": 10.0, "all-reduce-start.2": 30.0})
    env = pgle_env(REPLAY_SCENARIO="partial")
    cli = report_of(run_pgle("run", "--profile", "p.pb", "--json", "--require-applied", REPLAY,
                             cwd=project, env=env))
    monkeypatch.chdir(project)
    caplog.set_level("INFO", logger="pgle")
    api = pgle.run(REPLAY, profile="p.pb", require_applied=True, environ=env).to_dict()
    messages = [r.getMessage() for r in caplog.records]
    assert (cli["status"], cli["exit_code"]) == ("partial", 3), cli["reasons"]
    for key in ("command", "status", "exit_code", "workload_exit_code", "reasons"):
        assert api[key] == cli[key], key
    assert [(m["module"], m["status"], m["coverage"]) for m in api["modules"]] == \
        [(m["module"], m["status"], m["coverage"]) for m in cli["modules"]]
    assert any(m.startswith("running: ") for m in messages)
