"""`pgle report`: what PGLE bought, and why, from run folders."""

from __future__ import annotations

from typing import Any

import click

from .output import finish


@click.command(
    help="Analyse run folders: step time with spread, FLOPs and MFU, exposed vs hidden "
    "communication, the schedule change, memory, diagnostics. Pass a tune run folder, or "
    "WITHOUT and WITH run folders.",
)
@click.argument("run_folders", nargs=-1, metavar="RUN_FOLDER...")
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write the self-contained HTML report here.",
)
@click.option("--force", is_flag=True, help="Replace an existing HTML report.")
@click.option(
    "--dtype",
    type=click.Choice(["bf16", "fp16", "fp8", "tf32"]),
    default="bf16",
    show_default=True,
    help="Which device peak MFU is measured against.",
)
@click.option("--json", "json_out", is_flag=True, help="Print the JSON report on stdout.")
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
def report(run_folders: tuple[str, ...], json_out: bool, debug: bool, **options: Any) -> None:
    from pgle import api

    finish(
        lambda: api.report(*run_folders, **options),
        json_out=json_out,
        report_path=None,
        debug=debug,
    )
