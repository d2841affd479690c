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

A store is shared with other users, so what it holds is untrusted (pgle.shared_folders): an
entry's fingerprint and id are checked against fixed patterns (and against the names of the
folder and file that hold them) before they become a path, every path is checked to stay inside
the store before a delete or a write, files are opened without following links, and an entry
whose metadata fails a check is skipped with one warning naming its file (`damaged`). Readers
(`materialize`, `serve`) hold the lock shared, so a trim never removes a file under them; the
writer that takes the lock first removes what a killed writer left behind (a profile without its
metadata, a temporary file).

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
import re
import stat
import uuid
from collections.abc import Iterator
from typing import Any

from pgle.errors import BadInput, PgleError, ProfileError
from pgle.profiles.files import (
    BINARY,
    FINGERPRINT_RE,
    SUFFIX,
    TEXT,
    Profile,
    check_fingerprint,
    encode_profile,
    parse_profile,
)
from pgle.shared_folders import LinkRefused, NotAFile, check_inside, read_bytes_nofollow
from pgle.store.policy import Policy, parse_policy

PROFILES = "profiles"
LOCK = ".lock"
TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
# `<UTC time>-<sha256[:12] of the profile>`: TIME_FORMAT's 8 + 12 digits, then 12 hex digits.
# An id read from a file names nothing until it matches.
ENTRY_ID_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{12}$")
_ID = r"\d{8}T\d{12}Z-[0-9a-f]{12}"
_SUFFIXES = (".json", SUFFIX[TEXT], SUFFIX[BINARY])
# An entry's files, and a temporary file of one being written (pgle.atomic's
# `.<name>.<random>.tmp`, or the `.<name>.<uuid>.tmp` of earlier pgle versions).
_ENTRY_FILE = re.compile(rf"^({_ID})(\.json|\.pbtxt|\.pb)$")
_TEMP_FILE = re.compile(rf"^\.({_ID})(\.json|\.pbtxt|\.pb)\..+\.tmp$")
LOCK_TIMEOUT = 600.0
MAX_METADATA_BYTES = 1 << 20
_REQUIRED = (
    "fingerprint",
    "entry_id",
    "jax",
    "jaxlib",
    "device_kind",
    "device_count",
    "created",
    "source",
)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
        now = now or dt.datetime.now(dt.UTC)
        return (now - self.created_at).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_metadata(cls, data: Any, fingerprint: str, file_name: str) -> Entry:
        """The entry a metadata file `<folder fingerprint>/<file_name>` describes; ValueError or
        TypeError saying why when it is not one (another user wrote it: nothing is trusted)."""
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}  # newer fields are ignored
        missing = [n for n in _REQUIRED if n not in fields]
        if missing:
            raise ValueError(f"no {missing[0]!r} field")
        for name in (
            "fingerprint",
            "entry_id",
            "jax",
            "jaxlib",
            "device_kind",
            "created",
            "source",
            "module",
        ):
            if name in fields and not isinstance(fields[name], str):
                raise TypeError(f"{name} {_shown(fields[name])} is not a string")
        for name in ("device_count", "instructions"):
            value = fields.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} {_shown(value)} is not a count")
        if not FINGERPRINT_RE.match(fields["fingerprint"]) or fields["fingerprint"] != fingerprint:
            raise ValueError(
                f"fingerprint {_shown(fields['fingerprint'])} is not its folder's ({fingerprint})"
            )
        if not ENTRY_ID_RE.match(fields["entry_id"]) or file_name != fields["entry_id"] + ".json":
            raise ValueError(f"entry_id {_shown(fields['entry_id'])} is not its file's name")
        try:
            created = dt.datetime.fromisoformat(fields["created"])
        except ValueError:
            raise ValueError(f"created {_shown(fields['created'])} is not a time") from None
        if created.tzinfo is None:
            raise ValueError(f"created {_shown(fields['created'])} has no time zone")
        return cls(**fields)


def _epath(path: Any):
    from etils import epath

    return epath.Path(path)


def is_remote(path: Any) -> bool:
    return str(path).startswith(("gs://", "s3://"))


class ProfileStore:
    def __init__(self, root: Any, *, create: bool = False):
        self.root = _epath(root)
        self.remote = is_remote(root)
        # metadata file -> why it is not an entry; filled by entries(), one warning per command
        self.damaged: dict[str, str] = {}
        self.swept: list[str] = []  # leftovers of killed writers removed under the lock
        self._swept_all = False
        try:
            exists, is_dir = self.root.exists(), self.root.is_dir()
        except OSError as e:
            raise BadInput(f"cannot reach profile store {root}: {e.strerror or e}.") from None
        if not exists:
            if not create:
                raise BadInput(
                    f"profile store {root} does not exist.",
                    hint="`pgle store add` creates it, or pass an existing folder.",
                )
            if self.remote:
                self.root.mkdir(parents=True, exist_ok=True)
            else:
                from pgle.atomic import make_dirs

                make_dirs(os.fspath(self.root))
        elif not is_dir:
            raise BadInput(f"profile store {root} is not a directory.")

    def __str__(self) -> str:
        return str(self.root)

    def _local(self, *parts: str) -> str:
        return os.path.join(os.fspath(self.root), *parts)

    # --- locking -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, *, shared: bool = False) -> Iterator[None]:
        """The store's lock: exclusive for a writer; shared for a reader, which goes on without
        it where it cannot be taken (a read-only store: nobody can trim it either)."""
        if self.remote:
            yield  # single-writer rule (module docstring)
            return
        from pgle.shared_folders import flocked

        with flocked(
            self._local(LOCK),
            shared=shared,
            optional=shared,
            timeout=LOCK_TIMEOUT,
            what="store lock file",
        ):
            yield

    # --- reading -------------------------------------------------------------------------------
    def fingerprints(self) -> list[str]:
        return sorted({e.fingerprint for e in self.entries()})

    def _fingerprint_folders(self, fingerprint: str | None) -> Iterator[tuple[str, str]]:
        """(fingerprint, folder) of the store's fingerprint folders: names that are fingerprints,
        real folders (a link there is noted as damaged, never followed)."""
        base = self._local(PROFILES)
        try:
            st = os.lstat(base)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            self.damaged[base] = "a symbolic link, not the store's folder"
            return
        if fingerprint is not None:
            names = [fingerprint]
        else:
            with os.scandir(base) as it:
                names = sorted(e.name for e in it)
        for fp in names:
            if not FINGERPRINT_RE.match(fp):
                continue  # not pgle's: never read, never touched
            folder = os.path.join(base, fp)
            try:
                st = os.lstat(folder)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                self.damaged[folder] = "a symbolic link, not a folder"
            elif stat.S_ISDIR(st.st_mode):
                yield fp, folder

    def _metadata_files(self, fingerprint: str | None) -> Iterator[tuple[str, Any]]:
        """(fingerprint, metadata path) of every entry. Local stores use os.scandir: epath's
        per-file objects made listing a 10,000-module store the slow part of a view."""
        if not self.remote:
            for fp, folder in self._fingerprint_folders(fingerprint):
                try:
                    with os.scandir(folder) as it:
                        names = [e.name for e in it]
                except FileNotFoundError:
                    continue
                for name in names:
                    if name.endswith(".json") and not name.startswith("."):
                        yield fp, os.path.join(folder, name)
            return
        base = self.root / PROFILES
        if fingerprint is not None:
            names = [fingerprint]
        elif base.exists():
            names = sorted(p.name for p in base.iterdir() if FINGERPRINT_RE.match(p.name))
        else:
            names = []
        for fp in names:
            folder = base / fp
            if folder.exists():
                for meta in folder.glob("*.json"):
                    yield fp, meta

    def _read_metadata(self, fp: str, meta: Any) -> Entry | None:
        name = os.path.basename(os.fspath(meta))
        try:
            raw = (
                _epath(meta).read_bytes()
                if self.remote
                else read_bytes_nofollow(meta, what="store entry", limit=MAX_METADATA_BYTES)
            )
            return Entry.from_metadata(json.loads(raw), fp, name)
        except FileNotFoundError:
            return None  # removed by a trim while we listed
        except LinkRefused:
            self.damaged[str(meta)] = "a symbolic link"
        except NotAFile as e:
            self.damaged[str(meta)] = e.reason
        except UnicodeDecodeError:
            self.damaged[str(meta)] = "not UTF-8 text"
        except json.JSONDecodeError:
            self.damaged[str(meta)] = "not JSON"
        except (ValueError, TypeError) as e:
            self.damaged[str(meta)] = str(e)
        except OSError as e:
            self.damaged[str(meta)] = e.strerror or str(e)
        return None

    def entries(
        self,
        fingerprint: str | None = None,
        *,
        jax: str | None = None,
        device_kind: str | None = None,
    ) -> list[Entry]:
        """Entries, oldest first, optionally for one fingerprint / jax version / device kind.
        Metadata that fails a check is skipped and noted in `damaged`."""
        if fingerprint is not None and not FINGERPRINT_RE.match(fingerprint):
            return []
        out = []
        for fp, meta in self._metadata_files(fingerprint):
            entry = self._read_metadata(fp, meta)
            if entry is None:
                continue
            if jax and entry.jax != jax:
                continue
            if device_kind and entry.device_kind != device_kind:
                continue
            out.append(entry)
        return sorted(out, key=lambda e: (e.fingerprint, e.entry_id))

    def damaged_warning(self) -> str | None:
        """One warning naming the files skipped as damaged, or None."""
        if not self.damaged:
            return None
        items = sorted(self.damaged.items())
        shown = "; ".join(f"{path} ({why})" for path, why in items[:3])
        more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
        return (
            f"skipped {len(items)} damaged store entr{'y' if len(items) == 1 else 'ies'}: "
            f"{shown}{more}. pgle neither reads nor deletes {'it' if len(items) == 1 else 'them'}"
            "; remove or fix by hand."
        )

    def _entry_file(self, entry: Entry, suffix: str) -> Any:
        """The path of one of `entry`'s files, its names checked again (a path is built from
        nothing that did not pass them) and, locally, its folder inside the store."""
        check_fingerprint(entry.fingerprint)
        if not ENTRY_ID_RE.match(entry.entry_id) or suffix not in _SUFFIXES:
            raise BadInput(f"store entry id {_shown(entry.entry_id)} is not an entry id.")
        if self.remote:
            return self.root / PROFILES / entry.fingerprint / f"{entry.entry_id}{suffix}"
        path = self._local(PROFILES, entry.fingerprint, f"{entry.entry_id}{suffix}")
        return check_inside(os.fspath(self.root), path, "store file")

    def profile_path(self, entry: Entry):
        """The entry's profile file: text `.pbtxt` (pgle writes these), or binary `.pb`."""
        text = self._entry_file(entry, SUFFIX[TEXT])
        binary = self._entry_file(entry, SUFFIX[BINARY])
        if self.remote:
            return text if text.exists() else binary
        return text if os.path.lexists(text) else binary

    def read(self, entry: Entry) -> Profile:
        path = self.profile_path(entry)
        fmt = TEXT if str(path).endswith(SUFFIX[TEXT]) else BINARY
        if self.remote:
            return parse_profile(path.read_bytes(), fmt, str(path))
        try:
            data = read_bytes_nofollow(path, what="store profile")
        except OSError as e:
            raise ProfileError(f"cannot read store profile {path}: {e.strerror or e}.") from None
        return parse_profile(data, fmt, str(path))

    def serve(
        self, fingerprint: str, *, jax: str, device_kind: str, policy: Policy | str | None = None
    ) -> tuple[Profile, list[Entry]] | None:
        """The profile XLA gets for one module under `policy`, and the entries it came from."""
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        with self.locked(shared=True):
            entries = self.entries(fingerprint, jax=jax, device_kind=device_kind)[-policy.keep :]
            if not entries:
                return None
            if not policy.merge or len(entries) == 1:
                return self.read(entries[-1]), entries[-1:]
            from pgle.profiles.merge import merge_profiles

            return (
                merge_profiles([self.read(e) for e in entries], percentile=policy.percentile),
                entries,
            )

    # --- writing -------------------------------------------------------------------------------
    def _folder(self, fingerprint: str) -> Any:
        """The fingerprint's folder, made if missing; a link or a file there is refused."""
        if self.remote:
            folder = self.root / PROFILES / fingerprint
            folder.mkdir(parents=True, exist_ok=True)
            return folder
        from pgle.atomic import write_error

        for path in (self._local(PROFILES), self._local(PROFILES, fingerprint)):
            try:
                os.mkdir(path)
            except FileExistsError:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    raise LinkRefused(
                        f"store folder {path} is a symbolic link; pgle does not "
                        "follow links in folders other users can write.",
                        hint="Remove the link.",
                    ) from None
                if not stat.S_ISDIR(st.st_mode):
                    raise BadInput(f"store folder {path} is not a directory.") from None
            except OSError as e:
                raise write_error(path, e, "store folder") from None
        return self._local(PROFILES, fingerprint)

    def _write(self, path: Any, data: bytes) -> None:
        if self.remote:
            tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
            tmp.write_bytes(data)
            tmp.replace(path)
            return
        from pgle.atomic import write_bytes_atomic

        # A temp file beside it, then a rename: a link at `path` is replaced, never followed;
        # a full disk, a read-only store or `ulimit -f` is one WriteFailed line, no temp left.
        write_bytes_atomic(check_inside(os.fspath(self.root), path, "store file"), data)

    def _sweep(self) -> None:
        """Remove what killed writers left (a profile without its metadata, a temp file). Only
        under the exclusive lock, where no writer is between its two renames; only names of
        entry files, in fingerprint folders; never anything else."""
        if self.remote or self._swept_all:
            return
        self._swept_all = True
        for _fp, folder in self._fingerprint_folders(None):
            try:
                with os.scandir(folder) as it:
                    names = {e.name for e in it if not e.is_dir(follow_symlinks=False)}
            except OSError:
                continue
            ids = {
                m.group(1) for n in names if (m := _ENTRY_FILE.match(n)) and m.group(2) == ".json"
            }
            for name in sorted(names):
                m = _ENTRY_FILE.match(name)
                orphan = (
                    m is not None and m.group(2) != ".json" and m.group(1) not in ids
                ) or _TEMP_FILE.match(name) is not None
                if not orphan:
                    continue
                path = check_inside(os.fspath(self.root), os.path.join(folder, name), "store file")
                try:
                    os.unlink(path)
                    self.swept.append(path)
                except OSError:
                    pass  # another user's leftover in a folder we may not write: harmless

    def add(
        self,
        fingerprint: str,
        profile: Profile,
        *,
        jax: str,
        jaxlib: str,
        device_kind: str,
        device_count: int,
        source: str,
        module: str = "",
        policy: Policy | str | None = None,
        now: dt.datetime | None = None,
    ) -> tuple[Entry, list[Entry]]:
        """Add one module's profile; trim older entries per `policy`. Returns (added, removed)."""
        check_fingerprint(fingerprint)
        if profile.is_empty():
            raise ProfileError(f"refusing to store an empty profile for module {fingerprint}.")
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        data = encode_profile(profile, TEXT)
        now = now or dt.datetime.now(dt.UTC)
        from pgle.redact import redact_text

        entry = Entry(
            fingerprint=fingerprint,
            entry_id=f"{now.strftime(TIME_FORMAT)}-{hashlib.sha256(data).hexdigest()[:12]}",
            jax=jax,
            jaxlib=jaxlib,
            device_kind=device_kind,
            device_count=device_count,
            created=now.isoformat(),
            source=redact_text(source),
            module=module,
            instructions=profile.instruction_count,
        )
        with self.locked():
            self._folder(fingerprint)
            self._sweep()
            # The profile first, the metadata last: the entry exists once both are in place.
            self._write(self._entry_file(entry, SUFFIX[TEXT]), data)
            self._write(
                self._entry_file(entry, ".json"), json.dumps(entry.to_dict(), indent=1).encode()
            )
            same = self.entries(fingerprint, jax=jax, device_kind=device_kind)
            removed = same[: -policy.keep] if len(same) > policy.keep else []
            for old in removed:
                self._remove(old)
        return entry, removed

    def _remove(self, entry: Entry) -> None:
        # Metadata first: the entry disappears at once, its profile after.
        for suffix in _SUFFIXES:
            path = self._entry_file(entry, suffix)
            if self.remote:
                if path.exists():
                    path.unlink()
                continue
            try:
                os.unlink(path)  # a link here is removed, never followed
            except FileNotFoundError:
                pass
            except OSError as e:
                raise PgleError(f"cannot remove store file {path}: {e.strerror or e}.") from None

    def prune(
        self,
        *,
        keep: int | None = None,
        older_than: float | None = None,
        jax: str | None = None,
        dry_run: bool = False,
        now: dt.datetime | None = None,
    ) -> list[Entry]:
        """Remove entries: beyond the `keep` newest per (module, jax, device kind), last
        written more than `older_than` seconds ago, or of a jax version other than `jax`."""
        removed: list[Entry] = []
        with self.locked(shared=dry_run):
            if not dry_run:
                self._sweep()
            groups: dict[tuple[str, str, str], list[Entry]] = {}
            for e in self.entries():
                groups.setdefault((e.fingerprint, e.jax, e.device_kind), []).append(e)
            for group in groups.values():
                for i, e in enumerate(group):
                    newer = len(group) - 1 - i
                    if (
                        (keep is not None and newer >= keep)
                        or (older_than is not None and e.age_seconds(now) > older_than)
                        or (jax is not None and e.jax != jax)
                    ):
                        removed.append(e)
            if not dry_run:
                for e in removed:
                    self._remove(e)
        return removed

    def select(
        self,
        *,
        jax: str,
        device_kind: str,
        policy: Policy | str | None = None,
        fingerprints: list[str] | None = None,
    ) -> dict[str, list[Entry]]:
        """Per module, the entries XLA would be served under `policy` (newest last)."""
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        wanted = set(fingerprints) if fingerprints else None
        by_fp: dict[str, list[Entry]] = {}
        for e in self.entries(jax=jax, device_kind=device_kind):
            if wanted is None or e.fingerprint in wanted:
                by_fp.setdefault(e.fingerprint, []).append(e)
        return {fp: es[-policy.keep :] if policy.merge else es[-1:] for fp, es in by_fp.items()}

    def materialize(
        self,
        out: Any,
        *,
        jax: str,
        device_kind: str,
        policy: Policy | str | None = None,
        fingerprints: list[str] | None = None,
        force: bool = False,
    ) -> dict[str, list[Entry]]:
        """Write the view XLA reads: `<out>/<fingerprint>.pbtxt` (or `.pb` for an old binary
        entry) per module with a matching entry. Returns the entries each module came from.
        OUT must be new, empty, or (with `force`) a profile directory or view: never the store
        or a folder inside it or around it."""
        from pgle.atomic import replace_directory_atomic
        from pgle.profiles.files import check_directory_output

        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        target = os.path.abspath(os.fspath(out))
        check_directory_output(
            target, force=force, inputs=[] if self.remote else [self.root], what="store view"
        )
        with self.locked(shared=True):  # no trim removes a file while the view is built
            served = self.select(
                jax=jax, device_kind=device_kind, policy=policy, fingerprints=fingerprints
            )
            if not served:
                raise ProfileError(
                    f"profile store {self.root} has no profile for jax {jax} on {device_kind}.",
                    hint="`pgle store ls` shows what it holds.",
                )

            def fill(tmp) -> None:
                for fp, entries in served.items():
                    self._fill_one(tmp, check_fingerprint(fp), entries, policy)

            replace_directory_atomic(target, fill)
        return served

    def _fill_one(self, tmp: Any, fp: str, entries: list[Entry], policy: Policy) -> None:
        from pgle.atomic import write_bytes_atomic

        if len(entries) > 1:  # merge policy: the percentile of several entries
            from pgle.profiles.merge import merge_profiles

            merged = merge_profiles([self.read(e) for e in entries], percentile=policy.percentile)
            write_bytes_atomic(
                os.path.join(tmp, f"{fp}{SUFFIX[TEXT]}"), encode_profile(merged, TEXT)
            )
            return
        src = self.profile_path(entries[0])
        suffix = SUFFIX[TEXT] if str(src).endswith(SUFFIX[TEXT]) else SUFFIX[BINARY]
        dst = os.path.join(tmp, f"{fp}{suffix}")
        if self.remote:
            write_bytes_atomic(dst, src.read_bytes())
            return
        from pgle.shared_folders import link_or_copy

        link_or_copy(src, dst, what="store profile")
