"""PGLE profiles as data: read, write, validate, directories, content-addressed copies.

A profile is a `tensorflow.profiler.ProfiledInstructionsProto` (docs/xla-facts.md
section 2) in a file ending in `.pb` (binary) or `.pbtxt` (text), or a
directory of `<fingerprint>.pb|.pbtxt` files, one per module (section 3).
XLA decides the format from the extension alone and, since jax 0.5.1, silently
ignores any other extension, so pgle refuses other extensions outright.

This module never imports jax: the CLI reads profiles without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from pgle.atomic import (
    check_writable_target,
    dir_mode,
    replace_directory_atomic,
    write_bytes_atomic,
    write_error,
    write_files_atomic,
)
from pgle.errors import ProfileError, exists_error
from pgle.profiles.proto import binary_columns, locate_corruption, message_class

BINARY, TEXT = "binary", "text"
# XLA takes the extension with tsl::io::Extension (case-sensitive, after the last dot).
EXTENSIONS = {".pb": BINARY, ".pbtxt": TEXT}
SUFFIX = {BINARY: ".pb", TEXT: ".pbtxt"}
# XLA names per-module files after the module's 128-bit fingerprint before
# latency-hiding scheduling, printed as 32 lowercase hex digits (absl::Hex).
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{32}$")
QUALIFIER = "::"


@dataclasses.dataclass
class Profile:
    """The content of one ProfiledInstructionsProto, in file order (duplicates kept)."""

    costs: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    latencies: list[tuple[str, str, float]] = dataclasses.field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.costs and not self.latencies

    @property
    def instruction_count(self) -> int:
        return len(self.costs)

    @property
    def latency_count(self) -> int:
        return len(self.latencies)


def split_qualified(name: str) -> tuple[str | None, str]:
    """`'<fp>::fusion.3'` -> `('<fp>', 'fusion.3')`; a bare name -> `(None, name)`.

    XLA splits on every `::` and keeps an entry only when there are exactly two
    parts and the first is the module's fingerprint; a name with more than one
    `::` therefore matches no module. Such names come back as `('', name)`.
    """
    if QUALIFIER not in name:
        return None, name
    parts = name.split(QUALIFIER)
    if len(parts) != 2:
        return "", name
    return parts[0], parts[1]


# --- format and parsing ----------------------------------------------------------


def _name_of(path: Any) -> str:
    return os.fspath(path) if not isinstance(path, str) else path


def profile_format(path: Any) -> str:
    """'binary' for `.pb`, 'text' for `.pbtxt`; ProfileError for anything else."""
    name = _name_of(path).rstrip("/")
    suffix = os.path.splitext(name)[1]
    fmt = EXTENSIONS.get(suffix)
    if fmt is None:
        shown = f"extension '{suffix}'" if suffix else "no extension"
        raise ProfileError(
            f"profile {name} has {shown}; XLA reads only .pb (binary) and .pbtxt (text) profiles "
            "and silently ignores any other extension (jax >= 0.5.1).",
            hint="Rename it to end in .pb or .pbtxt (extensions are case-sensitive).",
        )
    return fmt


def _looks_like_text(data: bytes) -> bool:
    head = data[:256].lstrip()
    return head.startswith((b"costs", b"latencies", b"#"))


def parse_profile(data: bytes, fmt: str, source: str) -> Profile:
    """Parse `data` in format `fmt`; ProfileError names `source` (and the byte offset, for
    binary). The layouts pgle writes are read as columns; anything else is protobuf's."""
    cols = layout_columns(data, fmt)
    if cols is not None and ascii_names(cols[0]):
        return Profile(costs=_pairs(cols[0], cols[1]))
    return protobuf_profile(data, fmt, source)


def layout_columns(data: bytes, fmt: str, like: Any = None) -> tuple[Any, Any, Any] | None:
    """(names, costs, the binary layout or None) as numpy columns, for the layouts pgle writes:
    text_format's (canonical.text_columns, the one fast text reader) and the canonical binary
    one (proto.binary_columns; `like`: a previous file's layout); None for anything else,
    which protobuf reads. Both readers account for every byte of their layout (entries back to
    back, tags, lengths): with ASCII names nothing is left for protobuf to reject."""
    if fmt == TEXT:
        from pgle.profiles.canonical import text_columns  # numpy: only where profiles are read

        got = text_columns(data)
        return None if got is None else (got[0], got[1], None)
    return binary_columns(data, like) if fmt == BINARY and data else None


def ascii_names(names: Any) -> bool:  # a numpy bytes array
    return not names.size or bool((names.view("u1") < 0x80).all())


def _pairs(names: Any, costs: Any) -> list[tuple[str, float]]:
    """(name, cost) pairs of numpy columns (names: UTF-8 bytes without NUL)."""
    return [(b.decode("utf-8"), c) for b, c in zip(names.tolist(), costs.tolist(), strict=True)]


def protobuf_profile(data: bytes, fmt: str, source: str) -> Profile:
    """`data` as protobuf reads it (the reference every faster reader matches)."""
    if fmt == BINARY:
        return _profile_of(_parse_binary(data, source))
    if fmt == TEXT:
        return _profile_of(_parse_text(data, source))
    raise ValueError(f"unknown profile format {fmt!r}")


def _profile_of(msg: Any) -> Profile:  # a ProfiledInstructionsProto
    return Profile(
        costs=[(c.name, c.cost_us) for c in msg.costs],
        latencies=[(lat.source, lat.target, lat.latency_us) for lat in msg.latencies],
    )


# Leading bytes of files that get a profile's name by mistake (a plot, an archive, a binary).
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"\x7fELF", "an ELF binary"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


def _is_binary_profile(data: bytes) -> bool:
    """True only when the bytes parse as a binary profile with entries: protobuf keeps the
    unknown fields of random bytes, so "it parsed" alone says nothing."""
    from google.protobuf.message import DecodeError

    try:
        msg = message_class().FromString(data)
    except (DecodeError, ValueError):
        return False
    return bool(len(msg.costs) or len(msg.latencies))


def _parse_binary(data: bytes, source: str) -> Any:  # a ProfiledInstructionsProto
    from google.protobuf.message import DecodeError

    try:
        return message_class().FromString(data)
    except DecodeError as e:
        err = locate_corruption(data)
        where = f"at byte {err.offset} of {len(data)} ({err.what})" if err else f"({e})"
        hint = "Regenerate the profile, or check that the copy is complete."
        if _looks_like_text(data):
            hint = "It looks like the text format: rename it to .pbtxt."
        raise ProfileError(
            f"profile {source} is not a valid binary ProfiledInstructionsProto: "
            f"parsing failed {where}.",
            hint=hint,
        ) from None


def _parse_text(data: bytes, source: str) -> Any:  # a ProfiledInstructionsProto
    from google.protobuf import text_format

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        kind = next((name for magic, name in _MAGIC if data.startswith(magic)), None)
        if kind:
            hint = f"It is {kind}, not a profile."
        elif _is_binary_profile(data):
            hint = "It is a binary profile: rename it to .pb."
        else:
            hint = "Save it as UTF-8 text, or regenerate the profile."
        raise ProfileError(
            f"profile {source} is not valid UTF-8 text: byte {e.start} cannot be decoded.",
            hint=hint,
        ) from None
    msg = message_class()()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as e:
        raise ProfileError(
            f"profile {source} is not a valid text ProfiledInstructionsProto: {e}.",
            hint="Fix the line shown, or regenerate the profile.",
        ) from None
    return msg


def encode_profile(profile: Profile, fmt: str) -> bytes:
    """Serialize `profile` as `fmt` ('binary' or 'text'); entries keep their order."""
    if fmt == TEXT:
        from pgle.profiles.canonical import text_bytes

        fast = text_bytes(profile.costs, profile.latencies)
        if fast is not None:
            return fast
    msg = message_class()()
    costs, latencies = msg.costs, msg.latencies
    for name, cost in profile.costs:
        costs.add(name=name, cost_us=cost)
    for src, dst, lat in profile.latencies:
        latencies.add(source=src, target=dst, latency_us=lat)
    if fmt == BINARY:
        return bytes(msg.SerializeToString(deterministic=True))
    if fmt == TEXT:
        from google.protobuf import text_format

        return str(text_format.MessageToString(msg)).encode("utf-8")
    raise ValueError(f"unknown profile format {fmt!r}")


# --- files ---------------------------------------------------------------------------


def _epath(path: Any) -> Any:  # an etils.epath.Path or a pathlib.Path
    """etils.epath for URLs (gs://, ...), pathlib for local paths: importing etils.epath
    costs ~0.1 s, more than a local inspect/diff/convert does otherwise (issue 16)."""
    if not _is_remote(path):
        return pathlib.Path(path)
    from etils import epath

    return epath.Path(path)


def _read_bytes(path: Any, what: str = "profile") -> bytes:
    if not _is_remote(path):
        try:
            st = os.stat(path)
            mode = st.st_mode
        except OSError:
            mode = stat.S_IFREG  # the read below says why, in its own words
        else:
            if stat.S_ISREG(mode):
                from pgle.profiles.bounded import check_profile_size

                check_profile_size(_name_of(path), st.st_size, what)
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            from pgle.profiles.bounded import describe_mode

            # A FIFO would block the read forever, /dev/zero never end it.
            raise ProfileError(
                f"{what} {_name_of(path)} is not a regular file ({describe_mode(mode)})."
            )
    try:
        data: bytes = _epath(path).read_bytes()
        return data
    except FileNotFoundError:
        raise ProfileError(
            f"{what} {_name_of(path)} does not exist.",
            hint="Check the path, or run `pgle collect` to create it.",
        ) from None
    except IsADirectoryError:
        raise ProfileError(f"{what} {_name_of(path)} is a directory, not a file.") from None
    except PermissionError:
        raise ProfileError(
            f"{what} {_name_of(path)} is not readable (permission denied).",
            hint="Fix its permissions.",
        ) from None
    except OSError as e:
        raise ProfileError(f"cannot read {what} {_name_of(path)}: {e.strerror or e}.") from None


def _check_path(path: Any, what: str) -> None:
    """A Python caller's wrong type (an int, a list, None) is one BadInput line, not a
    TypeError from deep inside (docs/reliability.md)."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        if type(path).__module__.startswith("etils"):
            return
        raise ProfileError(
            f"{what} must be a path (str or os.PathLike), not {type(path).__name__} {path!r:.60}."
        )


def read_profile(path: Any) -> Profile:
    """Read one profile file (format from its extension)."""
    _check_path(path, "read_profile: path")
    fmt = profile_format(path)
    return parse_profile(_read_bytes(path), fmt, _name_of(path))


def write_profile(
    profile_or_bytes: Profile | bytes,
    path: Any,
    *,
    force: bool = False,
    companions: dict[Any, bytes] | None = None,
) -> pathlib.Path:
    """Write atomically in the format of `path`'s extension; refuse to overwrite without `force`.

    Bytes are taken as a serialized *binary* profile (what jaxlib returns); they
    are validated first, so pgle never writes a file XLA would fail to parse.
    `companions` (path -> bytes, e.g. the manifest) are written with it: all or none.
    """
    _check_path(path, "write_profile: path")
    if not isinstance(profile_or_bytes, (Profile, bytes, bytearray, memoryview)):
        raise ProfileError(
            "write_profile: profile_or_bytes must be a Profile or bytes, not "
            f"{type(profile_or_bytes).__name__}."
        )
    fmt = profile_format(path)
    target = pathlib.Path(path).absolute()
    check_writable_target(target, force=force, what="profile")
    if isinstance(profile_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(profile_or_bytes)
        profile = parse_profile(data, BINARY, "<bytes to write>")
        if fmt != BINARY:
            data = encode_profile(profile, fmt)
    else:
        data = encode_profile(profile_or_bytes, fmt)
    if companions:
        write_files_atomic([(target, data), *companions.items()])
        return target
    return write_bytes_atomic(target, data)


# --- sources: a file or a per-module directory ---------------------------------------------


@dataclasses.dataclass
class ProfileSource:
    """What `--xla_gpu_pgle_profile_file_or_directory_path` would point XLA at."""

    path: pathlib.Path  # absolute (an epath.Path for gs://)
    kind: str  # 'file' | 'directory'
    files: list[pathlib.Path]  # the file, or the effective <fingerprint>.pb|.pbtxt files
    instruction_count: int  # summed over files
    latency_count: int
    sha256: str  # file sha256; directory: sha256 over sorted (name, file-sha) pairs
    modules: dict[str, Profile]  # fingerprint -> profile; {'': profile} for a file
    # Directory only: files XLA never reads because `<fp>.pbtxt` wins over `<fp>.pb`,
    # and names that are not `<32 lowercase hex>.pb|.pbtxt` (XLA never looks them up).
    shadowed: list[pathlib.Path] = dataclasses.field(default_factory=list)
    ignored: list[str] = dataclasses.field(default_factory=list)
    # Directory only: files that do not parse but that XLA gets past, as (path, why): a
    # `<fp>.pbtxt` it logs a parse error for and then reads `<fp>.pb` instead, or a shadowed
    # `<fp>.pb` it never reads.
    unreadable: list[tuple[pathlib.Path, str]] = dataclasses.field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One line per file XLA gets past without reading it (`unreadable`)."""
        out = []
        for path, why in self.unreadable:
            if path.suffix == ".pbtxt":
                out.append(
                    f"{path} {why}; XLA logs a parse error for it and reads "
                    f"{path.stem}.pb instead, and so does pgle."
                )
            else:
                out.append(
                    f"{path} {why}; XLA never reads it, since {path.stem}.pbtxt is read first."
                )
        return out

    @property
    def empty_modules(self) -> list[str]:
        return [fp for fp, p in self.modules.items() if p.is_empty()]

    def is_empty(self) -> bool:
        return all(p.is_empty() for p in self.modules.values())

    def to_dict(self) -> dict[str, Any]:
        """For `Report.profile`."""
        return {
            "path": str(self.path),
            "kind": self.kind,
            "files": [str(f) for f in self.files],
            "instruction_count": self.instruction_count,
            "latency_count": self.latency_count,
            "sha256": self.sha256,
            "modules": {
                fp: {"instruction_count": p.instruction_count, "latency_count": p.latency_count}
                for fp, p in self.modules.items()
            },
            "shadowed": [str(f) for f in self.shadowed],
            "ignored": list(self.ignored),
            "unreadable": [{"path": str(f), "error": why} for f, why in self.unreadable],
        }


def _is_remote(path: Any) -> bool:
    return "://" in _name_of(path)


def _absolute(path: Any) -> Any:  # an etils.epath.Path or a pathlib.Path
    if _is_remote(path):
        return _epath(path)
    return pathlib.Path(os.path.abspath(os.fspath(path)))


def _directory_digest(pairs: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, sha in sorted(pairs):
        h.update(f"{name}\0{sha}\n".encode())
    return h.hexdigest()


def fingerprint_file_name(name: str) -> tuple[str, str] | None:
    """`'<32 hex>.pb'` -> `('<32 hex>', 'binary')`; None for any other name."""
    stem, suffix = os.path.splitext(name)
    fmt = EXTENSIONS.get(suffix)
    if fmt is None or not FINGERPRINT_RE.match(stem):
        return None
    return stem, fmt


def load_profile_source(path: Any) -> ProfileSource:
    """Load and validate a profile file or per-module directory.

    Empty profiles are returned as such (callers decide whether that is fatal).
    """
    if path is None or (isinstance(path, str) and path == ""):
        raise ProfileError("no profile path given.")
    _check_path(path, "profile path")
    if _name_of(path) == "":
        raise ProfileError("no profile path given.")
    p = _epath(path)
    try:
        is_dir = p.is_dir()
        exists = is_dir or p.exists()
    except PermissionError:
        raise ProfileError(
            f"profile {_name_of(path)} is not accessible (permission denied)."
        ) from None
    except OSError as e:
        raise ProfileError(f"cannot access profile {_name_of(path)}: {e.strerror or e}.") from None
    if not exists:
        raise ProfileError(
            f"profile {_name_of(path)} does not exist.",
            hint="Check the path, or run `pgle collect` to create it.",
        )
    if is_dir:
        return _load_directory(path)
    fmt = profile_format(path)
    return _file_source(path, fmt, _read_bytes(path))


def _file_source(path: Any, fmt: str, data: bytes) -> ProfileSource:
    profile = parse_profile(data, fmt, _name_of(path))
    abs_path = _absolute(path)
    return ProfileSource(
        path=abs_path,
        kind="file",
        files=[abs_path],
        instruction_count=profile.instruction_count,
        latency_count=profile.latency_count,
        sha256=hashlib.sha256(data).hexdigest(),
        modules={"": profile},
    )


def _load_directory(path: Any) -> ProfileSource:
    try:
        entries = sorted(_epath(path).iterdir(), key=lambda e: e.name)
    except PermissionError:
        raise ProfileError(
            f"profile directory {_name_of(path)} is not readable (permission denied).",
            hint="Fix its permissions.",
        ) from None
    p = _epath(path)
    listing = [(e.name, e.is_dir()) for e in entries]
    return _directory_source(_absolute(path), listing, lambda name: _read_bytes(p / name), shown=p)


def source_from_reader(
    path: Any, listing: list[tuple[str, bool]] | None, read: Callable[[str], bytes]
) -> ProfileSource:
    """A ProfileSource named `path` from bytes that `read` gives: for a file (`listing` None)
    `read("")`, for a per-module directory `read(name)` of each name in `listing` ((name,
    is_directory) pairs). How a caller reads foreign files its own way (pgle.jobs.rank_data:
    without following links, bounded)."""
    if listing is not None:
        return _directory_source(_absolute(path), listing, read)
    fmt = profile_format(path)
    return _file_source(path, fmt, read(""))


def by_fingerprint(
    listing: list[tuple[str, bool]],
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """A folder's (name, is_directory) entries -> ({fingerprint: {format: file name}}, the
    names ignored: not `<fingerprint>.pb[txt]`, or a folder)."""
    by_fp: dict[str, dict[str, str]] = {}
    ignored: list[str] = []
    for name, is_dir in listing:
        parsed = fingerprint_file_name(name)
        if parsed is None or is_dir:
            ignored.append(name + ("/" if is_dir else ""))
            continue
        by_fp.setdefault(parsed[0], {})[parsed[1]] = name
    return by_fp, ignored


def _directory_source(
    root: Any,
    listing: list[tuple[str, bool]],
    read: Callable[[str], bytes],
    *,
    shown: Any = None,
) -> ProfileSource:
    path = root if shown is None else shown  # as the user named it, in messages
    by_fp, ignored = by_fingerprint(listing)
    if not by_fp:
        seen = (
            f" (it ignored: {', '.join(ignored[:10])}{', ...' if len(ignored) > 10 else ''})"
            if ignored
            else " (it is empty)"
        )
        raise ProfileError(
            f"profile directory {_name_of(path)} holds no <fingerprint>.pb or "
            f"<fingerprint>.pbtxt file{seen}; XLA looks up each module by its 32-hex fingerprint.",
            hint="Collect one with `pgle collect --per-module`, or pass a single profile file.",
        )
    modules: dict[str, Profile] = {}
    files: list[pathlib.Path] = []
    shadowed: list[pathlib.Path] = []
    unreadable: list[tuple[pathlib.Path, str]] = []
    pairs: list[tuple[str, str]] = []
    for fp in sorted(by_fp):
        forms = by_fp[fp]
        readable: dict[str, Profile] = {}
        failed: dict[str, ProfileError] = {}
        for form, entry in forms.items():
            data = read(entry)
            pairs.append((entry, hashlib.sha256(data).hexdigest()))
            try:
                readable[form] = parse_profile(data, form, _name_of(path / entry))
            except ProfileError as e:
                failed[form] = e
        # XLA tries <fp>.pbtxt first and reads <fp>.pb when the text file is missing or does
        # not parse (it logs the parse error first; seen on every jax 0.4.35-0.12.0.1 in the
        # XLA:GPU lane, scenario dir-pbtxt-fallback).
        fmt = TEXT if TEXT in readable else BINARY
        if fmt not in readable:  # nothing XLA could read for this module: the user must know
            raise failed[TEXT if TEXT in failed and BINARY not in forms else BINARY]
        modules[fp] = readable[fmt]
        files.append(root / forms[fmt])
        for form, entry in forms.items():
            if form == fmt:
                continue
            if form == BINARY:
                shadowed.append(root / entry)
            if form in failed:
                # What the parse error says about the file, without its name and final period.
                why = failed[form].message.removeprefix(f"profile {_name_of(path / entry)} ")
                unreadable.append((root / entry, why.rstrip(".")))
    return ProfileSource(
        path=root,
        kind="directory",
        files=files,
        instruction_count=sum(p.instruction_count for p in modules.values()),
        latency_count=sum(p.latency_count for p in modules.values()),
        sha256=_directory_digest(pairs),
        modules=modules,
        shadowed=shadowed,
        ignored=ignored,
        unreadable=unreadable,
    )


# --- content-addressed copies ----------------------------------------------------------------


def content_addressed_name(source: ProfileSource) -> str:
    if source.kind == "file":
        return f"profile-{source.sha256[:16]}{SUFFIX[profile_format(source.files[0])]}"
    return f"profiles-{source.sha256[:16]}"


def content_addressed_copy(source: ProfileSource, store_dir: Any) -> pathlib.Path:
    """Copy `source` to `store_dir/profile-<sha16>.<ext>` or `store_dir/profiles-<sha16>/`.

    Why: XLA's compilation-cache key hashes the flag string, not the profile, so
    a profile regenerated at the same path would hit a stale cache entry; a path
    that names the content cannot. Atomic (temp + rename) and idempotent.
    """
    store = pathlib.Path(os.path.abspath(os.fspath(store_dir)))
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ProfileError(f"cannot create profile store {store}: {e.strerror or e}.") from None
    target = store / content_addressed_name(source)
    if source.kind == "file":
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == source.sha256:
            return target
        data = _read_bytes(source.files[0])
        if hashlib.sha256(data).hexdigest() != source.sha256:
            raise ProfileError(
                f"profile {source.path} changed while pgle was reading it.",
                hint="Wait until it is fully written, then retry.",
            )
        # Anything else at a content-addressed name is corrupt: replace it. A copy is never
        # readable by more users than the profile it copies.
        return write_bytes_atomic(target, data, mode=_source_mode(source.files[0]))
    if target.is_dir() and _same_directory(target, source.sha256):
        return target
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=store))
    try:
        # Every file pgle read (the digest covers them all): the copy reads the way the
        # original does, an unparsable <fp>.pbtxt included.
        for f in dict.fromkeys(source.files + source.shadowed + [p for p, _ in source.unreadable]):
            write_bytes_atomic(tmp / f.name, _read_bytes(f), mode=_source_mode(f))
        os.chmod(tmp, dir_mode())  # mkdtemp makes it private; other users run with it too
        if _directory_digest(_file_pairs(tmp)) != source.sha256:
            raise ProfileError(
                f"profile directory {source.path} changed while pgle was reading it.",
                hint="Wait until it is fully written, then retry.",
            )
        if target.exists():
            # A stale or partial copy under the content's name: move it aside, then swap.
            aside = pathlib.Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=store)
            )
            os.replace(target, aside / target.name)
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process (another rank) won the race; fine if it wrote the same content.
            if target.is_dir() and _same_directory(target, source.sha256):
                return target
            raise
    except OSError as e:
        raise write_error(target, e, "profile copy") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _source_mode(path: Any) -> int | None:
    """A local file's permission bits (a copy gets no more), None for a remote one."""
    if _is_remote(path):
        return None
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _file_pairs(directory: pathlib.Path) -> list[tuple[str, str]]:
    return [
        (f.name, hashlib.sha256(f.read_bytes()).hexdigest())
        for f in directory.iterdir()
        if fingerprint_file_name(f.name) and f.is_file()
    ]


def _same_directory(directory: pathlib.Path, sha256: str) -> bool:
    try:
        return _directory_digest(_file_pairs(directory)) == sha256
    except OSError:
        return False


# --- forms: single file, fingerprint-qualified file, directory ----------------------------------


def qualified_fingerprints(profile: Profile) -> list[str]:
    """Fingerprints named by `<fp>::` qualifiers (valid 32-hex ones), in first-seen order."""
    seen: dict[str, None] = {}
    for name in [n for n, _ in profile.costs] + [s for s, _, _ in profile.latencies]:
        fp, _ = split_qualified(name)
        if fp and FINGERPRINT_RE.match(fp):
            seen.setdefault(fp, None)
    return list(seen)


def module_view(profile: Profile, fingerprint: str) -> Profile:
    """What XLA keeps of `profile` for the module `fingerprint` (gpu_hlo_schedule.cc
    FilterWithFingerprint): bare names, plus `<fingerprint>::` names with the prefix
    stripped, in file order. Latencies follow the same rule on both ends."""

    def keep(name: str) -> str | None:
        fp, bare = split_qualified(name)
        if fp is None:
            return name
        return bare if fp == fingerprint else None

    costs = [(n2, c) for n, c in profile.costs if (n2 := keep(n)) is not None]
    latencies = []
    for s, t, lat in profile.latencies:
        s2, t2 = keep(s), keep(t)
        if s2 is not None and t2 is not None:
            latencies.append((s2, t2, lat))
    return Profile(costs=costs, latencies=latencies)


def qualify_profile(profile: Profile, fingerprint: str) -> Profile:
    """Prefix every bare name with `<fingerprint>::` (qualified names are kept as they are)."""

    def q(name: str) -> str:
        return name if QUALIFIER in name else f"{fingerprint}{QUALIFIER}{name}"

    return Profile(
        costs=[(q(n), c) for n, c in profile.costs],
        latencies=[(q(s), q(t), lat) for s, t, lat in profile.latencies],
    )


def check_fingerprint(fp: str) -> str:
    if not FINGERPRINT_RE.match(fp or ""):
        raise ProfileError(
            f"'{fp}' is not a module fingerprint: XLA names modules by 32 lowercase hex digits.",
            hint="Copy it from `pgle inspect` or the log line "
            "'Fingerprint before LHS for module ...'.",
        )
    return fp


def own_output_entry(path: pathlib.Path) -> bool:
    """A file pgle writes in a directory output: `<fingerprint>.pb|.pbtxt` or manifest.json,
    a regular file (a link or a folder is someone's work)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    return path.name == "manifest.json" or fingerprint_file_name(path.name) is not None


def _overlap(out: str, src: str) -> str | None:
    """How the output directory `out` overlaps the input `src` (both resolved), or None."""
    if out == src:
        return "is"
    if out.startswith(src.rstrip(os.sep) + os.sep):
        return "is inside"
    if src.startswith(out.rstrip(os.sep) + os.sep):
        return "holds"
    return None


def check_directory_output(
    path: Any, *, force: bool, inputs: Iterable[Any] = (), what: str = "profile directory"
) -> pathlib.Path:
    """Refuse, before any work, a directory output pgle must not replace (exit 2).

    OUT may be new or empty; with `force`, also a directory pgle recognises as its own output
    (nothing but `<fingerprint>.pb|.pbtxt` files and manifest.json: a profile directory, a store
    view). Anything else is refused, naming the files that would be lost. OUT may never be an
    input, lie inside one or hold one (`convert pm . --force`, `store get S S --force`)."""
    p = pathlib.Path(os.path.abspath(os.fspath(path)))
    real_out = os.path.realpath(p)
    for src in inputs:
        if _is_remote(src):
            continue
        how = _overlap(real_out, os.path.realpath(os.path.abspath(os.fspath(src))))
        if how:
            raise ProfileError(
                f"the output {_name_of(path)} {how} the input {_name_of(src)}; pgle "
                "never replaces a folder it reads from.",
                hint="Choose an output outside the inputs.",
            )
    if p.exists() and not p.is_dir():
        raise ProfileError(
            f"{p} exists and is not a directory.",
            hint="Choose another output path, or end the name in .pb/.pbtxt for one file.",
        )
    if p.is_dir():
        try:
            names = sorted(os.listdir(p))
        except OSError as e:
            raise ProfileError(f"cannot read {what} {p}: {e.strerror or e}.") from None
        foreign = [n for n in names if not own_output_entry(p / n)]
        if foreign:
            shown = ", ".join(foreign[:5]) + (
                f", and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            )
            raise ProfileError(
                f"{p} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} that are not "
                f"part of a profile directory and would be lost ({shown}); --force replaces only a "
                "directory of <fingerprint>.pb|.pbtxt files and its manifest.json.",
                hint="Choose another output, or move those files away.",
            )
        if names and not force:
            raise exists_error(f"{what} {p} already exists and is not empty.", ProfileError)
    check_writable_target(p, force=True, what="profile directory")  # its folder must take it
    return p


def write_profile_directory(
    modules: dict[str, Profile],
    path: Any,
    *,
    fmt: str = BINARY,
    force: bool = False,
    inputs: Iterable[Any] = (),
) -> pathlib.Path:
    """Write `<fingerprint>.pb|.pbtxt` per module into `path`, atomically (temp dir + rename).

    Refuses a non-empty existing `path` without `force`, and with it anything but pgle's own
    output (check_directory_output); the old directory is replaced as a whole, so XLA never
    sees a half-written mix. `inputs`: what the modules were read from (never replaced).
    """
    if fmt not in SUFFIX:
        raise ValueError(f"unknown profile format {fmt!r}")
    if not modules:
        raise ProfileError(
            "no module profiles to write: a directory profile needs at least one "
            "<fingerprint> file."
        )
    for fp in modules:
        check_fingerprint(fp)
    path = check_directory_output(path, force=force, inputs=inputs)

    def fill(tmp: pathlib.Path) -> None:
        for fp, profile in modules.items():
            write_bytes_atomic(tmp / f"{fp}{SUFFIX[fmt]}", encode_profile(profile, fmt))

    return replace_directory_atomic(path, fill)


# --- `pgle convert` ------------------------------------------------------------------------------


def output_kind(path: Any) -> str:
    """'file' for a .pb/.pbtxt name, 'directory' for an existing folder, a trailing slash or no
    extension."""
    name = os.fspath(path)
    if os.path.isdir(name) or name.endswith(("/", os.sep)) or not os.path.splitext(name)[1]:
        return "directory"
    profile_format(name)  # other extensions: the clear error
    return "file"
