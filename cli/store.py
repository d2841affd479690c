"""`pgle store ls|add|get|prune`: the fingerprint-keyed profile store. Thin click commands."""

from __future__ import annotations

import click

from pgle.cli.options import report_options
from pgle.cli.output import finish

_POLICY_HELP = "replace, keep:N (serve the newest) or merge:N[:pP] (serve the percentile P of the N newest)."


@click.group("store",
             short_help="A fingerprint-keyed profile store for recurring jobs: ls, add, get, prune.",
             help="A profile store: per-module profiles keyed by fingerprint, jax version "
             "and device kind, shared by recurring jobs (a folder or gs://bucket/path).")
def store():
    pass


@store.command("ls", help="List the profiles in STORE: module, jax, device, age, source.")
@click.argument("path", metavar="STORE")
@click.option("--fingerprint", default=None, metavar="FP")
@click.option("--jax", default=None, metavar="VERSION")
@click.option("--device-kind", default=None, metavar="KIND")
@report_options
def ls(path, fingerprint, jax, device_kind, json_out, report_path, debug):
    from pgle.commands.store import ls_report

    finish(lambda: ls_report(path, fingerprint=fingerprint, jax=jax, device_kind=device_kind),
           json_out=json_out, report_path=report_path, debug=debug)


@store.command("add", help="Add a per-module profile (directory, or file of <fp>::name entries) to STORE.")
@click.argument("path", metavar="STORE")
@click.argument("profile", metavar="PROFILE")
@click.option("--device-kind", required=True, metavar="KIND", help="Device kind it was collected on (e.g. 'NVIDIA H100 80GB HBM3').")
@click.option("--device-count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--jax", default=None, metavar="VERSION", help="Default: the installed jax.")
@click.option("--jaxlib", default=None, metavar="VERSION", help="Default: the installed jaxlib.")
@click.option("--source", default=None, help="Provenance text (default: the PROFILE path).")
@click.option("--policy", default=None, help=f"Default keep:3. {_POLICY_HELP}")
@report_options
def add(path, profile, device_kind, device_count, jax, jaxlib, source, policy, json_out, report_path, debug):
    from pgle.commands.store import add_report

    finish(lambda: add_report(path, profile, jax=jax, jaxlib=jaxlib, device_kind=device_kind,
                              device_count=device_count, source=source, policy=policy),
           json_out=json_out, report_path=report_path, debug=debug)


@store.command("get", help="Write the view XLA reads (<fingerprint>.pb per module) for one jax "
               "version and device kind to OUT.")
@click.argument("path", metavar="STORE")
@click.argument("out", metavar="OUT")
@click.option("--device-kind", required=True, metavar="KIND")
@click.option("--jax", default=None, metavar="VERSION", help="Default: the installed jax.")
@click.option("--policy", default=None, help=f"Default keep:3. {_POLICY_HELP}")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@report_options
def get(path, out, device_kind, jax, policy, force, json_out, report_path, debug):
    from pgle.commands.store import get_report

    finish(lambda: get_report(path, out, jax=jax, device_kind=device_kind, policy=policy, force=force),
           json_out=json_out, report_path=report_path, debug=debug)


@store.command("prune", help="Remove old profiles from STORE.")
@click.argument("path", metavar="STORE")
@click.option("--keep", type=click.IntRange(min=1), default=None, help="Keep the N newest per module.")
@click.option("--older-than", "older_than", type=click.FloatRange(min=0), default=None, metavar="DAYS")
@click.option("--jax", default=None, metavar="VERSION", help="Remove every profile of another jax version.")
@click.option("--dry-run", is_flag=True)
@report_options
def prune(path, keep, older_than, jax, dry_run, json_out, report_path, debug):
    from pgle.commands.store import prune_report

    finish(lambda: prune_report(path, keep=keep, older_than_days=older_than, jax=jax, dry_run=dry_run),
           json_out=json_out, report_path=report_path, debug=debug)
