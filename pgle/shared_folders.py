"""The rules pgle follows in folders other users can write: a profile store, a compilation
cache, a job folder, a run folder's parent, a shared working folder.

What is there is untrusted input: a name read from a file is validated before it becomes a
path, a path pgle deletes or writes is checked to stay inside its root, a file pgle opens
there is opened with O_NOFOLLOW (a link planted in its place is refused, never followed),
and a file pgle creates there is created with O_EXCL (a file or link already in its place
is never reused). docs/reliability.md ("Files other users share") states the guarantees.

A path is checked once and used later; in a folder another user can write, that user can swap a
folder for a link between the check and the use. `OpenDir` closes that gap: a folder is opened
once (each component with O_DIRECTORY|O_NOFOLLOW) and every later operation is relative to its
descriptor (openat, mkdirat, unlinkat, renameat, fstatat through `dir_fd=`), so a swap after
the open changes nothing pgle does: the descriptor still names the folder that was opened.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterator

from pgle.errors import BadInput, PgleError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# A folder tree pgle deletes (a run folder: trace/plugins/profile/<run>/...) is never deeper
# than a dozen levels; one deeper is not pgle's, and walking it would hold a descriptor a level.
MAX_DELETE_DEPTH = 64

log = logging.getLogger(__name__)


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
    path: os.PathLike | str,
    flags: int,
    mode: int | None = None,
    what: str = "file",
    *,
    dir_fd: int | None = None,
    shown: os.PathLike | str | None = None,
) -> int:
    """os.open with O_NOFOLLOW: a link at `path` is a LinkRefused (exit 2), never followed.
    With `dir_fd`, `path` is relative to that open folder (`shown` names it in messages)."""
    try:
        return os.open(
            path,
            flags | NOFOLLOW | CLOEXEC,
            _umask_mode() if mode is None else mode,
            dir_fd=dir_fd,
        )
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise refuse_link(shown if shown is not None else path, what) from None
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
    fd = open_nofollow(path, os.O_RDONLY | NONBLOCK, what=what)
    return _read_regular(fd, path, what, limit)


def _read_regular(fd: int, shown: os.PathLike | str, what: str, limit: int | None) -> bytes:
    """The bytes behind `fd` (closed here), refused unless a regular file within `limit`."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(shown, what, "not a regular file")
        if limit is not None and st.st_size > limit:
            raise NotAFile(shown, what, f"larger than {limit} bytes")
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


@contextlib.contextmanager
def flocked(
    path: os.PathLike | str,
    *,
    shared: bool = False,
    timeout: float | None = None,
    optional: bool = False,
    what: str = "lock file",
    dir_fd: int | None = None,
    shown: os.PathLike | str | None = None,
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

    shown = path if shown is None else shown
    try:
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, what=what, dir_fd=dir_fd, shown=shown)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            try:
                fd = open_nofollow(path, os.O_RDONLY, what=what, dir_fd=dir_fd, shown=shown)
            except FileNotFoundError:
                raise e from None  # none to share and none could be made: why it could not
    except OSError as e:  # a LinkRefused is no OSError: it goes up as it is
        if optional:
            yield
            return
        raise PgleError(
            f"cannot open the {what} {os.fspath(shown)}: {e.strerror or e}.",
            hint=_space_hint(e),
        ) from None
    path = shown
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
    src = os.fspath(src)
    _link_or_copy(os.path.basename(src), None, src, dst, what)


def _link_or_copy(
    name: str, dir_fd: int | None, shown: str, dst: os.PathLike | str, what: str
) -> None:
    path = name if dir_fd is not None else shown
    fd = open_nofollow(path, os.O_RDONLY | NONBLOCK, what=what, dir_fd=dir_fd, shown=shown)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(shown, what, "not a regular file")
        try:
            os.link(path, dst, src_dir_fd=dir_fd, follow_symlinks=False)
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


def _space_hint(e: OSError) -> str | None:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "Free some space and rerun."
    return None


def owner_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def foreign_owner(st: os.stat_result) -> str | None:
    """The name of the folder's owner when that is another user: neither this one nor root
    (root can change anything anyway; a folder an administrator made for everyone is root's)."""
    if st.st_uid in (os.geteuid(), 0):
        return None
    return owner_name(st.st_uid)


_NAMED: set[object] = set()


def warn_foreign(
    st: os.stat_result, path: os.PathLike | str, what: str, consequence: str, key: object = None
) -> str | None:
    """Name a folder of another user in one warning line (once per process and `key`, by
    default the folder itself) before pgle writes into it. Returns the owner's name, if any."""
    owner = foreign_owner(st)
    if owner is None:
        return None
    key = (st.st_dev, st.st_ino) if key is None else key
    if key not in _NAMED:
        _NAMED.add(key)
        log.warning(f"{what} {os.fspath(path)} belongs to {owner}, not to you: {consequence}")
    return owner


def is_plain_name(name: object) -> bool:
    """One component of a path: a string, never a separator, `.` or `..` (nothing climbs out)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\0" not in name
    )


def _check_name(name: str) -> str:
    if not is_plain_name(name):
        raise BadInput(f"{name!r} is not a file name.")
    return name


class OpenDir:
    """A folder opened once; every operation on what it holds is relative to its descriptor
    (module docstring). Close it (or use it as a context manager) when done."""

    def __init__(self, fd: int, path: str):
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: os.PathLike | str, what: str = "folder") -> OpenDir:
        """A folder the user named (its path is theirs: links in it are followed). Missing:
        FileNotFoundError; a file: BadInput."""
        path = os.fspath(path)
        try:
            fd = os.open(path, os.O_RDONLY | DIRECTORY | CLOEXEC)
        except NotADirectoryError:
            raise BadInput(f"{what} {path} is not a directory.") from None
        return cls(fd, path)

    def __enter__(self) -> OpenDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def child(self, name: str) -> str:
        return os.path.join(self.path, name)

    def stat(self) -> os.stat_result:
        return os.fstat(self.fd)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(_check_name(name), dir_fd=self.fd, follow_symlinks=False)

    def names(self) -> list[str]:
        with os.scandir(self.fd) as it:
            return sorted(e.name for e in it)

    def sub(
        self,
        name: str,
        *,
        what: str = "folder",
        create: bool = False,
        own_link: bool = False,
    ) -> OpenDir:
        """The folder `name` in this one, opened with O_NOFOLLOW: a link there is a
        LinkRefused; `create` makes it first (mkdirat) when missing. `own_link`: a link this
        user (or root) made is followed (a `.pgle` the user pointed at scratch space); one made
        by anyone else is refused all the same."""
        _check_name(name)
        shown = self.child(name)
        if create:
            try:
                from pgle.atomic import dir_mode

                os.mkdir(name, dir_mode(), dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as e:
                from pgle.atomic import write_error

                raise write_error(shown, e, what) from None
        flags = os.O_RDONLY | DIRECTORY | CLOEXEC
        if own_link:
            with contextlib.suppress(OSError):
                st = self.lstat(name)
                if stat.S_ISLNK(st.st_mode) and st.st_uid in (os.geteuid(), 0):
                    fd = os.open(name, flags, dir_fd=self.fd)
                    return OpenDir(fd, shown)
        try:
            fd = os.open(name, flags | NOFOLLOW, dir_fd=self.fd)
        except OSError as e:
            # Linux says ELOOP for a link under O_NOFOLLOW (ENOTDIR where O_DIRECTORY is
            # checked first, on some systems): look before calling it a file.
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    is_link = stat.S_ISLNK(self.lstat(name).st_mode)
                except OSError:
                    is_link = False
                if is_link:
                    raise LinkRefused(
                        f"{what} {shown} is a symbolic link; pgle does not follow links "
                        "in folders other users can write.",
                        hint="Remove the link (or ask who made it).",
                    ) from None
                if e.errno == errno.ENOTDIR:
                    raise BadInput(f"{what} {shown} is not a directory.") from None
            if create and e.errno == errno.ENOENT:
                # made or found a moment ago: another process renamed or removed it since
                raise BadInput(
                    f"{what} {shown} vanished while pgle opened it: another process renamed "
                    "or removed it; rerun."
                ) from None
            raise
        return OpenDir(fd, shown)

    def read_bytes(self, name: str, what: str = "file", limit: int | None = None) -> bytes:
        """read_bytes_nofollow, relative to this folder."""
        shown = self.child(name)
        fd = open_nofollow(
            _check_name(name), os.O_RDONLY | NONBLOCK, what=what, dir_fd=self.fd, shown=shown
        )
        return _read_regular(fd, shown, what, limit)

    def create_exclusive(self, name: str, mode: int | None = None) -> int:
        """create_exclusive, relative to this folder."""
        return os.open(
            _check_name(name),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC,
            _umask_mode() if mode is None else mode,
            dir_fd=self.fd,
        )

    def write_atomic(
        self, name: str, data: bytes, *, mode: int | None = None, what: str = "file"
    ) -> str:
        """Write `name` through a temporary file beside it (`.<name>.<random>.tmp`, created
        with O_EXCL|O_NOFOLLOW), fsync, then renameat over `name`: a link there is replaced,
        never followed. A failure (a full disk) is one WriteFailed line and leaves no temp."""
        from pgle.atomic import file_mode, write_error

        _check_name(name)
        shown = self.child(name)
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC,
                0o600,
                dir_fd=self.fd,
            )
        except OSError as e:
            raise write_error(shown, e, what) from None
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
                os.fchmod(fd, file_mode() if mode is None else file_mode() & mode)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            if isinstance(e, OSError):
                raise write_error(shown, e, what) from None
            raise
        return shown

    def unlink(self, name: str) -> None:
        """unlinkat: a link here is removed, never followed."""
        os.unlink(_check_name(name), dir_fd=self.fd)

    def link_or_copy(self, name: str, dst: os.PathLike | str, what: str = "file") -> None:
        """link_or_copy of the file `name` of this folder."""
        _link_or_copy(_check_name(name), self.fd, self.child(name), dst, what)

    def rmtree(self, name: str, expect: os.stat_result | None = None) -> None:
        """rmtree_fd of the folder `name` in this one."""
        rmtree_fd(self.fd, name, self.child(name), expect)


def rmtree_fd(dir_fd: int, name: str, shown: str, expect: os.stat_result | None = None) -> None:
    """Delete the folder `name` of the open folder `dir_fd` and all it holds, never following
    a link: each folder is opened with O_DIRECTORY|O_NOFOLLOW relative to its parent's
    descriptor and must be the folder lstat saw (same device and inode); links and files are
    unlinked (the link, never its target). A folder swapped for a link mid-way is refused
    (PgleError), never entered.

    Why not shutil.rmtree(name, dir_fd=...): on Linux it is fd-based too (CPython 3.11-3.13,
    `rmtree.avoids_symlink_attacks`), but it opens each folder without O_NOFOLLOW and relies on
    the stat comparison alone, recurses without a depth bound (RecursionError on a planted deep
    tree) and its onerror protocol differs across those versions; this one is short enough to
    read whole. `expect`: the stat of the folder pgle checked (recognised as its own); a
    different folder at that name now is refused."""
    st = os.stat(_check_name(name), dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{shown} is not a folder; pgle deletes only folders it made.")
    if expect is not None and not os.path.samestat(st, expect):
        raise PgleError(f"{shown} was replaced since pgle checked it; left as it is.")
    _rmtree(dir_fd, name, st, shown, 0)


def _rmtree(parent: int, name: str, st: os.stat_result, shown: str, depth: int) -> None:
    if depth > MAX_DELETE_DEPTH:
        raise PgleError(
            f"{shown} is nested deeper than {MAX_DELETE_DEPTH} folders: pgle makes none so "
            "deep and deletes nothing there."
        )
    try:
        fd = os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        return  # removed meanwhile
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PgleError(f"{shown} was replaced while pgle deleted it; left as it is.") from None
        raise
    try:
        if not os.path.samestat(os.fstat(fd), st):
            raise PgleError(f"{shown} was replaced while pgle deleted it; left as it is.")
        with os.scandir(fd) as it:
            entries = list(it)
        for entry in entries:
            try:
                est = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(est.st_mode):
                    _rmtree(fd, entry.name, est, os.path.join(shown, entry.name), depth + 1)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                continue
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=parent)
