"""`pgle store ls|add|get|prune`: the fingerprint-keyed profile store. Thin click commands."""

from __future__ import annotations

from typing import Any

import click

from pgle.report import Report

from .options import deprecated_alias, report_options
from .output import echo, emit, table

_POLICY_HELP = (
    "replace, keep:N (serve the newest) or merge:N[:pP] (serve the percentile P of the N newest)."
)


@click.group(
    "store",
    help="A profile store: per-module profiles keyed by fingerprint, jax version "
    "and device kind, shared by recurring jobs (a folder or gs://bucket/path).",
)
def store() -> None:
    pass


def _table(rows: list[dict[str, Any]]) -> None:
    """The listing is the command's product: stdout, one entry per line, under a header."""
    if not rows:
        return
    for line in table(
        ("FINGERPRINT", "ENTRY", "JAX", "DEVICE", ">INSTR", ">AGE", "MODULE", "SOURCE"),
        [
            (
                r["fingerprint"],
                r["entry_id"],
                r["jax"],
                f"{r['device_kind']} x{r['device_count']}",
                str(r["instructions"]),
                r["age"],
                r["module"] or "-",
                r["source"],
            )
            for r in rows
        ],
    ):
        echo(line)


@store.command(
    "ls",
    help="List the profiles in STORE on stdout: fingerprint, entry, jax, "
    "device, instructions, age, module, source.",
)
@click.argument("store", metavar="STORE")
@click.option("--fingerprint", default=None, metavar="FP")
@click.option("--jax", default=None, metavar="VERSION")
@click.option("--device-kind", default=None, metavar="KIND")
@report_options
def ls(store: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    report = api.store_ls(store, **options)
    if not json_out:
        _table(report.modules)
    return report


@store.command(
    "add", help="Add a per-module profile (directory, or file of <fp>::name entries) to STORE."
)
@click.argument("store", metavar="STORE")
@click.argument("profile", metavar="PROFILE")
@click.option(
    "--device-kind",
    required=True,
    metavar="KIND",
    help="Device kind it was collected on (e.g. 'NVIDIA H100 80GB HBM3').",
)
@click.option("--device-count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--jax", default=None, metavar="VERSION", help="Default: the installed jax.")
@click.option("--jaxlib", default=None, metavar="VERSION", help="Default: the installed jaxlib.")
@click.option("--source", default=None, help="Provenance text (default: the PROFILE path).")
@click.option("--policy", default=None, help=f"Default keep:3. {_POLICY_HELP}")
@report_options
def add(store: str, profile: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.store_add(store, profile, **options)


@store.command(
    "get",
    help="Write the view XLA reads (<fingerprint>.pbtxt per module) for one "
    "jax version and device kind to OUT.",
)
@click.argument("store", metavar="STORE")
@click.argument("out", metavar="OUT")
@click.option("--device-kind", required=True, metavar="KIND")
@click.option("--jax", default=None, metavar="VERSION", help="Default: the installed jax.")
@click.option("--policy", default=None, help=f"Default keep:3. {_POLICY_HELP}")
@click.option(
    "--force",
    is_flag=True,
    help="Replace OUT if it is a profile directory or an earlier view (never anything else).",
)
@report_options
def get(store: str, out: str, json_out: bool, **options: Any) -> Report:
    from pgle import api

    return api.store_get(store, out, **options)


@store.command("prune", help="Remove old profiles from STORE. Dry run unless --yes.")
@click.argument("store", metavar="STORE")
@click.option(
    "--keep-last",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Keep the N newest per module.",
)
@deprecated_alias("--keep", "--keep-last", "keep_last", type=click.IntRange(min=1))
@click.option(
    "--older-than",
    default=None,
    metavar="DURATION",
    help="Profiles added longer ago than this: 30m, 12h, 7d, 2w.",
)
@click.option(
    "--jax", default=None, metavar="VERSION", help="Remove every profile of another jax version."
)
@click.option("--yes", is_flag=True, help="Really remove (default: only show what would go).")
@click.option("--dry-run", is_flag=True, hidden=True)  # the default now; kept for old scripts
@report_options
def prune(store: str, yes: bool, dry_run: bool, json_out: bool, **options: Any) -> Report:
    from pgle import api

    report = api.store_prune(store, yes=yes and not dry_run, **options)
    if not json_out:
        for r in report.modules:
            emit(
                f"{r['status']} {r['fingerprint']}/{r['entry_id']} (jax {r['jax']}, "
                f"{r['device_kind']}, {r['created']})"
            )
    return report
