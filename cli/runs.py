"""`pgle runs ls|prune [ROOT]`: the run folders under .pgle/runs."""

from __future__ import annotations

import click

from pgle.cli.options import report_options
from pgle.cli.output import echo, emit, finish

ROOT_ARG = click.argument("root", metavar="[ROOT]", required=False, default=".pgle/runs")


@click.group(
    short_help="List and prune the run folders under .pgle/runs (logs, traces).",
    help="List and prune pgle's run folders (default ROOT: .pgle/runs). A folder in use is never "
         "deleted: its pgle still runs on this host, or refreshed the folder's lease.json less "
         "than 10 minutes ago on another host of a shared filesystem.")
def runs():
    pass


@runs.command("ls", help="List run folders, newest first: size, last write, in use or not.")
@ROOT_ARG
@report_options
def ls_cmd(root, json_out, report_path, debug):
    def produce():
        from pgle.commands.runs import ls
        from pgle.units import human_bytes

        report = ls(root)
        if not json_out:  # the listing is the command's product: stdout
            rows = report.details["runs"]
            width = max((len(r["name"]) for r in rows), default=0)
            for r in rows:
                echo(f"{r['name']:<{width}}  {human_bytes(r['size']):>10}  {r['modified_iso']}"
                     + (f"  in use on {r['host']}" if r["live"] and r.get("host") else
                        "  in use" if r["live"] else ""))
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@runs.command("prune", help="Delete run folders by age, total size and count. Dry run unless --yes.")
@ROOT_ARG
@click.option("--older-than", default=None, metavar="DURATION",
              help="Folders last written longer ago than this: 30m, 12h, 7d, 2w.")
@click.option("--max-size", default=None, metavar="SIZE",
              help="Keep the newest folders within this total: 500M, 5G.")
@click.option("--keep-last", default=None, type=int, metavar="N",
              help="Never delete the newest N (alone: delete all the others).")
@click.option("--yes", is_flag=True, help="Really delete (default: only show what would go).")
@report_options
def prune_cmd(root, older_than, max_size, keep_last, yes, json_out, report_path, debug):
    def produce():
        from pgle.commands.runs import prune
        from pgle.units import human_bytes, parse_duration, parse_size

        report = prune(root, older_than=parse_duration(older_than) if older_than else None,
                       max_size=parse_size(max_size) if max_size else None,
                       keep_last=keep_last, yes=yes)
        if not json_out:
            for r in report.details["selected"]:
                emit(f"{'delete' if yes else 'would delete'} {r['name']} "
                     f"({human_bytes(r['size'])}, {r['modified_iso']})")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
