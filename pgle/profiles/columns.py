"""Profiles as numpy columns (names, costs), read in bulk: the input side of `pgle merge`.

Why: merging hundreds of ranks' profiles through Python tuples cost ~9x the input in memory
and 4x jaxlib's time once the fast path (binary files of identical names) did not apply:
names differing by a few per rank, text profiles, per-module folders (issue 25). Here each
file becomes two arrays, whatever its format: the layouts pgle writes through
`files.layout_columns` (what `read_profile` reads them with), anything else (latencies,
escapes, comments, other spacing) through protobuf; files with latencies return None and the
caller takes the general path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any, Literal, overload

import numpy as np

from pgle.errors import ProfileError
from pgle.profiles.files import (
    BINARY,
    TEXT,
    _absolute,
    _epath,
    _is_remote,
    _name_of,
    _parse_binary,
    _read_bytes,
    ascii_names,
    by_fingerprint,
    layout_columns,
    profile_format,
    protobuf_profile,
)


@dataclasses.dataclass
class FileColumns:
    path: Any  # absolute
    names: np.ndarray  # bytes (S<w>), UTF-8, no NUL
    costs: np.ndarray  # float64
    layout: Any = None  # proto.ColumnLayout of a binary file: the next rank's may reuse it
    size: int = 0  # the file's bytes


def read_file_columns(path: Any, like: Any = None) -> FileColumns | None:
    """A profile file as columns; None when it holds latencies (or a name with a NUL byte,
    which numpy's bytes type cannot hold): the general path reads those. Errors (missing,
    unreadable, corrupt) are load_profile_source's, word for word."""
    fmt = profile_format(path)
    data = _read_bytes(path)
    cols = layout_columns(data, fmt, like)
    if fmt == BINARY and data and (cols is None or not ascii_names(cols[0])):
        # What the column reader leaves to protobuf is parsed by protobuf first: what it
        # rejects is an error, in its words.
        _parse_binary(data, _name_of(path))
    if cols is None:
        # Another layout (escapes, comments, other spacing, ...): protobuf's reading, then
        # columns of it.
        profile = protobuf_profile(data, fmt, _name_of(path))
        if profile.latencies or any("\0" in name for name, _ in profile.costs):
            return None
        encoded = [name.encode("utf-8") for name, _ in profile.costs]
        width = max((len(b) for b in encoded), default=1) or 1
        costs = np.array([c for _, c in profile.costs], np.float64)
        cols = (np.array(encoded, f"S{width}"), costs, None)
    return FileColumns(_absolute(path), cols[0], cols[1], cols[2], len(data))


@dataclasses.dataclass
class DirectoryColumns:
    """A per-module folder: the files XLA reads, as columns, by fingerprint."""

    path: Any
    modules: dict[str, FileColumns]
    shadowed: list[str]
    ignored: list[str]
    size: int  # bytes of the files read


def read_directory_columns(
    path: Any, likes: dict[str, Any] | None = None
) -> DirectoryColumns | None:
    """Every `<fp>.pbtxt|.pb` XLA would read in the folder (`.pbtxt` wins), as columns; None
    when one of them needs the general path. `likes`: fingerprint -> a previous folder's
    binary layout of that module (ranks of one program share it)."""
    if _is_remote(path):
        entries = sorted((e.name, e.is_dir()) for e in _epath(path).iterdir())
    else:
        try:
            with os.scandir(os.fspath(path)) as it:
                entries = sorted((e.name, e.is_dir()) for e in it)
        except PermissionError:
            raise ProfileError(
                f"profile directory {_name_of(path)} is not readable (permission denied).",
                hint="Fix its permissions.",
            ) from None
    by_fp, ignored = by_fingerprint(entries)
    if not by_fp:
        return None  # load_profile_source says what is wrong
    root = _absolute(path)
    modules, shadowed, size = {}, [], 0
    for fp in sorted(by_fp):
        forms = by_fp[fp]
        fmt = TEXT if TEXT in forms else BINARY
        try:
            for other_fmt, name in forms.items():
                if other_fmt != fmt:
                    shadowed.append(name)
                    read_file_columns(root / name)
            cols = read_file_columns(root / forms[fmt], (likes or {}).get(fp))
        except ProfileError:
            if len(forms) == 1:
                raise
            # XLA reads <fp>.pb when <fp>.pbtxt does not parse, and never reads a shadowed
            # .pb: the general path (files._load_directory) says which file it used and why.
            return None
        if cols is None:
            return None
        modules[fp] = cols
        size += cols.size
    return DirectoryColumns(root, modules, shadowed, ignored, size)


# --- many inputs: read in worker processes ----------------------------------------------------

_LIKES: dict[str, Any] = {}  # per process: the last binary layout of each module ("" for files)


def _read_file(path: Any) -> FileColumns | None:
    cols = read_file_columns(path, _LIKES.get(""))
    if cols is not None and cols.layout is not None:
        _LIKES[""] = cols.layout
        cols.layout = None  # stays in this process (a worker's result crosses a pipe)
    return cols


def _read_directory(path: Any) -> DirectoryColumns | None:
    folder = read_directory_columns(path, _LIKES)
    if folder is not None:
        for fp, c in folder.modules.items():
            if c.layout is not None:
                _LIKES[fp] = c.layout
                c.layout = None
    return folder


# What crosses the pipe from a worker: a rank's names are mostly those of the ranks before it
# (the same program), so a worker sends a module's names whole once, then the positions where
# they differ from the names it last sent whole (issue 25: the names were four fifths of the
# bytes pickled, and the pipe's copies a third of the time of a 800-rank merge on 2 cores).
_SENT: dict[str, np.ndarray] = {}  # per worker: module ("" for files) -> names last sent whole


@dataclasses.dataclass
class _NamesDelta:
    key: str
    at: np.ndarray  # positions whose name differs from the names last sent whole
    names: np.ndarray  # their names


def _compact(key: str, cols: FileColumns) -> None:
    """In a worker: `cols.names` as a _NamesDelta when few differ from the last sent whole."""
    ref = _SENT.get(key)
    if ref is not None and ref.size == cols.names.size:
        wrong = np.flatnonzero(cols.names != ref)
        if wrong.size * 20 <= ref.size:
            cols.names = _NamesDelta(key, wrong, cols.names[wrong])  # type: ignore[assignment]
            return
    _SENT[key] = cols.names


def _expand(worker: int, cols: FileColumns, sent: dict[tuple[int, str], np.ndarray]) -> None:
    """In the caller: the names a worker sent, whole again (the other half of _compact)."""
    delta = cols.names
    if not isinstance(delta, _NamesDelta):
        return
    ref = sent[(worker, delta.key)]
    # A wider name than the reference holds: widen first (assigning would cut it short).
    names = ref.astype(delta.names.dtype) if delta.names.itemsize > ref.itemsize else ref.copy()
    names[delta.at] = delta.names
    cols.names = names


def _start_worker() -> None:
    _SENT.clear()
    # glibc gives blocks of 128 KiB and more back to the kernel as soon as they are freed
    # (mmap, heap trimming): each file's temporaries (a few MB) then fault their pages in
    # again, one at a time: 400,000 faults, a third of the workers' time on 800 ranks (issue
    # 25). A worker keeps them instead; its memory stays about the largest file's temporaries
    # and goes back when it exits. Elsewhere than glibc there is no mallopt: nothing to do.
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (its largest value on 64-bit glibc)
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD


def _read_file_in_worker(path: Any) -> tuple[int, FileColumns | None]:
    cols = _read_file(path)
    if cols is not None:
        _compact("", cols)
    return os.getpid(), cols


def _read_directory_in_worker(path: Any) -> tuple[int, DirectoryColumns | None]:
    folder = _read_directory(path)
    if folder is not None:
        for fp, c in folder.modules.items():
            _compact(fp, c)
    return os.getpid(), folder


def _whole(worker: int, result: Any, sent: dict[tuple[int, str], np.ndarray]) -> Any:
    if result is None:
        return None
    pairs = result.modules.items() if isinstance(result, DirectoryColumns) else [("", result)]
    for key, cols in pairs:
        if isinstance(cols.names, _NamesDelta):
            _expand(worker, cols, sent)
        else:
            sent[(worker, key)] = cols.names
    return result


def _fork_is_safe() -> bool:
    """fork() only from a single-threaded process that has not loaded jax (jaxlib's threads
    are invisible to `threading`; a forked copy of a multithreaded process can deadlock). The
    CLI never imports jax; a notebook calling pgle's API may have. (The same rule as
    pgle.evidence.events, which does not import this module.)"""
    import sys
    import threading

    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and not any(name in sys.modules for name in ("jax", "jaxlib"))
    )


@overload
def read_all(paths: list[Any], directories: Literal[False]) -> Iterator[FileColumns | None]: ...
@overload
def read_all(paths: list[Any], directories: Literal[True]) -> Iterator[DirectoryColumns | None]: ...
def read_all(
    paths: list[Any], directories: bool
) -> Iterator[FileColumns | DirectoryColumns | None]:
    """The inputs' columns, in order (None where one needs the general path). With many inputs
    and several cores, files are read and parsed in worker processes, a few inputs ahead of the
    caller (reading is most of a large merge; jaxlib's runs on one thread). Errors are the
    reader's, raised here in input order."""
    import collections

    read = _read_directory if directories else _read_file
    workers = min(os.cpu_count() or 1, 8)
    if len(paths) < 16 or workers < 2 or not _fork_is_safe():
        _LIKES.clear()
        yield from (read(p) for p in paths)
        return
    import concurrent.futures
    import multiprocessing

    in_worker = _read_directory_in_worker if directories else _read_file_in_worker
    ahead = 4 * workers  # results waiting at most: memory stays a few inputs
    sent: dict[tuple[int, str], np.ndarray] = {}
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker
    ) as pool:
        pending: collections.deque[Any] = collections.deque()
        queued = iter(paths)
        for p in queued:
            pending.append(pool.submit(in_worker, p))
            if len(pending) >= ahead:
                break
        while pending:
            # In input order: a worker's names sent whole come before its deltas on them.
            worker, result = pending.popleft().result()
            nxt = next(queued, None)
            if nxt is not None:
                pending.append(pool.submit(in_worker, nxt))
            yield _whole(worker, result, sent)
