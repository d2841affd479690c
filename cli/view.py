"""`pgle view RUN_FOLDER`: open a run's kept trace in XProf."""

from __future__ import annotations

import signal

import click

from pgle.cli.options import report_options
from pgle.cli.output import emit, finish


@click.command("view", short_help="Open a run folder's kept trace in XProf.")
@click.argument("run_folder", type=click.Path(file_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (0.0.0.0 exposes the trace to the network).")
@click.option("--port", type=int, default=8791, show_default=True,
              help="Port to listen on; 0 picks a free one.")
@report_options
def view(run_folder, host, port, json_out, report_path, debug):
    """Serve RUN_FOLDER's trace (RUN_FOLDER/trace, or RUN_FOLDER itself) with XProf until Ctrl+C.

    Needs the xprof extra: pip install 'pgle[xprof]'.
    """
    from pgle.commands import view as v
    from pgle.report import Report

    def produce():
        server = v.start(run_folder, host=host, port=port)
        # `kill` (SIGTERM) stops XProf as cleanly as Ctrl+C does.
        signal.signal(signal.SIGTERM, _interrupt)
        emit(f"XProf serves {server.logdir} at {server.url} (Ctrl+C to stop)")
        try:
            code = server.wait()
        except KeyboardInterrupt:
            code = 0
        finally:
            server.stop()
        report = Report("view", "ok" if code in (0, -15) else "error", trace_dir=str(server.logdir))
        report.details["url"] = server.url
        if report.status == "error":
            report.exit_code = 1
            report.reasons.append(f"XProf exited with code {code}")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
