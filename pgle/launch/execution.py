"""One launch of the workload through the harness: spec, environment, log, events.

Every workflow runs the workload this way; it returns what the run left behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pgle.atomic import copy_file_atomic, write_text_atomic
from pgle.errors import Interrupted, Stalled
from pgle.evidence import schema
from pgle.evidence.event_kinds import Exit, Hold
from pgle.evidence.event_tail import EventTail
from pgle.evidence.events import RunEvents, read_run_events
from pgle.evidence.schema import WORKLOAD_ARGS, HarnessSpec, WindowSpec, WorkloadSpec
from pgle.launch import launcher, streams
from pgle.launch.childenv import ChildEnv
from pgle.launch.progress import WindowProgress
from pgle.launch.runfolder import RunFolder
from pgle.launch.stall import StallPolicy, StallReport, StallWatch
from pgle.launch.workload import Workload
from pgle.redact import redact_args
from pgle.report import Report

HARNESS = Path(__file__).with_name("harness.py")
# Command mode: the folder put first on the command's PYTHONPATH; its sitecustomize.py starts
# the harness in every Python process of the command (pgle/launch/boot/sitecustomize.py).
BOOT = Path(__file__).with_name("boot")
PGLE_ROOT_VAR = "PGLE_HARNESS_ROOT"  # the folder holding pgle's package, for that harness


@dataclasses.dataclass
class Execution:
    run: RunFolder
    result: launcher.LaunchResult
    events: RunEvents
    child: ChildEnv
    spec: HarnessSpec  # what the harness was asked to do
    stall: StallReport | None = None  # the stall watchdog stopped the workload

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def report(self, command: str, status: str, **fields: Any) -> Report:
        """`command`'s report of this launch: the workload's exit code, log and run folder."""
        return Report(
            command,
            status,
            workload_exit_code=self.exit_code,
            log_path=str(self.run.log),
            run_dir=str(self.run.path),
            **fields,
        )

    @property
    def held(self) -> bool:
        """The workload has finished and waits for pgle (pgle.launch.handoff)."""
        return self.result.pending is not None

    @property
    def interrupted(self) -> bool:
        """pgle got SIGINT/SIGTERM/SIGHUP while the workload was held (and passed it on)."""
        pending = self.result.pending
        return pending is not None and pending.signals.interrupted is not None

    def resume(self) -> None:
        """A held workload goes on to its real end (after pgle's last handoff request).
        Interrupted where pgle got SIGINT/SIGTERM/SIGHUP while it was held (the exchange):
        the command stops there, as at any other moment of a launch."""
        pending = self.result.pending
        if pending is None:
            return
        final = pending.resume()
        self.result = dataclasses.replace(
            final, exit_code=final.exit_code if final.exit_code != 0 else self.result.exit_code
        )
        if final.interrupted:
            raise interrupted(final)

    def dropped_flags_reason(self) -> str | None:
        """The workload replaced XLA_FLAGS before XLA read it (the harness compared them at
        the first compile): which of pgle's flags XLA never saw."""
        seen = self.events.xla_flags_seen
        if not seen or not seen.missing:
            return None
        expected = self.spec.expected_xla_flags or {}
        wanted = " ".join(expected.get(n, n) for n in seen.missing)
        return (
            f"the workload replaced XLA_FLAGS before XLA read it: pgle's {wanted} never "
            f"reached XLA (XLA saw {seen.effective!r}); make the script append to "
            "os.environ['XLA_FLAGS'] instead of assigning it (docs/guide/real-scripts.md)"
        )


def pgle_flags(child: ChildEnv) -> dict[str, str]:
    """The XLA flags pgle added or changed: the harness checks they reach XLA."""
    out = {}
    for flag in child.flags.flags:
        mine = child.user_flags.get(flag.name)
        if mine is None or mine.raw != flag.raw:
            out[flag.name] = flag.raw
    return out


def command_environment(env: dict[str, str], spec_path: Path) -> dict[str, str]:
    """Command mode: the harness travels by environment into every Python process below the
    command (a sitecustomize first on PYTHONPATH, which chains to the one it shadows)."""
    path = env.get("PYTHONPATH")
    return {
        **env,
        schema.SPEC_VAR: str(spec_path),
        PGLE_ROOT_VAR: str(Path(__file__).resolve().parents[2]),
        "PYTHONPATH": os.pathsep.join(p for p in (str(BOOT), path) if p),
    }


def _held(run: RunFolder) -> Callable[[], int | None]:
    """The launcher's poll of a held workload: its exit code, once the harness holds."""
    folder = run.path / schema.HANDOFF_DIR
    events = EventTail(run.events, (Exit, Hold))
    code: int | None = None
    held = False

    def poll() -> int | None:
        nonlocal code, held
        if not folder.is_dir():
            return None
        for r in events.read():
            if isinstance(r, Exit):
                code = r.code
            elif isinstance(r, Hold):
                held = True
        return int(code or 0) if held else None

    return poll


def execute(
    workload: Workload,
    run: RunFolder,
    child: ChildEnv,
    *,
    profile_window: WindowSpec | None = None,
    step_name: str | None = None,
    capture_loggers: Sequence[dict[str, Any]] = (),
    warnings_always: Sequence[str] = (),
    prefix: Sequence[str] = (),
    watchdog: Callable[[], int | None] | None = None,
    on_start: Callable[[], None] | None = None,
    on_exit: Callable[[int], None] | None = None,
    log_copy: str | None = None,
    observe_pgle: bool = False,
    progress: bool = False,
    count_jits: bool = True,
    stall_timeout: float | StallPolicy | None = None,
    hold: bool = False,
    hold_timeout_s: float = 900.0,
    export_dir: str | None = None,
    before_stall_stop: Callable[[StallReport], None] | None = None,
) -> Execution:
    """`prefix` wraps the python command (e.g. `nsys profile -o x`); `observe_pgle` asks the
    harness for per-execution auto-PGLE events (pgle.launch.jax_internals). `on_start()` runs just
    before the launch and `on_exit(code)` the moment the workload has exited (a job records them
    so that its peers stop promptly); `watchdog()` is polled while it runs and returns an exit
    code to stop it with (pgle.launch.launcher). `progress`: log progress lines while it runs
    (the profiling window's, or plain running time; pgle.launch.progress). `count_jits`: the
    harness counts jitted executions (pgle.launch.step_rule) unless False.
    `stall_timeout`: the stall watchdog's policy (pgle.launch.stall.StallPolicy; seconds: stop
    after that long without progress; 0: off; None: the default, which reports and stops only
    a step rhythm that stopped); a stopped workload raises Stalled, a reported quiet spell is a
    warning of the report. `hold`: the workload waits at
    its end for pgle's exchange through jax.distributed (pgle.launch.handoff): the Execution
    then comes back while it waits (`held`), and `resume()` lets it end. `export_dir`: the
    harness exports the candidate step functions there for CUDA (pgle.launch.step_export)."""
    recorded = redact_args(workload.args)
    env = child.env
    if recorded != list(workload.args) and not workload.command:
        env = {**env, WORKLOAD_ARGS: json.dumps(list(workload.args))}  # never to a file
    command = tuple(redact_args(list(workload.command))) if workload.command else ()
    spec = HarnessSpec(
        events=str(run.events),
        workload=WorkloadSpec(workload.script, workload.module, tuple(recorded), command),
        profile=profile_window,
        step_name=step_name,
        capture_loggers=tuple(capture_loggers),
        warnings_always=tuple(warnings_always),
        observe_pgle=observe_pgle,
        expected_xla_flags=pgle_flags(child) or None,
        count_jits=count_jits,
        hold=hold,
        hold_timeout_s=hold_timeout_s,
        export_dir=export_dir,
    )
    run.claim_files()
    write_text_atomic(run.spec, spec.to_json())
    if workload.command:
        argv = [*prefix, *workload.command]
        env = command_environment(env, run.spec)
    else:
        # Run by file path: the harness needs only the standard library, and its own
        # folder on sys.path[0] is replaced by the script's before the script runs.
        argv = [*prefix, sys.executable, str(HARNESS), "--spec", str(run.spec)]
    if on_start is not None:
        on_start()
    ticker = WindowProgress(run.events, window=profile_window is not None) if progress else None
    policy = StallPolicy.of(stall_timeout)
    stall = (
        StallWatch(run.path, policy, streams.say, before_stop=before_stall_stop)
        if policy is not None
        else None
    )
    result = launcher.launch(
        argv,
        env,
        run.log,
        watchdog=watchdog,
        terminal_level=child.terminal_level,
        progress=ticker,
        stall=stall,
        held=_held(run) if hold else None,
    )
    if on_exit is not None:
        # Interrupted: the peers of a job stop too, whatever the workload's own code was.
        on_exit(128 + result.interrupted if result.interrupted else result.exit_code)
    _drop_empty_stacks(run)
    if log_copy:
        # Checked writable before the launch (check_writable_target); a failure now is
        # pgle's (exit 1), and copy_file_atomic leaves no half-written copy.
        copy_file_atomic(run.log, log_copy)
    if result.interrupted:
        raise interrupted(result)
    child.warnings.extend(result.stream_notes)
    if stall is not None:
        child.warnings.extend(stall.notes)
    if result.log_error:
        # Every command copies child.warnings into its report.
        child.warnings.append(
            f"the workload log {run.log} is incomplete ({result.log_error}): the verdict saw only "
            f"the lines written before that; {remedy(result.log_error)} and rerun to be sure"
        )
    ex = Execution(
        run,
        result,
        read_run_events(run.events),
        child,
        spec,
        stall.report if stall is not None else None,
    )
    if ex.stall is not None:
        raise Stalled(ex.stall.message(), ex)
    return ex


def _drop_empty_stacks(run: RunFolder) -> None:
    """Every harnessed process keeps a stacks file open for its dump; one never written is
    clutter (a dump pgle asked for stays)."""
    for home in [run.path, *sorted((run.path / schema.PROCS_DIR).glob("*"))]:
        path = home / schema.STACKS_NAME
        try:
            if path.stat().st_size == 0 and not path.is_symlink():
                path.unlink()
        except OSError:
            pass


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
    how = (
        "ignored it and was killed (SIGKILL) after the grace period"
        if result.killed
        else f"exited with code {result.exit_code}"
    )
    return Interrupted(
        signum,
        f"interrupted by {name}: pgle passed it to the workload, which "
        f"{how}; nothing more is run. Its output: {result.log_path}",
    )
