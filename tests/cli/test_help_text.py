"""`pgle --help` and every command's `--help` from the stored text (cli/help_text.py), as a user
runs them: identical to what click renders, never stale, and click's own rendering wherever the
stored text would not be what click prints."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from helpers.pgle_testing import REPO, pgle_env, run_pgle

from pgle.cli import help_text
from pgle.cli.main import COMMANDS


def gen():
    spec = importlib.util.spec_from_file_location("gen_help_text", REPO / "docs" / "gen_help_text.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stored_help_equals_clicks_rendering_now():
    # Renders every path through click in a fresh process at the stored width.
    g = gen()
    assert g.TARGET.read_text() == g.render(), (
        f"cli/help_text.py no longer matches click's help; regenerate it with: {g.REGENERATE}")


def test_every_command_and_subcommand_is_stored():
    assert {""} | set(COMMANDS) <= set(help_text.TEXT)
    assert {"cache ls", "flags explain", "store get"} <= set(help_text.TEXT)
    assert all(key.split()[0] in COMMANDS for key in help_text.TEXT if key)


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["diff", "--help"], ["convert", "-h"],
                                  ["cache", "ls", "--help"]])
def test_help_prints_the_stored_text_without_click(args, tmp_path):
    # Not a terminal: click would take 80 columns, less 2, which is the stored width.
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('click loaded: %s' % ('click' in sys.modules)))\n"
            "sys.argv = ['pgle'] + sys.argv[1:]\nfrom pgle.cli.main import main\nmain()\n")
    env = pgle_env()
    env.pop("COLUMNS", None)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == help_text.TEXT[" ".join(args[:-1])]
    assert proc.stdout == gen().click_help(args[:-1])
    assert proc.stderr == "click loaded: False"


@pytest.mark.parametrize("columns", ["60", "79"])
def test_a_narrower_terminal_gets_clicks_own_wrapping(columns, tmp_path):
    proc = run_pgle("merge", "--help", cwd=tmp_path, env=pgle_env(COLUMNS=columns))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == gen().click_help(["merge"], columns=int(columns))
    if columns == "60":
        assert proc.stdout.decode() != help_text.TEXT["merge"]


def test_a_wide_terminal_gets_the_stored_text(tmp_path):
    proc = run_pgle("store", "--help", cwd=tmp_path, env=pgle_env(COLUMNS="200"))
    assert proc.returncode == 0
    assert proc.stdout.decode() == help_text.TEXT["store"] == gen().click_help(["store"], columns=200)


@pytest.mark.parametrize("args", [["nosuch", "--help"], ["diff", "--top", "x", "--help"],
                                  ["diff", "--hlep"]])
def test_anything_else_goes_through_click(args, tmp_path):
    proc = run_pgle(*args, cwd=tmp_path)
    err = proc.stderr.decode()
    if args[-1] == "--help" and args[0] == "diff":
        # Options before --help: click's eager --help still wins, through click.
        assert proc.returncode == 0 and proc.stdout.decode() == help_text.TEXT["diff"]
        return
    assert proc.returncode == 2
    assert err.startswith("pgle: error: ") and len(err.strip().splitlines()) == 1


def test_check_fails_on_a_stale_file(tmp_path):
    stale = tmp_path / "help_text.py"
    stale.write_text((REPO / "cli" / "help_text.py").read_text().replace("--force", "--forse", 1))
    script = str(REPO / "docs" / "gen_help_text.py")
    proc = subprocess.run([sys.executable, script, "--check", "--output", str(stale)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert "regenerate it with: python3 docs/gen_help_text.py" in proc.stderr
