"""docs/architecture.md's recipes ("How to add a command, a converter, a verdict rule") hold:
every place they name exists, and a command and a converter built by their steps work."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from pgle import api
from pgle.commands import convert
from pgle.report import Report

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
PLACE = re.compile(r"`((?:pgle|cli|tests)/[\w/.<>-]+?)(?::(\w+))?`")


def recipes() -> str:
    return PAGE.read_text().split("## How to add a command, a converter, a verdict rule", 1)[1]


def defined(path: Path) -> set[str]:
    """The names a module defines at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_place_the_recipes_name_exists():
    places = PLACE.findall(recipes())
    assert len(places) > 25  # the recipes are read, or nothing is checked
    missing = []
    for path, name in places:
        if "<" in path:  # a template: `pgle/commands/<name>.py`
            assert path.count("<") == 1 and Path(REPO / path.split("<")[0]).is_dir(), path
            continue
        file = REPO / path
        if not file.exists():
            missing.append(path)
        elif name and name not in defined(file):
            missing.append(f"{path}:{name}")
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


# -- a command, added in a copy of the package as the recipe says --------------------------------

COMMAND = '''
"""`pgle hello NAME`: a command added by docs/architecture.md's recipe."""

from pgle.errors import BadInput
from pgle.report import Report


def hello(name: str, *, shout: bool = False) -> Report:
    if not name:
        raise BadInput("--name is empty.")
    line = f"hello, {name}"
    return Report("hello", "ok", summary=[line.upper() if shout else line])
'''
API = '''

@_front_door
def hello(name: str, *, shout: bool = False) -> Report:
    """`pgle hello NAME`: a greeting."""
    return _command("hello").hello(name, shout=shout)
'''
CLI = '''
"""`pgle hello NAME`."""

from typing import Any

import click

from pgle.cli.options import report_options
from pgle.report import Report


@click.command("hello")
@click.argument("name")
@click.option("--shout", is_flag=True, help="In capitals.")
@report_options
def hello(name: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.hello(name, **options)
'''


def test_a_command_added_by_the_recipe_works(tmp_path):
    copy = tmp_path / "pgle"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "pgle", copy, ignore=ignore)
    shutil.copytree(REPO / "cli", copy / "cli", ignore=ignore)  # installed as pgle.cli
    # 1. the work
    (copy / "commands" / "hello.py").write_text(textwrap.dedent(COMMAND))
    # 2. the front door
    source = (copy / "api.py").read_text().replace('__all__ = ["collect",',
                                                  '__all__ = ["hello", "collect",')
    (copy / "api.py").write_text(source + API)
    # 3. the command line
    (copy / "cli" / "hello.py").write_text(textwrap.dedent(CLI))
    # 4. one row in COMMANDS, nothing generated
    table = (copy / "cli" / "commands.py").read_text()
    row = '    "hello": ("pgle.cli.hello", "hello", "Say hello."),\n'
    (copy / "cli" / "commands.py").write_text(table.replace("COMMANDS: dict[str, tuple[str, str, str]] = {\n",
                                                       "COMMANDS: dict[str, tuple[str, str, str]] = {\n" + row))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def pgle(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pgle", *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=120, check=False)

    listed = pgle("--help")
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^\s+hello\s+Say hello\.$", listed.stdout, re.MULTILINE), listed.stdout
    said = pgle("hello", "world", "--shout")
    assert said.returncode == 0 and said.stderr == "pgle: HELLO, WORLD\n", said.stderr
    report = json.loads(pgle("hello", "world", "--json").stdout)
    assert report["command"] == "hello" and report["summary"] == ["hello, world"]
    refused = pgle("hello", "")
    assert refused.returncode == 2 and refused.stderr == "pgle: error: --name is empty.\n"
    code = ("import pgle.api\ntry:\n    pgle.api.hello('')\n"
            "except pgle.errors.BadInput as e:\n    print(e)\n")
    python = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120, check=False)
    assert python.stdout == "name is empty.\n", python.stderr
    assert str(copy) in subprocess.run(  # the copy ran, not the installed package
        [sys.executable, "-c", "import pgle; print(pgle.__file__)"], capture_output=True,
        text=True, cwd=tmp_path, env=env, check=True).stdout


# -- a converter, added as the recipe says ----------------------------------------------------

def test_a_converter_added_by_the_recipe_works(tmp_path, monkeypatch):
    looked: list[str] = []

    def detect(src: str) -> str | None:  # 1. one cheap look
        looked.append(src)
        return src if src.endswith(".demo") else None

    def from_demo(found: str, out: str, opts: convert.ConvertOptions) -> Report:  # 2.
        Path(out).write_text(Path(found).read_text().upper())
        return Report("convert", "ok", summary=[f"converted {found} (force={opts.force})"])

    # 3. a row before the last one
    rows = convert.CONVERTERS
    monkeypatch.setattr(convert, "CONVERTERS",
                        rows[:-1] + (convert.Converter("demo", detect, from_demo),) + rows[-1:])
    (tmp_path / "in.demo").write_text("costs")
    report = api.convert(str(tmp_path / "in.demo"), str(tmp_path / "out.txt"), force=True)
    assert report.summary == [f"converted {tmp_path / 'in.demo'} (force=True)"]
    assert (tmp_path / "out.txt").read_text() == "COSTS"
    assert looked == [str(tmp_path / "in.demo")]  # looked at once, then converted
