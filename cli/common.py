"""What every command shares: report options, error handling, rendering."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from typing import Callable

import click

from pgle.errors import EXIT_ERROR, PgleError


def emit(message: str) -> None:
    """pgle's own messages: stderr, `pgle:` prefix, never mixed into the workload's stdout."""
    for line in str(message).splitlines() or [""]:
        click.echo(f"pgle: {line}", err=True)


def report_options(f):
    """--json, --report FILE and --debug for a command that returns a Report."""
    f = click.option("--debug", is_flag=True, help="Show a traceback on errors.")(f)
    f = click.option(
        "--report", "report_path", type=click.Path(dir_okay=False), default=None,
        help="Also write the JSON report to this file.",
    )(f)
    f = click.option("--json", "json_out", is_flag=True, help="Print the JSON report on stdout.")(f)
    return f


def finish(produce: Callable[[], "object"], *, json_out: bool, report_path: str | None,
           debug: bool) -> None:
    """Run `produce()` (returns a Report), render it, and exit with its code.

    With --json, stdout carries the report alone: whatever the workload prints
    on stdout meanwhile goes to stderr (still live, still unchanged).
    """
    saved_stdout = _stdout_to_stderr() if json_out else None
    try:
        report = produce()
    except PgleError as e:
        if debug:
            traceback.print_exc()
        emit(f"error: {e}")
        if json_out:
            _restore_stdout(saved_stdout)
            click.echo(json.dumps({"status": "error", "exit_code": e.exit_code, "error": str(e)}))
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        emit("interrupted")
        sys.exit(130)
    finally:
        _restore_stdout(saved_stdout)
        if saved_stdout is not None:
            os.close(saved_stdout)
    for line in report.summary:
        emit(line)
    for w in report.warnings:
        emit(f"warning: {w}")
    text = report.to_json()
    if report_path:
        from pgle.atomic import write_text_atomic

        try:
            write_text_atomic(report_path, text + "\n")
        except OSError as e:
            emit(f"error: cannot write report {report_path}: {e.strerror}")
            sys.exit(EXIT_ERROR)
    if json_out:
        click.echo(text)
    sys.exit(report.exit_code)


def workload_command(name: str, help: str):
    """A command whose trailing arguments are `SCRIPT [ARGS]`, `-m MODULE [ARGS]` or `-- ...`."""

    def deco(f):
        @click.command(
            name,
            help=help,
            context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False},
        )
        @click.argument("workload", nargs=-1, type=click.UNPROCESSED, required=True,
                        metavar="SCRIPT [-- ARGS] | -m MODULE [-- ARGS]")
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs)

        return wrapper

    return deco


def _stdout_to_stderr() -> int:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    return saved


def _restore_stdout(saved: int | None) -> None:
    if saved is None:
        return
    try:
        sys.stdout.flush()
        os.dup2(saved, 1)
    except OSError:
        pass
