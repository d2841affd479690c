"""`pgle prewarm --cache-dir DIR`: fill a compilation cache with PGLE-optimized executables."""

from __future__ import annotations

import click

from pgle.cli.auto import pgle_options
from pgle.cli.common import emit, finish, report_options
from pgle.cli.manual import WORKLOAD_HELP, job_options, rank_outputs, workload_options


@click.command(help="Run the workload with auto PGLE and a persistent compilation cache, so that "
                    "`pgle nsys` can load PGLE-optimized executables; writes DIR/pgle-manifest.json."
                    "\n\n" + WORKLOAD_HELP)
@click.option("--cache-dir", required=True, metavar="DIR",
              help="The compilation cache to fill (created if missing; gs:// where JAX supports it).")
@click.option("--relocatable", is_flag=True,
              help="Keep cache keys independent of DIR's path (JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="
                   "none), so the cache can be moved or mounted elsewhere; XLA's GPU autotune "
                   "results are then not cached.")
@workload_options
@pgle_options
@job_options
@report_options
def prewarm(cache_dir, relocatable, module, words, run_dir, log, runs, percentile, require_all,
            require, job_dir, gather_timeout, json_out, report_path, debug):
    def produce():
        from pgle.commands.prewarm import PrewarmOptions, prewarm as do_prewarm
        from pgle.launch.workload import Workload

        opts = PrewarmOptions(Workload.from_cli(module, words), cache_dir, runs=runs,
                              percentile=percentile, relocatable=relocatable,
                              require_all=require_all, require=tuple(require), run_dir=run_dir,
                              log=log, job_dir=job_dir, gather_timeout=gather_timeout)
        return do_prewarm(opts, emit)

    json_out, report_path = rank_outputs(json_out, report_path)
    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
