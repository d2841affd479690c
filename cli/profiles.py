"""`pgle inspect`, `pgle diff`, `pgle merge`, `pgle convert`: profiles as data."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import report_options
from .output import echo

FORCE_OUT = click.option(
    "--force",
    is_flag=True,
    help="Replace OUT if it exists (a directory only if it "
    "holds nothing but profiles and their manifest).",
)


def _to_stdout(report: Report, json_out: bool) -> Report:
    """inspect's and diff's lines are the command's product: stdout (`pgle inspect p.pb > x.txt`);
    warnings and failures stay `pgle:` lines on stderr. With --json the report is the product."""
    if not json_out and report.exit_code == 0:
        for line in report.summary:
            echo(line)  # names come from the profile: control characters shown escaped
        report.summary = []
    return report


@click.command(
    "inspect",
    help="Show what a profile (file or per-module directory) holds: counts, total and top costs, "
    "cost by category, collectives, modules. Exit 1 if it is empty.",
)
@click.argument("profile", metavar="PROFILE")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many of the costliest instructions to list.",
)
@report_options
def inspect(profile: str, top: int, json_out: bool) -> Report:
    from pgle import api

    return _to_stdout(api.inspect(profile, top=top), json_out)


@click.command(
    "diff",
    help="Compare two profiles: instructions only in A or B, the largest cost changes (absolute "
    "and relative) and the shift per category.",
)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many of the largest changes to list.",
)
@report_options
def diff(a: str, b: str, top: int, json_out: bool) -> Report:
    from pgle import api

    return _to_stdout(api.diff(a, b, top=top), json_out)


@click.command(
    "merge",
    help="Merge profiles of several runs or ranks into one. The default equals jaxlib's "
    "aggregate_profiled_instructions (the value at index int(p/100*(n-1)) of the sorted "
    "costs); unlike jaxlib, latencies are kept. Directories merge per module.",
)
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT",
    help="Output .pb/.pbtxt file, or directory for directory inputs.",
)
@click.option(
    "--method",
    type=click.Choice(["percentile", "median", "mean", "min", "max"]),
    default="percentile",
    show_default=True,
)
@click.option(
    "--percentile",
    type=click.IntRange(0, 100),
    default=90,
    show_default=True,
    help="For --method percentile (JAX auto PGLE's default is 90).",
)
@FORCE_OUT
@report_options
def merge(profiles: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.merge(*profiles, **options)


@click.command(
    "convert",
    help="Convert a profile: binary <-> text (by extension), single file <-> "
    "fingerprint-qualified file <-> per-module directory (OUT without extension or ending "
    "in /). IN may also be a trace run folder (<log_dir>/plugins/profile/<stamp>), an Nsight "
    "Systems report (.nsys-rep, exported with the nsys on PATH), its SQLite export or an "
    "nsys-jax archive (.zip): a directory OUT then gets one profile per module.",
)
@click.argument("src", metavar="IN")
@click.argument("out", metavar="OUT")
@click.option(
    "--module",
    multiple=True,
    metavar="FP",
    help="Module fingerprint(s): the modules to write (XLA's view of each).",
)
@click.option(
    "--qualify",
    metavar="FP",
    default=None,
    help="File to file: prefix every bare name with FP:: so it applies to module FP only.",
)
@click.option(
    "--format",
    type=click.Choice(["binary", "text"]),
    default=None,
    help="File format inside a directory OUT (default: the input's).",
)
@click.option(
    "--stat",
    default=None,
    help="Trace input: statistic per instruction (median, mean, min, max, pNN; default "
    "median). Nsight input: default min-compute-max-comm (nsys-jax's rule).",
)
@click.option(
    "--skip",
    type=click.IntRange(min=0),
    default=None,
    help="Nsight input: drop the first N executions of every module (default: nsys-jax's "
    "warm-up rule).",
)
@click.option(
    "--dump",
    default=None,
    metavar="DIR",
    help="Nsight input: XLA dump folder (--xla_dump_to with --xla_dump_hlo_as_proto); "
    "needed for a SQLite export, optional for an nsys-jax archive.",
)
@click.option(
    "--log",
    default=None,
    metavar="LOG",
    help="Trace input: the run's log, for 'Fingerprint before LHS' lines.",
)
@click.option(
    "--qualify-all",
    is_flag=True,
    help="Trace input, file OUT: qualify every name with its module's fingerprint.",
)
@FORCE_OUT
@report_options
def convert(src: str, out: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.convert(src, out, **options)
