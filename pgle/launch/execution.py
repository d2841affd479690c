"""One launch of the workload through the harness: spec, environment, log, events.

Every workflow runs the workload this way; it returns what the run left behind.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Callable, Sequence

from pgle.launch import launcher
from pgle.launch.childenv import ChildEnv
from pgle.errors import BadInput
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
    run.spec.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    argv = [*prefix, *harness_argv(run.spec)]
    result = launcher.launch(argv, child.env, run.log, watchdog=watchdog)
    if log_copy:
        copy_log(run.log, log_copy)
    return Execution(run, result, read_events(run.events), child)


def copy_log(src: Path, dest: str) -> None:
    try:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    except OSError as e:
        raise BadInput(f"cannot write log {dest}: {e.strerror}.") from None
