"""The manual PGLE workflow: collect, run, tune, verify."""

from __future__ import annotations

import click

from pgle.cli.common import emit, finish, report_options

WORKLOAD_HELP = "SCRIPT [-- ARGS] or -m MODULE [-- ARGS]; arguments after -- reach the workload untouched."


def workload_options(f):
    f = click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [-- ARGS...]")(f)
    f = click.option("-m", "--module", "module", default=None, metavar="MODULE",
                     help="Run a module as `python -m MODULE` does.")(f)
    f = click.option("--run-dir", default=None, type=click.Path(file_okay=False),
                     help="Run folder (default .pgle/runs/<stamp>-<command>-<pid>; in a "
                          "multi-process job <job folder>/rank-<r>/, and a given one must hold "
                          "%r).")(f)
    f = click.option("--log", default=None, type=click.Path(dir_okay=False),
                     help="Also copy the workload's full log here (multi-process: with %r).")(f)
    return f


def verdict_options(f):
    f = click.option("--min-coverage", default=0.9, show_default=True, type=float,
                     help="Share of a module's instructions the profile must cover to count as applied.")(f)
    f = click.option("--require-applied", is_flag=True,
                     help="Exit 3 unless the verdict is `applied`.")(f)
    return f


def job_options(f):
    """Multi-process jobs (srun, mpirun, JobSet): the shared job folder and rank 0's wait."""
    f = click.option("--gather-timeout", type=float, default=None, metavar="SECONDS",
                     help="Multi-process: how long rank 0 waits for every rank's report "
                          "[default: 600]; ranks that never reported are listed, exit 1.")(f)
    f = click.option("--job-dir", default=None,
                     help="Multi-process: the job folder every rank shares (may hold %j, %n) "
                          "[default: .pgle/jobs/<job id>.<step id>].")(f)
    return f


def rank_outputs(json_out, report_path):
    """In a multi-process job only rank 0 prints --json (the job report; the other ranks send
    the workload's stdout to stderr); --report gets its placeholders, and without %r it is
    rank 0's alone."""
    import os
    import sys

    from pgle.jobs import driver as jobrun

    if jobrun.quiet_stdout_for_json(json_out):
        sys.stdout.flush()
        os.dup2(2, 1)
        json_out = False
    return json_out, jobrun.report_target(report_path)


def window_options(f):
    f = click.option("--duration", type=float, default=None, help="Seconds to profile (time window).")(f)
    f = click.option("--delay", type=float, default=None,
                     help="Seconds after start before profiling (time window).")(f)
    f = click.option("--step-name", default=None,
                     help="Count only StepTraceAnnotation steps with this name.")(f)
    f = click.option("--steps", default=None, metavar="START:COUNT",
                     help="Profile COUNT steps from step START (0-based StepTraceAnnotation steps). "
                          "Default: steps 2..6 when the script marks steps, else the whole run.")(f)
    return f


def _collect_options(module, words, output, steps, step_name, delay, duration, force, allow_empty,
                     run_dir, log, per_module=False, stat=None, fmt=None, converter=None,
                     qualify=False, rank=None, job_dir=None, gather_timeout=None):
    from pgle.commands.collect import CollectOptions, parse_steps
    from pgle.launch.workload import Workload

    return CollectOptions(
        workload=Workload.from_cli(module, words), output=output,
        steps=parse_steps(steps) if steps else None, step_name=step_name, delay=delay,
        duration=duration, force=force, allow_empty=allow_empty, run_dir=run_dir, log=log,
        per_module=per_module, stat=stat, fmt=fmt, converter=converter, qualify=qualify,
        rank=rank, job_dir=job_dir, gather_timeout=gather_timeout)


def _extraction_options(f):
    """How collect (and tune's collect phase) turns the trace into a profile."""
    f = click.option("--qualify", is_flag=True,
                     help="With --converter pgle: prefix every name with its module's "
                          "fingerprint (<fp>::name), so one file keeps modules apart.")(f)
    f = click.option("--converter", type=click.Choice(["jaxlib", "pgle"]), default=None,
                     help="Single-file converter: jaxlib (default; the mean over everything "
                          "profiled) or pgle (--stat, profiled steps only).")(f)
    f = click.option("--format", "fmt", type=click.Choice(["binary", "text"]), default=None,
                     help="With --per-module: write <fingerprint>.pbtxt (text, default: what XLA "
                          "looks up first) or <fingerprint>.pb (binary) files.")(f)
    f = click.option("--stat", default=None, metavar="STAT",
                     help="pgle's converter: each instruction's cost over the profiled steps: "
                          "median (default), mean, min, max or pNN.")(f)
    f = click.option("--per-module", is_flag=True,
                     help="Write a directory of <fingerprint>.pb files, one per module (what XLA "
                          "reads as is), plus manifest.json; -o names the directory.")(f)
    return f


@click.command(help="Profile a window of the workload and extract the PGLE profile.\n\n" + WORKLOAD_HELP)
@workload_options
@window_options
@click.option("-o", "--output", default=None,
              help="Profile to write: .pb (binary) or .pbtxt (text) [default: profile.pb]; with "
                   "--per-module a new or empty directory [default: profiles/].")
@click.option("--force", is_flag=True, help="Replace an existing profile (or profile directory) "
                                            "and manifest.")
@click.option("--allow-empty", is_flag=True, help="Write the profile even when it is empty.")
@_extraction_options
@click.option("--rank", "only_rank", type=int, default=None, metavar="N",
              help="Multi-process: only rank N runs the profiler and writes -o; the other ranks "
                   "run unprofiled. Default: every rank profiles, and without %r in -o rank 0 "
                   "merges the ranks' profiles into -o.")
@job_options
@report_options
def collect(module, words, output, steps, step_name, delay, duration, force, allow_empty, run_dir,
            log, per_module, stat, fmt, converter, qualify, only_rank, job_dir, gather_timeout,
            json_out, report_path, debug):
    def produce():
        from pgle.commands.collect import collect as do_collect

        out = output if output is not None else ("profiles" if per_module else "profile.pb")
        opts = _collect_options(module, words, out, steps, step_name, delay, duration, force,
                                allow_empty, run_dir, log, per_module, stat, fmt, converter,
                                qualify, only_rank, job_dir, gather_timeout)
        return do_collect(opts, emit)

    json_out, report_path = rank_outputs(json_out, report_path)
    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@click.command(help="Run the workload with a PGLE profile and verify from XLA's log that it was used.\n\n"
               + WORKLOAD_HELP)
@click.option("--profile", "profile_path", required=True,
              help="A .pb/.pbtxt profile, or a directory of <fingerprint>.pb|.pbtxt files.")
@click.option("--profile-store", default=None, type=click.Path(file_okay=False),
              help="Where the content-addressed copy handed to XLA goes (default .pgle/profiles).")
@workload_options
@verdict_options
@job_options
@report_options
def run(profile_path, profile_store, module, words, run_dir, log, min_coverage, require_applied,
        job_dir, gather_timeout, json_out, report_path, debug):
    def produce():
        from pgle.commands.run import RunOptions, run as do_run
        from pgle.launch.workload import Workload

        opts = RunOptions(Workload.from_cli(module, words), profile_path,
                          require_applied=require_applied, min_coverage=min_coverage,
                          run_dir=run_dir, log=log, profile_store=profile_store,
                          job_dir=job_dir, gather_timeout=gather_timeout)
        return do_run(opts, emit)

    json_out, report_path = rank_outputs(json_out, report_path)
    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@click.command(help="Collect, then run with the profile: one verdict, with the step times of both "
                    "phases.\n\n" + WORKLOAD_HELP)
@workload_options
@window_options
@click.option("-o", "--output", default=None,
              help="Where to keep the profile (default: inside the run folder); with "
                   "--per-module a new or empty directory.")
@click.option("--force", is_flag=True, help="Replace an existing profile (or profile directory) "
                                            "and manifest.")
@_extraction_options
@verdict_options
@job_options
@report_options
def tune(module, words, output, steps, step_name, delay, duration, force, per_module, stat, fmt,
         converter, qualify, run_dir, log, min_coverage, require_applied, job_dir, gather_timeout,
         json_out, report_path, debug):
    def produce():
        from pgle.commands.tune import TuneOptions, tune as do_tune

        copts = _collect_options(module, words, output, steps, step_name, delay, duration, force,
                                 False, run_dir, log, per_module, stat, fmt, converter, qualify,
                                 None, job_dir, gather_timeout)
        return do_tune(TuneOptions(copts, require_applied, min_coverage, html), emit)

    json_out, report_path = rank_outputs(json_out, report_path)
    # --report X.html: pgle report's HTML page of the run instead of the JSON report.
    html = report_path if report_path and report_path.lower().endswith((".html", ".htm")) else None
    report_path = None if html else report_path
    finish(produce, json_out=json_out, report_path=report_path, debug=debug)


@click.command(help="Build the PGLE verdict from a saved log (`-` for stdin).")
@click.argument("log_path", metavar="LOG")
@click.option("--profile", "profile_path", default=None,
              help="The profile the run was given: checked against what the log read.")
@click.option("--backend", default=None,
              help="The run's backend (gpu, cpu, ...): with no PGLE line, cpu means not_applicable.")
@click.option("--accuracy-checker-off", is_flag=True,
              help="The run had --xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_OFF.")
@click.option("--jax", default=None, metavar="VERSION",
              help="The jax version that wrote the log [default: the installed one]; before "
                   "0.4.36 XLA had no accuracy checker, so coverage is unverified.")
@verdict_options
@report_options
def verify(log_path, profile_path, backend, accuracy_checker_off, jax, min_coverage,
           require_applied, json_out, report_path, debug):
    def produce():
        from pgle.commands.verify import VerifyOptions, verify as do_verify

        return do_verify(VerifyOptions(log_path, profile_path, backend, min_coverage,
                                       require_applied, not accuracy_checker_off, jax))

    finish(produce, json_out=json_out, report_path=report_path, debug=debug)
