"""How every command ends: pgle's messages on stderr, the report (--json, --report), the exit
code; and what changes for one rank of a multi-process job.

In a job only rank 0 prints --json (the job report); the other ranks send the workload's
stdout to stderr, so `srun ... --json > job.json` stays one JSON document. `--report` gets
its placeholders filled in (%r, {rank}, ...); without a rank placeholder it is rank 0's
alone. A --report path with a bad placeholder is refused before anything runs (exit 2), and
--report is written on errors too, with the error.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence

import click

from pgle.errors import EXIT_ERROR, BadInput, Interrupted, PgleError
from pgle.launch import streams
from pgle.report import Report

# Control characters (C0 but tab, DEL, C1) and the bidi overrides that reorder what a terminal
# shows: text read from foreign data (a profile's names, a store entry, a log line) could move
# the cursor, retitle the window or hide text. Shown as escapes instead (`\x1b`, `\u202e`).
_UNPRINTABLE = {
    c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
    for c in [
        *range(0x09),
        *range(0x0A, 0x20),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
}


def printable(text: str) -> str:
    """`text` as it may reach a terminal: every control character shown as an escape."""
    return str(text).translate(_UNPRINTABLE)


def echo(line: str) -> None:
    """One line of a command's product (a listing, inspect's lines): stdout, printable."""
    click.echo(printable(line))


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a table whose columns line up: each as wide as its widest cell (as
    printed: control characters escaped); a header that starts with `>` is right-aligned
    (sizes, counts); the last column is not padded."""
    right = [h.startswith(">") for h in header]
    cells = [[h.lstrip(">") for h in header]] + [[printable(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        padded = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=False)
        ]
        if not right[-1]:
            padded[-1] = row[-1]
        return "  ".join(padded)

    return [line(row) for row in cells]


def emit(message: str) -> None:
    """pgle's own messages: stderr, `pgle:` prefix, never mixed into the workload's stdout;
    one line per line of `message`, each printable.

    A stderr that fails (`2>/dev/full`) loses pgle's messages, never the run: the command goes
    on, and its report (--json, --report) and exit code are what they would have been."""
    for line in str(message).splitlines() or [""]:
        if not _echo(f"pgle: {printable(line)}", err=True):
            return


def emit_selected(report: Report, yes: bool, describe: Callable[[dict], str]) -> None:
    """A prune's selection, a line each: what it deletes (`--yes`) or would delete."""
    verb = "delete" if yes else "would delete"
    for r in report.details["selected"]:
        emit(f"{verb} {describe(r)}")


class TerminalLines(logging.Handler):
    """pgle's log records (progress, notices) as its terminal lines: `pgle: message`, and
    `pgle: warning: message` from WARNING up, on stderr (`emit`). The one handler of the `pgle`
    logger on the command line; a library user's program configures logging its own way."""

    def emit(self, record: logging.LogRecord) -> None:
        level = (
            "error: "
            if record.levelno >= logging.ERROR
            else "warning: "
            if record.levelno >= logging.WARNING
            else ""
        )
        emit(level + record.getMessage())


def show_log_lines() -> None:
    """Route pgle's log records to the terminal (once per process)."""
    logger = logging.getLogger("pgle")
    if not any(isinstance(h, TerminalLines) for h in logger.handlers):
        logger.addHandler(TerminalLines())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _echo(text: str, *, err: bool = False) -> bool:
    """click.echo that survives a failing stream: False once it failed (then dropped, so that
    nothing is left in its buffer for Python to fail on again at exit, exit status 120)."""
    fd = 2 if err else 1
    if fd in streams.failed:
        return False
    try:
        click.echo(text, err=err)
        return True
    except OSError as e:
        streams.failed[fd] = streams.describe(e)
        null = open(os.devnull, "w")  # noqa: SIM115  pgle's stream from now on, never closed
        if err:
            sys.stderr = null
        else:
            sys.stdout = null
        return False


def quiet_stdout_for_json(json_out: bool, environ: Mapping[str, str] | None = None) -> bool:
    """True when this process is a rank other than 0 of a job and --json was asked."""
    from pgle.jobs import ranks

    if not json_out:
        return False
    try:
        info = ranks.detect(os.environ if environ is None else environ)
    except PgleError:
        return False  # the workflow reports it
    return info.is_multiprocess and not info.is_leader


def report_target(
    report_path: str | None, environ: Mapping[str, str] | None = None, *, job: bool = True
) -> str | None:
    """Where this process writes `--report`: the path with its placeholders filled in
    (BadInput for an unknown one). In a job (`job`: a command that runs as one rank of it) a
    path without a rank placeholder is rank 0's alone."""
    if not report_path:
        return report_path
    from pgle.jobs import ranks

    environ = os.environ if environ is None else environ
    try:
        info = ranks.detect(environ)
    except PgleError:
        info = ranks.RankInfo()  # the workflow reports the bad environment
    try:
        expanded = ranks.expand_path(report_path, info)
    except BadInput as e:
        raise BadInput(f"--report {report_path}: {e.message}", hint=e.hint) from None
    if (
        job
        and info.is_multiprocess
        and not info.is_leader
        and not ranks.has_rank_placeholder(report_path)
    ):
        return None
    return expanded


def finish(
    produce: Callable[[], Report],
    *,
    json_out: bool,
    report_path: str | None,
    debug: bool,
    job: bool = False,
) -> None:
    """Run `produce()` (returns a Report), render it, and exit with its code.

    With --json, stdout carries the report alone: whatever the workload prints on stdout
    meanwhile goes to stderr (still live, still unchanged). `job`: the command runs as one
    rank of a multi-process job (see the module docstring)."""
    if job and quiet_stdout_for_json(json_out):
        sys.stdout.flush()
        os.dup2(2, 1)
        json_out = False
    try:
        target = report_target(report_path, job=job)
    except BadInput as e:
        _fail(e, json_out=json_out, target=None, debug=debug)
    saved_stdout = None
    if json_out:
        sys.stdout.flush()
        saved_stdout = os.dup(1)
        os.dup2(2, 1)
    try:
        report = produce()
    except PgleError as e:
        _restore_stdout(saved_stdout)
        _fail(e, json_out=json_out, target=target, debug=debug)
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
    if target or json_out:
        text = report.to_json()
        if target:
            _write_report(target, text)
        if json_out:
            _print_json(text)
    sys.exit(report.exit_code)


def _print_json(text: str) -> None:
    if not _echo(text):
        emit(f"error: cannot write the --json report to stdout: {streams.failed.get(1)}")
        sys.exit(EXIT_ERROR)


def _fail(e: PgleError, *, json_out: bool, target: str | None, debug: bool):
    # traceback and json are imported here, not at the top: a command that succeeds without
    # --json needs neither (start-up, issue 16).
    if debug:
        import traceback

        traceback.print_exc()
    import json

    # The message as the command line spells options (`--min-coverage`), not as pgle.api
    # names them to Python callers (`min_coverage`).
    message = e.text(flags=True)
    fields: dict[str, object] = {
        "status": "error",
        "exit_code": e.exit_code,
        "error": message,
        "exit_code_from": "pgle",
    }
    fields.update(e.report_fields())
    if isinstance(e, Interrupted):
        import signal

        emit(message)  # not an error of pgle's: the user asked to stop
        fields["signal"] = signal.Signals(e.signum).name
        fields["exit_code_from"] = "signal"
    else:
        emit(f"error: {message}")
    text = json.dumps(fields)
    if target:
        _write_report(target, text)
    if json_out:
        _print_json(text)
    sys.exit(e.exit_code)


def _write_report(target: str, text: str) -> None:
    from pgle.atomic import write_text_atomic

    try:
        write_text_atomic(target, text + "\n")
    except OSError as e:
        emit(f"error: cannot write report {target}: {e.strerror}")
        sys.exit(EXIT_ERROR)


def _restore_stdout(saved: int | None) -> None:
    if saved is None:
        return
    try:
        sys.stdout.flush()
        os.dup2(saved, 1)
    except OSError:
        pass
