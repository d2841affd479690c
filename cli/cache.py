"""`pgle cache ls|stats|prune DIR`: the persistent compilation cache on disk."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report
from pgle.units import human_bytes

from .options import report_options
from .output import echo, emit_selected, table


@click.group(
    help="Inspect and prune a JAX persistent compilation cache directory.",
)
def cache() -> None:
    pass


def _entries(report: Report) -> None:
    """The listing itself is the command's product: stdout, one entry per line."""
    rows = report.details["entries"]
    if not rows:
        return
    for line in table(
        ("MODULE", "ROLE", ">SIZE", "MODIFIED", "KEY"),
        [
            (r["module"], r["role_label"], human_bytes(r["size"]), r["modified"], r["key"])
            for r in rows
        ],
    ):
        echo(line)
    echo("")
    _module_totals(report)


def _module_totals(report: Report) -> None:
    labels = report.details["role_labels"]
    for line in table(
        ("MODULE", ">ENTRIES", ">SIZE", "NEWEST", "ROLES"),
        [
            (
                t["module"],
                str(t["entries"]),
                human_bytes(t["bytes"]),
                t["newest"] or "-",
                ", ".join(f"{n} {labels[role]}" for role, n in sorted(t["roles"].items())),
            )
            for t in report.modules
        ],
    ):
        echo(line)


def _stats(report: Report) -> None:
    """Totals per role, then per module: the command's product, on stdout."""
    labels = report.details["role_labels"]
    total = report.details["total"]
    rows = [
        (labels[role], str(r["entries"]), human_bytes(r["bytes"]))
        for role, r in sorted(report.details["roles"].items())
    ]
    rows.append(("total", str(total["entries"]), human_bytes(total["bytes"])))
    for line in table(("ROLE", ">ENTRIES", ">SIZE"), rows):
        echo(line)
    if report.modules:
        echo("")
        _module_totals(report)


@cache.command(
    "ls",
    help="List entries: module, role (from pgle's manifest), size, time, key; "
    "then totals per module.",
)
@click.argument("cache_dir", metavar="DIR")
@click.option(
    "--module",
    multiple=True,
    metavar="NAME",
    help="Only this module (glob patterns allowed; repeatable).",
)
@report_options
def ls_cmd(cache_dir: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    report = api.cache_ls(cache_dir, **options)
    if not json_out:
        _entries(report)
    return report


@cache.command(
    "stats", help="Totals per role and per module on stdout; flags manifest entries that are gone."
)
@click.argument("cache_dir", metavar="DIR")
@report_options
def stats_cmd(cache_dir: str, json_out: bool) -> Report:
    from pgle import api

    report = api.cache_stats(cache_dir)
    if not json_out:
        _stats(report)
    return report


@cache.command(
    "prune",
    help="Delete entries by age and/or module. Dry run unless --yes. Touches "
    "only *-cache and *-atime files.",
)
@click.argument("cache_dir", metavar="DIR")
@click.option(
    "--older-than",
    default=None,
    metavar="DURATION",
    help="Entries last used longer ago than this: 30m, 12h, 7d, 2w.",
)
@click.option(
    "--module",
    multiple=True,
    metavar="NAME",
    help="Entries of this module (glob patterns allowed; repeatable).",
)
@click.option("--yes", is_flag=True, help="Really delete (default: only show what would go).")
@report_options
def prune_cmd(cache_dir: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    report = api.cache_prune(cache_dir, **options)
    if not json_out:
        emit_selected(
            report, options["yes"], lambda r: f"{r['key']} ({r['role_label']}, {r['modified']})"
        )
    return report
