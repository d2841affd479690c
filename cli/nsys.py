"""`pgle nsys --cache-dir DIR [NSYS OPTIONS] -- SCRIPT [ARGS]`."""

from __future__ import annotations

from typing import Any

import click

from pgle.errors import BadInput
from pgle.report import Report

from .options import job_options, report_options


class _SplitAtDashes(click.Command):
    """Everything after the first `--` is the workload; before it, pgle's options and nsys's.

    Options pgle does not know (`-o report`, `--trace=cuda,nvtx`, ...) go to nsys untouched.
    """

    def parse_args(self, ctx, args):
        if "--" in args:
            i = args.index("--")
            args, ctx.meta["pgle_workload"] = args[:i], args[i + 1 :]
        else:
            ctx.meta["pgle_workload"] = None
        return super().parse_args(ctx, args)


@click.command(
    cls=_SplitAtDashes,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    help="Run the workload under Nsight Systems with JAX_COMPILATION_CACHE_EXPECT_PGLE and the "
    "environment `pgle prewarm` recorded in DIR, and report per module whether it loaded its "
    "PGLE-optimized executable, fell back, or was compiled anew.\n\n"
    "pgle nsys --cache-dir DIR [NSYS OPTIONS] -- SCRIPT [ARGS] (or -- -m MODULE [ARGS], or "
    "-- COMMAND [ARGS]: bash run.sh, python -m pkg). "
    "Options pgle does not know go to `nsys profile` as they are.",
)
@click.option("--cache-dir", required=True, metavar="DIR", help="The cache `pgle prewarm` filled.")
@click.option(
    "--nsys", default=None, metavar="PATH", help="The nsys executable (default: nsys on PATH)."
)
@click.option(
    "--launcher",
    default=None,
    metavar="CMD",
    help="Another wrapper instead of `nsys profile`, e.g. nsys-jax: run as "
    "CMD [NSYS OPTIONS] -- python ...",
)
@click.option(
    "--force",
    is_flag=True,
    help="Start even when flags, versions or the cache path differ from the prewarm run.",
)
@click.option(
    "--require-all",
    is_flag=True,
    help="Exit 3 unless every module loaded its PGLE-optimized executable.",
)
@click.option(
    "--require",
    "require",
    multiple=True,
    metavar="MODULE",
    help="Exit 3 unless this module (glob) loaded its PGLE-optimized executable; repeatable.",
)
@click.option(
    "--run-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Run folder (default .pgle/runs/<stamp>-nsys-<pid>).",
)
@click.option(
    "--log",
    default=None,
    type=click.Path(dir_okay=False),
    help="Also copy the workload's full log here.",
)
@click.option(
    "--ranks",
    default=None,
    metavar="LIST",
    help="Multi-process: only these ranks (e.g. 0,8 or 0-3) run under nsys; the others "
    "run the same environment without it. Default: every rank.",
)
@job_options
@click.argument("nsys_options", nargs=-1, type=click.UNPROCESSED)
@report_options(job=True)
@click.pass_context
def nsys(ctx: click.Context, json_out: bool, **options: Any) -> Report:
    words = ctx.meta.get("pgle_workload")

    from pgle import api

    if not words:
        raise BadInput(
            "no workload after `--`.",
            hint="Usage: pgle nsys --cache-dir DIR [NSYS OPTIONS] -- SCRIPT [ARGS] "
            "(or -- -m MODULE [ARGS], or -- COMMAND [ARGS]).",
        )
    _refuse_typos(ctx, options.get("nsys_options") or ())
    return api.nsys(*words, **options)


def _refuse_typos(ctx: click.Context, passed: tuple[str, ...]) -> None:
    """An option for nsys that is one letter off one of pgle's (`--rnaks 0`) is a typo of
    pgle's, not an nsys option: refused rather than handed to nsys silently."""
    import difflib

    ours = [o for p in ctx.command.params for o in p.opts if o.startswith("--")]
    for word in passed:
        name = word.split("=", 1)[0]
        if not name.startswith("--") or name in ours:
            continue
        close = difflib.get_close_matches(name, ours, n=1, cutoff=0.8)
        if close:
            raise BadInput(
                f"{name} is not a pgle nsys option; did you mean {close[0]}?",
                hint="Options pgle does not know go to `nsys profile`; this one looks like a "
                "typo of pgle's own.",
            )
