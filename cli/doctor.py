"""`pgle doctor`: check jax, the GPU stack and the environment before a big job."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import report_options
from .output import echo, table


@click.command("doctor")
@click.option(
    "--workflow",
    type=click.Choice(["manual", "auto", "prewarm", "nsys"]),
    default="manual",
    show_default=True,
    help="Which workflow's checks apply.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="The compilation cache directory for prewarm/nsys (default: $JAX_COMPILATION_CACHE_DIR).",
)
@click.option(
    "--probe",
    is_flag=True,
    help="Also start jax with your XLA_FLAGS to see which flags jaxlib rejects (a few seconds).",
)
@report_options
def doctor(json_out: bool, **options: Any) -> Report:
    """Check python, jax, the backend, CUPTI, nsys, XLA_FLAGS, the environment and the cache.

    Prints one line per check (ok, WARN, ERROR, with what to do); exits 1 when
    any check is an error.
    """

    from pgle import api

    report = api.doctor(**options)
    rows = [
        (
            c["check"],
            c["status"].upper() if c["status"] != "ok" else "ok",
            c["found"] + (f"  -> {c['todo']}" if c.get("todo") else ""),
        )
        for c in report.details["checks"]
    ]
    if not json_out:
        for line in table(("CHECK", "STATUS", "FOUND -> WHAT TO DO"), rows):
            echo(line)
    return report
