"""Real kernel conditions for the paths where a system call fails, set on this process or a
folder for the length of one `with` block (issue 37: tests in process, where a mutation run
sees them):

- `append_only(folder)`: the ext4 append-only flag (`chattr +a`, root): names can be added to
  the folder, never removed or renamed away (unlink, rename and rmdir there: EPERM).
- `immutable(path)`: the ext4 immutable flag (`chattr +i`, root): not even its mode changes
  (chmod: EPERM).
- `file_size_limit(n)`: `ulimit -f` for this process (RLIMIT_FSIZE, SIGXFSZ ignored): a write
  past n bytes of a file fails with EFBIG. Nothing may be printed meanwhile (stdout is a file).
- `no_descriptor_left()`: RLIMIT_NOFILE lowered to the descriptors open now, so the next
  open() fails with EMFILE.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def append_only(folder: Path) -> Iterator[Path]:
    with _flag(folder, "a", "append-only"):
        yield folder


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[Path]:
    with _flag(path, "i", "immutable"):
        yield path


@contextlib.contextmanager
def _flag(path: Path, letter: str, name: str) -> Iterator[None]:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip(f"needs root and chattr to set the {name} flag")
    done = subprocess.run(["chattr", f"+{letter}", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no {name} flag on this filesystem: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", f"-{letter}", str(path)], check=True, capture_output=True)


@contextlib.contextmanager
def file_size_limit(nbytes: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the default would end the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


@contextlib.contextmanager
def no_descriptor_left() -> Iterator[None]:
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
