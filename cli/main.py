"""The `pgle` command group.

Subcommands are imported only when invoked, so `pgle --help` stays fast and
never imports jax.
"""

from __future__ import annotations

import importlib
import sys

import click

from pgle import __version__

# name -> (module under cli/, function, one-line help shown by `pgle --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "collect": ("pgle.cli.manual", "collect", "Profile a workload and extract the PGLE profile."),
    "run": ("pgle.cli.manual", "run", "Run a workload with a PGLE profile and verify XLA used it."),
    "tune": ("pgle.cli.manual", "tune", "Collect, then run with the profile: one verdict, with step times."),
    "verify": ("pgle.cli.manual", "verify", "Build the PGLE verdict from a saved log."),
    "doctor": ("pgle.cli.doctor", "doctor", "Check jax, GPU, CUPTI, nsys, XLA_FLAGS and the cache before a job."),
    "flags": ("pgle.cli.flags", "flags", "Explain an XLA_FLAGS string: meaning, defaults, status."),
    "view": ("pgle.cli.view", "view", "Open a run folder's kept trace in XProf."),
    "cache": ("pgle.cli.cache", "cache", "List, total and prune a JAX persistent compilation cache."),
    "auto": ("pgle.cli.auto", "auto", "Run with JAX's auto PGLE and verify each module was re-optimized."),
    "prewarm": ("pgle.cli.prewarm", "prewarm", "Fill a compilation cache with PGLE-optimized executables."),
    "nsys": ("pgle.cli.nsys", "nsys", "Run under Nsight Systems; verify it loaded the prewarmed PGLE modules."),
    "inspect": ("pgle.cli.profiles", "inspect", "Show what a profile holds: counts, top costs, categories."),
    "diff": ("pgle.cli.profiles", "diff", "Compare two profiles: missing instructions, largest changes."),
    "merge": ("pgle.cli.profiles", "merge", "Merge profiles of several runs or ranks (jaxlib's percentile rule)."),
    "convert": ("pgle.cli.profiles", "convert", "Convert profiles (binary/text, file/directory) or a trace."),
    "report": ("pgle.cli.report", "report", "What PGLE bought, and why: one HTML/JSON report from run folders."),
    "runs": ("pgle.cli.runs", "runs", "List and prune the run folders under .pgle/runs (logs, traces)."),
    "store": ("pgle.cli.store", "store", "A fingerprint-keyed profile store for recurring jobs: ls, add, get, prune."),
}


# Commands whose trailing arguments are a workload (SCRIPT [-- ARGS]).
WORKLOAD_COMMANDS = {"collect", "run", "tune", "auto", "prewarm", "nsys"}


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
    try:
        cli.main(prog_name="pgle", standalone_mode=False)
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


if __name__ == "__main__":
    main()
