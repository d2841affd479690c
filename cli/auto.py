"""`pgle auto`: one run with JAX's auto PGLE, verified per module."""

from __future__ import annotations

import click

from pgle.cli.common import emit, finish, report_options
from pgle.cli.manual import WORKLOAD_HELP, job_options, rank_outputs, workload_options


def pgle_options(f):
    """--runs / --percentile / --require-all / --require, shared by auto and prewarm."""
    f = click.option("--require", "require", multiple=True, metavar="MODULE",
                     help="Exit 3 unless this module (glob, e.g. 'jit_train_step*') is optimized; "
                          "repeatable.")(f)
    f = click.option("--require-all", is_flag=True,
                     help="Exit 3 unless every module is optimized (one-shot modules such as "
                          "initializers never are: prefer --require).")(f)
    f = click.option("--percentile", default=90, show_default=True, type=int,
                     help="JAX_PGLE_AGGREGATION_PERCENTILE: which of the profiled timings to keep.")(f)
    f = click.option("--runs", default=3, show_default=True, type=int,
                     help="JAX_PGLE_PROFILING_RUNS: executions profiled before the recompile.")(f)
    return f


@click.command(help="Run the workload with JAX's auto PGLE and report, per module, whether it was "
                    "recompiled with a non-empty profile.\n\n" + WORKLOAD_HELP)
@workload_options
@pgle_options
@job_options
@report_options
def auto(module, words, run_dir, log, runs, percentile, require_all, require, job_dir,
         gather_timeout, json_out, report_path, debug):
    def produce():
        from pgle.commands.auto import AutoOptions, auto as do_auto
        from pgle.launch.workload import Workload

        opts = AutoOptions(Workload.from_cli(module, words), runs=runs, percentile=percentile,
                           require_all=require_all, require=tuple(require), run_dir=run_dir, log=log,
                           job_dir=job_dir, gather_timeout=gather_timeout)
        return do_auto(opts, emit)

    json_out, report_path = rank_outputs(json_out, report_path)
    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
