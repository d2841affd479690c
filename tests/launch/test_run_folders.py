"""Run folders in a working folder others can write (issue 20): links planted in advance are
never followed, `.pgle/.gitignore` is never written through a link, and `pgle runs prune`
never removes a folder whose run is alive, on this host or another one of a shared filesystem.

Real `pgle run` processes on real folders. The planted links are the test's (the attacker's);
the files they point at are the user's, who runs pgle.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile

ECHO = str(WORKLOADS / "echo_env.py")


def victim_file(project: Path) -> Path:
    victim = project.parent / "victim.log"
    victim.write_text("precious\n")
    return victim


def test_precreated_run_folders_with_log_links_catch_nothing(project):
    """Folders named as the next run's would be (this second and the next few, the pid pgle will
    have: `exec` keeps the shell's), each holding links at workload.log and events.jsonl."""
    victim = victim_file(project)
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    plant = r'''
        pid=$$
        now=$(date +%s)
        for s in 0 1 2 3 4 5 6 7 8 9; do
          d=".pgle/runs/$(date -d "@$((now + s))" +%Y%m%d-%H%M%S)-run-$pid"
          mkdir -p "$d"
          ln -s "$VICTIM" "$d/workload.log"
          ln -s "$VICTIM" "$d/events.jsonl"
        done
        exec "$@"
    '''
    proc = subprocess.run(["bash", "-c", plant, "bash", sys.executable, "-m", "pgle", "run",
                           "--profile", "p.pb", "--json", ECHO], cwd=project,
                          env=pgle_env(VICTIM=str(victim)), capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert victim.read_text() == "precious\n"
    run_dir = Path(report_of(proc)["run_dir"])
    assert not (run_dir / "workload.log").is_symlink() and "ECHO " in (run_dir / "workload.log").read_text()
    assert len(list((project / ".pgle" / "runs").iterdir())) == 11  # ten planted, one of pgle's


def test_a_run_dir_with_a_link_at_the_log_is_refused(project):
    victim = victim_file(project)
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    for name, target in (("events.jsonl", project.parent / "new-file"), ("workload.log", victim)):
        run_dir = project / f"mine-{name}"
        run_dir.mkdir()
        (run_dir / name).symlink_to(target)  # dangling, then pointing at the user's file
        proc = run_pgle("run", "--profile", "p.pb", "--run-dir", str(run_dir), ECHO, cwd=project)
        assert victim.read_text() == "precious\n" and not (project.parent / "new-file").exists()
        assert proc.returncode == 2, proc.stderr.decode()
        assert f"already holds a run ({name})" in pgle_lines(proc)[-1]


def test_a_dangling_gitignore_link_creates_nothing(project):
    (project / ".pgle").mkdir()
    target = project.parent / "created-through-the-link"
    (project / ".pgle" / ".gitignore").symlink_to(target)
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", ECHO, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert not target.exists() and (project / ".pgle" / ".gitignore").is_symlink()


# --- leases: a run alive on another host is never pruned -----------------------------------------

def make_run(root: Path, name: str, *, lease: dict | None, lease_age: float = 0.0,
             age_days: float = 30.0) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "workload.log").write_bytes(b"x" * 1000)
    old = time.time() - age_days * 86400
    os.utime(folder / "workload.log", (old, old))
    if lease is not None:
        (folder / "lease.json").write_text(json.dumps(lease))
        t = time.time() - lease_age
        os.utime(folder / "lease.json", (t, t))
    os.utime(folder, (old, old))
    return folder


def test_runs_prune_never_removes_a_run_alive_on_another_host(project):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True).stdout.decode().strip()
    root = project / ".pgle" / "runs"
    other = {"host": "node-b.cluster", "pid": int(dead), "started": time.time() - 7200}
    alive = make_run(root, f"20260101-000000-run-{dead}", lease=other, lease_age=30)
    stale = make_run(root, f"20260101-000001-run-{dead}", lease=other, lease_age=3600)
    mine_dead = make_run(root, f"20260101-000002-run-{dead}",
                         lease={"host": socket.gethostname(), "pid": int(dead)}, lease_age=5)
    ls = run_pgle("runs", "ls", cwd=project)
    proc = run_pgle("runs", "prune", "--keep-last", "0", "--yes", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert alive.exists() and not stale.exists() and not mine_dead.exists()
    assert sorted(report_of(proc)["deleted"]) == sorted([stale.name, mine_dead.name])
    rows = {r.split()[0]: r for r in ls.stdout.decode().splitlines()}
    assert rows[alive.name].endswith("in use on node-b.cluster")
    assert "in use" not in rows[stale.name] and "in use" not in rows[mine_dead.name]


def test_a_running_pgle_holds_a_lease_on_its_run_folder(project):
    """The lease names this host and pgle's pid, so `runs prune` on another host sees it."""
    script = project / "wait.py"
    script.write_text("import sys, time\nprint('up', flush=True)\ntime.sleep(60)\n")
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    proc = subprocess.Popen([sys.executable, "-m", "pgle", "run", "--profile", "p.pb", str(script)],
                            cwd=project, env=pgle_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"up"
        (folder,) = (project / ".pgle" / "runs").iterdir()
        lease = json.loads((folder / "lease.json").read_text())
        assert lease["host"] == socket.gethostname() and lease["pid"] == proc.pid
        prune = run_pgle("runs", "prune", "--keep-last", "0", "--yes", "--json", cwd=project)
        assert report_of(prune)["deleted"] == [] and folder.exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_log_past_ulimit_f_says_to_raise_the_limit_not_to_free_space(project):
    """EFBIG is no full disk: the report names the file size limit."""
    script = project / "chatty.py"
    script.write_text("for i in range(4000):\n    print('x' * 100, flush=True)\n")
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    # 64 KiB (bash counts 1024-byte blocks); Python ignores SIGXFSZ, so the write gets EFBIG.
    proc = subprocess.run(["bash", "-c", 'ulimit -f 64 && exec "$@"', "bash", sys.executable, "-m",
                           "pgle", "run", "--profile", "p.pb", "--json", str(script)],
                          cwd=project, env=pgle_env(), capture_output=True, timeout=300)
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    warnings = [w for w in report_of(proc)["warnings"] if "is incomplete" in w]
    assert len(warnings) == 1 and "File too large" in warnings[0], report_of(proc)["warnings"]
    assert "ulimit -f" in warnings[0] and "free space" not in warnings[0]
