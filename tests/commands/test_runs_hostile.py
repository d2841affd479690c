"""`pgle runs prune ROOT` touches only what pgle recognises as a run folder (issue 31, item 2):
a name `<stamp>-<command>-<pid>` and a file pgle writes in it. Anything else in ROOT (`src/`,
`.git/`, `.pgle/runs` itself, `profiles/`, `jobs/`, a link) is never listed and never deleted;
the dry run lists exactly what `--yes` deletes; deletion goes through descriptors and never
follows a link, not even one swapped in after the folder was listed.

Real folders and links, the real CLI in subprocesses; the swap cases swap between pgle's steps.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_lines, report_of, run_pgle

from pgle.errors import PgleError
from pgle.shared_folders import OpenDir, rmtree_fd


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True)
    return int(done.stdout)


def make_run(runs: Path, name: str, *, lease: dict | None = None, age_days: float = 3) -> Path:
    """A run folder as pgle leaves it: lease.json, workload.log, a trace."""
    folder = runs / name
    (folder / "trace" / "plugins" / "profile").mkdir(parents=True)
    (folder / "trace" / "plugins" / "profile" / "t.xplane.pb").write_bytes(b"y" * 100)
    (folder / "workload.log").write_text("step 1\n")
    pid = int(name.rsplit("-", 1)[1])
    (folder / "lease.json").write_text(json.dumps(
        lease if lease is not None else {"host": socket.gethostname(), "pid": pid}))
    t = time.time() - age_days * 86400
    for p in [*folder.rglob("*"), folder]:
        os.utime(p, (t, t), follow_symlinks=False)
    return folder


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under `root` (links as their target text), for before/after comparisons."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: source, git, and pgle's own `.pgle` with two dead run folders,
    profiles and jobs."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text("print('hi')\n")
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    pid = dead_pid()
    for i in range(2):
        make_run(root / ".pgle" / "runs", f"20250101-00000{i}-collect-{pid}")
    (root / ".pgle" / "profiles" / "store-1").mkdir(parents=True)
    (root / ".pgle" / "profiles" / "store-1" / f"{'a' * 32}.pbtxt").write_text("costs\n")
    (root / ".pgle" / "jobs" / "job-1").mkdir(parents=True)
    (root / ".pgle" / "jobs" / "job-1" / "rank-0.json").write_text("{}")
    return root


def runs_of(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".pgle" / "runs").iterdir())


def test_prune_of_a_project_folder_deletes_only_its_run_folders(project: Path):
    """The hostile round's reproduction: `runs prune . --keep-last 0 --yes` deleted src/ and
    .git/; now ROOT names the project, and only its run folders go."""
    keep = snapshot(project / "src") | {".git/" + k: v for k, v in snapshot(project / ".git").items()}
    dry = run_pgle("runs", "prune", ".", "--keep-last", "0", "--json", cwd=project)
    assert dry.returncode == 0, dry.stderr.decode()
    report = report_of(dry)
    assert report["root"] == os.path.join(".pgle", "runs")
    assert sorted(r["name"] for r in report["selected"]) == runs_of(project)
    text = run_pgle("runs", "prune", ".", "--keep-last", "0", cwd=project)
    lines = pgle_lines(text)
    assert not any(".git" in line or "src" in line for line in lines), lines
    assert any("holds pgle's run folders in .pgle/runs" in line for line in lines), lines

    done = run_pgle("runs", "prune", ".", "--keep-last", "0", "--yes", "--json", cwd=project)
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(report_of(done)["deleted"]) == sorted(
        r["name"] for r in report["selected"])
    assert runs_of(project) == []
    assert (snapshot(project / "src") | {".git/" + k: v for k, v in
                                         snapshot(project / ".git").items()}) == keep


def test_prune_of_the_pgle_folder_never_deletes_runs_profiles_or_jobs(project: Path):
    """`runs prune .pgle --older-than 0s --yes` deleted .pgle/runs, profiles and jobs."""
    others = snapshot(project / ".pgle" / "profiles"), snapshot(project / ".pgle" / "jobs")
    done = run_pgle("runs", "prune", ".pgle", "--older-than", "0s", "--yes", "--json", cwd=project)
    assert done.returncode == 0, done.stderr.decode()
    assert len(report_of(done)["deleted"]) == 2
    assert (project / ".pgle" / "runs").is_dir() and runs_of(project) == []
    assert (snapshot(project / ".pgle" / "profiles"), snapshot(project / ".pgle" / "jobs")) == others


def test_a_folder_of_no_runs_is_left_whole_and_said_so(project: Path):
    """ROOT that holds no run folders: folders named like runs but holding no file pgle
    writes, files, links: nothing listed, nothing deleted, one line says what was left."""
    src = project / "src"
    named = src / f"20250101-000000-collect-{dead_pid()}"
    named.mkdir()  # a name alone is not enough
    (named / "notes.txt").write_text("mine")
    (src / "logs").mkdir()  # content alone is not enough: a user's folder with a workload.log
    (src / "logs" / "workload.log").write_text("my own log")
    before = snapshot(src)
    for argv in (["--keep-last", "0"], ["--older-than", "0s"], ["--max-size", "0"]):
        done = run_pgle("runs", "prune", "src", *argv, "--yes", "--json", cwd=project)
        assert done.returncode == 0, done.stderr.decode()
        assert report_of(done)["selected"] == []
    assert snapshot(src) == before
    lines = pgle_lines(run_pgle("runs", "ls", "src", cwd=project))
    assert any(line.startswith("pgle: left alone: 3 entries of src") for line in lines), lines


def test_the_dry_run_lists_exactly_what_yes_deletes(project: Path):
    runs = project / ".pgle" / "runs"
    (runs / "notes.txt").write_text("not a run")
    (runs / "20250101-000009-collect-1").mkdir()  # empty: pgle writes its lease at once
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        make_run(runs, f"20250101-000005-collect-{live.pid}")
        dry = report_of(run_pgle("runs", "prune", "--older-than", "1d", "--json", cwd=project))
        listed = sorted(r["name"] for r in dry["selected"])
        done = report_of(run_pgle("runs", "prune", "--older-than", "1d", "--yes", "--json",
                                  cwd=project))
        assert sorted(done["deleted"]) == listed and len(listed) == 2
        assert sorted(runs_of(project)) == sorted(["notes.txt", "20250101-000009-collect-1",
                                                   f"20250101-000005-collect-{live.pid}"])
        assert dry["not_run_folders"] == ["20250101-000009-collect-1", "notes.txt"]
    finally:
        live.kill()
        live.wait()


def test_a_link_named_like_a_run_folder_is_never_followed(tmp_path: Path, project: Path):
    """A link in .pgle/runs to someone's folder that looks like a dead run: never listed,
    never followed, never removed; the target keeps every file."""
    victim = make_run(tmp_path / "elsewhere", f"20250101-000000-collect-{dead_pid()}")
    before = snapshot(victim)
    link = project / ".pgle" / "runs" / f"20240101-000000-collect-{dead_pid()}"
    link.symlink_to(victim)
    done = run_pgle("runs", "prune", "--keep-last", "0", "--yes", "--json", cwd=project)
    assert done.returncode == 0, done.stderr.decode()
    assert link.name not in report_of(done)["deleted"]
    assert link.is_symlink() and snapshot(victim) == before


def test_links_inside_a_run_folder_are_removed_not_followed(tmp_path: Path, project: Path):
    victim = tmp_path / "victim"
    (victim / "deep").mkdir(parents=True)
    (victim / "deep" / "thesis.tex").write_text("precious")
    run = project / ".pgle" / "runs" / runs_of(project)[0]
    (run / "trace" / "link-dir").symlink_to(victim)
    (run / "link-file").symlink_to(victim / "deep" / "thesis.tex")
    done = run_pgle("runs", "prune", "--keep-last", "0", "--yes", cwd=project)
    assert done.returncode == 0, done.stderr.decode()
    assert not run.exists() and (victim / "deep" / "thesis.tex").read_text() == "precious"


def test_a_runs_folder_that_is_another_users_link_is_refused(tmp_path: Path, project: Path):
    """`.pgle/runs` swapped for a link by someone else (the link is not this user's): refused
    in one line, exit 2; the target is untouched. A link the user made is followed."""
    victim = tmp_path / "victim-runs"
    make_run(victim, f"20250101-000000-collect-{dead_pid()}")
    before = snapshot(victim)
    runs = project / ".pgle" / "runs"
    os.rename(runs, project / ".pgle" / "runs.real")
    runs.symlink_to(victim)
    other = 4242 if os.geteuid() == 0 else None
    if other is None:
        pytest.skip("needs root to make a link owned by another user (lchown)")
    os.lchown(runs, other, other)
    done = run_pgle("runs", "prune", "--keep-last", "0", "--yes", cwd=project)
    assert done.returncode == 2, done.stderr.decode()
    assert "symbolic link" in pgle_lines(done)[-1] and "Traceback" not in done.stderr.decode()
    assert snapshot(victim) == before
    os.lchown(runs, 0, 0)  # now the user's own link (to scratch space): followed
    done = run_pgle("runs", "prune", "--keep-last", "0", "--yes", cwd=project)
    assert done.returncode == 0, done.stderr.decode()
    assert list(victim.iterdir()) == []


def test_forged_leases_never_crash_and_never_pin_by_a_bogus_pid(project: Path):
    """Leases another user could write: a pid kill(2) cannot take (10**30 raised
    OverflowError), -1 and 0 (process groups: always "alive"), true, a string, a nested
    object, a link, a FIFO. One listing, no traceback; a bogus pid names no process."""
    runs = project / ".pgle" / "runs"
    host = socket.gethostname()
    forged = {"huge": 10**30, "minus": -1, "zero": 0, "true": True, "text": "1"}
    for i, (_, pid) in enumerate(forged.items()):
        make_run(runs, f"20250102-00000{i}-collect-{dead_pid()}", lease={"host": host, "pid": pid})
    nested = make_run(runs, f"20250103-000000-collect-{dead_pid()}")
    (nested / "lease.json").write_text("[" * 100000 + "]" * 100000)
    fifo = make_run(runs, f"20250103-000001-collect-{dead_pid()}")
    (fifo / "lease.json").unlink()
    os.mkfifo(fifo / "lease.json")
    old = time.time() - 3 * 86400  # unreadable leases count as refreshed at their mtime
    for lease in (nested / "lease.json", fifo / "lease.json"):
        os.utime(lease, (old, old))
    done = run_pgle("runs", "ls", "--json", cwd=project)
    assert done.returncode == 0 and "Traceback" not in done.stderr.decode(), done.stderr.decode()
    live = {r["name"]: r["live"] for r in report_of(done)["runs"]}
    bogus = [live[n] for n in live if n.startswith("20250102")]
    assert bogus == [False] * len(forged), live
    # Unreadable as a lease: in doubt, in use (its mtime is three days old: stale, not live).
    done = run_pgle("runs", "prune", "--keep-last", "0", "--yes", cwd=project)
    assert done.returncode == 0 and "Traceback" not in done.stderr.decode(), done.stderr.decode()
    assert runs_of(project) == []


# --- the swap, between pgle's steps, and in a loop ----------------------------------------------

def test_rmtree_fd_never_follows_a_folder_swapped_for_a_link_after_the_open(tmp_path: Path):
    """Open the parent, then swap the run folder for a link to a victim folder (what another
    user who can write the parent does between pgle's listing and its delete): the delete
    refuses the link; the victim keeps every file."""
    runs = tmp_path / "runs"
    run = make_run(runs, "20250101-000000-collect-1")
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "data").write_text("precious")
    with OpenDir.open(runs) as parent:
        st = parent.lstat(run.name)
        os.rename(run, tmp_path / "moved")
        run.symlink_to(victim)
        with pytest.raises(PgleError):
            rmtree_fd(parent.fd, run.name, str(run))
        # The deeper step: a folder the walk saw (its stat) swapped for another real folder.
        from pgle.shared_folders import _rmtree
        run.unlink()
        os.rename(victim, run)  # same name, another folder than the one listed
        with pytest.raises(PgleError, match="replaced while pgle deleted it"):
            _rmtree(parent.fd, run.name, st, str(run), 0)
        with pytest.raises(PgleError, match="replaced since pgle checked it"):
            parent.rmtree(run.name, expect=st)  # what prune passes: the folder it recognised
    assert (run / "sub" / "data").read_text() == "precious"


def test_a_loop_of_swaps_never_makes_prune_delete_outside(tmp_path: Path):
    """An attacker process swaps a dead run folder for a link to the victim's folder and back,
    as fast as it can, while `runs prune` runs again and again: the victim keeps every file."""
    runs = tmp_path / "project" / ".pgle" / "runs"
    runs.mkdir(parents=True)
    victim = tmp_path / "victim"
    (victim / "trace").mkdir(parents=True)
    (victim / "lease.json").write_text("{}")
    (victim / "trace" / "data").write_text("precious")
    before = snapshot(victim)
    attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, str(runs), str(victim)])
    try:
        for i in range(12):
            make_run(runs, f"20250101-{i + 1:06d}-collect-{dead_pid()}")
            run_pgle("runs", "prune", "--keep-last", "0", "--yes", cwd=tmp_path / "project")
    finally:
        attacker.kill()
        attacker.wait()
    assert snapshot(victim) == before


ATTACKER = r"""
import os, sys, time
runs, victim = sys.argv[1], sys.argv[2]
os.makedirs(runs, exist_ok=True)
name = os.path.join(runs, "20250101-000000-collect-999999")
aside = os.path.join(runs, ".aside")
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    try:
        if not os.path.lexists(name):
            os.makedirs(os.path.join(name, "trace"), exist_ok=True)
            open(os.path.join(name, "lease.json"), "w").write("{}")
            os.utime(os.path.join(name, "lease.json"), (0, 0))
        os.rename(name, aside)
        os.symlink(victim, name)
        os.unlink(name)
        os.rename(aside, name)
    except OSError:
        pass
"""
