"""pgle.shared_folders called in process on real folders: what a link, FIFO, folder or file
planted where pgle expects its own file does, the sentence each refusal says, what is created
(with which mode) and what is deleted (and what not). The store, cache and run-folder tests reach
the same rules through `pgle` subprocesses; these pin them where a mutation run sees them."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from helpers.fs_limits import append_only, file_size_limit, no_descriptor_left
from helpers.races import before_call
from pgle import shared_folders as sf
from pgle.atomic import WriteFailed
from pgle.errors import BadInput, PgleError


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def raised_at_once(call, fifo: Path) -> BaseException:
    """What `call` (which opens the FIFO `fifo`) raised. A blocking open (no O_NONBLOCK) waits
    for a writer: after 5 s one is given so the test ends, and the test fails (well before a
    mutation run's wall-clock limit, where a hang reads as a timeout, not a failure)."""
    got: list[BaseException] = []

    def run():
        try:
            call()
        except BaseException as err:  # handed to the test thread
            got.append(err)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    blocked = t.is_alive()
    if blocked:
        os.close(os.open(fifo, os.O_WRONLY))
        t.join(30)
    assert not blocked, f"opening the FIFO {fifo} waited for a writer"
    (err,) = got
    return err


# -- opening, reading -------------------------------------------------------------------
def test_read_bytes_nofollow_reads_a_file_and_refuses_a_link_a_fifo_and_a_big_file(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc" * 10)
    assert sf.read_bytes_nofollow(f) == b"abc" * 10
    assert sf.read_bytes_nofollow(f, limit=30) == b"abc" * 10  # the limit itself is allowed
    with pytest.raises(sf.NotAFile) as e:
        sf.read_bytes_nofollow(f, what="profile", limit=29)
    assert (e.value.message, e.value.reason) == (f"profile {f} is larger than 29 bytes.",
                                                 "larger than 29 bytes")
    link = tmp_path / "link"
    os.symlink(f, link)
    with pytest.raises(sf.LinkRefused) as e:
        sf.read_bytes_nofollow(link, what="store metadata")
    assert e.value.message == (f"store metadata {link} is a symbolic link; pgle does not follow "
                               "links in folders other users can write.")
    assert e.value.hint == "Remove the link (or ask who made it); pgle then recreates the file."
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    err = raised_at_once(lambda: sf.read_bytes_nofollow(fifo), fifo)
    assert isinstance(err, sf.NotAFile) and err.message == f"file {fifo} is not a regular file."
    with pytest.raises(sf.LinkRefused) as e:
        sf.read_bytes_nofollow(link)
    assert e.value.message.startswith(f"file {link} is a symbolic link;")
    with pytest.raises(FileNotFoundError):
        sf.read_bytes_nofollow(tmp_path / "missing")


def test_a_file_bigger_than_one_read_is_read_whole(tmp_path):
    f = tmp_path / "big"
    data = os.urandom((1 << 20) * 2 + 7)
    f.write_bytes(data)
    assert sf.read_bytes_nofollow(f) == data


def test_open_nofollow_creates_with_the_umask_mode_and_closes_on_exec(tmp_path, umask_022):
    p = tmp_path / "new"
    fd = sf.open_nofollow(p, os.O_WRONLY | os.O_CREAT)
    try:
        assert os.get_inheritable(fd) is False and fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        os.close(fd)
    assert mode(p) == 0o644
    fd = sf.open_nofollow(tmp_path / "m", os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    assert mode(tmp_path / "m") == 0o600
    with sf.OpenDir.open(tmp_path) as d:
        fd = sf.open_nofollow("rel", os.O_WRONLY | os.O_CREAT, dir_fd=d.fd)
        os.close(fd)
    assert (tmp_path / "rel").is_file()


def test_open_nofollow_names_the_shown_path_when_refusing_a_link(tmp_path):
    os.symlink(tmp_path / "elsewhere", tmp_path / "lk")
    with sf.OpenDir.open(tmp_path) as d, pytest.raises(sf.LinkRefused) as e:
        sf.open_nofollow("lk", os.O_RDONLY, what="lock file", dir_fd=d.fd, shown="the/lk")
    assert e.value.message.startswith("lock file the/lk is a symbolic link;")
    with pytest.raises(sf.LinkRefused) as e:
        sf.open_nofollow(tmp_path / "lk", os.O_RDONLY)
    assert e.value.message.startswith(f"file {tmp_path / 'lk'} is a symbolic link;")
    assert sf.refuse_link("/x/y").message.startswith("file /x/y is a symbolic link;")


def test_create_exclusive_never_reuses_what_is_there(tmp_path, umask_022):
    p = tmp_path / "x"
    os.close(sf.create_exclusive(p))
    assert mode(p) == 0o644
    with pytest.raises(FileExistsError):
        sf.create_exclusive(p)
    os.symlink(tmp_path / "target", tmp_path / "dangling")
    with pytest.raises(FileExistsError):
        sf.create_exclusive(tmp_path / "dangling")
    assert not (tmp_path / "target").exists()
    fd = sf.create_exclusive(tmp_path / "y", 0o600)
    assert os.get_inheritable(fd) is False
    os.write(fd, b"w")  # opened for writing
    os.close(fd)
    assert mode(tmp_path / "y") == 0o600


# -- paths inside a root ---------------------------------------------------------------
def test_is_inside_and_check_inside(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "rootbeer").mkdir()
    os.symlink(tmp_path, root / "up")
    assert sf.is_inside(root, root / "a") is True
    assert sf.is_inside(root, root / "sub" / "a") is True
    assert sf.is_inside(root, root / "up") is True  # the last component is not resolved
    assert sf.is_inside(root, root / "up" / "a") is False  # a link among the folders
    assert sf.is_inside(root, tmp_path / "rootbeer" / "a") is False  # a prefix is not a parent
    assert sf.is_inside(str(root) + "/", root / "a") is True
    assert sf.is_inside("/", tmp_path / "a") is True  # the filesystem's root holds everything
    assert sf.check_inside(root, root / "a") == str(root / "a")
    with pytest.raises(BadInput) as e:
        sf.check_inside(root, tmp_path / "x")
    assert e.value.message.startswith(f"path {tmp_path / 'x'} is outside {root} ")
    with pytest.raises(BadInput) as e:
        sf.check_inside(root, root / "up" / "a", what="run folder")
    assert e.value.message == (
        f"run folder {root / 'up' / 'a'} is outside {root} (a link or a planted name leads "
        "elsewhere); pgle touches nothing outside the folder it owns.")


# -- locks -------------------------------------------------------------------------------
def test_flocked_holds_an_exclusive_lock_and_creates_the_file(tmp_path, umask_022):
    lock = tmp_path / "l.lock"
    with sf.flocked(lock):
        assert mode(lock) == 0o644
        fd = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(lock, os.O_RDONLY)  # released on exit
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_flocked_shared_lets_readers_share(tmp_path):
    lock = tmp_path / "l.lock"
    with sf.flocked(lock, shared=True):
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another reader: fine
            fcntl.flock(fd, fcntl.LOCK_UN)
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        with sf.flocked(lock, shared=True, timeout=0):
            pass


def test_flocked_times_out_with_one_sentence_and_waits_without_a_timeout(tmp_path):
    lock = tmp_path / "l.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(PgleError) as e:
            with sf.flocked(lock, timeout=0.2, what="store lock"):
                pass
        assert e.value.message == (f"timed out after 0 s waiting for the store lock {lock} "
                                   "(another process holds it).")
        entered = threading.Event()

        def wait_for_it():
            with sf.flocked(lock):
                entered.set()

        t = threading.Thread(target=wait_for_it, daemon=True)
        t.start()
        assert not entered.wait(0.5)  # blocks while the lock is held
    finally:
        os.close(fd)  # release
    assert entered.wait(60)
    t.join(60)


def test_flocked_refuses_a_link_and_a_folder(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, tmp_path / "l.lock")
    with pytest.raises(sf.LinkRefused):
        with sf.flocked(tmp_path / "l.lock", optional=True):
            pass
    assert target.read_text() == "keep"
    (tmp_path / "d.lock").mkdir()
    with pytest.raises(PgleError) as e:
        with sf.flocked(tmp_path / "d.lock", what="cache lock"):
            pass
    assert e.value.message == f"cannot open the cache lock {tmp_path / 'd.lock'}: Is a directory."
    assert e.value.hint is None


def test_flocked_optional_goes_on_without_a_lock_it_cannot_open(tmp_path):
    ran = []
    with sf.flocked(tmp_path / "missing-dir" / "l.lock", optional=True):
        ran.append(1)
    assert ran == [1]
    with pytest.raises(PgleError) as e:
        with sf.flocked(tmp_path / "missing-dir" / "l.lock"):
            pass
    assert e.value.message.endswith(": No such file or directory.")


def test_flocked_on_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "f.lock")
    done: list[BaseException] = []

    def lock_it():
        try:
            with sf.flocked(tmp_path / "f.lock", what="lock"):
                pass
        except BaseException as err:  # handed to the test thread
            done.append(err)

    t = threading.Thread(target=lock_it, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive()
    (err,) = done
    assert isinstance(err, BadInput) and err.message == f"lock {tmp_path / 'f.lock'} is not a regular file."


def test_flocked_opens_another_users_lock_file_read_only():
    """A lock file another user made (0644): flock needs only a read fd. Run as nobody."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the lock as another user")
    import tempfile

    d = tempfile.mkdtemp()
    try:
        os.chmod(d, 0o755)
        lock = os.path.join(d, "l.lock")
        with open(lock, "w"):
            pass
        os.chmod(lock, 0o644)
        with sf.flocked(lock):
            pass
        # Everything imported before the setuid: nobody cannot read root's Python install.
        code = ("import fcntl, os, pgle.atomic; from pgle import shared_folders as sf\n"
                "os.setuid(65534)\n"
                f"with sf.flocked({lock!r}, shared=True): print('locked')\n"
                f"with sf.flocked({lock + '.new'!r}, optional=True): print('went on')\n"
                "try:\n"
                f"    with sf.flocked({lock + '.new'!r}): pass\n"
                "except Exception as e: print(e.message)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        # the create's EACCES, not the read-only retry's ENOENT
        assert out.stdout.splitlines() == [
            "locked", "went on", f"cannot open the lock file {lock}.new: Permission denied."
        ], out.stderr
    finally:
        import shutil

        shutil.rmtree(d)


def test_space_hint_for_a_full_disk_or_quota_only():
    assert sf._space_hint(OSError(errno.ENOSPC, "No space")) == "Free some space and rerun."
    assert sf._space_hint(OSError(errno.EDQUOT, "Quota")) == "Free some space and rerun."
    assert sf._space_hint(OSError(errno.EACCES, "denied")) is None


# -- copies --------------------------------------------------------------------------------
def test_copy_mode_is_the_umasks_never_wider_than_the_source(umask_022):
    assert sf.copy_mode(0o100666) == 0o644
    assert sf.copy_mode(0o100600) == 0o600
    assert sf.copy_mode(0o104755) == 0o644  # neither the setuid bit nor an exec bit
    assert sf.copy_mode(0o100444) == 0o444


def test_link_or_copy_links_on_one_filesystem(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"profile")
    sf.link_or_copy(src, tmp_path / "dst")
    assert os.stat(tmp_path / "dst").st_ino == os.stat(src).st_ino
    with pytest.raises(FileExistsError):  # never over something already there
        sf.link_or_copy(src, tmp_path / "dst")


def test_link_or_copy_copies_with_at_most_the_source_mode_across_filesystems(tmp_path, umask_022):
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second filesystem (/dev/shm)")
    src = other / f"pgle-src-{os.getpid()}"
    data = os.urandom((1 << 20) + 5)
    src.write_bytes(data)
    os.chmod(src, 0o640)
    try:
        sf.link_or_copy(src, tmp_path / "dst")
    finally:
        src.unlink()
    assert (tmp_path / "dst").read_bytes() == data
    assert mode(tmp_path / "dst") == 0o640


def test_link_or_copy_refuses_a_link_and_a_fifo(tmp_path):
    (tmp_path / "real").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "lk")
    with pytest.raises(sf.LinkRefused):
        sf.link_or_copy(tmp_path / "lk", tmp_path / "dst")
    with pytest.raises(sf.LinkRefused) as e:
        sf.link_or_copy(tmp_path / "lk", tmp_path / "dst")
    assert e.value.message.startswith(f"file {tmp_path / 'lk'} is a symbolic link;")
    with sf.OpenDir.open(tmp_path) as d, pytest.raises(sf.LinkRefused) as e:
        d.link_or_copy("lk", tmp_path / "dst")
    assert e.value.message.startswith(f"file {tmp_path / 'lk'} is a symbolic link;")
    os.mkfifo(tmp_path / "fifo")
    err = raised_at_once(lambda: sf.link_or_copy(tmp_path / "fifo", tmp_path / "dst2", what="profile"),
                         tmp_path / "fifo")
    assert isinstance(err, sf.NotAFile)
    assert err.message == f"profile {tmp_path / 'fifo'} is not a regular file."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "lk", "real"]


# -- owners ----------------------------------------------------------------------------------
def test_owner_name_and_foreign_owner(tmp_path):
    assert sf.owner_name(0) == "root"
    assert sf.owner_name(4_000_000_000) == "uid 4000000000"
    assert sf.foreign_owner(os.stat(tmp_path)) is None  # mine
    assert sf.foreign_owner(os.stat("/")) is None  # root's
    if os.geteuid() == 0:
        os.chown(tmp_path, 65534, 65534)
        assert sf.foreign_owner(os.stat(tmp_path)) == sf.owner_name(65534)
        os.chown(tmp_path, 1, 1)  # uid 1 (daemon) is another user like any other
        assert sf.foreign_owner(os.stat(tmp_path)) == sf.owner_name(1)


def test_warn_foreign_warns_once_per_folder(tmp_path, caplog):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 65534, 65534)
    st = os.stat(d)
    with caplog.at_level(logging.WARNING, logger="pgle.shared_folders"):
        assert sf.warn_foreign(st, d, "store", "entries you add are theirs to delete") == sf.owner_name(65534)
        assert sf.warn_foreign(st, d, "store", "again") == sf.owner_name(65534)
        assert sf.warn_foreign(st, d, "store", "by key", key=("k", str(d))) == sf.owner_name(65534)
        assert sf.warn_foreign(os.stat(tmp_path), tmp_path, "store", "mine") is None
        other = tmp_path / "theirs too"
        other.mkdir()
        os.chown(other, 65534, 65534)
        assert sf.warn_foreign(os.stat(other), other, "cache", "c") == sf.owner_name(65534)
        assert sf.warn_foreign(os.stat(other), other, "cache", "again") == sf.owner_name(65534)
    assert [r.getMessage() for r in caplog.records] == [
        f"store {d} belongs to {sf.owner_name(65534)}, not to you: entries you add are theirs to delete",
        f"store {d} belongs to {sf.owner_name(65534)}, not to you: by key",
        f"cache {other} belongs to {sf.owner_name(65534)}, not to you: c",
    ]


# -- OpenDir ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs", "a\0b"])
def test_a_name_that_climbs_or_splits_is_refused(tmp_path, name):
    with sf.OpenDir.open(tmp_path) as d:
        for call in (lambda: d.lstat(name), lambda: d.sub(name), lambda: d.read_bytes(name),
                     lambda: d.create_exclusive(name), lambda: d.unlink(name),
                     lambda: d.write_atomic(name, b"x")):
            with pytest.raises(BadInput) as e:
                call()
            assert e.value.message == f"{name!r} is not a file name."
    assert list(tmp_path.iterdir()) == []


def test_opendir_open_names_paths_and_closes(tmp_path):
    (tmp_path / "b").write_text("1")
    (tmp_path / "a").mkdir()
    d = sf.OpenDir.open(tmp_path)
    assert d.path == str(tmp_path) and d.child("x") == os.path.join(str(tmp_path), "x")
    assert d.names() == ["a", "b"]
    assert d.stat().st_ino == os.stat(tmp_path).st_ino
    assert stat.S_ISDIR(d.lstat("a").st_mode)
    fd = d.fd
    assert os.get_inheritable(fd) is False
    d.close()
    assert d.fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)
    d.close()  # twice: nothing
    with pytest.raises(BadInput) as e:
        sf.OpenDir.open(tmp_path / "b", what="store")
    assert e.value.message == f"store {tmp_path / 'b'} is not a directory."
    with pytest.raises(FileNotFoundError):
        sf.OpenDir.open(tmp_path / "missing")


def test_opendir_lstat_does_not_follow_a_link(tmp_path):
    os.symlink(tmp_path, tmp_path / "lk")
    with sf.OpenDir.open(tmp_path) as d:
        assert stat.S_ISLNK(d.lstat("lk").st_mode)


def test_sub_opens_creates_and_refuses(tmp_path, umask_022):
    (tmp_path / "file").write_text("")
    os.symlink(tmp_path / "file", tmp_path / "flink")
    os.symlink(tmp_path, tmp_path / "dlink")
    with sf.OpenDir.open(tmp_path) as d:
        with d.sub("new", create=True) as s:
            assert s.path == str(tmp_path / "new")
            assert mode(tmp_path / "new") == 0o755
        with d.sub("new", create=True) as s:  # already there: opened
            assert s.names() == []
        with pytest.raises(FileNotFoundError):
            d.sub("missing")
        with pytest.raises(BadInput) as e:
            d.sub("file", what="job folder")
        assert type(e.value) is BadInput
        assert e.value.message == f"job folder {tmp_path / 'file'} is not a directory."
        for name in ("dlink", "flink"):
            with pytest.raises(sf.LinkRefused) as e:
                d.sub(name, what="run folder", create=True)
            assert e.value.message == (f"run folder {tmp_path / name} is a symbolic link; pgle "
                                       "does not follow links in folders other users can write.")
            assert e.value.hint == "Remove the link (or ask who made it)."
        with pytest.raises(BadInput) as e:
            d.sub("file", create=True)  # a file in the way: not made into a folder
        assert e.value.message == f"folder {tmp_path / 'file'} is not a directory."


def test_sub_create_failure_is_one_write_sentence(tmp_path):
    with sf.OpenDir.open("/proc") as d, pytest.raises(PgleError) as e:
        d.sub("pgle-new", create=True, what="run folder")
    assert e.value.message.startswith("cannot write run folder /proc/pgle-new: ")


def test_sub_own_link_follows_only_this_users_link(tmp_path):
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "inside").write_text("")
    os.symlink(tmp_path / "scratch", tmp_path / ".pgle")
    with sf.OpenDir.open(tmp_path) as d:
        with d.sub(".pgle", own_link=True) as s:
            assert s.names() == ["inside"] and s.path == str(tmp_path / ".pgle")
        with pytest.raises(sf.LinkRefused):
            d.sub(".pgle")
        with d.sub("scratch", own_link=True) as s:  # a plain folder: opened as usual
            assert s.names() == ["inside"]
        os.symlink(tmp_path / "gone", tmp_path / "dangling")
        with pytest.raises(sf.LinkRefused):  # this user's link, to nothing: refused, no crash
            d.sub("dangling", own_link=True)
        if os.geteuid() == 0:
            for uid in (65534, 1):
                os.lchown(tmp_path / ".pgle", uid, uid)
                with pytest.raises(sf.LinkRefused):
                    d.sub(".pgle", own_link=True)


def test_opendir_read_create_write_unlink(tmp_path, umask_022):
    (tmp_path / "f").write_bytes(b"data")
    os.symlink(tmp_path / "f", tmp_path / "lk")
    with sf.OpenDir.open(tmp_path) as d:
        assert d.read_bytes("f") == b"data"
        with pytest.raises(sf.NotAFile) as e:
            d.read_bytes("f", what="metadata", limit=3)
        assert e.value.message == f"metadata {tmp_path / 'f'} is larger than 3 bytes."
        with pytest.raises(sf.LinkRefused) as e:
            d.read_bytes("lk", what="metadata")
        assert e.value.message.startswith(f"metadata {tmp_path / 'lk'} is a symbolic link;")
        fd = d.create_exclusive("c")
        assert os.get_inheritable(fd) is False
        os.write(fd, b"1")
        os.close(fd)
        assert mode(tmp_path / "c") == 0o644
        with pytest.raises(FileExistsError):
            d.create_exclusive("c")
        with pytest.raises(FileExistsError):
            d.create_exclusive("lk")
        os.close(d.create_exclusive("p", 0o600))
        assert mode(tmp_path / "p") == 0o600
        d.unlink("lk")
        assert (tmp_path / "f").read_bytes() == b"data"  # the link went, not its target
        assert d.names() == ["c", "f", "p"]


def test_write_atomic_replaces_a_link_never_follows_it_and_leaves_no_temp(tmp_path, umask_022):
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, tmp_path / "meta.json")
    with sf.OpenDir.open(tmp_path) as d:
        assert d.write_atomic("meta.json", b"{}") == str(tmp_path / "meta.json")
        assert d.write_atomic("private", b"p", mode=0o600) == str(tmp_path / "private")
        assert d.write_atomic("big", b"z" * (3 << 20)) == str(tmp_path / "big")
    assert target.read_text() == "keep"
    assert not (tmp_path / "meta.json").is_symlink()
    assert (tmp_path / "meta.json").read_bytes() == b"{}" and mode(tmp_path / "meta.json") == 0o644
    assert mode(tmp_path / "private") == 0o600
    assert (tmp_path / "big").read_bytes() == b"z" * (3 << 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "meta.json", "private", "target"]


def test_write_atomic_failure_is_one_sentence_and_leaves_no_temp(tmp_path):
    (tmp_path / "adir").mkdir()
    with sf.OpenDir.open(tmp_path) as d, pytest.raises(PgleError) as e:
        d.write_atomic("adir", b"x", what="store metadata")
    assert e.value.message == f"cannot write store metadata {tmp_path / 'adir'}: it is a directory."
    assert isinstance(e.value, OSError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    with sf.OpenDir.open("/proc") as d, pytest.raises(PgleError) as e:
        d.write_atomic("pgle-x", b"x")
    assert e.value.message.startswith("cannot write file /proc/pgle-x: ")


def test_write_atomic_takes_a_name_as_long_as_the_filesystem_allows_with_its_temp(tmp_path):
    # The temp name adds 18 characters (`.<name>.<12 hex>.tmp`); 255 is NAME_MAX here.
    name = "n" * (255 - 18)
    with sf.OpenDir.open(tmp_path) as d:
        d.write_atomic(name, b"x")
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_opendir_link_or_copy_works_through_the_descriptor_after_a_rename(tmp_path):
    """A folder renamed (or swapped) after pgle opened it: the copy still comes from the folder
    opened, never from whatever is at its old path now."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "src").write_bytes(b"opened")
    with sf.OpenDir.open(tmp_path / "a") as d:
        os.rename(tmp_path / "a", tmp_path / "b")
        (tmp_path / "a").mkdir()
        (tmp_path / "a" / "src").write_bytes(b"planted")
        d.link_or_copy("src", tmp_path / "dst")
        assert d.read_bytes("src") == b"opened"
    assert (tmp_path / "dst").read_bytes() == b"opened"


def test_opendir_refusals_name_the_full_path(tmp_path):
    (tmp_path / "f").write_text("x")
    os.symlink(tmp_path / "f", tmp_path / "lk")
    os.mkfifo(tmp_path / "fifo")
    with sf.OpenDir.open(tmp_path) as d:
        with pytest.raises(sf.LinkRefused) as e:
            d.link_or_copy("lk", tmp_path / "dst", what="profile")
        assert e.value.message.startswith(f"profile {tmp_path / 'lk'} is a symbolic link;")
        with pytest.raises(sf.LinkRefused) as e:
            d.read_bytes("lk")
        assert e.value.message.startswith(f"file {tmp_path / 'lk'} is a symbolic link;")
        err = raised_at_once(lambda: d.read_bytes("fifo"), tmp_path / "fifo")
        assert isinstance(err, sf.NotAFile) and err.message == f"file {tmp_path / 'fifo'} is not a regular file."
        err = raised_at_once(lambda: d.link_or_copy("fifo", tmp_path / "dst"), tmp_path / "fifo")
        assert isinstance(err, sf.NotAFile)
    with pytest.raises(BadInput) as e:
        sf.OpenDir.open(tmp_path / "f")
    assert e.value.message == f"folder {tmp_path / 'f'} is not a directory."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "fifo", "lk"]


def test_opendir_on_fd_0_is_closed_too():
    """With stdin closed, the folder's descriptor may be 0: close() must still close it."""
    code = ("import os; from pgle import shared_folders as sf\n"
            "os.close(0)\n"
            "d = sf.OpenDir.open('/')\n"
            "assert d.fd == 0, d.fd\n"
            "d.close()\n"
            "try: os.fstat(0)\n"
            "except OSError: print('closed')\n"
            "else: print('still open')")
    with sf.OpenDir.open("/") as d:  # the same code in process (fd > 0 here)
        pass
    assert d.fd == -1
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "closed", out.stderr


def test_opendir_link_or_copy(tmp_path):
    (tmp_path / "src").write_bytes(b"s")
    (tmp_path / "out").mkdir()
    with sf.OpenDir.open(tmp_path) as d:
        d.link_or_copy("src", tmp_path / "out" / "dst")
        with pytest.raises(sf.NotAFile) as e:
            d.link_or_copy("out", tmp_path / "out" / "x", what="profile")
    assert e.value.message == f"profile {tmp_path / 'out'} is not a regular file."
    assert os.stat(tmp_path / "out" / "dst").st_ino == os.stat(tmp_path / "src").st_ino


# -- deleting trees ---------------------------------------------------------------------------
def tree(root: Path) -> None:
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "f").write_text("1")
    (root / "a" / "b" / "c" / "g").write_text("2")
    (root / "a" / "b" / ".hidden").write_text("3")


def test_rmtree_deletes_the_tree_and_unlinks_links_without_following(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("mine")
    tree(tmp_path / "run")
    os.symlink(keep, tmp_path / "run" / "a" / "to-keep")
    os.symlink(keep / "precious", tmp_path / "run" / "a" / "b" / "file-link")
    with sf.OpenDir.open(tmp_path) as d:
        d.rmtree("run", expect=d.lstat("run"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    assert (keep / "precious").read_text() == "mine"


def test_rmtree_refuses_a_file_a_link_and_a_replaced_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "lk")
    with sf.OpenDir.open(tmp_path) as d:
        for name in ("file", "lk"):
            with pytest.raises(BadInput) as e:
                d.rmtree(name)
            assert e.value.message == f"{tmp_path / name} is not a folder; pgle deletes only folders it made."
        other = tmp_path / "other"
        other.mkdir()
        with pytest.raises(PgleError) as e:
            d.rmtree("real", expect=os.stat(other))
        assert e.value.message == f"{tmp_path / 'real'} was replaced since pgle checked it; left as it is."
        with pytest.raises(BadInput):
            d.rmtree("..")
    assert (tmp_path / "real" / "x").read_text() == "x" and (tmp_path / "file").exists()


def test_rmtree_refuses_a_tree_deeper_than_pgle_makes(tmp_path):
    deep = tmp_path / "run"
    p = deep
    for _ in range(sf.MAX_DELETE_DEPTH + 1):
        p = p / "d"
    p.mkdir(parents=True)
    with sf.OpenDir.open(tmp_path) as d, pytest.raises(PgleError) as e:
        d.rmtree("run")
    assert e.value.message.endswith(f"is nested deeper than {sf.MAX_DELETE_DEPTH} folders: pgle "
                                    "makes none so deep and deletes nothing there.")
    assert e.value.message == (f"{deep / '/'.join(['d'] * (sf.MAX_DELETE_DEPTH + 1))} is nested "
                               f"deeper than {sf.MAX_DELETE_DEPTH} folders: pgle makes none so "
                               "deep and deletes nothing there.")
    assert p.is_dir()  # the deepest folder was never deleted
    # exactly MAX_DELETE_DEPTH levels below the root folder: deleted
    p = tmp_path / "ok"
    for _ in range(sf.MAX_DELETE_DEPTH):
        p = p / "d"
    p.mkdir(parents=True)
    (p / "leaf").write_text("x")
    with sf.OpenDir.open(tmp_path) as d:
        d.rmtree("ok")
    assert not (tmp_path / "ok").exists()


def test_rmtree_private_steps_refuse_a_swapped_folder(tmp_path):
    """_rmtree checks each folder it enters is the one it listed (same inode), and refuses a
    folder turned into a link; a folder removed meanwhile is nothing to do."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    st_a = os.lstat(tmp_path / "a")
    with sf.OpenDir.open(tmp_path) as d:
        with pytest.raises(PgleError) as e:
            sf._rmtree(d.fd, "b", st_a, "shown/b", 0)
        assert e.value.message == "shown/b was replaced while pgle deleted it; left as it is."
        os.symlink(tmp_path / "b", tmp_path / "lk")
        # a link swapped in for the very folder listed: never entered
        with pytest.raises(PgleError) as e:
            sf._rmtree(d.fd, "lk", os.lstat(tmp_path / "b"), "shown/lk", 0)
        assert e.value.message == "shown/lk was replaced while pgle deleted it; left as it is."
        sf._rmtree(d.fd, "gone", st_a, "shown/gone", 0)  # nothing, no error
        (tmp_path / "f").write_text("")
        with pytest.raises(PgleError) as e:  # a file, even the one listed, is no folder
            sf._rmtree(d.fd, "f", os.lstat(tmp_path / "f"), "shown/f", 0)
        assert e.value.message == "shown/f was replaced while pgle deleted it; left as it is."
        sf._rmtree(d.fd, "a", st_a, "shown/a", sf.MAX_DELETE_DEPTH)  # the last level allowed
    assert (tmp_path / "b" / "x").exists() and not (tmp_path / "a").exists()


def test_rmtree_fd_by_path(tmp_path):
    tree(tmp_path / "run")
    with sf.OpenDir.open(tmp_path) as d:
        sf.rmtree_fd(d.fd, "run", "shown")
    assert list(tmp_path.iterdir()) == []


# -- system calls that fail: real limits and flags (helpers/fs_limits.py) --------------------
def test_a_copy_cut_short_was_never_readable_wider_than_its_source(tmp_path, umask_022):
    """The copy is created with its final mode (at most the source's), not the umask's until
    its fchmod: a copy cut short by `ulimit -f` is left as private as its source."""
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second filesystem (/dev/shm)")
    src = other / f"pgle-src-{os.getpid()}-cut"
    src.write_bytes(os.urandom(1 << 16))
    os.chmod(src, 0o600)
    try:
        with pytest.raises(OSError) as e, file_size_limit(4096):
            sf.link_or_copy(src, tmp_path / "dst")
    finally:
        src.unlink()
    assert e.value.errno == errno.EFBIG
    assert (tmp_path / "dst").stat().st_size == 4096
    assert mode(tmp_path / "dst") == 0o600  # the umask's would be 0o644


def test_write_atomic_where_the_temp_can_be_neither_renamed_nor_removed(tmp_path, umask_022):
    """An append-only folder: the rename fails (EPERM) and so does the temp's removal; the
    failure is still one WriteFailed line, and the temp left behind was private (0o600) until
    its fchmod, whichever of the two failed."""
    folder = tmp_path / "shared"
    folder.mkdir()
    with append_only(folder), sf.OpenDir.open(folder) as d:
        with pytest.raises(WriteFailed) as e:
            d.write_atomic("record.json", b"{}\n", what="record")
        assert e.value.message == (f"cannot write record {folder / 'record.json'}: Operation not "
                                   "permitted.")
        (left,) = os.listdir(folder)
        assert re.fullmatch(r"\.record\.json\.[0-9a-f]{12}\.tmp", left)
        assert mode(folder / left) == 0o644  # after its fchmod: the umask's
        # A write cut short by `ulimit -f`, before the fchmod: the temp as it was created.
        with pytest.raises(WriteFailed) as e, file_size_limit(2):
            d.write_atomic("big.json", b"0123456789", what="record")
        assert e.value.errno == errno.EFBIG
        assert e.value.hint == ("The file size limit was reached (see `ulimit -f`); nothing was "
                                "written.")
        (cut,) = (n for n in os.listdir(folder) if n.startswith(".big.json."))
        assert mode(folder / cut) == 0o600 and (folder / cut).stat().st_size == 2
        assert not (folder / "record.json").exists() and not (folder / "big.json").exists()


def test_rmtree_empties_a_tree_whose_own_removal_is_refused(tmp_path):
    """The tree's folder itself cannot go (its parent is append-only): what it held is deleted
    and the refusal is the rmdir's own error, not hidden (only a folder already gone is)."""
    parent = tmp_path / "parent"
    (parent / "tree" / "sub").mkdir(parents=True)
    (parent / "tree" / "a").write_text("x")
    (parent / "tree" / "sub" / "b").write_text("y")
    with append_only(parent), sf.OpenDir.open(parent) as d:
        with pytest.raises(PermissionError) as e:
            d.rmtree("tree")
        assert e.value.errno == errno.EPERM
    assert os.listdir(parent / "tree") == []


def test_sub_out_of_descriptors_is_the_open_error_not_a_vanished_folder(tmp_path):
    """Only ENOENT after `create` means the folder vanished; EMFILE (no descriptor left) is the
    open's own OSError, with or without `create`."""
    (tmp_path / "there").mkdir()
    with sf.OpenDir.open(tmp_path) as d:
        for create in (False, True):
            with pytest.raises(OSError) as e, no_descriptor_left():
                d.sub("there", create=create)
            assert e.value.errno == errno.EMFILE and not isinstance(e.value, BadInput)
        with d.sub("there", create=True) as there:  # with descriptors again
            assert there.names() == []


# -- another process between two system calls (helpers/races.py) ----------------------------
def test_link_or_copy_undoes_a_link_to_a_source_swapped_after_its_open(tmp_path):
    """The source turned into a link between pgle's open and its hard link: the hard link (to
    the link) is undone and the copy comes from the file opened; the link's target is untouched."""
    src, other = tmp_path / "src", tmp_path / "other"
    src.write_bytes(b"opened")
    other.write_bytes(b"planted")

    def swap(_: Mapping[str, Any]) -> None:
        src.unlink()
        os.symlink(other, src)

    with before_call(os.link, lambda _: True, swap) as fired:
        sf.link_or_copy(src, tmp_path / "dst")
    assert fired
    dst = tmp_path / "dst"
    assert not dst.is_symlink() and dst.read_bytes() == b"opened"
    assert os.lstat(dst).st_nlink == 1  # a copy, linked to nothing
    assert other.read_bytes() == b"planted" and src.is_symlink()


def test_rmtree_goes_on_past_an_entry_removed_while_it_deleted(tmp_path):
    """Another process deletes one of the files pgle listed: that one is nothing to do, and
    the ones after it are still deleted (the folder goes)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    for name in ("a", "b", "c", "d"):
        (gone / name).write_text(name)
    order = [e.name for e in os.scandir(gone)]  # the order _rmtree lists them in

    def remove_the_next(_: Mapping[str, Any]) -> None:
        (gone / order[1]).unlink()

    def at_the_first(names: Mapping[str, Any]) -> bool:
        return getattr(names.get("entry"), "name", None) == order[0]

    with sf.OpenDir.open(tmp_path) as d:
        with before_call(os.unlink, at_the_first, remove_the_next) as fired:
            d.rmtree("gone")
    assert fired
    assert list(tmp_path.iterdir()) == []


def test_sub_calls_a_file_gone_before_its_look_no_link(tmp_path):
    """A file where a folder goes fails the open (ENOTDIR); removed before pgle looks at what it
    was, it is still "not a directory", never called a symbolic link."""
    (tmp_path / "f").write_text("")
    with sf.OpenDir.open(tmp_path) as d:
        with before_call(
            os.stat, lambda names: names.get("name") == "f", lambda _: (tmp_path / "f").unlink()
        ) as fired, pytest.raises(BadInput) as e:
            d.sub("f", what="job folder")
    assert fired
    assert type(e.value) is BadInput
    assert e.value.message == f"job folder {tmp_path / 'f'} is not a directory."


def test_sub_create_names_a_folder_removed_before_its_open(tmp_path):
    """`create`: the folder made (or found), then removed by another process before pgle opens
    it, is one sentence saying so."""
    made = tmp_path / "made"

    def at_the_open(names: Mapping[str, Any]) -> bool:
        return names.get("name") == "made" and names.get("create") is True

    with sf.OpenDir.open(tmp_path) as d:
        with before_call(os.open, at_the_open, lambda _: made.rmdir()) as fired, pytest.raises(
            BadInput
        ) as e:
            d.sub("made", what="store folder", create=True)
    assert fired
    assert e.value.message == (
        f"store folder {made} vanished while pgle opened it: another process renamed or "
        "removed it; rerun."
    )


def test_write_atomic_never_writes_through_a_link_planted_at_its_temp_name(tmp_path):
    """A link planted at the very temp name (another user who guessed or watched it) is
    refused by O_EXCL|O_NOFOLLOW: the write fails in one sentence and the link's target is
    untouched."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"not pgle's")
    os.chmod(victim, 0o600)
    planted: list[str] = []

    def plant(names: Mapping[str, Any]) -> None:
        planted.append(names["tmp"])
        os.symlink(victim, tmp_path / names["tmp"])

    with sf.OpenDir.open(tmp_path) as d:
        with before_call(os.open, lambda names: "tmp" in names, plant) as fired, pytest.raises(
            WriteFailed
        ) as e:
            d.write_atomic("meta.json", b"{}", what="store file")
    assert fired
    assert e.value.message == f"cannot write store file {tmp_path / 'meta.json'}: File exists."
    assert victim.read_bytes() == b"not pgle's" and mode(victim) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([planted[0], "victim"])
