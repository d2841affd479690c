"""`--gather kv` (issue 23, case 3): a multi-process job whose ranks share no folder. Rank
reports and profiles travel through the key-value store of the jax.distributed service the
workload starts itself; each rank keeps its own job folder in storage only it sees.

Real processes: two pgle ranks (PGLE_RANK / PGLE_WORLD_SIZE, each in a private folder), two
JAX processes joined by jax.distributed on localhost. (Under SLURM the ranks come from srun's
variables, asserted in test_multiprocess_collect.py / test_multiprocess_run.py; what travels
through the store is the same.)
tests/helpers/dist_collect_profile stands in for a GPU trace's conversion (rank-dependent
numbers), as in the shared-folder tests.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pythonpath
from helpers.processes import start_pgle, wait_until

DIST = WORKLOADS / "dist_steps.py"
FAKE_GPU_CONVERSION = str(TESTS / "helpers" / "dist_collect_profile")



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_ranks(base: Path, *args: str, job: str = "kv-job", timeout: float = 300,
               workload: tuple[str, ...] = ()) -> list[tuple[int, dict | None, str, Path]]:
    """`pgle ARGS DIST [-- WORKLOAD]` as ranks 0 and 1, each in its own folder."""
    port = _free_port()
    procs = []
    for rank in (0, 1):
        home = base / f"rank{rank}"
        home.mkdir()
        env = pgle_env(PGLE_RANK=str(rank), PGLE_WORLD_SIZE="2", PGLE_JOB_ID=job,
                       SLURM_PROCID=str(rank), DIST_PORT=str(port),
                       PYTHONPATH=pythonpath(FAKE_GPU_CONVERSION))
        argv = [sys.executable, "-m", "pgle", *args, "--json", str(DIST)]
        if workload:
            argv += ["--", *workload]
        procs.append((home, subprocess.Popen(argv, cwd=home, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)))
    out = []
    for home, proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        text = stdout.decode().strip()
        out.append((proc.returncode, json.loads(text) if text.startswith("{") else None,
                    stderr.decode(), home))
    return out


def test_tune_merges_every_ranks_profile_without_a_shared_folder_and_runs_rank_1_with_it(
        tmp_path):
    """Phase 1 (collect) gathers rank 1's profile and report through the store, merges, and
    sends the job's report and profile back to rank 1; phase 2 runs rank 1 with that merged
    profile from its own storage. One tune for both: its collect phase is pgle collect's job.

    The workload calls jax.distributed.shutdown() itself (--shutdown), as many scripts do:
    pgle defers it to the end, so both phases' exchanges still go through the store."""
    (code0, report, err0, home0), (code1, _, err1, home1) = _two_ranks(
        tmp_path, "tune", "--gather", "kv", "-o", "merged.pb", workload=("--shutdown",))
    assert (code0, code1) == (0, 0), err0[-3000:] + err1[-3000:]
    job = report["phases"]["collect"]
    assert job["status"] == "collected" and job["job"]["reported"] == [0, 1]
    assert job["job"]["missing"] == []
    assert report["phases"]["run"]["job"]["reported"] == [0, 1]
    jd0 = home0 / ".pgle" / "jobs" / "kv-job" / "collect"
    jd1 = home1 / ".pgle" / "jobs" / "kv-job" / "collect"
    # Rank 1's profile and report came to rank 0's own job folder through the store...
    assert (jd0 / "profiles" / "rank-1.pb").read_bytes() == \
        (jd1 / "profiles" / "rank-1.pb").read_bytes()
    rank1 = json.loads((jd0 / "rank-1.json").read_text())
    assert rank1["profile"]["path"] == str(jd0 / "profiles" / "rank-1.pb")
    # where it ran: rank 1's storage (a tune's rank-1/ folder holds each phase's run folder)
    assert rank1["run_dir"] == str(home1 / ".pgle" / "jobs" / "kv-job" / "rank-1" / "collect")
    assert set(job["profile"]["merged_from"]) == {"0", "1"}
    assert (home0 / "merged.pb").stat().st_size > 0
    # ...and the job's report and profile went back to rank 1.
    assert (home1 / "merged.pb").read_bytes() == (home0 / "merged.pb").read_bytes()
    back = json.loads((jd1 / "job.json").read_text())
    assert back["profile"]["path"] == str(home1 / "merged.pb")
    assert back["job"]["reported"] == [0, 1]
    # Rank 1's run phase read the merged profile from its own storage.
    run1 = json.loads((home1 / ".pgle" / "jobs" / "kv-job" / "run" / "rank-1.json").read_text())
    assert run1["profile"]["path"] == str(home1 / "merged.pb")
    assert run1["profile"]["sha256"] == back["profile"]["sha256"]
    assert "pgle: tune: rank 1 of 2: not_applicable; exit 0" in err1, err1[-3000:]  # CPU


def test_ranks_without_a_distributed_client_are_named(tmp_path):
    """Nothing can travel without jax.distributed: rank 0 says so, and rank 1 is missing."""
    no_dist = tmp_path / "single.py"
    no_dist.write_text("import jax, jax.numpy as jnp\nprint(jnp.ones(3).sum())\n")
    base = tmp_path / "job"
    base.mkdir()
    port = _free_port()
    procs = []
    for rank in (0, 1):
        home = base / f"rank{rank}"
        home.mkdir()
        env = pgle_env(PGLE_RANK=str(rank), PGLE_WORLD_SIZE="2", PGLE_JOB_ID="nodist",
                       DIST_PORT=str(port))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pgle", "run", "--profile", str(_profile(tmp_path)),
             "--gather", "kv", "--gather-timeout", "120", "--json", str(no_dist)],
            cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    began = time.monotonic()
    (out0, err0), _ = [p.communicate(timeout=300) for p in procs]
    wall = time.monotonic() - began
    assert procs[0].returncode == 1, err0.decode()[-2000:]
    # Issue 37: no file can travel, and rank 0's folder is its own: it does not wait out the
    # 120 s gather timeout for a report that cannot come.
    assert wall < 60, f"{wall:.0f} s"
    job = json.loads(out0)
    assert job["job"]["missing"][0]["rank"] == 1
    assert "key-value store" in job["job"]["missing"][0]["why"]
    assert any("jax.distributed.initialize()" in w for w in job["warnings"]), job["warnings"]


def test_a_bundle_writes_only_the_senders_own_files(tmp_path):
    """What comes through the store is foreign data, as a shared job folder is: rank 1's
    bundle may only land as rank 1's files, inside this rank's job folder."""
    from pgle.jobs import kv

    sender = tmp_path / "sender"
    files = {"rank-1.json": json.dumps({"profile": {"path": str(sender / "profiles/rank-1.pb")},
                                        "log_path": "/elsewhere/workload.log"}).encode(),
             "profiles/rank-1.pb": b"\n\x02ok",
             "../escape": b"x", "rank-0.json": b"{}", "profiles/rank-2.pb": b"x",
             "profiles/rank-1/../../../escape": b"x", "job.json": b"{}", "notes.txt": b"x"}
    raw = kv.bundle(sender, files)
    mine = tmp_path / "mine"
    mine.mkdir()
    written = kv.write_rank_files(mine, 1, raw)
    assert sorted(written) == ["profiles/rank-1.pb", "rank-1.json"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                  if p.is_file()) == ["mine/profiles/rank-1.pb", "mine/rank-1.json"]
    report = json.loads((mine / "rank-1.json").read_text())
    assert report["profile"]["path"] == str(mine / "profiles" / "rank-1.pb")  # it came along
    assert report["log_path"] == "/elsewhere/workload.log"  # the sender's own storage


def _profile(folder: Path) -> Path:
    path = folder / "p.pbtxt"
    path.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    return path


def test_ctrl_c_while_the_workload_is_held_stops_the_rank_with_130(tmp_path):
    """`--gather kv` holds the finished workload while its files travel (Execution.resume):
    Ctrl-C on rank 0 then stops rank 0 with 130 once the workload has stopped, even where the
    exchange and the job report went on (issue 31: Ctrl-C anywhere)."""
    go = tmp_path / "go"
    late = tmp_path / "late_rank_1.py"
    # Rank 1 finishes its steps, then waits for the test: rank 0 waits for its files, held.
    late.write_text(textwrap.dedent(f"""
        import os, runpy, sys, time
        sys.argv = [{str(DIST)!r}]
        try:
            runpy.run_path({str(DIST)!r}, run_name="__main__")
        except SystemExit:
            pass
        deadline = time.monotonic() + 300
        while os.environ["PGLE_RANK"] == "1" and not os.path.exists({str(go)!r}):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    """))
    port = _free_port()
    procs = []
    for rank in (0, 1):
        home = tmp_path / f"rank{rank}"
        home.mkdir()
        env = pgle_env(PGLE_RANK=str(rank), PGLE_WORLD_SIZE="2", PGLE_JOB_ID="held",
                       DIST_PORT=str(port), PYTHONPATH=pythonpath(FAKE_GPU_CONVERSION))
        # A gather timeout far beyond the bound below: a rank that waits it out fails.
        procs.append(start_pgle("collect", "--gather", "kv", "--gather-timeout", "120",
                                "-o", "profile.pb", str(late), cwd=home, env=env))
    rank0, rank1 = procs
    try:
        # Rank 0's workload has finished and waits while pgle asks it for rank 1's files.
        # (The exact path, not a walk of rank0/: pgle removes folders under it meanwhile.)
        request = (tmp_path / "rank0" / ".pgle" / "jobs" / "held" / "rank-0" / "handoff"
                   / "request-0.json")
        wait_until(request.exists, "rank 0's held workload", proc=rank0, timeout=240)
        # Ctrl-C on the job, as srun passes it on: every rank gets SIGINT (rank 1's workload
        # still runs; its jax.distributed shutdown then meets rank 0's).
        for proc in procs:
            os.kill(proc.pid, signal.SIGINT)
        interrupted_at = time.monotonic()
        out, err = rank0.communicate(timeout=400)
        stopped_after = time.monotonic() - interrupted_at
        out1, err1 = rank1.communicate(timeout=300)
    finally:
        go.touch()
        for proc in procs:
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    text = err.decode(errors="replace")
    assert rank0.returncode == 130, text[-4000:]
    assert "interrupted by SIGINT (Ctrl-C)" in text and "Traceback" not in text, text[-4000:]
    assert rank1.returncode == 130, err1.decode(errors="replace")[-4000:]
    # Issue 37: the held workload's fetch of rank 1's files and rank 0's gather of the rank
    # reports both stop at the Ctrl-C; each used to wait out the whole gather timeout (120 s).
    assert stopped_after < 60, f"rank 0 took {stopped_after:.0f} s to stop after Ctrl-C"
