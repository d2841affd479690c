"""The rules pgle follows in folders other users can write: a profile store, a compilation
cache, a job folder, a run folder's parent, a shared working folder.

What is there is untrusted input: a name read from a file is validated before it becomes a
path, a path pgle deletes or writes is checked to stay inside its root, a file pgle opens
there is opened with O_NOFOLLOW (a link planted in its place is refused, never followed),
and a file pgle creates there is created with O_EXCL (a file or link already in its place
is never reused). docs/reliability.md ("Files other users share") states the guarantees.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator

from pgle.errors import BadInput, PgleError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkRefused(BadInput):
    """A symbolic link where pgle expected its own file, in a folder others can write."""


class NotAFile(BadInput):
    """Not a regular file, or larger than pgle reads (`reason` says which)."""

    def __init__(self, path: os.PathLike | str, what: str, reason: str):
        super().__init__(f"{what} {os.fspath(path)} is {reason}.")
        self.reason = reason


def _umask_mode() -> int:
    from pgle.atomic import file_mode

    return file_mode()


def refuse_link(path: os.PathLike | str, what: str = "file") -> LinkRefused:
    return LinkRefused(
        f"{what} {os.fspath(path)} is a symbolic link; pgle does not follow links "
        "in folders other users can write.",
        hint="Remove the link (or ask who made it); pgle then recreates the file.",
    )


def open_nofollow(
    path: os.PathLike | str, flags: int, mode: int | None = None, what: str = "file"
) -> int:
    """os.open with O_NOFOLLOW: a link at `path` is a LinkRefused (exit 2), never followed."""
    try:
        return os.open(path, flags | NOFOLLOW | CLOEXEC, _umask_mode() if mode is None else mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise refuse_link(path, what) from None
        raise


def create_exclusive(path: os.PathLike | str, mode: int | None = None, what: str = "file") -> int:
    """Create a new file (O_CREAT|O_EXCL: anything already there, a dangling link included,
    is FileExistsError) and return its fd, opened for writing."""
    return os.open(
        path,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC,
        _umask_mode() if mode is None else mode,
    )


def read_bytes_nofollow(
    path: os.PathLike | str, what: str = "file", limit: int | None = None
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, refusing a link or anything but a
    regular file (a FIFO would block, a device never end) with one BadInput sentence."""
    fd = open_nofollow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), what=what)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(path, what, "not a regular file")
        if limit is not None and st.st_size > limit:
            raise NotAFile(path, what, f"larger than {limit} bytes")
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def is_inside(root: os.PathLike | str, path: os.PathLike | str) -> bool:
    """True when `path`'s folder, all links resolved, is `root` (resolved) or below it. The
    last component is not resolved: pgle unlinks or renames over it, which never follows a
    link, so a link there is harmless; a link among the folders above it is not."""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    return parent == real_root or parent.startswith(real_root.rstrip(os.sep) + os.sep)


def check_inside(root: os.PathLike | str, path: os.PathLike | str, what: str = "path") -> str:
    """`path` when is_inside(root, path); otherwise a PgleError before anything is touched."""
    if not is_inside(root, path):
        raise BadInput(
            f"{what} {os.fspath(path)} is outside {os.fspath(root)} (a link or a "
            "planted name leads elsewhere); pgle touches nothing outside the folder "
            "it owns."
        )
    return os.fspath(path)


def real_directory(path: os.PathLike | str) -> bool:
    """A directory that is not a symbolic link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def flocked(
    path: os.PathLike | str,
    *,
    shared: bool = False,
    timeout: float | None = None,
    optional: bool = False,
    what: str = "lock file",
) -> Iterator[None]:
    """Hold flock(2) on `path` (created 0666 under the umask if missing). `optional`: where
    the lock file can neither be opened nor created (a read-only store), go on without it;
    a link at `path` is refused all the same.

    Why not filelock.FileLock here: it opens O_RDWR, so a lock file another user created (0644)
    cannot be taken, and its handling of a link planted at the lock path differs by version
    (3.12 follows it and truncates the target; 3.20.1 and 4.x fail with an uncaught ELOOP).
    This opens with O_NOFOLLOW and never truncates; flock needs only a read fd, so another
    user's lock file is opened read-only. Yields with the lock held; closing the fd releases it.
    """
    import fcntl

    try:
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, what=what)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            fd = open_nofollow(path, os.O_RDONLY, what=what)
    except OSError as e:  # a LinkRefused is no OSError: it goes up as it is
        if optional:
            yield
            return
        raise PgleError(f"cannot open the {what} {os.fspath(path)}: {e.strerror or e}.") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(f"{what} {os.fspath(path)} is not a regular file.")
        op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, op | (fcntl.LOCK_NB if deadline is not None else 0))
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    raise PgleError(
                        f"timed out after {timeout:.0f} s waiting for the {what} "
                        f"{os.fspath(path)} (another process holds it)."
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def copy_mode(source_mode: int) -> int:
    """The mode of a copy: the umask's, never wider than the source's."""
    from pgle.atomic import file_mode

    return file_mode() & stat.S_IMODE(source_mode)


def link_or_copy(src: os.PathLike | str, dst: os.PathLike | str, what: str = "file") -> None:
    """Put `src` at the new name `dst`: a hard link (same inode, same mode), or a copy with at
    most its permissions where links fail (another filesystem). A link at `src` is refused; if
    `src` is swapped for one between the open and the link, the link is undone and the copy is
    made from the file opened."""
    fd = open_nofollow(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), what=what)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(src, what, "not a regular file")
        try:
            os.link(src, dst, follow_symlinks=False)
            if os.lstat(dst).st_ino == st.st_ino:
                return
            os.unlink(dst)
        except OSError:
            pass
        out = create_exclusive(dst, copy_mode(st.st_mode))
        try:
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, copy_mode(st.st_mode))  # O_CREAT's mode went through the umask
        finally:
            os.close(out)
    finally:
        os.close(fd)
