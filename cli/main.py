"""The `pgle` command group.

Subcommands are imported only when invoked, so `pgle --help` stays fast and
never imports jax.
"""

from __future__ import annotations

import importlib

import click

from pgle import __version__

# name -> (module under cli/, function, one-line help shown by `pgle --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "collect": ("cli.manual", "collect", "Profile a workload and extract the PGLE profile."),
    "run": ("cli.manual", "run", "Run a workload with a PGLE profile and verify XLA used it."),
    "tune": ("cli.manual", "tune", "Collect, then run with the profile: one verdict, with step times."),
    "verify": ("cli.manual", "verify", "Build the PGLE verdict from a saved log."),
    "cache": ("cli.cache", "cache", "List, total and prune a JAX persistent compilation cache."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

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


def main():
    cli(prog_name="pgle")


if __name__ == "__main__":
    main()
