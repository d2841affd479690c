"""`pgle doctor`: check jax, the GPU stack and the environment before a big job."""

from __future__ import annotations

import click

from pgle.cli.options import report_options
from pgle.cli.output import finish


@click.command("doctor",
               short_help="Check jax, GPU, CUPTI, nsys, XLA_FLAGS and the cache before a job.")
@click.option("--workflow", type=click.Choice(["manual", "auto", "prewarm", "nsys"]),
              default="manual", show_default=True, help="Which workflow's checks apply.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="The compilation cache directory for prewarm/nsys (default: "
                   "$JAX_COMPILATION_CACHE_DIR).")
@click.option("--probe", is_flag=True,
              help="Also start jax with your XLA_FLAGS to see which flags jaxlib rejects "
                   "(a few seconds).")
@report_options
def doctor(workflow, cache_dir, probe, json_out, report_path, debug):
    """Check python, jax, the backend, CUPTI, nsys, XLA_FLAGS, the environment and the cache.

    Prints one line per check (ok, WARN, ERROR, with what to do); exits 1 when
    any check is an error.
    """
    from pgle.commands import doctor as doc

    def produce():
        report = doc.doctor(workflow=workflow, cache_dir=cache_dir, probe=probe)
        if not json_out:
            click.echo(doc.format_checks(report.details["checks"]))
        return report

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
