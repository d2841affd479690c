"""A real, small filesystem to fill up: a tmpfs of a few hundred KiB mounted by the test.

Root only (mount); the test is skipped with the reason otherwise, and `-rs`
lists the skip in CI.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(where: Path, size_kib: int = 512):
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs for the disk-full cases")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0777", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(where: Path, leave_bytes: int = 0) -> None:
    """Fill the filesystem under `where` until a write fails (or `leave_bytes` are left)."""
    with open(where / "filler", "wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    st = os.statvfs(where)
                    if leave_bytes and st.f_bavail * st.f_frsize <= leave_bytes + size:
                        break
                    f.write(b"\0" * size)
            except OSError:
                pass
