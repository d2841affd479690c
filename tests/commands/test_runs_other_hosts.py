"""`pgle runs prune` on a shared filesystem: a run of another host is in use while its lease was
refreshed within the documented ten minutes (a busy host or a slow filesystem may skip some of
its refreshes), and prunable once it is older (issue 37's independent mutants: a one-minute
lifetime deleted another node's live run)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from helpers.pgle_testing import pgle_lines, run_pgle


def _other_hosts_run(root: Path, name: str, refreshed_ago_s: float) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "workload.log").write_text("x\n")
    lease = d / "lease.json"
    lease.write_text(json.dumps({"host": "node-b-not-this-one", "pid": 4242,
                                 "started": time.time() - 86400, "refresh_seconds": 60,
                                 "ttl_seconds": 600}))
    t = time.time() - refreshed_ago_s
    os.utime(lease, (t, t))
    old = time.time() - 10 * 86400  # the files: ten days old
    for p in (d / "workload.log", d):
        os.utime(p, (old, old))


def test_another_hosts_run_is_in_use_while_its_lease_is_fresh(project: Path):
    root = project / ".pgle" / "runs"
    _other_hosts_run(root, "20260101-000001-run-4242", refreshed_ago_s=5 * 60)
    _other_hosts_run(root, "20260101-000002-run-4243", refreshed_ago_s=60 * 60)
    # --max-size 1: every folder is selected; only those in use stay.
    proc = run_pgle("runs", "prune", "--max-size", "1", "--yes", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    # Refreshed 5 minutes ago: live on node-b, kept; an hour ago: its run is gone, deleted.
    assert sorted(p.name for p in root.iterdir()) == ["20260101-000001-run-4242"]
    assert any("20260101-000001-run-4242" in line and "in use" in line
               for line in pgle_lines(proc)), pgle_lines(proc)
