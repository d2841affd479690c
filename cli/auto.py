"""`pgle auto`: one run with JAX's auto PGLE, verified per module."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import (
    WORKLOAD_HELP,
    auto_pgle_options,
    job_options,
    report_options,
    store_options,
    workload_options,
)


@click.command(
    help="Run the workload with JAX's auto PGLE and report, per module, whether it was "
    "recompiled with a non-empty profile.\n\n" + WORKLOAD_HELP,
)
@workload_options
@auto_pgle_options
@store_options
@job_options
@report_options(job=True)
def auto(words: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.auto(*words, **options)
