"""`pgle prewarm --cache-dir DIR`: fill a compilation cache with PGLE-optimized executables."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import WORKLOAD_HELP, auto_pgle_options, job_options, report_options, workload_options


@click.command(
    help="Run the workload with auto PGLE and a persistent compilation cache, so that "
    "`pgle nsys` can load PGLE-optimized executables; writes DIR/pgle-manifest.json."
    "\n\n" + WORKLOAD_HELP,
)
@click.option(
    "--cache-dir",
    required=True,
    metavar="DIR",
    help="The compilation cache to fill (created if missing; gs:// where JAX supports it).",
)
@click.option(
    "--relocatable",
    is_flag=True,
    help="Keep cache keys independent of DIR's path (JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="
    "none), so the cache can be moved or mounted elsewhere; XLA's GPU autotune "
    "results are then not cached.",
)
@workload_options
@auto_pgle_options
@job_options
@report_options(job=True)
def prewarm(words: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.prewarm(*words, **options)
