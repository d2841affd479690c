"""One launch of the workload through the harness: spec, environment, log, events.

Every workflow runs the workload this way; it returns what the run left behind.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from pgle.launch import launcher
from pgle.launch.childenv import ChildEnv
from pgle.atomic import copy_file_atomic, write_text_atomic
from pgle.evidence.events import RunEvents, read_events
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload

HARNESS = Path(__file__).with_name("harness.py")


@dataclasses.dataclass
class Execution:
    run: RunFolder
    result: launcher.LaunchResult
    events: RunEvents
    child: ChildEnv

    @property
    def exit_code(self) -> int:
        return self.result.exit_code


def harness_argv(spec_path: Path) -> list[str]:
    # Run by file path: the harness needs only the standard library, and its own
    # folder on sys.path[0] is replaced by the script's before the script runs.
    return [sys.executable, str(HARNESS), "--spec", str(spec_path)]


def execute(
    workload: Workload,
    run: RunFolder,
    child: ChildEnv,
    *,
    profile_window: dict | None = None,
    step_name: str | None = None,
    capture_loggers: Sequence[dict] = (),
    warnings_always: Sequence[str] = (),
    prefix: Sequence[str] = (),
    watchdog: Callable[[], int | None] | None = None,
    log_copy: str | None = None,
    extra_spec: dict | None = None,
) -> Execution:
    """`prefix` wraps the python command (e.g. `nsys profile -o x`); `extra_spec` adds harness
    spec keys (e.g. `observe_pgle`)."""
    spec = {
        "events": str(run.events),
        "workload": {"script": workload.script, "module": workload.module,
                     "args": list(workload.args)},
        "profile": profile_window,
        "step_name": step_name,
        "capture_loggers": list(capture_loggers),
        "warnings_always": list(warnings_always),
        **(extra_spec or {}),
    }
    write_text_atomic(run.spec, json.dumps(spec, indent=2))
    argv = [*prefix, *harness_argv(run.spec)]
    result = launcher.launch(argv, child.env, run.log, watchdog=watchdog)
    if result.log_error:
        # Every command copies child.warnings into its report.
        child.warnings.append(
            f"the workload log {run.log} is incomplete ({result.log_error}): the verdict saw only "
            "the lines written before that; free space and rerun to be sure")
    if log_copy:
        copy_log(run.log, log_copy)
    return Execution(run, result, read_events(run.events), child)


def copy_log(src: Path, dest: str) -> None:
    # Checked writable before the launch (check_writable_target); a failure now is
    # pgle's (exit 1), and copy_file_atomic leaves no half-written copy.
    copy_file_atomic(src, dest)
