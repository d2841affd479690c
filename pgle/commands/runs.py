"""`pgle runs ls|prune [ROOT]`: the run folders pgle leaves under `.pgle/runs/` (logs, events,
traces: gigabytes after a few collects), listed and pruned by age, total size and count.

ROOT is the folder holding run folders (default `.pgle/runs`). A project folder (one holding
`.pgle/runs`) or a `.pgle` folder (one holding `runs`) stands for its run folders' parent, and
the report says which folder that is.

A run folder is what pgle recognises as its own, by name and content: a real folder (not a link)
named `<YYYYmmdd-HHMMSS>-<command>[-suffix]-<pid>` (pgle.launch.runfolder) that holds a regular
file pgle writes first (`lease.json`; `workload.log`, `events.jsonl` or `spec.json` of a pgle
before leases). Anything else in ROOT (`src/`, `.git/`, `profiles/`, a link) is never listed,
never deleted; the dry run lists exactly what `--yes` deletes.

It holds `lease.json` (host and pid of the pgle process, whose mtime it refreshes while it
runs). A folder is in use, and never deleted, when its lease is alive: on this host its process
is running; on another host (a shared filesystem) it was refreshed less than
LEASE_TTL_SECONDS ago (a lease dated in the future counts as alive: a clock ahead of this one is
no reason to delete). A folder without a lease (pgle before 0.2) is in use while the pid in its
name runs on this host.

Everything is done through descriptors (pgle.shared_folders.OpenDir): ROOT is opened once,
each run folder without following links, and deleted with rmtree_fd relative to ROOT's
descriptor, so a folder swapped for a link after the listing is never followed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import stat
import time
from typing import Any

from pgle.cache.manifest import pid_alive
from pgle.errors import BadInput, PgleError
from pgle.launch.runfolder import (
    DEFAULT_ROOT,
    EVENTS_NAME,
    LEASE_NAME,
    LEASE_TTL_SECONDS,
    LOG_NAME,
    SPEC_NAME,
)
from pgle.report import Report
from pgle.shared_folders import MAX_DELETE_DEPTH, OpenDir, warn_foreign
from pgle.units import human_bytes, iso

DEFAULT_RUNS_ROOT = os.path.join(DEFAULT_ROOT, "runs")
# pgle.launch.runfolder's names: stamp, command (and suffix, tag), pid last.
RUN_NAME_RE = re.compile(r"\d{8}-\d{6}-[a-z][a-z0-9_-]*-(\d+)")
# A file pgle writes in every run folder it makes (the lease; before leases, the log,
# events and spec): a folder holding none of them is not a run folder.
MARKERS = (LEASE_NAME, LOG_NAME, EVENTS_NAME, SPEC_NAME)
MAX_LEASE_BYTES = 1 << 16


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


def _scan(folder: OpenDir, depth: int = 0) -> tuple[int, float]:
    """(bytes, newest mtime) of what `folder` holds, walked by descriptor, links not followed."""
    size, newest = 0, folder.stat().st_mtime
    try:
        with os.scandir(folder.fd) as it:
            entries = list(it)
    except OSError:
        return size, newest
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue  # deleted while we looked
        if stat.S_ISDIR(st.st_mode) and depth < MAX_DELETE_DEPTH:
            try:
                with folder.sub(e.name) as sub:
                    sub_size, sub_newest = _scan(sub, depth + 1)
            except (OSError, PgleError):
                continue
            size, newest = size + sub_size, max(newest, sub_newest)
        else:
            size, newest = size + st.st_size, max(newest, st.st_mtime)
    return size, newest


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def open_root(root: str) -> tuple[OpenDir, str]:
    """The run folders' parent ROOT names (module docstring), opened, and its path. A project
    folder or a `.pgle` folder stands for the runs folder in it; `.pgle` and `runs` are opened
    without following another user's link."""
    if os.path.normpath(root) == DEFAULT_RUNS_ROOT:
        base, steps = ".", [DEFAULT_ROOT, "runs"]
    elif _is_dir(os.path.join(root, DEFAULT_ROOT, "runs")):
        base, steps = root, [DEFAULT_ROOT, "runs"]
    elif os.path.basename(os.path.abspath(root)) == DEFAULT_ROOT and _is_dir(
        os.path.join(root, "runs")
    ):
        base, steps = root, ["runs"]
    else:
        base, steps = root, []
    path = os.path.normpath(os.path.join(base, *steps))
    try:
        opened = OpenDir.open(base, "runs folder")
    except FileNotFoundError:
        raise BadInput(f"runs folder {path} does not exist.") from None
    except OSError as e:
        raise BadInput(f"cannot open runs folder {path}: {e.strerror or e}.") from None
    try:
        for name in steps:
            nxt = opened.sub(name, own_link=True, what="runs folder")
            opened.close()
            opened = nxt
    except FileNotFoundError:
        opened.close()
        raise BadInput(f"runs folder {path} does not exist.") from None
    except BaseException:
        opened.close()
        raise
    opened.path = path
    return opened, path


def _recognised(runs: OpenDir, name: str) -> OpenDir | None:
    """The run folder `name` opened (module docstring: name and content), or None."""
    if not RUN_NAME_RE.fullmatch(name):
        return None
    try:
        if not stat.S_ISDIR(runs.lstat(name).st_mode):
            return None
        folder = runs.sub(name, what="run folder")
    except (OSError, PgleError):
        return None
    for marker in MARKERS:
        try:
            if stat.S_ISREG(folder.lstat(marker).st_mode):
                return folder
        except OSError:
            continue
    folder.close()
    return None


def _others(runs: OpenDir, found: list[RunEntry]) -> list[str]:
    """What ROOT holds besides run folders: never listed as runs, never deleted."""
    ours = {r.name for r in found}
    return [n for n in runs.names() if n not in ours]


def _root_lines(given: str, path: str, others: list[str]) -> list[str]:
    lines = []
    if os.path.normpath(given) != path:
        lines.append(f"{given} holds pgle's run folders in {path}")
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        lines.append(
            f"left alone: {len(others)} entr{'y' if len(others) == 1 else 'ies'} of {path} "
            f"that {'is' if len(others) == 1 else 'are'} not pgle run folders ({shown})"
        )
    return lines


def _list(runs: OpenDir, path: str) -> list[RunEntry]:
    out = []
    for name in runs.names():
        folder = _recognised(runs, name)
        if folder is None:
            continue
        with folder:
            size, modified = _scan(folder)
            out.append(_entry(folder, os.path.join(path, name), size, modified))
    return sorted(out, key=lambda e: (e.modified, e.name), reverse=True)


def _entry(folder: OpenDir, path: str, size: int, modified: float) -> RunEntry:
    """The folder's liveness from its lease (module docstring), else from its name's pid."""
    name = os.path.basename(path)
    lease = _read_lease(folder)
    if lease is not None:
        info, refreshed = lease
        pid = _pid(info.get("pid"))
        host = info.get("host") if isinstance(info.get("host"), str) else None
        if host == socket.gethostname():
            return RunEntry(name, path, size, modified, pid, pid is not None and pid_alive(pid))
        age = time.time() - refreshed
        return RunEntry(name, path, size, modified, pid, age < LEASE_TTL_SECONDS, host)
    m = RUN_NAME_RE.fullmatch(name)
    pid = _pid(int(m.group(1))) if m else None
    return RunEntry(name, path, size, modified, pid, pid is not None and pid_alive(pid))


def _pid(value: Any) -> int | None:
    """A process id as a lease may hold one: an int in Linux's range (pid_max <= 2**22), not a
    bool; anything else (a forged lease's -1, 0, 10**30, true) names no process."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 22:
        return None
    return value


def _read_lease(folder: OpenDir) -> tuple[dict[str, Any], float] | None:
    """(the lease's fields, when it was last refreshed), or None where there is none. A lease
    that cannot be read as one still counts as refreshed at its mtime: in doubt, in use."""
    try:
        st = folder.lstat(LEASE_NAME)
    except OSError:
        return None
    try:
        info = json.loads(folder.read_bytes(LEASE_NAME, what="lease", limit=MAX_LEASE_BYTES))
    except (PgleError, OSError, ValueError, RecursionError):
        info = None
    return (info if isinstance(info, dict) else {}), st.st_mtime


def ls(root: str = DEFAULT_RUNS_ROOT) -> Report:
    opened, path = open_root(root)
    with opened:
        runs = _list(opened, path)
        others = _others(opened, runs)
    total = sum(r.size for r in runs)
    report = Report(command="runs ls", status="ok")
    report.details = {
        "root": path,
        "not_run_folders": others,
        "runs": [r.to_dict() for r in runs],
        "total": {"runs": len(runs), "bytes": total},
    }
    live = sum(r.live for r in runs)
    report.summary = [
        f"{len(runs)} run folders, {human_bytes(total)} in {path}"
        + (f" ({live} in use)" if live else "")
    ] + _root_lines(root, path, others)
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
    opened, path = open_root(root)
    deleted, errors = [], []
    with opened:
        runs = _list(opened, path)
        others = _others(opened, runs)
        chosen = select(
            runs, older_than=older_than, max_size=max_size, keep_last=keep_last, now=now
        )
        if yes and chosen:
            warn_foreign(
                opened.stat(),
                path,
                "runs folder",
                "pgle deletes only the run folders it recognises in it.",
            )
        for r in chosen if yes else []:
            folder = _recognised(opened, r.name)
            if folder is None:  # no longer a run folder (swapped, emptied): left alone
                continue
            with folder:
                if _entry(folder, r.path, r.size, r.modified).live:  # in use since the listing
                    continue
                checked = folder.stat()
            try:
                # Only the folder just recognised: another one swapped in since is refused.
                opened.rmtree(r.name, expect=checked)
                deleted.append(r)
            except OSError as e:
                errors.append(f"cannot delete {r.path}: {e.strerror or e}")
            except PgleError as e:
                errors.append(str(e))
    gone = deleted if yes else chosen
    freed = sum(r.size for r in gone)
    report = Report(
        command="runs prune",
        status="ok" if not errors else "error",
        exit_code=0 if not errors else 1,
        reasons=errors,
    )
    report.details = {
        "root": path,
        "not_run_folders": others,
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
    report.summary += _root_lines(root, path, others)
    return report
