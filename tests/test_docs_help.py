"""The guides and references agree with `--help`: every option a page shows on a `pgle COMMAND`
line is one that command's help lists, and the per-module profile format is stated the way the
code writes it, in the help and on every page."""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pgle.cli.commands import COMMANDS
from pgle.cli.main import cli

from pgle.commands.options import PER_MODULE_FORMAT
from pgle.profiles.files import SUFFIX

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
# Generated from the code itself (docs/gen_*.py, checked by tests/test_docs.py).
GENERATED = {DOCS / "reference" / "cli.md", DOCS / "reference" / "api.md"}
PAGES = sorted(p for p in [*DOCS.glob("guide/*.md"), *DOCS.glob("reference/*.md")]
               if p not in GENERATED)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
# A pgle flag: not an XLA flag (`--xla_gpu_...`), not part of a longer word.
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w*])")
# Where a `pgle ...` line stops being pgle's: the workload's arguments, another command.
STOP = {"--", "|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "\\"}
# `pgle nsys` passes the options it does not know to `nsys profile`: these are nsys's own.
NSYS_PROFILE_OPTIONS = {"--trace", "--output", "--sample", "--force-overwrite"}
HEADING = re.compile(r"^#{1,6}\s+(.*)$")


def snippets(text: str) -> list[tuple[int, str, str]]:
    """(line number, text, the heading above) of every code span and every line of a fenced
    block."""
    out, fenced, heading = [], False, ""
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            out.append((number, line.split(" #")[0], heading))  # a shell comment is prose
            continue
        m = HEADING.match(line)
        if m:
            heading = m.group(1)
        out += [(number, span, heading) for span in CODE_SPAN.findall(line)]
    return out


def commands_in(heading: str) -> list[tuple[str, ...]]:
    """The commands a heading is about: `pgle cache ls|stats|prune DIR` -> cache ls, stats,
    prune; `pgle collect --per-module` -> collect."""
    out: list[tuple[str, ...]] = []
    for m in re.finditer(r"pgle (\w+)(?: ([\w|]+))?", heading):
        if m.group(1) not in COMMANDS:
            continue
        command = cli.get_command(click.Context(cli), m.group(1))
        subs = (m.group(2) or "").split("|")
        if isinstance(command, click.Group):
            named = [s for s in subs if s in command.commands]
            out += [(m.group(1), s) for s in (named or sorted(command.commands))]
        else:
            out.append((m.group(1),))
    return out


def invocations(snippet: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """(command path, its flags) for each `pgle COMMAND [SUB] ...` in a snippet."""
    try:
        words = shlex.split(snippet, comments=False)
    except ValueError:  # an unbalanced quote in prose
        words = snippet.split()
    out = []
    for i, word in enumerate(words):
        if word != "pgle" or i + 1 >= len(words) or words[i + 1] not in COMMANDS:
            continue
        path = [words[i + 1]]
        rest = words[i + 2:]
        command = cli.get_command(click.Context(cli), path[0])
        if isinstance(command, click.Group) and rest and rest[0] in command.commands:
            path.append(rest.pop(0))
        flags = []
        for w in rest:
            if w in STOP or w == "pgle":
                break
            flags += FLAG.findall(w)
        out.append((tuple(path), flags))
    return out


def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="pgle", terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@functools.cache
def help_flags(path: tuple[str, ...]) -> frozenset[str]:
    flags = set(FLAG.findall(help_text(path)))
    return frozenset(flags | NSYS_PROFILE_OPTIONS if path == ("nsys",) else flags)


def documented() -> list[tuple[Path, int, tuple[tuple[str, ...], ...], str]]:
    """(page, line, the commands it may belong to, flag) of every option a page shows: on a
    `pgle COMMAND` line (that command's), or alone (`--stat`) in a section whose heading names
    commands (one of those commands'; elsewhere a flag alone may be another tool's)."""
    out = []
    for page in PAGES:
        for number, snippet, heading in snippets(page.read_text()):
            found = invocations(snippet)
            out += [(page, number, (path,), flag) for path, flags in found for flag in flags]
            owners = tuple(commands_in(heading))
            if not found and owners and snippet.startswith("--"):
                out += [(page, number, owners, flag) for flag in FLAG.findall(snippet)[:1]]
    return out


def test_the_pages_show_options():
    found = documented()
    assert len(found) > 100  # the scan sees the guides' commands, or it checks nothing
    assert any(paths == (("run",),) and flag == "--min-coverage" for _, _, paths, flag in found)
    assert any(("cache", "prune") in paths for _, _, paths, _ in found)
    assert any(paths == (("collect",),) and flag == "--stat" for _, _, paths, flag in found)


def test_every_documented_option_is_in_its_commands_help():
    wrong = [f"{page.relative_to(REPO)}:{number}: "
             f"{' or '.join('pgle ' + ' '.join(p) for p in paths[:3])}"
             f"{' or ...' if len(paths) > 3 else ''} {flag}"
             for page, number, paths, flag in documented()
             if not any(flag in help_flags(p) for p in paths)]
    assert not wrong, "options the docs show that `--help` does not list:\n" + "\n".join(wrong)


def test_the_scan_catches_a_wrong_option():
    [(path, flags)] = invocations("pgle cache prune DIR --older-then 7d --yes")
    assert path == ("cache", "prune") and flags == ["--older-then", "--yes"]
    assert "--older-then" not in help_flags(path)
    assert invocations("srun pgle tune train.py -- --steps 30") == [(("tune",), [])]
    assert invocations("pgle run --profile p.pb --xla_gpu_foo=1 x.py") == [(("run",), ["--profile"])]


# -- the per-module format --------------------------------------------------------------------

PER_MODULE_FILE = f"<fingerprint>{SUFFIX[PER_MODULE_FORMAT]}"
OTHER_FORMAT = next(f for f in SUFFIX if f != PER_MODULE_FORMAT)
# `<fingerprint>.pb` on its own (not `.pbtxt`, not `.pb|.pbtxt`): a format stated as the one
# written.
LONE = {fmt: re.compile(re.escape(f"<fingerprint>{suffix}") + r"(?![\w|])")
        for fmt, suffix in SUFFIX.items()}


def statements() -> list[tuple[str, str]]:
    """(where, line) of every line that names a per-module file format: the pages, README,
    `collect` and `tune --help`, and the commands' own messages."""
    sources = {str(p.relative_to(REPO)): p.read_text() for p in [*PAGES, REPO / "README.md"]}
    sources |= {f"pgle {c} --help": help_text((c,)) for c in ("collect", "tune")}
    sources |= {str(p.relative_to(REPO)): p.read_text()
                for p in sorted((REPO / "pgle" / "commands").glob("*.py"))}
    return [(where, line) for where, text in sources.items() for line in text.splitlines()
            if any(rx.search(line) for rx in LONE.values())]


def test_per_module_help_states_the_default_the_code_writes():
    text = " ".join(help_text(("collect",)).split())
    per_module = text.split("--per-module", 1)[1].split("  --", 1)[0]
    assert PER_MODULE_FILE in per_module, per_module
    assert f"{PER_MODULE_FILE} (text, default" in text  # --format's help


@pytest.mark.parametrize("where, line", statements())
def test_the_other_format_is_named_as_the_option(where, line):
    """A line that names `<fingerprint>.pb` alone names it as what `--format binary` writes (or
    as one of the files XLA reads, beside `.pbtxt`), never as what --per-module writes."""
    if LONE[OTHER_FORMAT].search(line):
        assert OTHER_FORMAT in line or PER_MODULE_FILE in line, f"{where}: {line.strip()}"
