"""`pgle runs ls|prune`: run folders under .pgle/runs, by age, size and count (issue 13, case 7).

Real folders with real files; a live folder carries the pid of a process that is running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_lines, report_of, run_pgle

DAY = 86400.0


def make_run(root: Path, name: str, size: int, age_days: float) -> Path:
    d = root / name
    (d / "trace").mkdir(parents=True)
    (d / "workload.log").write_bytes(b"x" * size)
    (d / "trace" / "t.xplane.pb").write_bytes(b"y" * size)
    t = time.time() - age_days * DAY
    for p in (d / "trace" / "t.xplane.pb", d / "workload.log", d / "trace", d):
        os.utime(p, (t, t))
    return d


@pytest.fixture
def tree(project: Path):
    """Five run folders, oldest first; the newest belongs to a process that is still running."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True).stdout.decode().strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    root = project / ".pgle" / "runs"
    names = [f"20260101-00000{i}-collect-{dead}" for i in range(4)]
    for i, name in enumerate(names):
        make_run(root, name, 1000 * (i + 1), age_days=10 - 2 * i)  # 10, 8, 6, 4 days old
    live_name = f"20260101-000009-collect-{live.pid}"
    make_run(root, live_name, 500, age_days=30)  # old, but in use
    yield project, root, names, live_name
    live.kill()
    live.wait()


def test_ls_lists_newest_first_on_stdout(tree):
    project, root, names, live_name = tree
    proc = run_pgle("runs", "ls", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    header, *rows = proc.stdout.decode().splitlines()
    assert header.split() == ["RUN", "SIZE", "MODIFIED", "IN", "USE"]
    assert [r.split()[0] for r in rows] == names[::-1] + [live_name]
    assert rows[-1].endswith("in use") and not rows[0].endswith("in use")
    rep = report_of(run_pgle("runs", "ls", "--json", str(root), cwd=project))
    assert rep["total"] == {"runs": 5, "bytes": 2 * (1000 + 2000 + 3000 + 4000 + 500)}


def test_prune_is_a_dry_run_and_never_touches_a_live_folder(tree):
    project, root, names, live_name = tree
    proc = run_pgle("runs", "prune", "--older-than", "7d", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(p.name for p in root.iterdir()) == sorted(names + [live_name])  # dry run
    would = [l for l in pgle_lines(proc) if "would delete" in l]
    assert any(names[0] in l for l in would) and any(names[1] in l for l in would)
    assert not any(live_name in l for l in would)
    assert any("dry run, pass --yes" in l for l in pgle_lines(proc))

    proc = run_pgle("runs", "prune", "--older-than", "7d", "--yes", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(p.name for p in root.iterdir()) == sorted(names[2:] + [live_name])
    assert any("in use by a running process" in l and live_name in l for l in pgle_lines(proc))


def test_prune_by_size_and_keep_last(tree):
    project, root, names, live_name = tree
    # Newest first: 8000 + 6000 B fit in 15000 B, 4000 and 2000 more do not; the live one stays.
    rep = report_of(run_pgle("runs", "prune", "--max-size", "15000", "--json", cwd=project))
    assert [r["name"] for r in rep["selected"]] == [names[1], names[0]]
    rep = report_of(run_pgle("runs", "prune", "--keep-last", "1", "--yes", "--json", cwd=project))
    assert rep["deleted"] == names[2::-1]
    assert sorted(p.name for p in root.iterdir()) == sorted([names[3], live_name])


def test_prune_bad_input(tree):
    project, *_ = tree
    for args, what in ((["runs", "prune"], "prune needs"),
                       (["runs", "prune", "--max-size", "lots"], "is not a size"),
                       (["runs", "prune", "--older-than", "soon"], "is not a duration")):
        proc = run_pgle(*args, cwd=project)
        assert proc.returncode == 2 and what in proc.stderr.decode(), proc.stderr.decode()
        assert "Traceback" not in proc.stderr.decode()
