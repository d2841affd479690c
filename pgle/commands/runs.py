"""`pgle runs ls|prune [ROOT]`: the run folders pgle leaves under `.pgle/runs/` (logs, events,
traces: gigabytes after a few collects), listed and pruned by age, total size and count.

A run folder is named `<YYYYmmdd-HHMMSS>-<command>[-suffix]-<pid>` (pgle.launch.runfolder)
and holds `lease.json` (host and pid of the pgle process, whose mtime it refreshes while it
runs). A folder is in use, and never deleted, when its lease is alive: on this host its process
is running; on another host (a shared filesystem) it was refreshed less than
LEASE_TTL_SECONDS ago. A folder without a lease (pgle before 0.2) is in use while the pid in
its name runs on this host.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from pgle.cache.manifest import pid_alive
from pgle.errors import BadInput, PgleError
from pgle.launch.runfolder import DEFAULT_ROOT, LEASE_NAME, LEASE_TTL_SECONDS
from pgle.report import Report
from pgle.shared_folders import read_bytes_nofollow
from pgle.units import human_bytes, iso

DEFAULT_RUNS_ROOT = os.path.join(DEFAULT_ROOT, "runs")
_PID = re.compile(r"-(\d+)$")


@dataclasses.dataclass
class RunEntry:
    name: str
    path: str
    size: int
    modified: float  # the newest file's mtime: when the run last wrote anything
    pid: int | None
    live: bool
    host: str | None = None  # the lease's host, when it is not this one

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"modified_iso": iso(self.modified)}


def _scan(folder: Path) -> tuple[int, float]:
    size, newest = 0, folder.lstat().st_mtime
    for dirpath, _dirs, files in os.walk(folder):  # os.walk does not follow symlinks
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue  # deleted while we looked
            size += st.st_size
            newest = max(newest, st.st_mtime)
    return size, newest


def list_runs(root: str) -> list[RunEntry]:
    """Every run folder directly under `root`, newest first. Symlinks are not run folders."""
    base = Path(root)
    if base.exists() and not base.is_dir():
        raise BadInput(f"{root} is not a directory.")
    out = []
    for child in base.iterdir() if base.is_dir() else []:
        if child.is_symlink() or not child.is_dir():
            continue
        size, modified = _scan(child)
        out.append(_entry(child, size, modified))
    return sorted(out, key=lambda e: (e.modified, e.name), reverse=True)


def _entry(folder: Path, size: int, modified: float, now: float | None = None) -> RunEntry:
    """The folder's liveness from its lease (module docstring), else from its name's pid."""
    lease = _read_lease(folder / LEASE_NAME)
    if lease is not None:
        info, refreshed = lease
        pid = info.get("pid") if isinstance(info.get("pid"), int) else None
        host = info.get("host") if isinstance(info.get("host"), str) else None
        if host == socket.gethostname():
            return RunEntry(
                folder.name, str(folder), size, modified, pid, pid is not None and pid_alive(pid)
            )
        age = (time.time() if now is None else now) - refreshed
        return RunEntry(
            folder.name, str(folder), size, modified, pid, age < LEASE_TTL_SECONDS, host
        )
    m = _PID.search(folder.name)
    pid = int(m.group(1)) if m else None
    return RunEntry(
        folder.name, str(folder), size, modified, pid, pid is not None and pid_alive(pid)
    )


def _read_lease(path: Path) -> tuple[dict[str, Any], float] | None:
    """(the lease's fields, when it was last refreshed), or None where there is none. A lease
    that cannot be read as one still counts as refreshed at its mtime: in doubt, in use."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    try:
        info = json.loads(read_bytes_nofollow(path, what="lease", limit=1 << 16))
    except (PgleError, OSError, ValueError):
        info = None
    return (info if isinstance(info, dict) else {}), st.st_mtime


def ls(root: str = DEFAULT_RUNS_ROOT, *, now: float | None = None) -> Report:
    runs = list_runs(root)
    total = sum(r.size for r in runs)
    report = Report(command="runs ls", status="ok")
    report.details = {
        "root": root,
        "runs": [r.to_dict() for r in runs],
        "total": {"runs": len(runs), "bytes": total},
    }
    live = sum(r.live for r in runs)
    report.summary = [
        f"{len(runs)} run folders, {human_bytes(total)} in {root}"
        + (f" ({live} in use)" if live else "")
    ]
    return report


def select(
    runs: list[RunEntry],
    *,
    older_than: float | None,
    max_size: int | None,
    keep_last: int | None,
    now: float,
) -> list[RunEntry]:
    """The folders to delete (`runs` newest first). --older-than and --max-size each select;
    --keep-last N protects the newest N and, given alone, selects all the others. A live
    folder is never selected (it still counts toward the size)."""
    chosen: list[RunEntry] = []
    budget = 0
    for i, r in enumerate(runs):
        budget += r.size
        protected = r.live or (keep_last is not None and i < keep_last)
        if protected:
            continue
        if older_than is None and max_size is None:  # --keep-last alone
            chosen.append(r)
        elif (older_than is not None and now - r.modified > older_than) or (
            max_size is not None and budget > max_size
        ):
            chosen.append(r)
            budget -= r.size  # deleted: no longer counts toward what is kept
    return chosen


def prune(
    root: str = DEFAULT_RUNS_ROOT,
    *,
    older_than: float | None = None,
    max_size: int | None = None,
    keep_last: int | None = None,
    yes: bool = False,
    now: float | None = None,
) -> Report:
    """Delete run folders by age, total size and count; dry run unless `yes`. Needs at least
    one criterion, so a bare `prune` never empties the folder."""
    if older_than is None and max_size is None and keep_last is None:
        raise BadInput(
            "prune needs --older-than, --max-size and/or --keep-last.",
            hint="e.g. `pgle runs prune --older-than 7d --keep-last 5`.",
        )
    if keep_last is not None and keep_last < 0:
        raise BadInput(f"--keep-last {keep_last} is negative.")
    now = time.time() if now is None else now
    runs = list_runs(root)
    chosen = select(runs, older_than=older_than, max_size=max_size, keep_last=keep_last, now=now)
    deleted, errors = [], []
    if yes:
        for r in chosen:
            folder = Path(r.path)
            if _entry(folder, r.size, r.modified).live:  # in use since the listing
                continue
            try:
                shutil.rmtree(r.path)
                deleted.append(r)
            except OSError as e:
                errors.append(f"cannot delete {r.path}: {e.strerror or e}")
    gone = deleted if yes else chosen
    freed = sum(r.size for r in gone)
    report = Report(
        command="runs prune",
        status="ok" if not errors else "error",
        exit_code=0 if not errors else 1,
        reasons=errors,
    )
    report.details = {
        "root": root,
        "dry_run": not yes,
        "selected": [r.to_dict() for r in chosen],
        "deleted": [r.name for r in deleted],
        "bytes": freed,
        "kept_live": [r.name for r in runs if r.live],
        "errors": errors,
    }
    report.summary = [
        f"{'deleted' if yes else 'would delete'} {len(gone)} of {len(runs)} run "
        f"folders ({human_bytes(freed)})" + ("" if yes else "; dry run, pass --yes to delete")
    ]
    live = [r.name + (f" (on {r.host})" if r.host else "") for r in runs if r.live]
    if live:
        report.summary.append(f"kept {len(live)} in use by a running process: {', '.join(live)}")
    return report
