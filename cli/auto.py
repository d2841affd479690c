"""`pgle auto`: one run with JAX's auto PGLE, verified per module."""

from __future__ import annotations

from typing import Any

import click

from .options import (
    WORKLOAD_HELP,
    auto_pgle_options,
    job_options,
    report_options,
    store_options,
    workload_options,
)
from .output import finish


@click.command(
    short_help="Run with JAX's auto PGLE and verify each module was re-optimized.",
    help="Run the workload with JAX's auto PGLE and report, per module, whether it was "
    "recompiled with a non-empty profile.\n\n" + WORKLOAD_HELP,
)
@workload_options
@auto_pgle_options
@store_options
@job_options
@report_options
def auto(
    words: tuple[str, ...], json_out: bool, report_path: str | None, debug: bool, **options: Any
) -> None:
    from pgle import api

    finish(
        lambda: api.auto(*words, **options),
        json_out=json_out,
        report_path=report_path,
        debug=debug,
        job=True,
    )
