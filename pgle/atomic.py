"""Atomic writes and no-clobber checks for every file pgle produces."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pgle.errors import BadInput


def check_writable_target(path: os.PathLike | str, *, force: bool, what: str = "output") -> Path:
    """Refuse before any work is done if `path` exists (without force) or its folder is unusable."""
    path = Path(path)
    if path.exists() and not force:
        raise BadInput(f"{what} {path} already exists.", hint="Pass --force to replace it.")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise BadInput(f"cannot write {what} {path}: {parent} is not a directory.")
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BadInput(f"cannot write {what} {path}: {probe} is not writable.")
    return path


def write_bytes_atomic(path: os.PathLike | str, data: bytes) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text_atomic(path: os.PathLike | str, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def replace_directory_atomic(path: os.PathLike | str, fill) -> Path:
    """Build a directory with `fill(tmp_dir)` beside `path`, then swap it in.

    Readers (XLA) see the old directory or the new one, never a half-written mix;
    an old directory is moved aside first and removed after the swap.
    """
    import shutil

    path = Path(os.path.abspath(os.fspath(path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        fill(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a profile directory is shared data
        if path.exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, aside / path.name)
            os.replace(tmp, path)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path
