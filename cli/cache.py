"""`pgle cache ls|stats|prune DIR`: the persistent compilation cache on disk."""

from __future__ import annotations

import time

import click

from pgle.cli.options import report_options
from pgle.cli.output import echo, emit, finish


@click.group(
    short_help='List, total and prune a JAX persistent compilation cache.',
    help="Inspect and prune a JAX persistent compilation cache directory.")
def cache():
    pass


def _table(report) -> None:
    """The listing itself is the command's output: stdout, one entry per line."""
    from pgle.units import human_bytes

    rows = report.details["entries"]
    if not rows:
        return
    width = max(len(r["module"]) for r in rows)
    echo(f"{'MODULE':<{width}}  {'ROLE':<14}  {'SIZE':>10}  {'MODIFIED':<19}  KEY")
    for r in rows:
        echo(f"{r['module']:<{width}}  {r['role_label']:<14}  {human_bytes(r['size']):>10}  "
             f"{r['modified']:<19}  {r['key']}")
    echo("")
    _module_totals(report.modules)


def _module_totals(modules: list[dict]) -> None:
    from pgle.cache.manifest import ROLE_LABELS
    from pgle.units import human_bytes

    width = max([len("MODULE")] + [len(t["module"]) for t in modules])
    echo(f"{'MODULE':<{width}}  {'ENTRIES':>7}  {'SIZE':>10}  {'NEWEST':<19}  ROLES")
    for t in modules:
        roles = ", ".join(f"{n} {ROLE_LABELS[role]}" for role, n in sorted(t["roles"].items()))
        echo(f"{t['module']:<{width}}  {t['entries']:>7}  {human_bytes(t['bytes']):>10}  "
             f"{t['newest'] or '-':<19}  {roles}")


def _stats(report) -> None:
    """Totals per role, then per module: the command's product, on stdout."""
    from pgle.cache.manifest import ROLE_LABELS
    from pgle.units import human_bytes

    roles = report.details["roles"]
    total = report.details["total"]
    echo(f"{'ROLE':<14}  {'ENTRIES':>7}  {'SIZE':>10}")
    for role, r in sorted(roles.items()):
        echo(f"{ROLE_LABELS[role]:<14}  {r['entries']:>7}  {human_bytes(r['bytes']):>10}")
    echo(f"{'total':<14}  {total['entries']:>7}  {human_bytes(total['bytes']):>10}")
    if report.modules:
        echo("")
        _module_totals(report.modules)


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


@cache.command("stats", help="Totals per role and per module on stdout; flags manifest entries "
                             "that are gone.")
@click.argument("cache_dir", metavar="DIR")
@report_options
def stats_cmd(cache_dir, json_out, report_path, debug):
    def produce():
        from pgle.commands.cache import stats

        report = stats(cache_dir)
        if not json_out:
            _stats(report)
        return report

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
        from pgle.commands.cache import prune
        from pgle.units import parse_duration

        age = parse_duration(older_than) if older_than is not None else None
        report = prune(cache_dir, older_than=age, modules=tuple(modules), yes=yes, now=time.time())
        if not json_out:
            for r in report.details["selected"]:
                emit(f"{'delete' if yes else 'would delete'} {r['key']} ({r['role_label']}, "
                     f"{r['modified']})")
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
