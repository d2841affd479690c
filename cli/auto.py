"""`pgle auto`: one run with JAX's auto PGLE, verified per module."""

from __future__ import annotations

import click

from pgle.cli.options import (WORKLOAD_HELP, auto_pgle_options, job_options, report_options,
                              store_options, workload_options)
from pgle.cli.output import emit, finish


@click.command(
    short_help="Run with JAX's auto PGLE and verify each module was re-optimized.",
    help="Run the workload with JAX's auto PGLE and report, per module, whether it was "
                    "recompiled with a non-empty profile.\n\n" + WORKLOAD_HELP)
@workload_options
@auto_pgle_options
@store_options
@job_options
@report_options
def auto(module, words, run_dir, log, runs, percentile, require_all, require, store, store_policy,
         job_dir, gather_timeout, gather, stall_timeout, json_out, report_path, debug):
    from pgle import api

    finish(lambda: api.auto(
        *words, module=module, runs=runs, percentile=percentile, require_all=require_all,
        require=require, run_dir=run_dir, log=log, job_dir=job_dir,
        gather_timeout=gather_timeout, gather=gather, stall_timeout=stall_timeout, store=store, store_policy=store_policy, notify=emit),
        json_out=json_out, report_path=report_path, debug=debug, job=True)
