"""`pgle view RUN_FOLDER`: open a run's kept trace in XProf."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

import click

from pgle.report import Report

from .options import report_options


@click.command("view")
@click.argument("run_folder", type=click.Path(file_okay=False))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0 exposes the trace to the network).",
)
@click.option(
    "--port",
    type=int,
    default=8791,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@report_options
def view(run_folder: str, json_out: bool, **options: Any) -> Report:
    """Serve RUN_FOLDER's trace (RUN_FOLDER/trace, or RUN_FOLDER itself) with XProf until Ctrl+C.

    Needs the xprof extra: pip install 'pgle[xprof]'.
    """

    from pgle import api

    # `kill` (SIGTERM) stops XProf as cleanly as Ctrl+C does.
    signal.signal(signal.SIGTERM, _interrupt)
    return api.view(run_folder, **options)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
