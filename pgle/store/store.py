"""The profile store: per-module profiles keyed by fingerprint, jax version and device kind.

Layout (a plain directory, local or `gs://` through etils.epath):

    STORE/profiles/<fingerprint>/<entry>.pbtxt  the profile (text ProfiledInstructionsProto;
                                                entries written before pgle 0.x used binary .pb,
                                                still read)
    STORE/profiles/<fingerprint>/<entry>.json   its metadata: jax, jaxlib, device kind and count,
                                                created (UTC), source, module name, instructions
    STORE/profiles/<fingerprint>/<entry>.calibration.jsonl
                                                optional: predicted and measured ratios per arm
                                                (`tune --compare --predict`; pgle.store.calibration)
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
whose metadata fails a check is skipped with one warning naming its file (`damaged`). Every
local operation goes through descriptors (pgle.shared_folders.OpenDir): the store is opened
once, `profiles/` and each fingerprint folder are opened without following links, and files are
read, written (temp + renameat), linked and unlinked relative to the folder opened, so another
user who swaps a folder for a link mid-operation redirects nothing. A folder pgle writes into
that belongs to another user is named in one warning per owner. An entry is also refused when
its id's time is not its `created` time (serving and trimming order by id, listings by
`created`: both must agree) or lies more than FUTURE_SKEW_SECONDS ahead of this host's clock (a
future-dated entry would be served, and would trim every fresh one, forever); and `add` never
trims the entry it has just written. Readers
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
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from pgle.errors import BadInput, PgleError, ProfileError
from pgle.profiles.files import (
    BINARY,
    SUFFIX,
    TEXT,
    Profile,
    check_fingerprint,
    encode_profile,
    parse_profile,
)
from pgle.shared_folders import (
    LinkRefused,
    NotAFile,
    OpenDir,
    check_inside,
    warn_foreign,
)
from pgle.store import calibration
from pgle.store.calibration import Calibration
from pgle.store.policy import Policy, parse_policy

PROFILES = "profiles"
LOCK = ".lock"
TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
# `<UTC time>-<sha256[:12] of the profile>`: TIME_FORMAT's 8 + 12 digits, then 12 hex digits.
# An id read from a file names nothing until it matches.
ENTRY_ID_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{12}\Z")
# `$` also matches before a final newline: names read from a store are matched whole.
_FP_RE = re.compile(r"[0-9a-f]{32}")
_ID = r"\d{8}T\d{12}Z-[0-9a-f]{12}"
_SUFFIXES = (".json", SUFFIX[TEXT], SUFFIX[BINARY], calibration.SUFFIX)
# An entry's files, and a temporary file of one being written (pgle.atomic's
# `.<name>.<random>.tmp`, or the `.<name>.<uuid>.tmp` of earlier pgle versions).
_FILES = r"(\.json|\.pbtxt|\.pb|\.calibration\.jsonl)"
_ENTRY_FILE = re.compile(rf"^({_ID}){_FILES}$")
_TEMP_FILE = re.compile(rf"^\.({_ID}){_FILES}\..+\.tmp$")
LOCK_TIMEOUT = 600.0
MAX_METADATA_BYTES = 1 << 20
# Clocks of the hosts that share a store differ by seconds (NTP), rarely minutes: an entry
# created further ahead of this host's clock is refused as damaged.
FUTURE_SKEW_SECONDS = 3600.0
_FOREIGN = "its owner can replace or remove what pgle stores there (a shared store)."
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
    if not isinstance(value, str | int | float | bool) and value is not None:
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"  # never repr'd
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
        if not _FP_RE.fullmatch(fields["fingerprint"]) or fields["fingerprint"] != fingerprint:
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
        stamp = created.astimezone(dt.UTC).strftime(TIME_FORMAT)
        if not fields["entry_id"].startswith(stamp + "-"):
            raise ValueError(
                f"entry_id {_shown(fields['entry_id'])} is not dated by its created time "
                f"({fields['created']})"
            )
        ahead = (created - dt.datetime.now(dt.UTC)).total_seconds()
        if ahead > FUTURE_SKEW_SECONDS:
            raise ValueError(f"created {_shown(fields['created'])} is in the future")
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
        # The store as opened now (the user named it: a link to it is followed); everything
        # below it is reached from this descriptor.
        self._dir: OpenDir | None = None
        if not self.remote:
            try:
                self._dir = OpenDir.open(self._local(), "profile store")
            except OSError as e:
                raise BadInput(f"cannot open profile store {root}: {e.strerror or e}.") from None
            # Closed with the store object, or at exit (finalize is safe then; __del__ is not).
            self._closer = weakref.finalize(self, self._dir.close)

    def close(self) -> None:
        if self._dir is not None:
            self._closer()

    def __str__(self) -> str:
        return str(self.root)

    @property
    def dir(self) -> OpenDir:
        assert self._dir is not None, "a local store"
        return self._dir

    def _foreign(self, folder: OpenDir, what: str) -> None:
        """Name a folder of another user once per owner (a shared store has many) before
        pgle writes into it."""
        st = folder.stat()
        warn_foreign(st, folder.path, what, _FOREIGN, key=("store", self.dir.path, st.st_uid))

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

        if not shared:
            self._foreign(self.dir, "profile store")
        with flocked(
            LOCK,
            shared=shared,
            optional=shared,
            timeout=LOCK_TIMEOUT,
            what="store lock file",
            dir_fd=self.dir.fd,
            shown=self._local(LOCK),
        ):
            yield

    # --- reading -------------------------------------------------------------------------------
    def fingerprints(self) -> list[str]:
        return sorted({e.fingerprint for e in self.entries()})

    def _profiles_dir(self) -> OpenDir | None:
        """STORE/profiles opened; None when missing. A link there is noted as damaged, never
        followed (writers open it themselves: `_entry_folder`)."""
        try:
            return self.dir.sub(PROFILES, what="store folder")
        except FileNotFoundError:
            return None
        except LinkRefused:
            self.damaged[self._local(PROFILES)] = "a symbolic link, not the store's folder"
        except BadInput:
            self.damaged[self._local(PROFILES)] = "not a folder"
        return None

    def _fingerprint_folders(self, fingerprint: str | None) -> Iterator[tuple[str, OpenDir]]:
        """(fingerprint, folder opened) of the store's fingerprint folders: names that are
        fingerprints, real folders (a link there is noted as damaged, never followed). Each
        folder is closed once the caller moves on."""
        profiles = self._profiles_dir()
        if profiles is None:
            return
        with profiles:
            try:
                names = [fingerprint] if fingerprint is not None else profiles.names()
            except OSError:
                return
            for fp in names:
                if not _FP_RE.fullmatch(fp):
                    continue  # not pgle's: never read, never touched
                try:
                    folder = profiles.sub(fp, what="store folder")
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except LinkRefused:
                    self.damaged[profiles.child(fp)] = "a symbolic link, not a folder"
                    continue
                except (BadInput, OSError):
                    continue  # a file where a folder goes, or one we may not read
                with folder:
                    yield fp, folder

    def _remote_metadata_files(self, fingerprint: str | None) -> Iterator[tuple[str, Any]]:
        base = self.root / PROFILES
        if fingerprint is not None:
            names = [fingerprint]
        elif base.exists():
            names = sorted(p.name for p in base.iterdir() if _FP_RE.fullmatch(p.name))
        else:
            names = []
        for fp in names:
            folder = base / fp
            if folder.exists():
                for meta in folder.glob("*.json"):
                    yield fp, meta

    def _entry_of(self, raw: Callable[[], bytes], fp: str, name: str, shown: str) -> Entry | None:
        """The entry the metadata `raw()` reads describes, or None (noted in `damaged`)."""
        try:
            return Entry.from_metadata(json.loads(raw()), fp, name)
        except FileNotFoundError:
            return None  # removed by a trim while we listed
        except LinkRefused:
            self.damaged[shown] = "a symbolic link"
        except NotAFile as e:
            self.damaged[shown] = e.reason
        except UnicodeDecodeError:
            self.damaged[shown] = "not UTF-8 text"
        except json.JSONDecodeError:
            self.damaged[shown] = "not JSON"
        except RecursionError:
            self.damaged[shown] = "JSON nested deeper than Python reads"
        except (ValueError, TypeError) as e:
            self.damaged[shown] = str(e)
        except OSError as e:
            self.damaged[shown] = e.strerror or str(e)
        return None

    def _all_entries(self, fingerprint: str | None) -> Iterator[Entry]:
        if self.remote:
            for fp, meta in self._remote_metadata_files(fingerprint):
                entry = self._entry_of(
                    _epath(meta).read_bytes, fp, os.path.basename(str(meta)), str(meta)
                )
                if entry is not None:
                    yield entry
            return
        for fp, folder in self._fingerprint_folders(fingerprint):
            try:
                found = self._entries_in(fp, folder)
            except OSError:
                continue  # a folder we may not list
            yield from found

    def entries(
        self,
        fingerprint: str | None = None,
        *,
        jax: str | None = None,
        device_kind: str | None = None,
    ) -> list[Entry]:
        """Entries, oldest first, optionally for one fingerprint / jax version / device kind.
        Metadata that fails a check is skipped and noted in `damaged`."""
        if fingerprint is not None and not _FP_RE.fullmatch(fingerprint):
            return []
        out = []
        for entry in self._all_entries(fingerprint):
            # `is not None`: an empty --jax or device kind selects that key, not every key.
            if jax is not None and entry.jax != jax:
                continue
            if device_kind is not None and entry.device_kind != device_kind:
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

    def _entry_name(self, entry: Entry, suffix: str) -> str:
        """The name of one of `entry`'s files, its parts checked again (a name is built from
        nothing that did not pass them)."""
        if not _FP_RE.fullmatch(entry.fingerprint):
            check_fingerprint(entry.fingerprint)
            raise BadInput(f"{_shown(entry.fingerprint)} is not a module fingerprint.")
        if not ENTRY_ID_RE.match(entry.entry_id) or suffix not in _SUFFIXES:
            raise BadInput(f"store entry id {_shown(entry.entry_id)} is not an entry id.")
        return f"{entry.entry_id}{suffix}"

    def _entry_file(self, entry: Entry, suffix: str) -> Any:
        """The path of one of `entry`'s files (for messages, and for a remote store)."""
        name = self._entry_name(entry, suffix)
        if self.remote:
            return self.root / PROFILES / entry.fingerprint / name
        return check_inside(
            os.fspath(self.root), self._local(PROFILES, entry.fingerprint, name), "store file"
        )

    @contextlib.contextmanager
    def _entry_folder(self, fingerprint: str, *, create: bool = False) -> Iterator[OpenDir]:
        """STORE/profiles/<fingerprint> opened without following links (made with `create`,
        and its owner named when it is another user); a link there is a LinkRefused."""
        if not _FP_RE.fullmatch(fingerprint):
            check_fingerprint(fingerprint)
            raise BadInput(f"{_shown(fingerprint)} is not a module fingerprint.")
        try:
            profiles = self.dir.sub(PROFILES, create=create, what="store folder")
        except FileNotFoundError:
            raise ProfileError(f"profile store {self.root} holds no profiles.") from None
        with profiles:
            if create:
                self._foreign(profiles, "store folder")
            with profiles.sub(fingerprint, create=create, what="store folder") as folder:
                if create:
                    self._foreign(folder, "store folder")
                yield folder

    @staticmethod
    def _profile_name(folder: OpenDir, entry: Entry) -> str:
        """The entry's profile's name in its folder: text `.pbtxt`, or an old binary `.pb`."""
        text = f"{entry.entry_id}{SUFFIX[TEXT]}"
        try:
            folder.lstat(text)
            return text
        except FileNotFoundError:
            return f"{entry.entry_id}{SUFFIX[BINARY]}"

    def profile_path(self, entry: Entry):
        """The entry's profile file: text `.pbtxt` (pgle writes these), or binary `.pb`."""
        text = self._entry_file(entry, SUFFIX[TEXT])
        binary = self._entry_file(entry, SUFFIX[BINARY])
        if self.remote:
            return text if text.exists() else binary
        return text if os.path.lexists(text) else binary

    def read(self, entry: Entry) -> Profile:
        if self.remote:
            path = self.profile_path(entry)
            fmt = TEXT if str(path).endswith(SUFFIX[TEXT]) else BINARY
            return parse_profile(path.read_bytes(), fmt, str(path))
        self._entry_name(entry, ".json")
        try:
            with self._entry_folder(entry.fingerprint) as folder:
                name = self._profile_name(folder, entry)
                shown = folder.child(name)
                data = folder.read_bytes(name, what="store profile")
        except OSError as e:
            raise ProfileError(
                f"cannot read store profile of {entry.fingerprint}/{entry.entry_id}: "
                f"{e.strerror or e}."
            ) from None
        fmt = TEXT if name.endswith(SUFFIX[TEXT]) else BINARY
        return parse_profile(data, fmt, shown)

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
    def _sweep(self) -> None:
        """Remove what killed writers left (a profile without its metadata, a temp file). Only
        under the exclusive lock, where no writer is between its two renames; only names of
        entry files, in fingerprint folders; never anything else."""
        if self.remote or self._swept_all:
            return
        self._swept_all = True
        for _fp, folder in self._fingerprint_folders(None):
            try:
                with os.scandir(folder.fd) as it:
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
                try:
                    folder.unlink(name)
                    self.swept.append(folder.child(name))
                except OSError:
                    pass  # another user's leftover in a folder we may not write: harmless

    def _entries_in(self, fp: str, folder: OpenDir) -> list[Entry]:
        """The entries of one fingerprint folder already opened, oldest first."""
        out = []
        for name in folder.names():
            if name.endswith(".json") and not name.startswith("."):

                def raw(name: str = name) -> bytes:
                    return folder.read_bytes(name, what="store entry", limit=MAX_METADATA_BYTES)

                entry = self._entry_of(raw, fp, name, folder.child(name))
                if entry is not None:
                    out.append(entry)
        return sorted(out, key=lambda e: e.entry_id)

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
        """Add one module's profile; trim older entries per `policy`. Returns (added, removed).
        The entry added is never among those trimmed (module docstring)."""
        check_fingerprint(fingerprint)
        for what, value in (("jax version", jax), ("device kind", device_kind)):
            if not value.strip():
                raise BadInput(f"the {what} of a store entry cannot be empty.")
        if profile.is_empty():
            raise ProfileError(f"refusing to store an empty profile for module {fingerprint}.")
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        data = encode_profile(profile, TEXT)
        now = now or dt.datetime.now(dt.UTC)
        from pgle.redact import redact_text

        entry = Entry(
            fingerprint=fingerprint,
            entry_id=f"{now.astimezone(dt.UTC).strftime(TIME_FORMAT)}-"
            f"{hashlib.sha256(data).hexdigest()[:12]}",
            jax=jax,
            jaxlib=jaxlib,
            device_kind=device_kind,
            device_count=device_count,
            created=now.isoformat(),
            source=redact_text(source),
            module=module,
            instructions=profile.instruction_count,
        )
        metadata = json.dumps(entry.to_dict(), indent=1).encode()
        with self.locked():
            if self.remote:
                folder_path = self.root / PROFILES / fingerprint
                folder_path.mkdir(parents=True, exist_ok=True)
                self._write_remote(self._entry_file(entry, SUFFIX[TEXT]), data)
                self._write_remote(self._entry_file(entry, ".json"), metadata)
                same = self.entries(fingerprint, jax=jax, device_kind=device_kind)
                removed = self._trimmed(same, entry, policy)
                for old in removed:
                    self._remove_remote(old)
                return entry, removed
            self._sweep()
            with self._entry_folder(fingerprint, create=True) as folder:
                # The profile first, the metadata last: the entry exists once both are in
                # place. Both renamed into the folder opened: a swap cannot redirect them.
                folder.write_atomic(self._entry_name(entry, SUFFIX[TEXT]), data, what="store file")
                folder.write_atomic(self._entry_name(entry, ".json"), metadata, what="store file")
                same = [
                    e
                    for e in self._entries_in(fingerprint, folder)
                    if e.jax == jax and e.device_kind == device_kind
                ]
                removed = self._trimmed(same, entry, policy)
                for old in removed:
                    self._remove(old, folder)
        return entry, removed

    def add_calibration(self, fingerprint: str, entry_id: str, records: list[Calibration]) -> None:
        """Append predicted/measured records next to an existing entry (pgle.store.calibration),
        under the lock; the newest MAX_RECORDS are kept. Refused when the entry is not there."""
        entry = next((e for e in self.entries(fingerprint) if e.entry_id == entry_id), None)
        if entry is None:
            raise ProfileError(f"store {self.root}: no entry {entry_id} for module {fingerprint}.")
        with self.locked():
            old = self.calibration(entry)
            data = calibration.encode(old + list(records))
            if self.remote:
                self._write_remote(self._entry_file(entry, calibration.SUFFIX), data)
                return
            with self._entry_folder(fingerprint) as folder:
                if not any(e.entry_id == entry_id for e in self._entries_in(fingerprint, folder)):
                    raise ProfileError(f"store {self.root}: entry {entry_id} was just removed.")
                name = self._entry_name(entry, calibration.SUFFIX)
                folder.write_atomic(name, data, what="store file")

    def calibration(self, entry: Entry) -> list[Calibration]:
        """The predicted/measured records kept next to `entry` (none: []); a file or line that
        fails a check is noted in `damaged` and skipped."""
        shown = str(self._entry_file(entry, calibration.SUFFIX))
        try:
            if self.remote:
                path = self._entry_file(entry, calibration.SUFFIX)
                if not path.exists():
                    return []
                raw = path.read_bytes()
                if len(raw) > calibration.MAX_BYTES:
                    raise NotAFile(shown, "store file", "larger than pgle writes")
            else:
                with self._entry_folder(entry.fingerprint) as folder:
                    raw = folder.read_bytes(
                        self._entry_name(entry, calibration.SUFFIX),
                        what="store file",
                        limit=calibration.MAX_BYTES,
                    )
        except (FileNotFoundError, ProfileError):
            return []
        except LinkRefused:
            self.damaged[shown] = "a symbolic link"
            return []
        except NotAFile as e:
            self.damaged[shown] = e.reason
            return []
        except OSError as e:
            self.damaged[shown] = e.strerror or str(e)
            return []
        records, bad = calibration.decode(raw)
        if bad:
            self.damaged[shown] = f"{bad} line{'s' if bad > 1 else ''} not a calibration record"
        return records

    @staticmethod
    def _trimmed(same: list[Entry], added: Entry, policy: Policy) -> list[Entry]:
        """What `policy` trims once `added` is in: never `added` itself, which counts as the
        newest (an entry another clock dated later must not push out the one just stored)."""
        others = [e for e in same if e.entry_id != added.entry_id]
        kept = policy.keep - 1
        return others[:-kept] if kept and len(others) > kept else ([] if kept else others)

    def _write_remote(self, path: Any, data: bytes) -> None:
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
        tmp.write_bytes(data)
        tmp.replace(path)

    def _remove_remote(self, entry: Entry) -> None:
        for suffix in _SUFFIXES:
            path = self._entry_file(entry, suffix)
            if path.exists():
                path.unlink()

    def _remove(self, entry: Entry, folder: OpenDir) -> None:
        # Metadata first: the entry disappears at once, its profile after; each unlinked in
        # the folder opened (a link there is removed, never followed).
        for suffix in _SUFFIXES:
            name = self._entry_name(entry, suffix)
            try:
                folder.unlink(name)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise PgleError(
                    f"cannot remove store file {folder.child(name)}: {e.strerror or e}."
                ) from None

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
        written more than `older_than` seconds ago, or of a jax version other than `jax`.
        Only entries pgle recognises (valid metadata in a fingerprint folder) are counted or
        removed; a damaged one is named, never deleted."""
        removed: list[Entry] = []

        def chosen(entries: list[Entry]) -> list[Entry]:
            out = []
            groups: dict[tuple[str, str, str], list[Entry]] = {}
            for e in entries:
                groups.setdefault((e.fingerprint, e.jax, e.device_kind), []).append(e)
            for group in groups.values():
                group.sort(key=lambda e: e.entry_id)
                for i, e in enumerate(group):
                    newer = len(group) - 1 - i
                    if (
                        (keep is not None and newer >= keep)
                        or (older_than is not None and e.age_seconds(now) > older_than)
                        or (jax is not None and e.jax != jax)
                    ):
                        out.append(e)
            return out

        with self.locked(shared=dry_run):
            if self.remote:
                removed = chosen(self.entries())
                for e in removed if not dry_run else []:
                    self._remove_remote(e)
                return removed
            if not dry_run:
                self._sweep()
            for fp, folder in self._fingerprint_folders(None):
                mine = chosen(self._entries_in(fp, folder))
                for e in mine if not dry_run else []:
                    self._remove(e, folder)
                removed += mine
        return removed

    def select(
        self,
        *,
        jax: str,
        device_kind: str,
        policy: Policy | str | None = None,
    ) -> dict[str, list[Entry]]:
        """Per module, the entries XLA would be served under `policy` (newest last)."""
        policy = policy if isinstance(policy, Policy) else parse_policy(policy)
        by_fp: dict[str, list[Entry]] = {}
        for e in self.entries(jax=jax, device_kind=device_kind):
            by_fp.setdefault(e.fingerprint, []).append(e)
        return {fp: es[-policy.keep :] if policy.merge else es[-1:] for fp, es in by_fp.items()}

    def materialize(
        self,
        out: Any,
        *,
        jax: str,
        device_kind: str,
        policy: Policy | str | None = None,
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
            served = self.select(jax=jax, device_kind=device_kind, policy=policy)
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
        if self.remote:
            src = self.profile_path(entries[0])
            suffix = SUFFIX[TEXT] if str(src).endswith(SUFFIX[TEXT]) else SUFFIX[BINARY]
            write_bytes_atomic(os.path.join(tmp, f"{fp}{suffix}"), src.read_bytes())
            return
        self._entry_name(entries[0], ".json")
        with self._entry_folder(fp) as folder:
            name = self._profile_name(folder, entries[0])
            suffix = SUFFIX[TEXT] if name.endswith(SUFFIX[TEXT]) else SUFFIX[BINARY]
            folder.link_or_copy(name, os.path.join(tmp, f"{fp}{suffix}"), what="store profile")
