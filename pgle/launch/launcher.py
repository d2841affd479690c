"""Spawn the workload, pass its output through live, keep the log, forward signals.

The child's stdout and stderr reach pgle's own stdout and stderr byte for byte
as they arrive (progress bars included); complete lines of both also go to the
log file, so lines of the two streams never interleave mid-line there.
The child runs in its own process group: a Ctrl-C reaches pgle, which forwards
it once to the whole group (as a shell would), waits, and exits 128+signal.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from pgle.errors import PgleError

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
KILL_GRACE_S = 5.0  # after jax.distributed.initialize() SIGTERM is swallowed (XLA preemption notifier)


@dataclasses.dataclass
class LaunchResult:
    exit_code: int  # as a shell reports it: 128+N when killed by signal N
    signal: int | None  # the signal that ended the child, if any
    duration_s: float
    log_path: Path
    stopped_by_watchdog: bool = False


def shell_exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class _Pump(threading.Thread):
    """Copies one pipe to a terminal stream at once, and whole lines to the log."""

    def __init__(self, fd: int, sink, log, log_lock: threading.Lock):
        super().__init__(daemon=True)
        self.fd, self.sink, self.log, self.log_lock = fd, sink, log, log_lock
        self.partial = b""

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self._to_sink(chunk)
            data = self.partial + chunk
            cut = data.rfind(b"\n") + 1
            self.partial = data[cut:]
            if cut:
                with self.log_lock:
                    self.log.write(data[:cut])
        if self.partial:
            with self.log_lock:
                self.log.write(self.partial + b"\n")

    def _to_sink(self, chunk: bytes) -> None:
        try:
            buffer = getattr(self.sink, "buffer", None)
            if buffer is not None:
                buffer.write(chunk)
                buffer.flush()
            else:
                self.sink.write(chunk.decode("utf-8", "replace"))
                self.sink.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the log or the workload


def launch(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    *,
    cwd: str | None = None,
    watchdog: Callable[[], int | None] | None = None,
    poll_s: float = 0.5,
) -> LaunchResult:
    """Run `argv` to completion. `watchdog()` is polled; a non-None code stops the child."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab", buffering=0)
    log_lock = threading.Lock()
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, **group)
    except OSError as e:
        log.close()
        raise PgleError(f"cannot start {argv[0]}: {e.strerror}.") from None

    pumps = [
        _Pump(child.stdout.fileno(), sys.stdout, log, log_lock),
        _Pump(child.stderr.fileno(), sys.stderr, log, log_lock),
    ]
    for p in pumps:
        p.start()

    received: list[int] = []

    def forward(signum, frame):
        received.append(signum)
        _signal_group(child, signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED_SIGNALS:
            previous[sig] = signal.signal(sig, forward)

    stopped = False
    watchdog_code = None
    try:
        while True:
            try:
                returncode = child.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                pass
            if watchdog is not None and not stopped:
                watchdog_code = watchdog()
                if watchdog_code is not None:
                    stopped = True
                    _terminate(child)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for p in pumps:
        # A grandchild that inherited the pipes may keep them open; don't hang on it.
        p.join(timeout=5.0)
    log.close()
    child.stdout.close()
    child.stderr.close()
    duration = time.monotonic() - start
    code = shell_exit_code(returncode)
    if stopped and watchdog_code is not None:
        code = watchdog_code
    return LaunchResult(code, -returncode if returncode < 0 else None, duration, log_path, stopped)


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass


def _terminate(child: subprocess.Popen) -> None:
    _signal_group(child, signal.SIGTERM)
    try:
        child.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
