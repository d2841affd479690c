"""`pgle prewarm --cache-dir DIR`: fill a compilation cache with PGLE-optimized executables."""

from __future__ import annotations

import click

from pgle.cli.options import (WORKLOAD_HELP, auto_pgle_options, job_options, report_options,
                              workload_options)
from pgle.cli.output import emit, finish


@click.command(
    short_help='Fill a compilation cache with PGLE-optimized executables.',
    help="Run the workload with auto PGLE and a persistent compilation cache, so that "
                    "`pgle nsys` can load PGLE-optimized executables; writes DIR/pgle-manifest.json."
                    "\n\n" + WORKLOAD_HELP)
@click.option("--cache-dir", required=True, metavar="DIR",
              help="The compilation cache to fill (created if missing; gs:// where JAX supports it).")
@click.option("--relocatable", is_flag=True,
              help="Keep cache keys independent of DIR's path (JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="
                   "none), so the cache can be moved or mounted elsewhere; XLA's GPU autotune "
                   "results are then not cached.")
@workload_options
@auto_pgle_options
@job_options
@report_options
def prewarm(cache_dir, relocatable, module, words, run_dir, log, runs, percentile, require_all,
            require, job_dir, gather_timeout, gather, stall_timeout, json_out, report_path, debug):
    from pgle import api

    finish(lambda: api.prewarm(
        *words, module=module, cache_dir=cache_dir, relocatable=relocatable, runs=runs,
        percentile=percentile, require_all=require_all, require=require, run_dir=run_dir,
        log=log, job_dir=job_dir, gather_timeout=gather_timeout, gather=gather, stall_timeout=stall_timeout, notify=emit),
        json_out=json_out, report_path=report_path, debug=debug, job=True)
