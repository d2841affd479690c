"""`pgle flags explain`: what each flag in an XLA_FLAGS string does, and whether XLA takes it."""

from __future__ import annotations

import os

import click

from pgle.cli.options import report_options
from pgle.cli.output import finish


@click.group("flags", short_help='Explain an XLA_FLAGS string: meaning, defaults, status.')
def flags():
    """Explain XLA flags."""


@flags.command("explain", context_settings={"ignore_unknown_options": True})
@click.argument("xla_flags", nargs=-1, type=click.UNPROCESSED, metavar='["XLA_FLAGS string"]')
@click.option("--probe", is_flag=True,
              help="Also ask the installed jaxlib (starts jax on CPU; a few seconds).")
@report_options
def explain(xla_flags, probe, json_out, report_path, debug):
    """Print each flag's meaning, default, jax versions and status (default: $XLA_FLAGS).

    Exits 1 when XLA would abort on a flag (removed, unknown to jaxlib with
    --probe, or a value it cannot read).
    """
    from pgle.commands import doctor as doc

    text = os.environ.get("XLA_FLAGS", "") if not xla_flags else _join(xla_flags)

    def produce():
        report = doc.explain_flags(text, probe=probe)
        if not json_out:
            rows = report.details["flags"]
            click.echo(doc.format_flags(rows) if rows else "no flags")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


def _join(tokens: tuple[str, ...]) -> str:
    """One argument is the XLA_FLAGS string itself; several are one flag each, as the shell
    split them (a value with spaces gets quoted again)."""
    if len(tokens) == 1:
        return tokens[0]
    from pgle.xla.flags import render_flag

    out = []
    for token in tokens:
        name, sep, value = token.partition("=")
        if sep and token.startswith("-") and any(c.isspace() for c in value):
            dashes = name[:len(name) - len(name.lstrip("-"))]  # keep them: one dash is an error
            token = dashes + render_flag(name.lstrip("-"), value)[2:]
        out.append(token)
    return " ".join(out)
