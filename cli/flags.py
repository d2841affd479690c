"""`pgle flags explain`: what each flag in an XLA_FLAGS string does, and whether XLA takes it."""

from __future__ import annotations

import os

import click

from cli.common import finish, report_options


@click.group("flags")
def flags():
    """Explain XLA flags."""


@flags.command("explain")
@click.argument("xla_flags", required=False, metavar='["XLA_FLAGS string"]')
@click.option("--probe", is_flag=True,
              help="Also ask the installed jaxlib (starts jax on CPU; a few seconds).")
@report_options
def explain(xla_flags, probe, json_out, report_path, debug):
    """Print each flag's meaning, default, jax versions and status (default: $XLA_FLAGS).

    Exits 1 when XLA would abort on a flag (removed, unknown to jaxlib with
    --probe, or a value it cannot read).
    """
    from pgle import doctor as doc

    text = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags

    def produce():
        report = doc.explain_flags(text, probe=probe)
        if not json_out:
            rows = report.details["flags"]
            click.echo(doc.format_flags(rows) if rows else "no flags")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
