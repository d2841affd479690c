"""Atomic writes and no-clobber checks for every file pgle produces.

Files get the mode of an ordinary new file under the user's umask (0644 under
umask 022; mkstemp alone would make them 0600, unreadable to the other users
of a shared cache or profile folder) and folders 0777 under the umask.
A write that fails (full disk, read-only or immutable target, a folder where
the file should go) raises one PgleError sentence and leaves nothing behind:
the temp file is removed and the old file, if any, is untouched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from pgle.errors import BadInput, PgleError, exists_error


def _umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~_umask()


def dir_mode() -> int:
    return 0o777 & ~_umask()


class WriteFailed(PgleError, OSError):
    """A write pgle could not make: one sentence (PgleError, exit 1), and still an OSError
    (with errno and strerror) for callers that handle those."""


def write_error(path: os.PathLike | str, e: OSError, what: str = "") -> PgleError:
    """One sentence for an OSError while writing `path`."""
    what = f"{what} " if what else ""
    reason = e.strerror or str(e)
    hint = None
    if isinstance(e, IsADirectoryError) or os.path.isdir(path):
        reason = "it is a directory"
        hint = "Give a file name, or remove the directory."
    elif e.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "Free some space and rerun; nothing was written."
    elif e.errno == errno.EFBIG:  # `ulimit -f`, or the filesystem's largest file: not space
        hint = "The file size limit was reached (see `ulimit -f`); nothing was written."
    elif e.errno == errno.EROFS:
        hint = "The filesystem is mounted read-only; nothing was written."
    elif isinstance(e, PermissionError):
        hint = "Check its permissions (and `lsattr` for the immutable flag)."
    error = WriteFailed(f"cannot write {what}{path}: {reason}.", hint=hint)
    error.errno, error.strerror, error.filename = e.errno, reason, os.fspath(path)
    return error


def check_writable_target(path: os.PathLike | str, *, force: bool, what: str = "output") -> Path:
    """Refuse before any work is done if `path` exists (without force) or its folder is unusable."""
    path = Path(path)
    if path.is_dir() and not what.endswith("directory"):
        raise BadInput(
            f"cannot write {what} {path}: it is a directory.",
            hint="Give a file name, or remove the directory.",
        )
    if path.exists() and not force:
        raise exists_error(f"{what} {path} already exists.")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise BadInput(f"cannot write {what} {path}: {parent} is not a directory.")
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BadInput(f"cannot write {what} {path}: {probe} is not writable.")
    return path


def make_dirs(path: os.PathLike | str) -> None:
    """mkdir -p with the umask's modes (Path.mkdir's default), as a PgleError on failure."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(path, e, "folder") from None


def write_bytes_atomic(path: os.PathLike | str, data: bytes, *, mode: int | None = None) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over `path` (which is
    replaced, never followed, if it is a link). `mode`: at most this (a copy's source mode)."""
    return _write_atomic(path, lambda f: f.write(data), mode)


def write_files_atomic(items: list[tuple[os.PathLike | str, bytes]]) -> None:
    """Write several files that belong together (a profile and its manifest): all temp
    files are written and synced first, then renamed in order, so a full disk leaves
    none of them, never one without the other."""
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in items:
            path = Path(path)
            make_dirs(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                os.fchmod(f.fileno(), file_mode())
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as e:
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        failed = temps[-1][1] if temps else Path(items[0][0])
        raise write_error(failed, e) from None


def write_stream_atomic(
    path: os.PathLike | str, fill: Callable[[BinaryIO], None], *, mode: int | None = None
) -> Path:
    """write_bytes_atomic for data `fill` writes into the open file a piece at a time (a big
    file never held whole). `mode`: at most this."""
    return _write_atomic(path, fill, mode)


def copy_file_atomic(src: os.PathLike | str, dest: os.PathLike | str) -> Path:
    """Copy `src` to `dest` the way write_bytes_atomic writes (streamed, for big logs); the
    copy never gets wider permissions than `src` has."""
    with open(src, "rb") as s:
        return _write_atomic(
            dest, lambda f: shutil.copyfileobj(s, f), stat.S_IMODE(os.fstat(s.fileno()).st_mode)
        )


def _write_atomic(path: os.PathLike | str, fill, mode: int | None = None) -> Path:
    path = Path(path)
    make_dirs(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise write_error(path, e) from None
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), file_mode() if mode is None else file_mode() & mode)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise write_error(path, e) from None
        raise
    return path


def write_text_atomic(path: os.PathLike | str, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def replace_directory_atomic(path: os.PathLike | str, fill) -> Path:
    """Build a directory with `fill(tmp_dir)` beside `path`, then swap it in.

    Readers (XLA) see the old directory or the new one, never a half-written mix;
    an old directory is moved aside first and removed after the swap.
    """
    path = Path(os.path.abspath(os.fspath(path)))
    make_dirs(path.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as e:
        raise write_error(path, e) from None
    try:
        fill(tmp)
        os.chmod(tmp, dir_mode())  # mkdtemp makes it private; a profile directory is shared data
        if path.exists() and not path.is_dir():
            raise PgleError(
                f"cannot write profile directory {path}: a file is in the way.",
                hint="Remove it, or give another path.",
            )
        if path.exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, aside / path.name)
            os.replace(tmp, path)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except OSError as e:
        raise write_error(path, e) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path
