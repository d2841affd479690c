"""The persistent compilation cache on disk: list, total, prune.

Entries are `<module>-<64 hex>-cache` files, plus `<key>-atime` files when JAX
runs with a size cap (jax/_src/lru_cache.py, jax >= 0.4.31). pgle touches only
those two kinds of file: never `.lockfile`, `pgle-manifest.json`, XLA's
autotune cache folder or anything else a user keeps there.

Local directories are read with `os.scandir` (listing 10,000 entries must
take well under a second); `gs://...` and other URLs go through etils.epath
where the backend supports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import stat
from collections.abc import Iterator

from pgle.cache import manifest
from pgle.errors import BadInput
from pgle.units import iso

# Entry files (jax/_src/lru_cache.py, jax 0.4.31-0.12): `<key>-cache`, and `<key>-atime` only
# with JAX_COMPILATION_CACHE_MAX_SIZE != -1; cache_key.get() makes the key
# "<module name>-<sha256 hex>" (module names may hold '-').
CACHE_SUFFIX = "-cache"
ATIME_SUFFIX = "-atime"
LOCKFILE = ".lockfile"  # filelock.FileLock (fcntl.flock on POSIX) while evicting
ENTRY_FILE = re.compile(r"^(?P<key>(?P<module>.+)-(?P<hash>[0-9a-f]{64}))-(?P<kind>cache|atime)$")


@dataclasses.dataclass(frozen=True)
class Entry:
    module: str
    key: str
    size: int  # bytes of the -cache file
    mtime: float  # when JAX wrote it
    atime_file: bool  # a -atime file exists (size-capped cache)
    role: str  # cache_manifest.ROLE_*

    def to_dict(self) -> dict:
        return {
            "module": self.module,
            "key": self.key,
            "size": self.size,
            "mtime": self.mtime,
            "modified": iso(self.mtime),
            "role": self.role,
            "role_label": manifest.ROLE_LABELS[self.role],
            "atime_file": self.atime_file,
        }


# -- reading ------------------------------------------------------------------
def _scan(cache_dir: str) -> Iterator[tuple[str, int, float]]:
    """(name, size, mtime) of every plain file in the directory."""
    if manifest.is_remote(cache_dir):
        from etils import epath

        root = epath.Path(cache_dir)
        try:
            children = list(root.iterdir())
        except Exception as e:  # epath backends raise their own types
            raise BadInput(f"cannot list cache dir {cache_dir}: {e}.") from None
        for child in children:
            if ENTRY_FILE.match(child.name):
                st = child.stat()
                yield child.name, int(getattr(st, "length", 0)), float(getattr(st, "mtime", 0.0))
        return
    try:
        it = os.scandir(cache_dir)
    except FileNotFoundError:
        raise BadInput(f"cache dir {cache_dir} does not exist.") from None
    except NotADirectoryError:
        raise BadInput(f"{cache_dir} is not a directory.") from None
    except PermissionError:
        raise BadInput(f"cannot read cache dir {cache_dir}: permission denied.") from None
    with it:
        for de in it:
            # Filter by name before stat: a name that is not an entry costs nothing.
            if not de.name.endswith(("-cache", "-atime")):
                continue
            try:
                if not de.is_file(follow_symlinks=False):
                    continue
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # evicted while we looked
            yield de.name, st.st_size, st.st_mtime


def list_entries(cache_dir: str, recorded: dict | None = None) -> list[Entry]:
    """Every cache entry, sorted by module then newest first; roles from `recorded` (the
    cache's pgle manifest)."""
    cache_dir = manifest.local_form(cache_dir)
    caches: dict[str, tuple[str, int, float]] = {}
    atimes: set[str] = set()
    for name, size, mtime in _scan(cache_dir):
        m = ENTRY_FILE.match(name)
        if not m:
            continue
        if m["kind"] == "cache":
            caches[m["key"]] = (m["module"], size, mtime)
        else:
            atimes.add(m["key"])
    index = manifest.key_roles(recorded) if recorded else {}
    entries = [
        Entry(module, key, size, mtime, key in atimes, index.get(key, manifest.ROLE_UNKNOWN))
        for key, (module, size, mtime) in caches.items()
    ]
    entries.sort(key=lambda e: (e.module, -e.mtime, e.key))
    return entries


def totals(entries: list[Entry]) -> list[dict]:
    """Per module: entry count, bytes, newest write, count per role."""
    by_module: dict[str, dict] = {}
    for e in entries:
        t = by_module.setdefault(
            e.module, {"module": e.module, "entries": 0, "bytes": 0, "newest": 0.0, "roles": {}}
        )
        t["entries"] += 1
        t["bytes"] += e.size
        t["newest"] = max(t["newest"], e.mtime)
        t["roles"][e.role] = t["roles"].get(e.role, 0) + 1
    out = []
    for t in sorted(by_module.values(), key=lambda t: t["module"]):
        t["status"] = _module_status(t["roles"])
        t["newest"] = iso(t["newest"])
        out.append(t)
    return out


def _module_status(roles: dict[str, int]) -> str:
    """The most useful role a module has in the cache (report `modules[].status`)."""
    for role in (manifest.ROLE_PGLE_OPTIMIZED, manifest.ROLE_FIRST_PASS, manifest.ROLE_PLAIN):
        if roles.get(role):
            return role
    return manifest.ROLE_UNKNOWN


def select(
    cache_dir: str,
    entries: list[Entry],
    *,
    older_than: float | None = None,
    modules: tuple[str, ...] = (),
    now: float,
) -> list[Entry]:
    """The entries of `modules` (globs) and/or last used more than `older_than` seconds ago."""
    chosen = []
    for e in entries:
        if modules and not selected(e.module, modules):
            continue
        if older_than is not None and now - last_used(cache_dir, e) < older_than:
            continue
        chosen.append(e)
    return chosen


def delete_entries(cache_dir: str, chosen: list[Entry]) -> tuple[list[Entry], list[str]]:
    """Delete `chosen` under JAX's own cache lock: (deleted, one error sentence per failure)."""
    deleted, errors = [], []
    with _jax_cache_lock(cache_dir):
        for e in chosen:
            try:
                _delete_entry(cache_dir, e)
                deleted.append(e)
            except OSError as err:
                errors.append(f"{e.key}: {err.strerror or err}")
    return deleted, errors


def check_writable_dir(cache_dir: str, *, create: bool, what: str = "use") -> str:
    """Prove the directory takes new files (root ignores permission bits, so try it)."""
    if manifest.is_remote(cache_dir):
        return cache_dir
    try:
        if create:
            os.makedirs(cache_dir, exist_ok=True)
        elif not os.path.isdir(cache_dir):
            raise BadInput(f"cache dir {cache_dir} does not exist.")
        import tempfile

        fd, probe = tempfile.mkstemp(prefix=".pgle-probe-", dir=cache_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInput(
            f"cannot {what} cache dir {cache_dir}: {e.strerror or e}.",
            hint="Pick a directory you can write to (--cache-dir).",
        ) from None
    return cache_dir


def last_used(cache_dir: str, e: Entry) -> float:
    """Newest of the write time and JAX's LRU access stamp (the -atime file, ns little-endian)."""
    if not e.atime_file:
        return e.mtime
    try:
        raw = _read_bytes(manifest.join(cache_dir, e.key + ATIME_SUFFIX))
        return max(e.mtime, int.from_bytes(raw[:8], "little") / 1e9)
    except (OSError, ValueError):
        return e.mtime


def _delete_entry(cache_dir: str, e: Entry) -> None:
    # The -cache file first: JAX's eviction reads the -atime of every -cache it
    # finds, so a -cache without its -atime would break JAX; the reverse is harmless.
    for suffix in (CACHE_SUFFIX, ATIME_SUFFIX):
        path = manifest.join(cache_dir, e.key + suffix)
        if not ENTRY_FILE.match(os.path.basename(path)):
            raise AssertionError(path)  # never delete anything else
        with contextlib.suppress(FileNotFoundError):
            _unlink(path)


@contextlib.contextmanager
def _jax_cache_lock(cache_dir: str) -> Iterator[None]:
    """Hold JAX's own `.lockfile` (filelock.FileLock = fcntl.flock) while deleting,
    so a size-capped JAX process never evicts or stamps an entry half-deleted."""
    path = os.path.join(cache_dir, LOCKFILE)
    if manifest.is_remote(cache_dir) or not os.path.lexists(path):
        yield
        return
    from pgle.shared_folders import flocked

    # JAX made it (pgle never creates it); a link planted there is refused, never followed.
    with flocked(path, what="JAX cache lock file"):
        yield


def manifest_keys_missing(recorded: dict | None, present: set[str]) -> list[dict]:
    """The PGLE-optimized keys the manifest `recorded` that are not `present` on disk."""
    if not recorded:
        return []
    return [
        {"module": module, "key": key}
        for module, info in sorted(recorded.get("modules", {}).items())
        for key in info.get("pgle_optimized_keys", [])
        if key not in present
    ]


# -- small helpers ------------------------------------------------------------
def selected(module: str, patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return True
    import fnmatch

    return any(fnmatch.fnmatchcase(module, p) for p in patterns)


def _read_bytes(path: str, limit: int = 64) -> bytes:
    """At most `limit` bytes of a cache file (an -atime stamp holds 8). A shared cache is
    foreign: a link, FIFO or device planted at an entry's name (or swapped in after the
    listing) is never followed or read; OSError instead."""
    if manifest.is_remote(path):
        from etils import epath

        with epath.Path(path).open("rb") as f:
            return bytes(f.read(limit))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    if manifest.is_remote(path):
        from etils import epath

        p = epath.Path(path)
        if not p.exists():
            raise FileNotFoundError(path)
        p.unlink()
        return
    os.unlink(path)
