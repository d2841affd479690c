"""`pgle cache ls|stats|prune DIR`: the persistent compilation cache on disk."""

from __future__ import annotations

import time

import click

from pgle.cli.options import report_options
from pgle.cli.output import emit, finish


@click.group(
    short_help='List, total and prune a JAX persistent compilation cache.',
    help="Inspect and prune a JAX persistent compilation cache directory.")
def cache():
    pass


def _table(report) -> None:
    """The listing itself is the command's output: stdout, one entry per line."""
    from pgle.cache.entries import human_bytes
    from pgle.cache.manifest import ROLE_LABELS

    rows = report.details["entries"]
    if not rows:
        return
    width = max(len(r["module"]) for r in rows)
    click.echo(f"{'MODULE':<{width}}  {'ROLE':<14}  {'SIZE':>10}  {'MODIFIED':<19}  KEY")
    for r in rows:
        click.echo(f"{r['module']:<{width}}  {r['role_label']:<14}  {human_bytes(r['size']):>10}  "
                   f"{r['modified']:<19}  {r['key']}")
    click.echo("")
    click.echo(f"{'MODULE':<{width}}  {'ENTRIES':>7}  {'SIZE':>10}  ROLES")
    for t in report.modules:
        roles = ", ".join(f"{n} {ROLE_LABELS[role]}" for role, n in sorted(t["roles"].items()))
        click.echo(f"{t['module']:<{width}}  {t['entries']:>7}  {human_bytes(t['bytes']):>10}  {roles}")


@cache.command("ls", help="List entries: module, role (from pgle's manifest), size, time, key; "
                          "then totals per module.")
@click.argument("cache_dir", metavar="DIR")
@click.option("--module", "modules", multiple=True, metavar="NAME",
              help="Only this module (glob patterns allowed; repeatable).")
@report_options
def ls_cmd(cache_dir, modules, json_out, report_path, debug):
    def produce():
        from pgle.commands.cache import ls

        report = ls(cache_dir, modules=tuple(modules))
        if not json_out:
            _table(report)
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@cache.command("stats", help="Totals per role and module; flags manifest entries that are gone.")
@click.argument("cache_dir", metavar="DIR")
@report_options
def stats_cmd(cache_dir, json_out, report_path, debug):
    def produce():
        from pgle.commands.cache import stats

        return stats(cache_dir)

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@cache.command("prune", help="Delete entries by age and/or module. Dry run unless --yes. Touches "
                             "only *-cache and *-atime files.")
@click.argument("cache_dir", metavar="DIR")
@click.option("--older-than", default=None, metavar="DURATION",
              help="Entries last used longer ago than this: 30m, 12h, 7d, 2w.")
@click.option("--module", "modules", multiple=True, metavar="NAME",
              help="Entries of this module (glob patterns allowed; repeatable).")
@click.option("--yes", is_flag=True, help="Really delete (default: only show what would go).")
@report_options
def prune_cmd(cache_dir, older_than, modules, yes, json_out, report_path, debug):
    def produce():
        from pgle.cache.entries import parse_duration
        from pgle.commands.cache import prune

        age = parse_duration(older_than) if older_than is not None else None
        report = prune(cache_dir, older_than=age, modules=tuple(modules), yes=yes, now=time.time())
        if not json_out:
            for r in report.details["selected"]:
                emit(f"{'delete' if yes else 'would delete'} {r['key']} ({r['role_label']}, "
                     f"{r['modified']})")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
