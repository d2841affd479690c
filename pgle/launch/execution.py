"""One launch of the workload through the harness: spec, environment, log, events.

Every workflow runs the workload this way; it returns what the run left behind.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from pathlib import Path
from typing import Callable, Sequence

from pgle.errors import Interrupted
from pgle.launch import launcher
from pgle.launch.childenv import ChildEnv
from pgle.launch.progress import WindowProgress
from pgle.atomic import copy_file_atomic, write_text_atomic
from pgle.evidence.events import RunEvents, read_events
from pgle.launch.runfolder import RunFolder
from pgle.evidence.schema import WORKLOAD_ARGS, HarnessSpec, WindowSpec, WorkloadSpec
from pgle.redact import redact_args
from pgle.launch.workload import Workload

HARNESS = Path(__file__).with_name("harness.py")


@dataclasses.dataclass
class Execution:
    run: RunFolder
    result: launcher.LaunchResult
    events: RunEvents
    child: ChildEnv
    spec: HarnessSpec  # what the harness was asked to do

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def dropped_flags_reason(self) -> str | None:
        """The workload replaced XLA_FLAGS before XLA read it (the harness compared them at
        the first compile): which of pgle's flags XLA never saw."""
        seen = self.events.xla_flags_seen
        if not seen or not seen.get("missing"):
            return None
        expected = self.spec.expected_xla_flags or {}
        wanted = " ".join(expected.get(n, n) for n in seen["missing"])
        return (f"the workload replaced XLA_FLAGS before XLA read it: pgle's {wanted} never "
                f"reached XLA (XLA saw {seen.get('effective')!r}); make the script append to "
                "os.environ['XLA_FLAGS'] instead of assigning it (docs/guide/real-scripts.md)")


def pgle_flags(child: ChildEnv) -> dict[str, str]:
    """The XLA flags pgle added or changed: the harness checks they reach XLA."""
    out = {}
    for flag in child.flags.flags:
        mine = child.user_flags.get(flag.name)
        if mine is None or mine.raw != flag.raw:
            out[flag.name] = flag.raw
    return out


def harness_argv(spec_path: Path) -> list[str]:
    # Run by file path: the harness needs only the standard library, and its own
    # folder on sys.path[0] is replaced by the script's before the script runs.
    return [sys.executable, str(HARNESS), "--spec", str(spec_path)]


def execute(
    workload: Workload,
    run: RunFolder,
    child: ChildEnv,
    *,
    profile_window: WindowSpec | None = None,
    step_name: str | None = None,
    capture_loggers: Sequence[dict] = (),
    warnings_always: Sequence[str] = (),
    prefix: Sequence[str] = (),
    watchdog: Callable[[], int | None] | None = None,
    on_start: Callable[[], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    log_copy: str | None = None,
    observe_pgle: bool = False,
    progress: bool = False,
    count_jits: bool = True,
) -> Execution:
    """`prefix` wraps the python command (e.g. `nsys profile -o x`); `observe_pgle` asks the
    harness for per-execution auto-PGLE events (pgle.launch.jax_internals). `on_start()` runs just before the launch and
    `on_exit(code)` the moment the workload has exited (a job records them so that its peers
    stop promptly); `watchdog()` is polled while it runs and returns an exit code to stop it
    with (pgle.launch.launcher). `progress`: log progress lines while it runs (the
    profiling window's, or plain running time; pgle.launch.progress). `count_jits`: the
    harness counts jitted executions (pgle.launch.step_rule) unless False."""
    recorded = redact_args(workload.args)
    env = child.env
    if recorded != list(workload.args):  # the real ones go by environment, never to a file
        env = {**env, WORKLOAD_ARGS: json.dumps(list(workload.args))}
    spec = HarnessSpec(
        events=str(run.events),
        workload=WorkloadSpec(workload.script, workload.module, tuple(recorded)),
        profile=profile_window, step_name=step_name, capture_loggers=tuple(capture_loggers),
        warnings_always=tuple(warnings_always), observe_pgle=observe_pgle,
        expected_xla_flags=pgle_flags(child) or None, count_jits=count_jits)
    run.claim_files()
    write_text_atomic(run.spec, spec.to_json())
    argv = [*prefix, *harness_argv(run.spec)]
    if on_start is not None:
        on_start()
    ticker = WindowProgress(run.events, window=profile_window is not None) if progress else None
    result = launcher.launch(argv, env, run.log, watchdog=watchdog,
                             terminal_level=child.terminal_level, progress=ticker)
    if on_exit is not None:
        # Interrupted: the peers of a job stop too, whatever the workload's own code was.
        on_exit(128 + result.interrupted if result.interrupted else result.exit_code)
    if result.interrupted:
        if log_copy:
            copy_log(run.log, log_copy)
        raise interrupted(result)
    child.warnings.extend(result.stream_notes)
    if result.log_error:
        # Every command copies child.warnings into its report.
        child.warnings.append(
            f"the workload log {run.log} is incomplete ({result.log_error}): the verdict saw only "
            f"the lines written before that; {remedy(result.log_error)} and rerun to be sure")
    if log_copy:
        copy_log(run.log, log_copy)
    return Execution(run, result, read_events(run.events), child, spec)


def remedy(error: str) -> str:
    """What to do about a write error the launcher recorded (`strerror (ENAME)`)."""
    if "EFBIG" in error:
        return "raise the file size limit (ulimit -f)"
    if "ENOSPC" in error or "EDQUOT" in error:
        return "free space"
    return "fix that"


def interrupted(result: launcher.LaunchResult) -> Interrupted:
    """The command stops: pgle got SIGINT/SIGTERM/SIGHUP while the workload ran."""
    signum = result.interrupted or signal.SIGINT
    name = signal.Signals(signum).name + (" (Ctrl-C)" if signum == signal.SIGINT else "")
    how = ("ignored it and was killed (SIGKILL) after the grace period" if result.killed
           else f"exited with code {result.exit_code}")
    return Interrupted(signum, f"interrupted by {name}: pgle passed it to the workload, which "
                               f"{how}; nothing more is run. Its output: {result.log_path}")


def copy_log(src: Path, dest: str) -> None:
    # Checked writable before the launch (check_writable_target); a failure now is
    # pgle's (exit 1), and copy_file_atomic leaves no half-written copy.
    copy_file_atomic(src, dest)
