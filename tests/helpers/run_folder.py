"""Extract the profile of a finished (or synthetic) collect run folder again, exactly as
`pgle collect` does after its run: the test side of pgle.commands.collect.finish_collect."""

from __future__ import annotations

from pathlib import Path

from pgle.commands import collect
from pgle.errors import BadInput
from pgle.evidence.events import read_events
from pgle.launch import childenv
from pgle.launch.execution import Execution
from pgle.launch.launcher import LaunchResult
from pgle.launch.runfolder import RunFolder
from pgle.evidence.schema import HarnessSpec, WorkloadSpec
from pgle.xla.flags import XlaFlags


def execution_from_run_folder(run_dir: str | Path) -> Execution:
    """The `Execution` a collect run left in `run_dir` (workload.log, events.jsonl, trace/,
    and spec.json when there is one)."""
    path = Path(run_dir)
    run = RunFolder(path.resolve())
    events = read_events(run.events)
    if not events.records:
        raise BadInput(f"run folder {run_dir} holds no events.jsonl from a pgle run.")
    code = events.exit.code if events.exit else None
    result = LaunchResult(exit_code=0 if code is None else int(code), signal=None,
                          duration_s=0.0, log_path=run.log)
    child = childenv.ChildEnv(env={}, user_flags=XlaFlags.parse(""), flags=XlaFlags.parse(""),
                              notices=[], warnings=[])
    spec = (HarnessSpec.from_json(run.spec.read_text()) if run.spec.exists()
            else HarnessSpec(str(run.events), WorkloadSpec(None, None)))
    return Execution(run, result, events, child, spec)


def finish_run_folder(opts: collect.CollectOptions, run_dir: str | Path) -> "object":
    ex = execution_from_run_folder(run_dir)
    output = opts.output or str(ex.run.path / ("profiles" if opts.per_module else "profile.pb"))
    collect.check_output(opts, output)
    return collect.finish_collect(opts, ex, output)
