"""`<cache-dir>/pgle-manifest.json`: what `pgle prewarm` put into a compilation cache.

Nothing in a JAX cache entry says whether it is PGLE-optimized (docs/xla-facts.md
section 5), so prewarm records, per module, the keys it saw written as the
first (profiling) pass and as the PGLE-optimized recompile, how often the module
ran, and the exact environment that produced those keys; `pgle nsys` replays
that environment and `pgle cache ls` shows each entry's role from it.

Layout (format 1):
    {"format": 1,
     "environment": {...},          # of the latest finished prewarm: what nsys reproduces
     "modules": {"jit_step": {"first_pass_keys": [...], "pgle_optimized_keys": [...],
                              "plain_keys": [...], "executions_seen": 4, "status": "optimized",
                              "profiled_executions": 3, "empty_profiles": 0, "reason": "...",
                              "run": "<run id>"}},
     "runs": [{"id", "state": "in_progress|finished|failed", "pid", "host", "started",
               "finished", "workload", "environment"}]}

Concurrent writers (two prewarms into one directory) are serialized by an
fcntl lock on `pgle-manifest.json.lock` and every write is an atomic replace,
so a reader never sees half a file and no update is lost. A `gs://` cache dir
has no file locks: updates there are best-effort (last writer wins).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from pgle.errors import BadInput, PgleError

MANIFEST_NAME = "pgle-manifest.json"
LOCK_NAME = "pgle-manifest.json.lock"
FORMAT = 1

ROLE_FIRST_PASS = "first_pass"
ROLE_PGLE_OPTIMIZED = "pgle_optimized"
ROLE_PLAIN = "plain"
ROLE_UNKNOWN = "unknown"
ROLE_LABELS = {
    ROLE_FIRST_PASS: "first-pass",
    ROLE_PGLE_OPTIMIZED: "PGLE-optimized",
    ROLE_PLAIN: "plain",
    ROLE_UNKNOWN: "unknown",
}
_ROLE_FIELDS = {
    ROLE_PGLE_OPTIMIZED: "pgle_optimized_keys",
    ROLE_FIRST_PASS: "first_pass_keys",
    ROLE_PLAIN: "plain_keys",
}

MAX_MANIFEST_BYTES = 64 << 20
# A run on another host cannot be checked for liveness; past this age it is stale.
STALE_REMOTE_RUN_SECS = 24 * 3600


class ManifestError(BadInput):
    """The manifest exists but cannot be read as one."""


def is_remote(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def local_form(path: str) -> str:
    """`file:///x` -> `/x` (JAX accepts both spellings); anything else unchanged."""
    path = str(path)
    return path[len("file://") :] if path.startswith("file://") else path


def manifest_path(cache_dir: str) -> str:
    return join(local_form(cache_dir), MANIFEST_NAME)


def empty() -> dict[str, Any]:
    return {"format": FORMAT, "environment": None, "modules": {}, "runs": []}


def load(cache_dir: str) -> dict[str, Any] | None:
    """The manifest, or None when there is none. Corrupt -> ManifestError (exit 2)."""
    path = manifest_path(cache_dir)
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ManifestError(f"cannot read cache manifest {path}: {e.strerror or e}.") from None
    return parse(text, path)


def parse(text: str, path: str = MANIFEST_NAME) -> dict[str, Any]:
    fix = (
        "Move it away (or delete it) and run `pgle prewarm` again; the cache entries "
        "themselves are fine."
    )
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ManifestError(f"cache manifest {path} is corrupt ({e}).", hint=fix) from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("modules"), dict)
        or not isinstance(data.get("runs"), list)
    ):
        raise ManifestError(
            f"cache manifest {path} is not a pgle manifest (no 'modules' object or 'runs' list).",
            hint=fix,
        )
    if data.get("format") != FORMAT:
        raise ManifestError(
            f"cache manifest {path} has format {data.get('format')!r}; this pgle "
            f"reads format {FORMAT}.",
            hint=fix,
        )
    bad = _foreign_record(data)
    if bad:
        raise ManifestError(f"cache manifest {path} is not a pgle manifest ({bad}).", hint=fix)
    return data


def _foreign_record(data: dict[str, Any]) -> str | None:
    """What in the manifest no pgle writes. The cache folder is shared: a record another
    process or user wrote is read by prune and prewarm, which must not crash on it (a run's
    `started` of "x" raised ValueError in `cache prune`) nor print control characters."""
    for name, module in data["modules"].items():
        fields = (
            [module.get(f, []) for f in _ROLE_FIELDS.values()] if isinstance(module, dict) else None
        )
        if fields is None or not all(
            isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in fields
        ):
            return f"module {name[:80]!r} is no record of cache keys"
    for i, run in enumerate(data["runs"]):
        if not isinstance(run, dict):
            return f"run {i + 1} is no object"
        started, host = run.get("started"), run.get("host")
        if started is not None and (
            isinstance(started, bool)
            or not isinstance(started, (int, float))
            or not math.isfinite(started)
        ):
            return f"run {i + 1} has a start time that is no number"
        if host is not None and not (isinstance(host, str) and host.isprintable()):
            return f"run {i + 1} has a host that is no printable name"
    return None


def update(cache_dir: str, change: Callable[[dict[str, Any]], Any]) -> Any:
    """Read-modify-write under the lock; `change` edits the dict in place. Returns its result."""
    cache_dir = local_form(cache_dir)
    with _locked(cache_dir):
        data = load(cache_dir) or empty()
        result = change(data)
        _write(cache_dir, data)
        return result


def key_roles(data: dict[str, Any]) -> dict[str, str]:
    roles: dict[str, str] = {}
    # PGLE-optimized wins if a key were ever recorded under two roles.
    for role in (ROLE_PLAIN, ROLE_FIRST_PASS, ROLE_PGLE_OPTIMIZED):
        for module in data.get("modules", {}).values():
            for key in module.get(_ROLE_FIELDS[role], []):
                roles[key] = role
    return roles


def record_keys(data: dict[str, Any], module: str, role: str, keys: list[str]) -> dict[str, Any]:
    entry = data["modules"].setdefault(
        module, {"first_pass_keys": [], "pgle_optimized_keys": [], "plain_keys": []}
    )
    field = _ROLE_FIELDS[role]
    for key in keys:
        if key not in entry.setdefault(field, []):
            entry[field].append(key)
    return entry


# -- runs in progress ------------------------------------------------------------
def new_run(workload: str, environment: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": f"{time.strftime('%Y%m%dT%H%M%S')}-{socket.gethostname()}-{os.getpid()}",
        "state": "in_progress",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "finished": None,
        "workload": workload,
        "environment": environment,
    }


def runs_in_progress(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Runs marked in progress whose process is (or may be) still alive."""
    if not data:
        return []
    live = []
    host = socket.gethostname()
    for run in data.get("runs", []):
        if run.get("state") != "in_progress":
            continue
        if run.get("host") == host:
            if pid_alive(run.get("pid")):
                live.append(run)
        elif time.time() - float(run.get("started") or 0) < STALE_REMOTE_RUN_SECS:
            live.append(run)
    return live


def pid_alive(pid) -> bool:
    """Whether the process `pid` runs on this host. Another user's process is alive too
    (kill(2) says EPERM, not ESRCH). What a forged record may hold instead of a pid (-1 or 0,
    which kill(2) reads as a process group, 10**30, true, "12") names no process."""
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= 1 << 22:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- files ----------------------------------------------------------------------
@contextlib.contextmanager
def _locked(cache_dir: str) -> Iterator[None]:
    if is_remote(cache_dir):
        yield  # no advisory locks on object stores: best effort, documented above
        return
    from pgle.shared_folders import flocked

    # 0666 under the umask, like any new file; flock needs only a read fd, so a lock file
    # another user created (0644) still locks; a link planted there is refused, not followed.
    with flocked(os.path.join(cache_dir, LOCK_NAME), what="cache manifest lock file"):
        yield


def _write(cache_dir: str, data: dict[str, Any]) -> None:
    from pgle.redact import redact_json

    data = {k: v for k, v in data.items() if not k.startswith("_")}
    text = json.dumps(redact_json(data), indent=1, sort_keys=True) + "\n"
    path = manifest_path(cache_dir)
    if is_remote(cache_dir):
        from etils import epath

        epath.Path(path).write_text(text)
        return
    from pgle.atomic import write_text_atomic

    try:
        write_text_atomic(path, text)
    except OSError as e:
        raise PgleError(f"cannot write cache manifest {path}: {e.strerror}.") from None


def _read_text(path: str) -> str:
    if is_remote(path):
        from etils import epath

        p = epath.Path(path)
        if not p.exists():
            raise FileNotFoundError(path)
        return p.read_text()
    from pgle.shared_folders import read_bytes_nofollow

    # A shared cache: a link planted at the manifest's name is refused, never read (pgle would
    # otherwise republish the file it points to as the cache's manifest).
    return read_bytes_nofollow(path, what="cache manifest", limit=MAX_MANIFEST_BYTES).decode(
        "utf-8", errors="replace"
    )


def join(cache_dir: str, name: str) -> str:
    """`name` inside `cache_dir`, a local folder or a URL."""
    if is_remote(cache_dir):
        return f"{str(cache_dir).rstrip('/')}/{name}"
    return os.path.join(cache_dir, name)
