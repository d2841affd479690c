"""Every click option shared by more than one command, declared once."""

from __future__ import annotations

import functools

import click

from .output import finish

WORKLOAD_HELP = (
    "SCRIPT [-- ARGS], -m MODULE [-- ARGS], or -- COMMAND [ARGS] (any launcher: "
    "bash run.sh, python -m pkg, torchrun ...; pgle reaches every Python process "
    "below it that imports jax); arguments after -- reach the workload untouched."
)


def report_options(f=None, *, job=False):
    """--json, --report FILE and --debug for a command whose body returns a Report: the body
    gets `json_out` (it prints its own table on stdout without --json), and output.finish
    renders the Report and exits with its code. `job`: one rank of a multi-process job
    (`@report_options(job=True)`; see cli/output.py)."""
    if f is None:
        return functools.partial(report_options, job=job)
    body = f

    @functools.wraps(body)
    def command(*args, json_out: bool, report_path: str | None, debug: bool, **kwargs):
        finish(
            lambda: body(*args, json_out=json_out, **kwargs),
            json_out=json_out,
            report_path=report_path,
            debug=debug,
            job=job,
        )

    return report_flags(command)


def report_flags(f):
    """--json, --report FILE and --debug alone (the body calls output.finish itself)."""
    f = click.option("--debug", is_flag=True, help="Show a traceback on errors.")(f)
    f = click.option(
        "--report",
        "report_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Also write the JSON report to this file (on errors too). In a multi-process job "
        "it may hold %r; without it only rank 0 writes it.",
    )(f)
    f = click.option("--json", "json_out", is_flag=True, help="Print the JSON report on stdout.")(f)
    return f


def run_folder_options(f):
    """--run-dir and --log: where one launch keeps everything, and a copy of its log."""
    f = click.option(
        "--run-dir",
        default=None,
        type=click.Path(file_okay=False),
        help="Run folder (default .pgle/runs/<stamp>-<command>-<pid>; in a "
        "multi-process job <job folder>/rank-<r>/, and a given one must hold "
        "%r).",
    )(f)
    f = click.option(
        "--log",
        default=None,
        type=click.Path(dir_okay=False),
        help="Also copy the workload's full log here (multi-process: with %r).",
    )(f)
    return f


def workload_options(f):
    """SCRIPT [-- ARGS] or -m MODULE, plus the run folder options."""
    f = click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [-- ARGS...]")(f)
    f = click.option(
        "-m",
        "--module",
        "module",
        default=None,
        metavar="MODULE",
        help="Run a module as `python -m MODULE` does.",
    )(f)
    f = click.option(
        "--verbose",
        is_flag=True,
        expose_value=False,
        callback=_verbose,
        help="Show XLA's INFO/VLOG lines pgle turned on live (they always go to workload.log).",
    )(f)
    return run_folder_options(f)


def _verbose(ctx, param, value):
    if value:  # read by pgle.launch.childenv (PGLE_VERBOSE) when it builds the child's env
        import os

        os.environ["PGLE_VERBOSE"] = "1"


def window_options(f):
    """Which part of the run collect profiles, and what its trace holds."""
    f = click.option(
        "--trace-max-bytes",
        default=None,
        metavar="SIZE",
        help="Bound the trace's size (500M, 1G; 0: no bound) [default: 1.5G, under "
        "protobuf's 2 GiB limit]: a step window keeps at most SIZE / (one step's trace) "
        "steps, measured by tracing the step before the window alone.",
    )(f)
    f = click.option(
        "--trace-detail",
        type=click.Choice(["pgle", "full"]),
        default="pgle",
        show_default=True,
        help="What the profiler records: pgle (what PGLE reads: device activity, HLO "
        "protos, step annotations; no Python tracer) or full (jax.profiler's defaults, "
        "Python calls included: a bigger trace, a slower stop).",
    )(f)
    f = click.option(
        "--duration", type=float, default=None, help="Seconds to profile (time window)."
    )(f)
    f = click.option(
        "--delay",
        type=float,
        default=None,
        help="Seconds after start before profiling (time window).",
    )(f)
    f = click.option(
        "--step-name", default=None, help="Count only StepTraceAnnotation steps with this name."
    )(f)
    f = click.option(
        "--steps",
        default=None,
        metavar="START:COUNT",
        help="Profile COUNT steps from step START (0-based StepTraceAnnotation steps). "
        "Default: steps 2..6 when the script marks steps, else 5 executions "
        "of its step function (the jitted function taking the most host time) "
        "after 2 (at most 30 s).",
    )(f)
    return f


def extraction_options(f):
    """How collect (and tune's collect phase) turns the trace into a profile."""
    f = click.option(
        "--keep-trace/--no-keep-trace",
        default=True,
        show_default=True,
        help="--no-keep-trace: delete the trace (often gigabytes) once the profile is written.",
    )(f)
    f = click.option(
        "--qualify",
        is_flag=True,
        help="With --converter pgle: prefix every name with its module's "
        "fingerprint (<fp>::name), so one file keeps modules apart.",
    )(f)
    f = click.option(
        "--converter",
        type=click.Choice(["jaxlib", "pgle"]),
        default=None,
        help="Single-file converter: jaxlib (default; the mean over everything "
        "profiled) or pgle (--stat, profiled steps only).",
    )(f)
    f = click.option(
        "--format",
        type=click.Choice(["binary", "text"]),
        default=None,
        help="With --per-module: write <fingerprint>.pbtxt (text, default: what XLA "
        "looks up first) or <fingerprint>.pb (binary) files.",
    )(f)
    f = click.option(
        "--stat",
        default=None,
        metavar="STAT",
        help="pgle's converter: each instruction's cost over the profiled steps: "
        "median (default), mean, min, max or pNN.",
    )(f)
    f = click.option(
        "--per-module",
        is_flag=True,
        help="Write a directory of <fingerprint>.pbtxt files (--format binary: "
        "<fingerprint>.pb), one per module (what XLA reads as is), plus "
        "manifest.json; -o names the directory.",
    )(f)
    return f


def force_option(f):
    return click.option(
        "--force",
        is_flag=True,
        help="Replace an existing profile (or profile directory) and manifest.",
    )(f)


def verdict_options(f):
    f = click.option(
        "--min-coverage",
        default=None,
        type=float,
        help="Share of a module's instructions the profile must cover to count as applied "
        "[default: 0.9, except that where XLA prices the missing compute with its "
        "speed-of-light model (jax >= 0.10.1 on Hopper/Blackwell) a module missing no "
        "collective is applied; given, it always decides].",
    )(f)
    f = click.option(
        "--require-applied", is_flag=True, help="Exit 3 unless the verdict is `applied`."
    )(f)
    f = click.option(
        "--require",
        "require",
        multiple=True,
        metavar="MODULE",
        help="Exit 3 unless this module (glob, e.g. 'jit_train_step*') applied "
        "the profile, whatever other modules did; repeatable.",
    )(f)
    return f


def job_options(f):
    """Multi-process jobs (srun, mpirun, JobSet): the shared job folder and rank 0's wait; and
    the stall watchdog of every launch."""
    f = click.option(
        "--require-same-program",
        is_flag=True,
        help="Multi-process: stop the job (exit 3) as soon as two ranks compile "
        "different programs for one module; without it pgle names them and goes on.",
    )(f)
    f = click.option(
        "--stall-timeout",
        default=None,
        metavar="DURATION",
        help="The stall watchdog. Default (auto): after 10 min without progress "
        "(output, steps, executions, compiles) write every process's Python "
        "stacks to the run folder and say so, and go on; stop (exit 124) only a "
        "workload whose marked steps had a rhythm (6 or more) that stopped for "
        "max(1 h, 20x the median step interval), never while XLA compiles or a "
        "trace is written, never before the steps. DURATION (30m, 2h): stop after "
        "that long without progress, in any phase. report:DURATION: report after "
        "that long, never stop. off: no watchdog. Time stopped (Ctrl-Z) does not "
        "count.",
    )(f)
    f = click.option(
        "--gather",
        type=click.Choice(["folder", "kv"]),
        default="folder",
        show_default=True,
        help="Multi-process: how rank reports and profiles reach rank 0: the "
        "shared job folder, or kv: jax.distributed's key-value store (no "
        "shared storage needed; the workload must call "
        "jax.distributed.initialize()).",
    )(f)
    f = click.option(
        "--gather-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Multi-process: how long rank 0 waits for every rank's report "
        "[default: 600]; ranks that never reported are listed, exit 1.",
    )(f)
    f = click.option(
        "--job-dir",
        default=None,
        help="Multi-process: the job folder every rank shares (may hold %j, %n) "
        "[default: .pgle/jobs/<job id>.<step id>].",
    )(f)
    return f


def auto_pgle_options(f):
    """--runs / --percentile / --require-all / --require, shared by auto and prewarm."""
    f = click.option(
        "--require",
        "require",
        multiple=True,
        metavar="MODULE",
        help="Exit 3 unless this module (glob, e.g. 'jit_train_step*') is optimized; repeatable.",
    )(f)
    f = click.option(
        "--require-all",
        is_flag=True,
        help="Exit 3 unless every module is optimized (one-shot modules such as "
        "initializers never are: prefer --require).",
    )(f)
    f = click.option(
        "--percentile",
        default=90,
        show_default=True,
        type=int,
        help="JAX_PGLE_AGGREGATION_PERCENTILE: which of the profiled timings to keep.",
    )(f)
    f = click.option(
        "--runs",
        default=3,
        show_default=True,
        type=int,
        help="JAX_PGLE_PROFILING_RUNS: executions profiled before the recompile.",
    )(f)
    return f


def store_options(f):
    """--store and --store-policy: the fingerprint-keyed profile store (collect adds to it,
    run serves from it; tune does both, auto serves)."""
    f = click.option(
        "--store-policy",
        default="replace",
        show_default=True,
        metavar="POLICY",
        help="How the store keeps a module's profiles: replace, keep:N (serve the "
        "newest) or merge:N[:pP] (serve the percentile P of the N newest).",
    )(f)
    f = click.option(
        "--store",
        "store",
        default=None,
        metavar="DIR|gs://...",
        help="Profile store keyed by fingerprint, jax version and device kind (as "
        "the run reports them): collect adds each module's profile (needs "
        "--per-module), run hands XLA the store's profiles, tune does both, "
        "auto serves only.",
    )(f)
    return f


def quiet_option(cmd: click.Command) -> click.Command:
    """-q/--quiet on `cmd` (and every subcommand of a group): pgle's progress lines go; its
    errors, warnings, verdict and summary stay."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            quiet_option(sub)
        return cmd
    if not any("--quiet" in p.opts for p in cmd.params):
        cmd.params.append(
            click.Option(
                ["-q", "--quiet"],
                is_flag=True,
                expose_value=False,
                callback=_quiet,
                help="Print no progress lines (errors, warnings and the verdict still print).",
            )
        )
    return cmd


def _quiet(ctx, param, value):
    if value:
        import logging

        logging.getLogger("pgle").setLevel(logging.WARNING)


# Old option spellings kept for one release (hidden from --help): old -> (new, its values).
# `--keep-trace yes|no` took a value; the new flag has none, so the old form is rewritten
# before click reads the command line.
RENAMED_VALUES = {
    ("--keep-trace", "yes"): "--keep-trace",
    ("--keep-trace", "no"): "--no-keep-trace",
}


def renamed_args(args: list[str]) -> tuple[list[str], list[str]]:
    """`args` with the old spellings of RENAMED_VALUES replaced (up to `--`, after which the
    words are the workload's), and a deprecation notice for each."""
    out: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out += args[i:]
            break
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(args):
            value = args[i + 1]
        new = RENAMED_VALUES.get((name, value))
        if new is not None:
            notes.append(f"{name} {value} is deprecated: use {new}")
            out.append(new)
            i += 1 if eq else 2
            continue
        out.append(word)
        i += 1
    return out, notes


def deprecated_alias(old: str, new: str, dest: str, **kwargs):
    """A hidden `old` spelling of option `new` (dest `dest`) for one release: its value reaches
    `dest` when `new` was not given, with a deprecation notice."""

    def decorate(f):
        import functools

        alias_dest = f"_alias_{dest}"

        @functools.wraps(f)
        def wrapper(*args, **values):
            given = values.pop(alias_dest, None)
            if given is not None:
                from .output import emit

                emit(f"warning: {old} is deprecated: use {new}")
                if values.get(dest) is None:
                    values[dest] = given
            return f(*args, **values)

        return click.option(old, alias_dest, hidden=True, default=None, **kwargs)(wrapper)

    return decorate
