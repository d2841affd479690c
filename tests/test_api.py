"""pgle.api is the one front door: every command has its function there, each keyword is its
flag's name, errors name the keyword to Python callers (the flag on the command line), the
keywords of the last release still work with a DeprecationWarning, and progress goes through
`logging`."""

from __future__ import annotations

import inspect
import logging
import re
import warnings

import click
import pytest
from helpers.pgle_testing import pgle_lines, run_pgle
from pgle.cli.commands import COMMANDS
from pgle.cli.main import cli

from pgle import api
from pgle.errors import BadInput, PgleError
from pgle.profiles.files import Profile, write_profile

# The API function of every command of the CLI (a group's subcommands: group_sub).
COMMAND_FUNCTIONS = {
    ("collect",): api.collect, ("run",): api.run, ("tune",): api.tune, ("verify",): api.verify,
    ("auto",): api.auto, ("prewarm",): api.prewarm, ("nsys",): api.nsys,
    ("inspect",): api.inspect, ("diff",): api.diff, ("merge",): api.merge,
    ("convert",): api.convert, ("report",): api.report, ("doctor",): api.doctor,
    ("view",): api.view, ("flags", "explain"): api.flags_explain,
    ("cache", "ls"): api.cache_ls, ("cache", "stats"): api.cache_stats,
    ("cache", "prune"): api.cache_prune, ("store", "ls"): api.store_ls,
    ("store", "add"): api.store_add, ("store", "get"): api.store_get,
    ("store", "prune"): api.store_prune, ("runs", "ls"): api.runs_ls,
    ("runs", "prune"): api.runs_prune, ("estimate",): api.estimate,
}
# Flags of the command line's own (how it prints), not options of the command.
SURFACE_FLAGS = {"--json", "--report", "--debug", "--verbose", "--dry-run", "--quiet"}


@pytest.fixture
def in_project(project, monkeypatch):
    """A folder with a workload `w.py` (never launched: the options are refused first)."""
    (project / "w.py").write_text("print('never run')\n")
    monkeypatch.chdir(project)
    return project


def click_command(path: tuple[str, ...]) -> click.Command:
    ctx = click.Context(cli, info_name="pgle")
    command = cli.get_command(ctx, path[0])
    for name in path[1:]:
        command = command.get_command(click.Context(command, info_name=path[0], parent=ctx), name)
    return command


def test_every_command_has_its_api_function():
    paths = set()
    ctx = click.Context(cli, info_name="pgle")
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            paths |= {(name, sub) for sub in command.list_commands(ctx)}
        else:
            paths.add((name,))
    assert paths == set(COMMAND_FUNCTIONS)


@pytest.mark.parametrize("path", sorted(COMMAND_FUNCTIONS), ids=" ".join)
def test_keywords_are_the_flags(path):
    """Each keyword of the function is a flag of the command (`min_coverage` <-> `--min-coverage`)
    or one of its arguments, and each flag of the command is a keyword."""
    fn = COMMAND_FUNCTIONS[path]
    command = click_command(path)
    flags = {o for p in command.params if isinstance(p, click.Option) and not p.hidden
             for o in p.opts if o.startswith("--")}
    arguments = {p.name for p in command.params if isinstance(p, click.Argument)}
    parameters = inspect.signature(fn).parameters
    keywords = {name for name, p in parameters.items()
                if p.kind is not p.VAR_POSITIONAL and name != "environ"}
    if "workload" in parameters:  # SCRIPT [ARGS] or -m MODULE [ARGS]: `module` is the workload's
        keywords.discard("module")
        flags.discard("--module")
    for kw in keywords:
        assert "--" + kw.replace("_", "-") in flags or kw in arguments, \
            f"pgle.api.{fn.__name__}({kw}=...) has no flag --{kw.replace('_', '-')}"
    for flag in flags - SURFACE_FLAGS:
        assert flag[2:].replace("-", "_") in keywords, f"pgle {' '.join(path)} {flag}: no keyword"
    if path == ("tune",):  # tune's --report X.html is the API's report="X.html"
        assert "report" in keywords


@pytest.mark.parametrize("call, keyword, flag", [
    (lambda: api.run("w.py", profile="p.pb", min_coverage=2), "min_coverage 2 is not between",
     "--min-coverage"),
    (lambda: api.collect("w.py", steps="4"), "steps '4' is not START:COUNT", "--steps"),
    (lambda: api.collect("w.py", per_module=True, converter="jaxlib"),
     "per_module=True needs pgle's converter", "--per-module"),
    (lambda: api.collect("w.py", format="text"), "format applies to per_module=True",
     "--format"),
    (lambda: api.auto("w.py", store_policy="keep:2"), "store_policy needs store", "--store"),
    (lambda: api.cache_prune("/nonexistent"), "prune needs older_than DURATION and/or module",
     "--older-than"),
    (lambda: api.runs_prune(older_than="seven days"), "older_than 'seven days' is not a duration",
     "--older-than"),
    (lambda: api.tune("w.py", repeat=0), "repeat 0: at least 1 run", "--repeat"),
])
def test_errors_name_the_keyword_for_python_callers(in_project, call, keyword, flag):
    with pytest.raises(PgleError) as caught:
        call()
    text = str(caught.value)
    assert text.startswith(keyword), text
    assert flag not in re.sub(r"`[^`]*`", "", text)  # a quoted command to type keeps its flags
    assert flag in caught.value.text(flags=True)  # what the command line prints


def test_the_command_line_names_the_flag(in_project):
    proc = run_pgle("run", "--profile", "p.pb", "--min-coverage", "2", "w.py", cwd=in_project)
    assert proc.returncode == 2
    assert pgle_lines(proc) == ["pgle: error: --min-coverage 2 is not between 0 and 1."]


def test_a_quoted_command_keeps_its_flags(in_project, tmp_path):
    # The hint is a command to type: its flags stay flags, whoever called.
    with pytest.raises(BadInput) as caught:
        api.auto("w.py", store=str(tmp_path / "nowhere"))
    assert "store " in str(caught.value) and "`pgle collect --store`" in str(caught.value)


def test_old_keywords_still_work_with_a_deprecation_warning(tmp_path):
    write_profile(Profile([("fusion.1", 1.0)]), tmp_path / "a.pb")
    with pytest.warns(DeprecationWarning, match=r"convert\(fmt=...\) is now format=..."):
        report = api.convert(str(tmp_path / "a.pb"), str(tmp_path / "d") + "/",
                             module=["0" * 32], fmt="text")
    assert report.status == "ok" and (tmp_path / "d" / ("0" * 32 + ".pbtxt")).is_file()
    log = tmp_path / "w.log"
    log.write_text("a log without any XLA line\n")
    with pytest.warns(DeprecationWarning, match="accuracy_checker_off"):
        old = api.verify(str(log), accuracy_checker=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = api.verify(str(log), accuracy_checker_off=True)
    assert old.to_dict() == new.to_dict()


def test_keep_trace_takes_the_flags_words_too(in_project):
    with pytest.raises(BadInput, match="^keep_trace 'maybe': use yes or no"):
        api.collect("w.py", keep_trace="maybe")


def test_tune_report_is_the_html_page(in_project):
    with pytest.raises(BadInput, match=r"^report r\.json: tune writes pgle report's HTML page"):
        api.tune("w.py", report="r.json")


def test_progress_goes_to_the_pgle_logger(tmp_path, caplog):
    """A library user sees pgle's notices through standard logging; `notify=` of the last
    release still receives them, with a DeprecationWarning."""
    (tmp_path / "w.py").write_text("print('no jax here')\n")
    write_profile(Profile([("fusion.1", 1.0)]), tmp_path / "p.pbtxt")
    caplog.set_level(logging.INFO, logger="pgle")
    got: list[str] = []
    with pytest.warns(DeprecationWarning, match="notify"):
        report = api.run(str(tmp_path / "w.py"), profile=str(tmp_path / "p.pbtxt"),
                         run_dir=str(tmp_path / "run"), notify=got.append)
    assert report.status in ("not_applicable", "not_applied")
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("pgle.")]
    assert any(m.startswith("running: ") for m in logged)
    assert any(m.startswith("running: ") for m in got)
    assert all(h.__class__.__name__ != "Forward" for h in logging.getLogger("pgle").handlers)
