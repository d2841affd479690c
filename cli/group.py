"""The `pgle` click group and how its errors are shown: everything `pgle ...` does except
printing stored help (cli/main.py).

Subcommands are imported only when invoked, so `pgle --help` stays fast and never imports jax.
"""

from __future__ import annotations

import importlib
import sys

import click

from pgle.version import __version__

from .commands import COMMANDS, WORKLOAD_COMMANDS


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        from .options import quiet_option

        module, attr, _ = COMMANDS[name]
        return quiet_option(getattr(importlib.import_module(module), attr))

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgle")
def cli():
    """Run XLA's Profile Guided Latency Estimator workflows for JAX, and prove they worked.

    Arguments after `--` go to the workload untouched. pgle's own messages go to
    stderr with a `pgle:` prefix; `--json` prints one report on stdout.
    """


def run() -> None:
    from .options import renamed_args
    from .output import show_log_lines

    show_log_lines()
    args, notes = renamed_args(sys.argv[1:])
    for note in notes:
        click.echo(f"pgle: warning: {note}", err=True)
    try:
        cli.main(args=args, prog_name="pgle", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("pgle: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else e.format_message())
        sys.exit(0)
    except click.UsageError as e:
        # One line, as for every other bad input (exit 2).
        hint = ""
        if isinstance(e, click.NoSuchOption) and e.ctx and e.ctx.command.name in WORKLOAD_COMMANDS:
            hint = " (arguments for the workload go after --)"
        where = e.ctx.command_path if e.ctx else "pgle"
        click.echo(f"pgle: error: {e.format_message()}{hint} See '{where} --help'.", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"pgle: error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    sys.exit(0)
