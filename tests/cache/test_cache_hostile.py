"""A shared compilation cache's manifest is untrusted (issue 31): a forged run record cannot
make `cache prune` crash, and a live process of another user counts as alive."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_lines, run_pgle

from pgle.cache.manifest import pid_alive


def manifest(cache: Path, pid) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "pgle-manifest.json").write_text(json.dumps({
        "format": 1, "environment": None, "modules": {},
        "runs": [{"id": "x", "state": "in_progress", "pid": pid, "host": socket.gethostname(),
                  "started": time.time(), "finished": None, "workload": "w",
                  "environment": None}]}))


@pytest.mark.parametrize("pid", [10**30, -1, 0, True, "1", None, [1]])
def test_a_forged_run_record_never_crashes_prune(tmp_path: Path, pid):
    """kill(2) of 10**30 raised OverflowError (a traceback); -1 and 0 are process groups,
    always "alive"; none of them names a process, so prune goes on."""
    cache = tmp_path / "cache"
    manifest(cache, pid)
    proc = run_pgle("cache", "prune", str(cache), "--older-than", "1d", "--yes", cwd=tmp_path)
    assert "Traceback" not in proc.stderr.decode(), proc.stderr.decode()
    assert proc.returncode == 0, proc.stderr.decode()


def test_a_live_process_is_alive_whoever_owns_it(tmp_path: Path):
    """A live prewarm keeps prune away; pid 1 (init, another user's to anyone but root)
    reads as alive through EPERM as through success."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert pid_alive(live.pid) and pid_alive(1)
        cache = tmp_path / "cache"
        manifest(cache, live.pid)
        proc = run_pgle("cache", "prune", str(cache), "--older-than", "1d", "--yes", cwd=tmp_path)
        assert proc.returncode == 1 and "is writing to" in pgle_lines(proc)[-1], proc.stderr.decode()
    finally:
        live.kill()
        live.wait()


def _entry_with_stamp(cache: Path, stamp_s: float):
    from pgle.cache.entries import list_entries

    cache.mkdir(parents=True, exist_ok=True)
    key = "jit_step-" + "a" * 64
    (cache / f"{key}-cache").write_bytes(b"x" * 100)
    (cache / f"{key}-atime").write_bytes(int(stamp_s * 1e9).to_bytes(8, "little"))
    [entry] = list_entries(str(cache))
    assert entry.atime_file
    return entry, cache / f"{key}-atime"


def test_an_atime_stamp_swapped_for_a_link_or_a_fifo_is_not_followed(tmp_path: Path):
    """Issue 31: the -atime stamp was read with open() and read whole: a link swapped in after
    the listing was followed (another file's bytes taken as the stamp), a FIFO blocked prune
    forever and /dev/zero read without end. It is opened without following links, must be
    a regular file, and at most a few bytes are read; otherwise the entry's own write time
    counts."""
    import os

    from pgle.cache.entries import last_used

    now = time.time()
    entry, atime = _entry_with_stamp(tmp_path / "cache", now)
    assert abs(last_used(str(tmp_path / "cache"), entry) - now) < 1
    future = tmp_path / "future-stamp"
    future.write_bytes(int((now + 10**8) * 1e9).to_bytes(8, "little"))
    for planted in ("link", "fifo", "zero"):
        atime.unlink()
        if planted == "link":
            atime.symlink_to(future)
        elif planted == "fifo":
            os.mkfifo(atime)
        else:
            atime.symlink_to("/dev/zero")
        assert last_used(str(tmp_path / "cache"), entry) == entry.mtime, planted


def test_another_users_live_prewarm_is_alive_to_a_user_who_cannot_signal_it(tmp_path: Path):
    """The EPERM side of pid_alive, as an unprivileged user sees it: root's live process (a
    prewarm that another account started) must read as alive to `nobody`, whose kill(2) of it
    fails with EPERM; a pid that names no process reads as dead. Run as root, the check runs in
    a child as uid 65534 with the system python (the venv's may sit in root's private home)."""
    import os
    import shutil

    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    repo = Path(__file__).resolve().parents[2]
    if system_python is None:
        pytest.skip("no system python3")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from pgle.cache.manifest import pid_alive; "
                "print(pid_alive(int(sys.argv[2])), pid_alive(int(sys.argv[3])))")
        probe = subprocess.run([system_python, "-I", "-c", code, str(repo), str(live.pid),
                                str(dead.pid)], user=65534, group=65534, capture_output=True,
                               text=True, timeout=60, cwd="/")
        if probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr:
            pytest.skip(f"the system python cannot import pgle: {probe.stderr.strip()[-200:]}")
        assert probe.stdout.split() == ["True", "False"], probe.stderr
    finally:
        live.kill()
        live.wait()
