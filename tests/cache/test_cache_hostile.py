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
