"""`pgle flags explain`: what each flag in an XLA_FLAGS string does, and whether XLA takes it."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import report_options
from .output import echo


@click.group("flags")
def flags() -> None:
    """Explain XLA flags."""


@flags.command("explain", context_settings={"ignore_unknown_options": True})
@click.argument("xla_flags", nargs=-1, type=click.UNPROCESSED, metavar='["XLA_FLAGS string"]')
@click.option(
    "--probe",
    is_flag=True,
    help="Also ask the installed jaxlib (starts jax on CPU; a few seconds).",
)
@report_options
def explain(xla_flags: tuple[str, ...], probe: bool, json_out: bool) -> Report:
    """Print each flag's meaning, default, jax versions and status (default: $XLA_FLAGS).

    Exits 1 when XLA would abort on a flag (removed, unknown to jaxlib with
    --probe, or a value it cannot read).
    """

    from pgle import api

    report = api.flags_explain(*xla_flags, probe=probe)
    if not json_out:
        rows = report.details["flags"]
        for line in flag_blocks(rows) if rows else ["no flags"]:
            echo(line)
    return report


def flag_blocks(rows: list[dict[str, Any]]) -> list[str]:
    """One block per flag: the flag and its status, then what pgle knows of it."""
    out = []
    for r in rows:
        out.append(f"{r['flag']}  [{r['status']}]")
        if r["message"]:
            out.append(f"    {r['message']}")
        if r["meaning"]:
            out.append(f"    meaning: {r['meaning']}")
            out.append(f"    default: {r['default']!r}   ({r['versions']})")
        if r["pgle"]:
            out.append(f"    PGLE: {r['pgle']}")
    return out
