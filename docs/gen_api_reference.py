"""Write docs/reference/api.md from pgle/api.py: each function's signature and docstring.

    python3 docs/gen_api_reference.py            # rewrite docs/reference/api.md
    python3 docs/gen_api_reference.py --check    # exit 1 when the file is stale

Like the CLI reference (docs/gen_cli_reference.py), the page is the code's own text, so it
cannot drift from it: the functions of `pgle.api.__all__` in the order of pgle/api.py, grouped
under its section comments (`# -- title ---`), each with its keywords, their types and
defaults, and the flag each keyword is.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pgle.cli.main import cli

from pgle import api

DOCS = Path(__file__).resolve().parent
TARGET = DOCS / "reference" / "api.md"
REGENERATE = "python3 docs/gen_api_reference.py"
SECTION = re.compile(r"^# -- (.+?) -+$")

HEADER = f"""# Python API reference

Generated from the signatures and docstrings of `pgle/api.py` by `{REGENERATE}`; do not edit by
hand (`tests/test_docs.py` fails when this file no longer matches the code). Every command of the
[CLI](cli.md) is a function here, and a keyword is its flag's name (`--min-coverage` ->
`min_coverage`); the guides explain what the options are for.
"""


def _generate() -> Callable[..., int]:
    """gen_cli_reference.generate (--check and --output), loaded from beside this file."""
    spec = importlib.util.spec_from_file_location("gen_cli_reference",
                                                  DOCS / "gen_cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate: Callable[..., int] = module.generate
    return generate


def sections() -> dict[str, str]:
    """Function name -> the title of the section comment above it, in pgle/api.py's order."""
    source = Path(inspect.getfile(api)).read_text()
    marks = [(number, m.group(1)) for number, line in enumerate(source.splitlines(), 1)
             if (m := SECTION.match(line))]
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            above = [title for number, title in marks if number < start]
            out[node.name] = above[-1] if above else ""
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    return f"`{value!r}`"


def command_of(name: str) -> click.Command:
    """The click command of API function `name` (`cache_ls` -> `pgle cache ls`)."""
    ctx = click.Context(cli, info_name="pgle")
    words = name.split("_", 1) if name.split("_", 1)[0] in ("cache", "store", "runs", "flags") \
        else [name]
    command = cli.get_command(ctx, words[0])
    assert command is not None, name
    if len(words) > 1:
        assert isinstance(command, click.Group)
        sub = command.get_command(ctx, words[1])
        assert sub is not None, name
        return sub
    return command


def on_the_command_line(command: click.Command, p: inspect.Parameter) -> str:
    """How the command line spells parameter `p`: its flags, or its argument's metavar."""
    flag = "--" + p.name.replace("_", "-")
    for param in command.params:
        if isinstance(param, click.Option) and flag in param.opts:
            return ", ".join(f"`{o}`" for o in param.opts)
        if isinstance(param, click.Argument) and (
                param.name == p.name or (p.kind is p.VAR_POSITIONAL and param.nargs == -1)):
            return f"`{param.metavar or param.name.upper()}`"
    if p.name == "module":
        return "`-- -m MODULE`"
    return "Python only"


def render_function(name: str) -> str:
    fn = getattr(api, name)
    signature = inspect.signature(fn)
    params = []
    for p in signature.parameters.values():
        text = f"*{p.name}" if p.kind is p.VAR_POSITIONAL else p.name
        if p.annotation is not inspect.Parameter.empty:
            text += f": {p.annotation}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        params.append(text)
    keyword_only = any(p.kind is p.KEYWORD_ONLY for p in signature.parameters.values())
    if keyword_only and not any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
        first_kw = next(i for i, p in enumerate(signature.parameters.values())
                        if p.kind is p.KEYWORD_ONLY)
        params.insert(first_kw, "*")
    head = f"pgle.api.{name}(\n" + "".join(f"    {p},\n" for p in params) + \
        f") -> {signature.return_annotation}"
    command = command_of(name)
    rows = "\n".join(
        f"| `{p.name}` | {_cell(on_the_command_line(command, p))} | "
        f"{_cell('`' + str(p.annotation) + '`') if p.annotation is not p.empty else ''} | "
        f"{_cell(_default(p.default)) if p.kind is not p.VAR_POSITIONAL else ''} |"
        for p in signature.parameters.values())
    doc = inspect.cleandoc(fn.__doc__ or "")
    return (f"### `pgle.api.{name}`\n\n```python\n{head}\n```\n\n{doc}\n\n"
            f"| parameter | on the command line | type | default |\n|---|---|---|---|\n{rows}\n")


def render() -> str:
    titles = sections()
    parts = [HEADER, "## The module\n", inspect.cleandoc(api.__doc__ or "") + "\n"]
    current = None
    for name in [n for n in titles if n in api.__all__]:
        if titles.get(name) != current:
            current = titles.get(name)
            parts.append(f"## {current[0].upper() + current[1:]}\n" if current else "")
        parts.append(render_function(name))
    return "\n".join(p for p in parts if p)


def main() -> int:
    return _generate()((__doc__ or "").splitlines()[0], render, TARGET, REGENERATE)


if __name__ == "__main__":
    sys.exit(main())
