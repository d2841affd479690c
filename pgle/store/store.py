"""The profile store: per-module profiles keyed by fingerprint, jax version and device kind.

Layout (a plain directory, local or `gs://` through etils.epath):

    STORE/profiles/<fingerprint>/<entry>.pbtxt  the profile (text ProfiledInstructionsProto;
                                                entries written before pgle 0.x used binary .pb,
                                                still read)
    STORE/profiles/<fingerprint>/<entry>.json   its metadata: jax, jaxlib, device kind and count,
                                                created (UTC), source, module name, instructions
    STORE/.lock                                 filelock lock file (local and shared filesystems)

`<entry>` is `<UTC time>-<sha256[:12] of the profile>`, so names sort by age and two writers never
pick the same name. An entry exists once its `.json` exists: the profile is written first and the
metadata last, each through a temporary name and an atomic rename, so a reader never sees half an
entry. Trimming (policy keep N, `prune`) deletes under the lock (`filelock.FileLock`, which uses
fcntl/flock and works on NFS/Lustre mounts that support locking). Concurrent writers on `gs://`
are not locked: object stores have no lock primitive; run one writer (rank 0) per store there, and
pgle's own `--store` writes from rank 0 only.

XLA reads a store through a materialized view (`materialize`): a folder of `<fingerprint>.pbtxt`
for one jax version and device kind, which `--xla_gpu_pgle_profile_file_or_directory_path`
points at. XLA's directory mode looks up `<fingerprint>.pbtxt` first, then `.pb` (every jax from
0.4.31 to 0.10.2, docs/guide/sources-and-store.md), so text entries are found on the first
lookup and no "file does not exist" line is logged per module. The view is hard links to the
entries' files (copies where links fail, e.g. across filesystems): no profile is parsed or
re-encoded unless a merge policy combines several entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import shutil
import uuid
from typing import Any, Iterator

from pgle.errors import BadInput, ProfileError
from pgle.profiles.files import (BINARY, SUFFIX, TEXT, Profile, check_fingerprint, encode_profile,
                                 parse_profile)
from pgle.store.policy import Policy, parse_policy

PROFILES = "profiles"
LOCK = ".lock"
TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"


@dataclasses.dataclass
class Entry:
    fingerprint: str
    entry_id: str
    jax: str
    jaxlib: str
    device_kind: str
    device_count: int
    created: str
    source: str
    module: str = ""
    instructions: int = 0

    @property
    def created_at(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.created)

    def age_seconds(self, now: dt.datetime | None = None) -> float:
        now = now or dt.datetime.now(dt.timezone.utc)
        return (now - self.created_at).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _epath(path: Any):
    from etils import epath

    return epath.Path(path)


def is_remote(path: Any) -> bool:
    return str(path).startswith(("gs://", "s3://"))


class ProfileStore:
    def __init__(self, root: Any, *, create: bool = False):
        self.root = _epath(root)
        self.remote = is_remote(root)
        if not self.root.exists():
            if not create:
                raise BadInput(f"profile store {root} does not exist.",
                               hint="`pgle store add` creates it, or pass an existing folder.")
            self.root.mkdir(parents=True, exist_ok=True)
        elif not self.root.is_dir():
            raise BadInput(f"profile store {root} is not a directory.")

    # --- locking -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        if self.remote:
            yield  # single-writer rule (module docstring)
            return
        import filelock

        with filelock.FileLock(str(self.root / LOCK), timeout=600):
            yield

    # --- reading -------------------------------------------------------------------------------
    def fingerprints(self) -> list[str]:
        base = self.root / PROFILES
        if not base.exists():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir())

    def _metadata_files(self, fingerprint: str | None) -> Iterator[tuple[str, Any]]:
        """(fingerprint, metadata path) of every entry. Local stores use os.scandir: epath's
        per-file objects made listing a 10,000-module store the slow part of a view."""
        if not self.remote:
            base = os.path.join(os.fspath(self.root), PROFILES)
            fps = [fingerprint] if fingerprint else (
                sorted(e.name for e in os.scandir(base) if e.is_dir()) if os.path.isdir(base) else [])
            for fp in fps:
                folder = os.path.join(base, fp)
                if not os.path.isdir(folder):
                    continue
                for e in os.scandir(folder):
                    if e.name.endswith(".json") and not e.name.startswith("."):
                        yield fp, e.path
            return
        for fp in [fingerprint] if fingerprint else self.fingerprints():
            folder = self.root / PROFILES / fp
            if folder.exists():
                for meta in folder.glob("*.json"):
                    yield fp, meta

    def entries(self, fingerprint: str | None = None, *, jax: str | None = None,
                device_kind: str | None = None) -> list[Entry]:
        """Entries, oldest first, optionally for one fingerprint / jax version / device kind."""
        out = []
        for _, meta in self._metadata_files(fingerprint):
                try:
                    entry = Entry(**json.loads(_epath(meta).read_text() if self.remote
                                               else open(meta, encoding="utf-8").read()))
                except (ValueError, TypeError, OSError):
                    continue  # a foreign, damaged or just-removed file is not an entry
                if jax and entry.jax != jax:
                    continue
                if device_kind and entry.device_kind != device_kind:
                    continue
                out.append(entry)
        return sorted(out, key=lambda e: (e.fingerprint, e.entry_id))

    def profile_path(self, entry: Entry):
        """The entry's profile file: text `.pbtxt` (pgle writes these), or binary `.pb`."""
        folder = self.root / PROFILES / entry.fingerprint
        text = folder / f"{entry.entry_id}{SUFFIX[TEXT]}"
        return text if text.exists() else folder / f"{entry.entry_id}{SUFFIX[BINARY]}"

    def read(self, entry: Entry) -> Profile:
        path = self.profile_path(entry)
        fmt = TEXT if path.name.endswith(SUFFIX[TEXT]) else BINARY
        return parse_profile(path.read_bytes(), fmt, str(path))

    def serve(self, fingerprint: str, *, jax: str, device_kind: str,
              policy: Policy | str | None = None) -> tuple[Profile, list[Entry]] | None:
        """The profile XLA gets for one module under `policy`, and the entries it came from."""
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        entries = self.entries(fingerprint, jax=jax, device_kind=device_kind)[-policy.keep:]
        if not entries:
            return None
        if not policy.merge or len(entries) == 1:
            return self.read(entries[-1]), entries[-1:]
        from pgle.profiles.merge import merge_profiles

        return merge_profiles([self.read(e) for e in entries], percentile=policy.percentile), entries

    # --- writing -------------------------------------------------------------------------------
    def _write_atomic(self, path, data: bytes) -> None:
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
        tmp.write_bytes(data)
        tmp.replace(path)

    def add(self, fingerprint: str, profile: Profile, *, jax: str, jaxlib: str, device_kind: str,
            device_count: int, source: str, module: str = "", policy: Policy | str | None = None,
            now: dt.datetime | None = None) -> tuple[Entry, list[Entry]]:
        """Add one module's profile; trim older entries per `policy`. Returns (added, removed)."""
        check_fingerprint(fingerprint)
        if profile.is_empty():
            raise ProfileError(f"refusing to store an empty profile for module {fingerprint}.")
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        data = encode_profile(profile, TEXT)
        now = now or dt.datetime.now(dt.timezone.utc)
        entry = Entry(fingerprint=fingerprint,
                      entry_id=f"{now.strftime(TIME_FORMAT)}-{hashlib.sha256(data).hexdigest()[:12]}",
                      jax=jax, jaxlib=jaxlib, device_kind=device_kind, device_count=device_count,
                      created=now.isoformat(), source=source, module=module,
                      instructions=profile.instruction_count)
        folder = self.root / PROFILES / fingerprint
        folder.mkdir(parents=True, exist_ok=True)
        with self.locked():
            self._write_atomic(folder / f"{entry.entry_id}{SUFFIX[TEXT]}", data)
            self._write_atomic(folder / f"{entry.entry_id}.json",
                               json.dumps(entry.to_dict(), indent=1).encode())
            same = self.entries(fingerprint, jax=jax, device_kind=device_kind)
            removed = same[:-policy.keep] if len(same) > policy.keep else []
            for old in removed:
                self._remove(old)
        return entry, removed

    def _remove(self, entry: Entry) -> None:
        folder = self.root / PROFILES / entry.fingerprint
        # Metadata first: the entry disappears at once, its profile after.
        for suffix in (".json", SUFFIX[TEXT], SUFFIX[BINARY]):
            p = folder / f"{entry.entry_id}{suffix}"
            if p.exists():
                p.unlink()

    def prune(self, *, keep: int | None = None, older_than_days: float | None = None,
              jax: str | None = None, dry_run: bool = False,
              now: dt.datetime | None = None) -> list[Entry]:
        """Remove entries: beyond the `keep` newest per (module, jax, device kind), older than
        `older_than_days`, or of a jax version other than `jax`."""
        removed: list[Entry] = []
        with self.locked():
            groups: dict[tuple[str, str, str], list[Entry]] = {}
            for e in self.entries():
                groups.setdefault((e.fingerprint, e.jax, e.device_kind), []).append(e)
            for group in groups.values():
                for i, e in enumerate(group):
                    newer = len(group) - 1 - i
                    if ((keep is not None and newer >= keep) or
                            (older_than_days is not None and e.age_seconds(now) > older_than_days * 86400) or
                            (jax is not None and e.jax != jax)):
                        removed.append(e)
            if not dry_run:
                for e in removed:
                    self._remove(e)
        return removed

    def select(self, *, jax: str, device_kind: str, policy: Policy | str | None = None,
               fingerprints: list[str] | None = None) -> dict[str, list[Entry]]:
        """Per module, the entries XLA would be served under `policy` (newest last)."""
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        wanted = set(fingerprints) if fingerprints else None
        by_fp: dict[str, list[Entry]] = {}
        for e in self.entries(jax=jax, device_kind=device_kind):
            if wanted is None or e.fingerprint in wanted:
                by_fp.setdefault(e.fingerprint, []).append(e)
        return {fp: es[-policy.keep:] if policy.merge else es[-1:] for fp, es in by_fp.items()}

    def materialize(self, out: Any, *, jax: str, device_kind: str, policy: Policy | str | None = None,
                    fingerprints: list[str] | None = None, force: bool = False) -> dict[str, list[Entry]]:
        """Write the view XLA reads: `<out>/<fingerprint>.pbtxt` (or `.pb` for an old binary
        entry) per module with a matching entry. Returns the entries each module came from."""
        from pgle.atomic import replace_directory_atomic, write_bytes_atomic

        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        served = self.select(jax=jax, device_kind=device_kind, policy=policy,
                             fingerprints=fingerprints)
        if not served:
            raise ProfileError(f"profile store {self.root} has no profile for jax {jax} on {device_kind}.",
                               hint="`pgle store ls` shows what it holds.")
        target = os.path.abspath(os.fspath(out))
        if os.path.exists(target) and not os.path.isdir(target):
            raise ProfileError(f"{target} exists and is not a directory.")
        if os.path.isdir(target) and os.listdir(target) and not force:
            raise ProfileError(f"profile directory {target} already exists and is not empty.",
                               hint="Pass --force to replace it.")

        def fill(tmp) -> None:
            for fp, entries in served.items():
                if len(entries) > 1:  # merge policy: the percentile of several entries
                    from pgle.profiles.merge import merge_profiles

                    merged = merge_profiles([self.read(e) for e in entries],
                                            percentile=policy.percentile)
                    write_bytes_atomic(tmp / f"{fp}{SUFFIX[TEXT]}", encode_profile(merged, TEXT))
                    continue
                src = self.profile_path(entries[0])
                dst = tmp / f"{fp}{SUFFIX[TEXT] if src.name.endswith(SUFFIX[TEXT]) else SUFFIX[BINARY]}"
                if self.remote:
                    dst.write_bytes(src.read_bytes())
                    continue
                try:
                    os.link(os.fspath(src), dst)  # entries are never rewritten in place
                except OSError:
                    shutil.copyfile(os.fspath(src), dst)

        replace_directory_atomic(target, fill)
        return served
