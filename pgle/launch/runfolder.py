"""The run folder: everything one pgle invocation leaves behind.

`.pgle/runs/<YYYYmmdd-HHMMSS>-<command>-<pid>/` under the current directory
(or `--run-dir`): `workload.log` (stdout and stderr, line by line),
`events.jsonl` (from the harness), `spec.json` (pgle.evidence.schema), `trace/`,
`lease.json` (who runs in it; see below).

The folder is made with mkdir(2), never reused: a folder of that name already there (made by
anyone) gets the run another name. `workload.log` and `events.jsonl` are created in it with
O_EXCL|O_NOFOLLOW just before the launch (`claim_files`), so no link planted in advance is ever
followed (`--run-dir` names a folder of the user's: one that already holds a run's file, or a
link at one's name, is refused).

`lease.json` records the host and pid of the pgle process; that process refreshes its
modification time every LEASE_REFRESH_SECONDS while it lives. `pgle runs prune` never deletes a
folder whose lease is alive: on this host, its process is running; on another host of a shared
filesystem, the lease was refreshed less than LEASE_TTL_SECONDS ago (docs/guide/runs.md).
While pgle is stopped (Ctrl-Z) nothing refreshes it; SIGCONT refreshes it at once
(`refresh_leases`, from pgle.launch.launcher's handler), not up to LEASE_REFRESH_SECONDS later.

`.pgle` and `.pgle/runs` are opened a component at a time without following links (a link the
user made is followed; one anyone else made is refused) and the run folder is made with mkdirat
in the folder opened: another user who can write the working folder cannot redirect it by
swapping a folder for a link. Either folder owned by another user is named in a warning before
pgle writes into it: its owner can rename or read the run folders in it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

from pgle.errors import BadInput, PgleError
from pgle.shared_folders import OpenDir, create_exclusive, warn_foreign

DEFAULT_ROOT = ".pgle"
LOG_NAME, EVENTS_NAME, SPEC_NAME, TRACE_NAME = "workload.log", "events.jsonl", "spec.json", "trace"
LEASE_NAME = "lease.json"
# The files of one run: a --run-dir holding any of them already holds a run.
RUN_FILES = (LOG_NAME, EVENTS_NAME, SPEC_NAME, TRACE_NAME, LEASE_NAME)
LEASE_REFRESH_SECONDS = 60.0
# A lease not refreshed for this long is stale: ten refreshes, so that a busy host, a slow
# shared filesystem or clocks some minutes apart never make a live run look dead.
LEASE_TTL_SECONDS = 600.0
_FOREIGN = "its owner can rename, replace or read the run folders pgle makes in it."


def ignore_pgle_folder(root: OpenDir) -> None:
    """`.pgle/` holds logs and traces (gigabytes): keep it out of the user's git. Created with
    O_EXCL|O_NOFOLLOW: whatever is there already (a file, a link, dangling or not) is left."""
    try:
        fd = root.create_exclusive(".gitignore")
    except OSError:
        return  # there already, or a read-only tree: the run folder itself was created
    try:
        os.write(fd, b"# written by pgle: run folders and traces are not source\n*\n")
    except OSError:
        with contextlib.suppress(OSError):  # a full disk: no half .gitignore left behind
            root.unlink(".gitignore")
    finally:
        os.close(fd)


class _Heartbeat:
    """One daemon thread per process that refreshes the mtime of every lease it holds."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def hold(self, path: str) -> None:
        with self.lock:
            self.paths.add(path)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._beat, name="pgle-lease", daemon=True)
                self.thread.start()

    def release(self, path: str) -> None:
        with self.lock:
            self.paths.discard(path)

    def _beat(self) -> None:
        while True:
            time.sleep(LEASE_REFRESH_SECONDS)
            with self.lock:
                paths = list(self.paths)
            self.refresh(paths)

    def refresh(self, paths: list[str]) -> None:
        for path in paths:
            try:
                os.utime(path, follow_symlinks=False)
            except OSError:
                self.release(path)  # the folder was removed: nothing left to hold

    def refresh_now(self) -> None:
        """From a signal handler (SIGCONT): no lock (the handler may interrupt its holder); a
        copy of the set is enough, a lease added meanwhile is fresh anyway."""
        for path in tuple(self.paths):
            with contextlib.suppress(OSError):
                os.utime(path, follow_symlinks=False)


_HEARTBEAT = _Heartbeat()


def refresh_leases() -> None:
    """Refresh every lease this process holds now (on SIGCONT: pgle was stopped)."""
    _HEARTBEAT.refresh_now()


def _open_runs_parent() -> OpenDir:
    """`.pgle/runs` under the working folder, made if missing, opened a component at a time
    (module docstring); each one owned by another user named in a warning."""
    try:
        with OpenDir.open(".", "working folder") as cwd:
            top = cwd.sub(DEFAULT_ROOT, create=True, own_link=True, what="pgle folder")
        with top:
            warn_foreign(top.stat(), top.path, "pgle folder", _FOREIGN)
            ignore_pgle_folder(top)
            runs = top.sub("runs", create=True, own_link=True, what="run folders' parent")
        warn_foreign(runs.stat(), runs.path, "run folders' parent", _FOREIGN)
        return runs
    except PgleError:
        raise
    except OSError as e:
        raise BadInput(
            f"cannot create run folder {Path(DEFAULT_ROOT) / 'runs'}: {e.strerror or e}."
        ) from None


def _new_folder(command: str) -> tuple[Path, OpenDir]:
    """A new folder under .pgle/runs, made by this process (mkdirat fails if the name exists),
    and the folder opened (its lease is written through it)."""
    from pgle.atomic import dir_mode

    with _open_runs_parent() as parent:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for attempt in range(100):
            # The pid stays last: `pgle runs` reads it from the name of a folder without a lease.
            tag = "" if attempt == 0 else f"-{secrets.token_hex(3)}"
            name = f"{stamp}-{command}{tag}-{os.getpid()}"
            try:
                os.mkdir(name, dir_mode(), dir_fd=parent.fd)
            except FileExistsError:
                continue  # made by someone else: never reuse it
            except OSError as e:
                raise BadInput(
                    f"cannot create run folder {parent.child(name)}: {e.strerror}."
                ) from None
            return Path(parent.child(name)), parent.sub(name, what="run folder")
    raise BadInput(f"cannot create a run folder in {DEFAULT_ROOT}/runs: 100 names were taken.")


class _Member:
    """A file of the run folder: `folder.log` is `folder.path / LOG_NAME`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: RunFolder, owner: type | None = None) -> Path:
        return folder.path / self.name


@dataclasses.dataclass(frozen=True)
class RunFolder:
    path: Path

    @classmethod
    def create(cls, command: str, run_dir: str | None = None) -> RunFolder:
        if run_dir:
            path = Path(run_dir)
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise BadInput(f"cannot create run folder {path}: {e.strerror}.") from None
            # Never mix two runs' logs in one folder.
            held = [name for name in RUN_FILES if os.path.lexists(path / name)]
            if held:
                raise BadInput(
                    f"run folder {path} already holds a run ({held[0]}).",
                    hint="Pick an empty --run-dir.",
                )
            opened = OpenDir.open(path, "run folder")
        else:
            path, opened = _new_folder(command)
        with opened:
            folder = cls(path.resolve())
            try:
                folder._lease(opened)
            except PgleError:
                if not run_dir:  # the folder pgle just made, empty: not left behind
                    with contextlib.suppress(OSError):
                        os.rmdir(folder.path)
                raise
        return folder

    def claim_files(self) -> None:
        """Create the log and the events file (O_EXCL|O_NOFOLLOW) just before the launch, which
        then appends to files pgle made: a link planted at either name is never followed."""
        for name in (LOG_NAME, EVENTS_NAME):
            try:
                os.close(create_exclusive(self.path / name))
            except FileExistsError:
                raise BadInput(
                    f"run folder {self.path} already holds a run ({name}).",
                    hint="Pick an empty --run-dir.",
                ) from None
            except OSError as e:
                raise BadInput(f"cannot write in run folder {self.path}: {e.strerror}.") from None

    def _lease(self, folder: OpenDir) -> None:
        """Write lease.json in the folder opened. A full disk (or quota) is one WriteFailed
        line (exit 1) and leaves no lease; any other failure is not fatal (`runs prune` then
        falls back on the pid in the folder's name)."""
        from pgle.atomic import write_error

        data = json.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": time.time(),
                "refresh_seconds": LEASE_REFRESH_SECONDS,
                "ttl_seconds": LEASE_TTL_SECONDS,
            }
        ).encode()
        try:
            fd = folder.create_exclusive(LEASE_NAME)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise write_error(self.lease, e, "run folder lease") from None
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            with contextlib.suppress(OSError):
                folder.unlink(LEASE_NAME)
            raise write_error(self.lease, e, "run folder lease") from None
        finally:
            os.close(fd)
        _HEARTBEAT.hold(str(self.lease))

    log = _Member(LOG_NAME)
    events = _Member(EVENTS_NAME)
    spec = _Member(SPEC_NAME)
    trace = _Member(TRACE_NAME)
    lease = _Member(LEASE_NAME)
