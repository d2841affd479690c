"""The manual PGLE workflow: collect, run, tune, verify.

Each option's parameter name is the keyword of its pgle.api function (`--min-coverage` ->
`min_coverage`), so a command passes its options on as they are.
"""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import (
    WORKLOAD_HELP,
    extraction_options,
    force_option,
    job_options,
    report_flags,
    report_options,
    store_options,
    verdict_options,
    window_options,
    workload_options,
)
from .output import finish


@click.command(
    help="Profile a window of the workload and extract the PGLE profile.\n\n" + WORKLOAD_HELP,
)
@workload_options
@window_options
@click.option(
    "-o",
    "--output",
    default=None,
    help="Profile to write: .pb (binary) or .pbtxt (text) [default: profile.pb]; with "
    "--per-module a new or empty directory [default: profiles/; with --store: the run "
    "folder's profiles/].",
)
@force_option
@click.option("--allow-empty", is_flag=True, help="Write the profile even when it is empty.")
@extraction_options
@click.option(
    "--rank",
    type=int,
    default=None,
    metavar="N",
    help="Multi-process: only rank N runs the profiler and writes -o; the other ranks "
    "run unprofiled. Default: every rank profiles, and without %r in -o rank 0 "
    "merges the ranks' profiles into -o.",
)
@store_options
@job_options
@report_options(job=True)
def collect(words: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.collect(*words, **options)


@click.command(
    help="Run the workload with a PGLE profile and verify from XLA's log that it was used.\n\n"
    + WORKLOAD_HELP,
)
@click.option(
    "--profile",
    default=None,
    help="A .pb/.pbtxt profile, or a directory of <fingerprint>.pb|.pbtxt files "
    "(or --store instead).",
)
@click.option(
    "--profile-store",
    default=None,
    type=click.Path(file_okay=False),
    help="Where the content-addressed copy handed to XLA goes (default .pgle/profiles).",
)
@workload_options
@verdict_options
@store_options
@click.option(
    "--trace-window",
    is_flag=True,
    help="Also keep a trace of collect's default window (left out of the step "
    "times): the after-picture for `pgle report`.",
)
@job_options
@report_options(job=True)
def run(words: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.run(*words, **options)


@click.command(
    help="Collect, then run with the profile: one verdict, with the step times of both "
    "phases.\n\n" + WORKLOAD_HELP,
)
@workload_options
@window_options
@click.option(
    "-o",
    "--output",
    default=None,
    help="Where to keep the profile (default: inside the run folder); with "
    "--per-module a new or empty directory.",
)
@force_option
@extraction_options
@verdict_options
@store_options
@job_options
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs of each arm (baseline and with the profile, or each --compare arm), "
    "alternating, with your own flags; the step-time ratio gets a bootstrap "
    "interval from them.",
)
@click.option(
    "--compare",
    default=None,
    metavar="ARMS",
    help="Compare these arms instead of baseline vs profile: default, o1 "
    "(JAX_OPTIMIZATION_LEVEL=O1), sol (XLA's speed-of-light estimator), pgle, and "
    "sums such as o1+pgle; e.g. default,o1,pgle,o1+pgle.",
)
@click.option(
    "--predict",
    is_flag=True,
    help="With --compare: beside each measured ratio, the one pgle estimate predicts (XLA:GPU's "
    "own scheduler, no GPU; one more CPU run of the script and a compile per arm). Needs "
    "pip install 'pgle[estimate]'; without it the table says so. With --store the store "
    "keeps both ratios next to the step module's entry.",
)
@report_flags
def tune(
    words: tuple[str, ...], json_out: bool, report_path: str | None, debug: bool, **options: Any
) -> None:
    from pgle import api

    # --report X.html: pgle report's HTML page of the run instead of the JSON report.
    html = report_path if report_path and report_path.lower().endswith((".html", ".htm")) else None
    finish(
        lambda: api.tune(*words, report=html, **options),
        json_out=json_out,
        report_path=None if html else report_path,
        debug=debug,
        job=True,
    )


@click.command(
    help="Build the PGLE verdict from a saved log (`-` for stdin).",
)
@click.argument("log", metavar="LOG")
@click.option(
    "--profile",
    default=None,
    help="The profile the run was given: checked against what the log read.",
)
@click.option(
    "--backend",
    default=None,
    help="The run's backend (gpu, cpu, ...): with no PGLE line, cpu means not_applicable.",
)
@click.option(
    "--accuracy-checker-off",
    is_flag=True,
    help="The run had --xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_OFF.",
)
@click.option(
    "--jax",
    default=None,
    metavar="VERSION",
    help="The jax version that wrote the log [default: inferred from the log's "
    "wording, and said]; what the accuracy checker's silence means depends on it.",
)
@click.option(
    "--device-kind",
    default=None,
    metavar="KIND",
    help="The GPU that ran the workload (e.g. 'NVIDIA H100 80GB HBM3'), which the log does "
    "not name: whether XLA priced missing compute with its speed-of-light model [default: "
    "assumed Hopper/Blackwell, and said].",
)
@verdict_options
@report_options
def verify(log: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.verify(log, **options)
