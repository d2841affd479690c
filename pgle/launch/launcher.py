"""Spawn the workload, pass its output through live, keep the log, forward signals.

The child's stdout and stderr reach pgle's own stdout and stderr byte for byte as they
arrive (progress bars included); complete lines of both also go to the log file, so lines of
the two streams never interleave mid-line there (pgle.launch.pumps).

Each of the child's two streams is what it would be without pgle: where pgle's own stdout
(stderr) is a terminal, the child's is a pseudo-terminal of the same size and modes (so Python
line-buffers it and progress bars and colours behave as on the terminal, without forcing the
program unbuffered, which made a program printing in lines several times slower; issue 16);
elsewhere (a pipe, a file, a batch log) it is a pipe, where the program block-buffers as it
would.

Signals (docs/reliability.md, "Signals"): the child runs in its own process group, and pgle
acts for it as a shell would.
- SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 reaching pgle are forwarded to the whole group.
  The first three also stop the command: once the workload has exited, pgle raises
  `Interrupted` (exit 128+N) whatever the workload's exit code, so no later phase starts.
- SIGTERM: a workload still running KILL_GRACE_S after it (after jax.distributed.initialize()
  jax swallows SIGTERM: XLA's preemption notifier) gets SIGKILL, group and all.
- SIGTSTP (Ctrl-Z) stops the workload's group, then pgle itself; SIGCONT resumes both, restarts
  the stall watchdog's clock (time stopped is not the workload's: pgle.launch.stall) and
  refreshes the run folder's lease at once (pgle.launch.runfolder).
- Processes of the workload that left its group (`setsid`, a daemon) are found by the mark in
  their environment (pgle.launch.escapees): the stopping signals and the stall watchdog's stop
  reach them too, those still alive when the stopped workload has exited are killed once the
  grace period is over, and a watcher process kills them if pgle dies (even by SIGKILL).
- The handlers are in place before the child is started: a signal that arrives meanwhile is
  forwarded as soon as the child exists, never lost.
- A signal pgle was started ignoring (`nohup`, `cmd &` in a script) stays ignored, by pgle and
  by the workload, as for any program.

Nothing the log file or pgle's own streams do may stop the workload (pgle.launch.pumps,
pgle.launch.streams). When the workload has exited, pgle waits at most PIPE_GRACE_S for its
streams to end: a process the workload left behind (a daemon) may hold them open.

If pgle itself dies (even by SIGKILL, which it cannot catch) the workload must not live on
holding the GPU: the harness watches the read end of a pipe whose only write end pgle holds (fd
in PGLE_PARENT_FD): EOF means pgle is gone, and the harness kills its whole process group, the
workload's own children included. EOF stays: a harness that starts after pgle died sees it at
once, so no `preexec_fn` (PR_SET_PDEATHSIG) is needed for the time before it runs. None is
used: a `preexec_fn` makes subprocess run Python's at-fork handlers, and a process that already
uses JAX (a notebook calling `pgle.run`) then prints JAX's `os.fork()` deadlock warning (and
may deadlock); without one, CPython starts the child with vfork/exec and no Python in between.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Protocol

from pgle.errors import BadInput, PgleError
from pgle.launch import escapees, runfolder, streams
from pgle.launch.pumps import (
    COALESCE_BELOW_PIPE,
    COALESCE_BELOW_TERMINAL,
    Log,
    Pump,
    Sink,
    drained,
    grow_pipe,
    hide_below,
)

# What pgle does with each signal while the workload runs (module docstring).
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORWARDED_SIGNALS = (*STOPPING_SIGNALS, signal.SIGUSR1, signal.SIGUSR2)
# SIGTERM -> SIGKILL: as long as SLURM's default KillWait and Kubernetes' default grace
# period, so pgle never cuts a checkpoint-on-SIGTERM shorter than the cluster would.
KILL_GRACE_S = 30.0
KILL_GRACE_VAR = "PGLE_KILL_GRACE_S"
# A rank whose peer failed: its workload is stopped (SIGTERM, SIGKILL after this), it is
# probably waiting in a collective (docs/guide/cluster.md).
PEER_STOP_GRACE_S = 5.0
# The most pgle waits for the workload's streams to end after it exited (a daemon it started
# may hold them open); docs/reliability.md states it.
PIPE_GRACE_S = 5.0
PARENT_FD_VAR = "PGLE_PARENT_FD"  # read by pgle/launch/harness.py


@dataclasses.dataclass
class LaunchResult:
    exit_code: int  # as a shell reports it: 128+N when killed by signal N
    signal: int | None  # the signal that ended the child, if any
    duration_s: float
    log_path: Path
    stopped_by_watchdog: bool = False
    log_error: str | None = None  # why the log stopped early (it is incomplete), e.g. a full disk
    interrupted: int | None = None  # the first SIGINT/SIGTERM/SIGHUP pgle got: stop the command
    killed: bool = False  # pgle escalated to SIGKILL
    stream_notes: list[str] = dataclasses.field(default_factory=list)  # for the report
    # The workload has finished and waits for pgle (pgle.launch.handoff); `pending.resume()`
    # waits for its real exit. `exit_code` is then the one the harness recorded.
    pending: Running | None = None


def shell_exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def kill_grace(environ: dict[str, str]) -> float:
    """Seconds between a SIGTERM pgle forwards and the SIGKILL (PGLE_KILL_GRACE_S)."""
    raw = environ.get(KILL_GRACE_VAR, "").strip()
    if not raw:
        return KILL_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise BadInput(f"{KILL_GRACE_VAR}={raw!r}: a number of seconds >= 0, e.g. 30.")
    return value


class _Channel:
    """Where one of the child's output streams goes: a pipe, or a pseudo-terminal when pgle's
    own stream (`fd`) is a terminal. `child_fd` is the child's end, `read_fd` pgle's."""

    def __init__(self, fd: int):
        self.terminal = fd not in streams.closed_at_start and _isatty(fd)
        if self.terminal:
            try:
                self.read_fd, self.child_fd = os.openpty()  # both non-inheritable
            except OSError:  # no pseudo-terminal left (ENOENT/EAGAIN): a pipe still works
                self.terminal = False
        if not self.terminal:
            self.read_fd, self.child_fd = os.pipe()
            # A small pipe would fill while the pump waits to gather (pgle.launch.pumps).
            self.coalesce_below = COALESCE_BELOW_PIPE if grow_pipe(self.read_fd) else 0
            return
        self.coalesce_below = COALESCE_BELOW_TERMINAL
        try:
            attrs = termios.tcgetattr(fd)
            # The user's terminal does the output processing (\n -> \r\n and the like) when
            # pgle writes the bytes to it, so the pseudo-terminal must pass them unchanged:
            # the log then holds what the program wrote.
            attrs[1] &= ~termios.OPOST
            termios.tcsetattr(self.child_fd, termios.TCSANOW, attrs)
        except termios.error:
            pass
        copy_window_size(fd, self.read_fd)

    def child_started(self) -> None:
        os.close(self.child_fd)  # the child's copy alone keeps it open: its exit is EOF (EIO)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def copy_window_size(terminal: int, pty: int) -> None:
    """The terminal's rows and columns onto the pseudo-terminal (set through its master)."""
    import fcntl

    try:
        size = fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(pty, termios.TIOCSWINSZ, size)
    except OSError:
        pass


class _ExitWatch:
    """Waits up to a timeout for the child's exit and notices it the moment it happens.

    `Popen.wait(timeout)` sleeps in steps of up to 50 ms between `waitpid` tries (CPython
    3.11's loop), which every run paid as wall time at exit; a pidfd (Linux >= 5.3) turns
    readable when the child exits, so `poll` on it returns at once. Without pidfd_open (older
    kernels, seccomp sandboxes), `Popen.wait(timeout)` as before."""

    def __init__(self, child: subprocess.Popen[bytes]):
        self.child = child
        self.fd: int | None = None
        try:
            self.fd = os.pidfd_open(child.pid)
        except (AttributeError, OSError):
            return
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)

    def within(self, seconds: float) -> bool:
        """True once the child has exited (not yet reaped), waiting at most `seconds`."""
        if self.fd is None:
            try:
                self.child.wait(timeout=seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        # A signal handler (forwarded signals, SIGWINCH) runs during poll; PEP 475 resumes it.
        return bool(self.poller.poll(seconds * 1000))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Signals:
    """pgle's signal handlers for one launch, installed before the child exists (a signal that
    arrives while it starts is kept and forwarded once it does) and removed after it exited."""

    def __init__(self, grace_s: float, channels: tuple[_Channel, _Channel]):
        self.grace_s = grace_s
        self.channels = channels
        self.child: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.interrupted: int | None = None
        self.kill_at: float | None = None
        self.token: str | None = None  # the workload's mark (pgle.launch.escapees)
        self.on_resume: list[Callable[[], None]] = [runfolder.refresh_leases]
        self.previous: dict[int, object] = {}
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers (a library caller's thread)
        handlers = {sig: self.forward for sig in FORWARDED_SIGNALS}
        handlers[signal.SIGTSTP] = self.suspend
        handlers[signal.SIGCONT] = self.resume
        if any(c.terminal for c in channels):
            handlers[signal.SIGWINCH] = self.resized
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # ignored when pgle started (nohup, `&`): the workload inherits it
            self.previous[sig] = signal.signal(sig, handler)

    def attach(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        while self.pending:
            self._send(self.pending.pop(0))

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            # None: a handler not set from Python (an embedding program's): the default then.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # type: ignore[arg-type]
        self.previous = {}

    def _send(self, signum: int) -> None:
        if self.child is None:
            self.pending.append(signum)
        else:
            signal_group(self.child, signum)

    def forward(self, signum: int, frame: FrameType | None) -> None:
        if signum in STOPPING_SIGNALS and self.interrupted is None:
            self.interrupted = signum
        if signum == signal.SIGTERM and self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace_s
        self._send(signum)
        if signum in STOPPING_SIGNALS and self.child is not None and self.token is not None:
            # The command stops: what left the workload's group gets the signal too.
            escapees.signal_all(escapees.marked(self.token, outside_group=self.child.pid), signum)

    def suspend(self, signum: int, frame: FrameType | None) -> None:
        """Ctrl-Z: stop the workload's group, then pgle, as the default action would (the shell
        sees the job stopped); resumed by SIGCONT (`fg`, `bg`), which `resume` passes on."""
        if self.child is not None:
            signal_group(self.child, signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGTSTP)  # stops here until SIGCONT
        finally:
            signal.signal(signal.SIGTSTP, self.suspend)

    def resume(self, signum: int, frame: FrameType | None) -> None:
        if self.child is not None:
            signal_group(self.child, signal.SIGCONT)
        for then in self.on_resume:
            then()

    def resized(self, signum: int, frame: FrameType | None) -> None:
        # The child's pseudo-terminal is no process's controlling terminal (the child runs in
        # its own process group), so the kernel signals nobody when its size changes: pgle
        # copies the new size and tells the workload, as the terminal would have.
        for fd, channel in zip((1, 2), self.channels, strict=False):
            if channel.terminal:
                copy_window_size(fd, channel.read_fd)
        self._send(signal.SIGWINCH)


class Stall(Protocol):
    """What the launcher asks of a stall watchdog (pgle.launch.stall)."""

    def poll(self, output_at: float) -> int | None:
        """None, or the exit code to stop the workload with: it made no progress (its output,
        last at `output_at` (time.monotonic()), counts) for longer than its bound."""

    def dump(self, why: str) -> None:
        """Have every process of the workload write its Python stacks (before pgle stops it)."""

    def restart(self) -> None:
        """pgle or the workload was stopped until now: restart the clock of no progress."""


def launch(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    *,
    cwd: str | None = None,
    watchdog: Callable[[], int | None] | None = None,
    poll_s: float = 0.5,
    terminal_level: int | None = None,
    progress: Callable[[], None] | None = None,
    stall: Stall | None = None,
    held: Callable[[], int | None] | None = None,
) -> LaunchResult:
    """Run `argv` to completion. `watchdog()` is polled; a non-None code stops the child;
    `progress()` is polled too (it rate-limits itself); `stall` stops a workload that made no
    progress for too long, after it dumped its stacks.
    `terminal_level`: XLA log lines below this TF_CPP_MIN_LOG_LEVEL go to the log only.
    `held()`: polled; an exit code once the workload has finished and waits for pgle
    (pgle.launch.handoff): the result then comes at once, `pending` set, and
    `pending.resume()` later waits for the real exit."""
    running = Running(argv, env, log_path, cwd=cwd, terminal_level=terminal_level)
    return running.wait(watchdog=watchdog, poll_s=poll_s, progress=progress, stall=stall, held=held)


class Running:
    """One started workload: its channels, pumps, log and pgle's signal handlers."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        *,
        cwd: str | None,
        terminal_level: int | None,
    ):
        streams.reserve_standard_fds()  # the CLI did already; a library caller may not have
        self.grace = kill_grace(env)
        self.log_path = log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = Log(log_path)
        self.sinks = Sink.pair(sys.stdout, sys.stderr, log_path)
        # Only pgle holds the write end (os.pipe fds are not inheritable): its death is EOF there.
        watch_r, self.watch_w = os.pipe()
        self.token = escapees.new_token()
        env = {**env, PARENT_FD_VAR: str(watch_r), escapees.TOKEN_VAR: self.token}
        out, err = _Channel(1), _Channel(2)
        self.signals = _Signals(self.grace, (out, err))
        self.signals.token = self.token
        self.watcher = escapees.Watcher(self.token)
        self.start = time.monotonic()
        try:
            self.child = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=out.child_fd,
                stderr=err.child_fd,
                pass_fds=(watch_r,),
                process_group=0,
            )
        except OSError as e:
            self.signals.restore()
            self.watcher.done()
            self.log.close()
            os.close(self.watch_w)
            for fd in (out.read_fd, err.read_fd):
                os.close(fd)
            raise PgleError(f"cannot start {argv[0]}: {e.strerror}.") from None
        finally:
            os.close(watch_r)
            out.child_started()
            err.child_started()
        self.signals.attach(self.child)
        self.pumps = [
            Pump(out.read_fd, self.sinks[0], self.log, coalesce_below=out.coalesce_below),
            Pump(
                err.read_fd,
                self.sinks[1],
                self.log,
                hide_below(terminal_level) if terminal_level else None,
                coalesce_below=err.coalesce_below,
            ),
        ]
        for p in self.pumps:
            p.start()
        self.stopped = self.killed = False
        self.stopped_code: int | None = None
        self.exited = _ExitWatch(self.child)

    def output_at(self) -> float:
        """When the workload last wrote anything (time.monotonic(); its start before that)."""
        return max([self.start, *(p.last_read for p in self.pumps)])

    def _stop(self, code: int) -> None:
        self.stopped, self.stopped_code = True, code
        signal_group(self.child, signal.SIGTERM)
        escapees.signal_all(
            escapees.marked(self.token, outside_group=self.child.pid), signal.SIGTERM
        )
        peer_kill = time.monotonic() + PEER_STOP_GRACE_S
        if self.signals.kill_at is None or peer_kill < self.signals.kill_at:
            self.signals.kill_at = peer_kill

    def wait(
        self,
        *,
        watchdog: Callable[[], int | None] | None = None,
        poll_s: float = 0.5,
        progress: Callable[[], None] | None = None,
        stall: Stall | None = None,
        held: Callable[[], int | None] | None = None,
    ) -> LaunchResult:
        signals = self.signals
        if stall is not None:
            signals.on_resume.append(stall.restart)
        try:
            while True:
                wait = poll_s
                if signals.kill_at is not None and not self.killed:
                    wait = max(0.0, min(wait, signals.kill_at - time.monotonic()))
                if self.exited.within(wait):
                    returncode = self.child.wait()
                    break
                if (
                    signals.kill_at is not None
                    and not self.killed
                    and time.monotonic() >= signals.kill_at
                ):
                    self.killed = True
                    signal_group(self.child, signal.SIGKILL)
                    escapees.signal_all(escapees.marked(self.token), signal.SIGKILL)
                    if not self.stopped:
                        streams.say(
                            f"pgle: the workload was still running {signals.grace_s:g} s after "
                            f"SIGTERM: killed it (SIGKILL, its process group too; "
                            f"{KILL_GRACE_VAR} sets the grace period)"
                        )
                if progress is not None:
                    progress()
                if self.stopped:
                    continue
                if watchdog is not None:
                    code = watchdog()
                    if code is not None:
                        if stall is not None:  # every rank's stacks, this one's too
                            stall.dump("a peer failed")
                        self._stop(code)
                        continue
                if stall is not None and _stopped(self.child.pid):
                    stall.restart()  # stopped (SIGSTOP, a debugger): not a stall
                elif stall is not None:
                    code = stall.poll(self.output_at())
                    if code is not None:
                        self._stop(code)
                        continue
                if held is not None and not signals.interrupted:
                    code = held()
                    if code is not None and self._caught_up():
                        return LaunchResult(
                            code,
                            None,
                            time.monotonic() - self.start,
                            self.log_path,
                            log_error=self.log.error,
                            pending=self,
                        )
        except BaseException:
            self._close()
            raise
        return self._finish(returncode)

    def _caught_up(self) -> bool:
        """The pumps hold everything the workload wrote so far (at most a moment's wait)."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if all(p.caught_up() for p in self.pumps):
                return True
        return True  # a workload still writing: its later lines are in the log after resume

    def resume(self) -> LaunchResult:
        """Wait for the real exit of a workload that was held (`wait(held=...)`)."""
        return self.wait()

    def _close(self) -> None:
        self.exited.close()
        self.signals.restore()
        with contextlib.suppress(OSError):
            os.close(self.watch_w)
        self.watcher.done()

    def _end_escapees(self) -> None:
        """The command stops (a stopping signal, the stall watchdog): what of the workload left
        its group and outlived it gets until the grace period's end, then SIGKILL."""
        if not (self.stopped or self.signals.interrupted):
            return  # a workload that ended by itself may leave a daemon, as without pgle
        left = escapees.marked(self.token)
        if not left:
            return
        if self.signals.kill_at is None:  # Ctrl-C or SIGHUP: they got it; give them the grace
            self.signals.kill_at = time.monotonic() + self.grace
        while left and time.monotonic() < self.signals.kill_at:
            time.sleep(0.1)
            left = escapees.marked(self.token)
        escapees.signal_all(left, signal.SIGKILL)

    def _finish(self, returncode: int) -> LaunchResult:
        self._end_escapees()
        self._close()
        pumps, log, log_path = self.pumps, self.log, self.log_path
        done = drained(pumps, PIPE_GRACE_S)
        stuck = [] if done else [p for p in pumps if p.abandon_stuck_terminal()]
        for p in stuck:  # the terminal took nothing for the grace: the log has the rest
            streams.say(
                f"pgle: warning: the terminal took none of the workload's {p.sink.name} for "
                f"{PIPE_GRACE_S:g} s after the workload exited (frozen with Ctrl-S?); the rest "
                f"of it is in {log_path} only"
            )
        # Only a pump freed from a stuck terminal can move again: without one, the first wait
        # already saw the grace pass with no byte moved (a daemon holds the streams), and a
        # second would double the documented "at most PIPE_GRACE_S" (issue 37).
        if any(p.is_alive() for p in pumps) and not (stuck and drained(pumps, PIPE_GRACE_S)):
            for p in pumps:
                p.detached = True  # drained and dropped from now on; its fd stays open until then
            streams.say(
                f"pgle: warning: the workload exited, but a process it started still holds its "
                f"output open; pgle stopped waiting after {PIPE_GRACE_S:g} s: what that process "
                f"prints from now on is neither shown nor kept in {log_path}"
            )
        log.close()
        for p in pumps:
            if not p.is_alive():
                os.close(p.fd)
        duration = time.monotonic() - self.start
        code = shell_exit_code(returncode)
        if self.stopped and self.stopped_code is not None:
            code = self.stopped_code
        notes = [n for n in (s.note() for s in self.sinks) if n]
        return LaunchResult(
            code,
            -returncode if returncode < 0 else None,
            duration,
            log_path,
            self.stopped,
            log.error,
            self.signals.interrupted,
            self.killed,
            notes,
        )


def _stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, SIGTSTP) or held by a debugger (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(512)
    except OSError:
        return False
    # `pid (comm) state ...`: comm may hold spaces and parentheses; the state follows the last ')'.
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"T", b"t")


def signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    """`signum` to the child's whole process group (the workload's own children included)."""
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
