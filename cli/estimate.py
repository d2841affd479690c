"""`pgle estimate SCRIPT|RUN_FOLDER`: PGLE's gain predicted with XLA:GPU's own compiler."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import report_options


@click.command(
    "estimate",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("source", metavar="SCRIPT|RUN_FOLDER")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE", help="Run a module (python -m MODULE) instead.")
@click.option(
    "--target",
    metavar="GPU",
    help="The GPU to compile for, from XLA's target specs: h100, h200, b200 (default: the run "
    "folder's device kind, else h100).",
)
@click.option(
    "--devices",
    type=int,
    metavar="N",
    help="The job's device count, emulated on CPU and compiled for (default: the run "
    "folder's, else 8).",
)
@click.option(
    "--arms",
    default="default,pgle",
    show_default=True,
    help="Arms to compile, of default, pgle, o1 (JAX_OPTIMIZATION_LEVEL=O1), sol (the "
    "speed-of-light estimator).",
)
@click.option(
    "--profile",
    metavar="FILE",
    help="The pgle arm's profile (default: costs derived from the module and the target).",
)
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="RULE",
    help="Scale or set costs before the prediction: PATTERN=xFACTOR or PATTERN=US, PATTERN a "
    "kind (collective, compute, host_copy), a collective (all-reduce) or a name pattern "
    "('all-gather*=x2'). Repeatable.",
)
@click.option("--run-dir", metavar="DIR", help="Run folder to use (default: a new one).")
@report_options
def estimate(source: str, args: tuple[str, ...], json_out: bool, **options: Any) -> Report:
    """Capture the step of SCRIPT (or of RUN_FOLDER's script) on CPU, compile it with XLA:GPU for
    --target once per arm, read XLA's own schedule statistics, replay every schedule with the
    same costs and predict what PGLE buys. Needs: pip install 'pgle[estimate]'."""
    from pgle import api

    return api.estimate(source, *args, **options)
