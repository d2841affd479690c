"""`pgle runs ls|prune [ROOT]`: the run folders under .pgle/runs."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report
from pgle.units import human_bytes

from .options import report_options
from .output import echo, emit_selected, table

ROOT_ARG = click.argument("root", metavar="[ROOT]", required=False, default=".pgle/runs")


@click.group(
    help="List and prune pgle's run folders (default ROOT: .pgle/runs; a project folder or a "
    ".pgle folder stands for the runs folder in it). Only folders pgle recognises as its run "
    "folders (named <stamp>-<command>-<pid>, holding its lease.json or log) are listed or "
    "deleted; anything else in ROOT is left alone. A folder in use is never "
    "deleted: its pgle still runs on this host, or refreshed the folder's lease.json less "
    "than 10 minutes ago on another host of a shared filesystem.",
)
def runs() -> None:
    pass


def _in_use(r: dict[str, Any]) -> str:
    if not r["live"]:
        return ""
    return f"in use on {r['host']}" if r.get("host") else "in use"


@runs.command("ls", help="List run folders, newest first: size, last write, in use or not.")
@ROOT_ARG
@report_options
def ls_cmd(root: str, json_out: bool) -> Report:
    from pgle import api

    report = api.runs_ls(root)
    rows = report.details["runs"]
    if not json_out and rows:  # the listing is the command's product: stdout
        for line in table(
            ("RUN", ">SIZE", "MODIFIED", "IN USE"),
            [
                (r["name"], human_bytes(r["size"]), r["modified_iso"] or "-", _in_use(r))
                for r in rows
            ],
        ):
            echo(line.rstrip())
    return report


@runs.command(
    "prune", help="Delete run folders by age, total size and count. Dry run unless --yes."
)
@ROOT_ARG
@click.option(
    "--older-than",
    default=None,
    metavar="DURATION",
    help="Folders last written longer ago than this: 30m, 12h, 7d, 2w.",
)
@click.option(
    "--max-size",
    default=None,
    metavar="SIZE",
    help="Keep the newest folders within this total: 500M, 5G.",
)
@click.option(
    "--keep-last",
    default=None,
    type=int,
    metavar="N",
    help="Never delete the newest N (alone: delete all the others).",
)
@click.option("--yes", is_flag=True, help="Really delete (default: only show what would go).")
@report_options
def prune_cmd(root: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    report = api.runs_prune(root, **options)
    if not json_out:
        emit_selected(
            report,
            options["yes"],
            lambda r: f"{r['name']} ({human_bytes(r['size'])}, {r['modified_iso']})",
        )
    return report
