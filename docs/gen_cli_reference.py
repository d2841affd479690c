"""Write docs/reference/cli.md from `pgle <command> --help`.

    python3 docs/gen_cli_reference.py            # rewrite docs/reference/cli.md
    python3 docs/gen_cli_reference.py --check    # exit 1 when the file is stale

The reference is the CLI's own help text, so the flag reference cannot drift
from the code (pip-tools does the same with `program-output`). Every command of
the COMMANDS table in cli/main.py is rendered, and the subcommands of a group
(`cache ls`, `flags explain`) too. Help goes through click's CliRunner at a fixed
width, so the output does not depend on the terminal it was generated in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from pgle.cli.commands import COMMANDS
from pgle.cli.main import cli

TARGET = Path(__file__).resolve().parent / "reference" / "cli.md"
REGENERATE = "python3 docs/gen_cli_reference.py"
WIDTH = 100

HEADER = f"""# CLI reference

Generated from `pgle <command> --help` by `{REGENERATE}`; do not edit by hand
(`tests/test_docs.py` fails when this file no longer matches the help). The guides explain what the
options are for: [manual PGLE](../guide/manual.md), [auto PGLE and Nsight Systems](../guide/auto-pgle-and-nsys.md),
[profiles](../guide/profiles.md), [before you launch](../guide/doctor.md), [cluster](../guide/cluster.md).
"""


def help_text(args: list[str]) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="pgle",
                                terminal_width=WIDTH, max_content_width=WIDTH)
    if result.exit_code != 0:
        raise SystemExit(f"pgle {' '.join(args)} --help failed ({result.exit_code}):\n{result.output}")
    return result.output.rstrip() + "\n"


def command_paths() -> list[list[str]]:
    """Every command of COMMANDS, in `pgle --help` order, each followed by its subcommands."""
    ctx = click.Context(cli, info_name="pgle")
    paths: list[list[str]] = []
    for name in cli.list_commands(ctx):
        assert name in COMMANDS
        paths.append([name])
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command, info_name=name, parent=ctx)
            paths.extend([name, sub] for sub in command.list_commands(sub_ctx))
    return paths


def render() -> str:
    parts = [HEADER, "## `pgle`\n", "```text\n" + help_text([]) + "```\n"]
    for path in command_paths():
        parts.append(f"{'#' * (len(path) + 1)} `pgle {' '.join(path)}`\n")
        parts.append("```text\n" + help_text(path) + "```\n")
    return "\n".join(parts)


def generate(description: str, render, target: Path, regenerate: str) -> int:
    """`--check` (exit 1 when `target` differs from `render()`) or write it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    parser.add_argument("--output", type=Path, default=target, help=f"default: {target.name}")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale; regenerate it with: {regenerate}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


def main() -> int:
    return generate(__doc__.splitlines()[0], render, TARGET, REGENERATE)

if __name__ == "__main__":
    sys.exit(main())
