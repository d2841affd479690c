"""A second, unprivileged user for tests about permissions (root ignores file modes).

As root, the user `pgle-test-other` is created once (useradd) and commands run as
it through `runuser`; CI may name another with PGLE_TEST_USER. Without root (and
without such a user) the test is skipped, and `-rs` lists the skip in CI.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import pytest

DEFAULT_NAME = "pgle-test-other"


def other_user() -> str:
    """The unprivileged user's name; skips the test when there can be none."""
    name = os.environ.get("PGLE_TEST_USER", DEFAULT_NAME)
    if os.geteuid() != 0:
        pytest.skip("needs root to run commands as a second user (runuser)")
    if shutil.which("runuser") is None:
        pytest.skip("runuser is not installed: cannot act as a second user")
    try:
        pwd.getpwnam(name)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                               "/usr/sbin/nologin", name], capture_output=True, text=True)
        if made.returncode not in (0, 9):  # 9: created meanwhile by another test process
            pytest.skip(f"cannot create the user {name}: {made.stderr.strip()}")
    return name


def as_user(name: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run `argv` as `name` (its uid and groups, the caller's environment)."""
    return subprocess.run(["runuser", "-u", name, "--", *argv], capture_output=True, **kwargs)


def reachable_by_others(path: str) -> None:
    """o+x on every folder above `path`, so the other user can walk down to it (tmp_path is 0700)."""
    path = os.path.abspath(path)
    while path != os.sep:
        path = os.path.dirname(path)
        mode = os.stat(path).st_mode
        if not mode & 0o001:
            os.chmod(path, mode | 0o001)
