"""Job folder, gathering and peer-failure notice through real files and processes (pgle.jobs.folder)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgle.jobs import folder as job
from pgle.errors import BadInput
from pgle.jobs.ranks import RankInfo, detect

SPAWN = multiprocessing.get_context("spawn")  # no fork of a process that may hold jax threads


def _info(rank: int, world: int = 4) -> RankInfo:
    return RankInfo(rank=rank, local_rank=rank % 2, world_size=world, node_id=rank // 2,
                    job_id="77", step_id="0", source="slurm")


# Real processes, one per simulated rank: what each rank's pgle does.
def _rank_main(job_dir: str, rank: int, world: int, delay_s: float, exit_code: int, report: bool) -> None:
    info = _info(rank, world)
    job.mark_started(job_dir, info)
    time.sleep(delay_s)  # the workload runs
    job.mark_exit(job_dir, rank, exit_code)
    if report:
        job.write_report(job_dir, rank, {"rank": rank, "status": "ok" if exit_code == 0 else "failed",
                                         "exit_code": exit_code, "modules": [{"module": "jit_step", "status": "applied"}]})


def _launch(job_dir, world, *, delays=None, codes=None, silent=()):
    procs = []
    for rank in range(world):
        delay = delays[rank] if delays else 0.05 * rank  # staggered, the same every run
        code = (codes or {}).get(rank, 0)
        if rank in silent:
            continue
        p = SPAWN.Process(target=_rank_main, args=(str(job_dir), rank, world, delay, code, True))
        p.start()
        procs.append(p)
    return procs


def _join(procs):
    for p in procs:
        p.join(30)
        assert p.exitcode == 0


def test_job_dir_from_slurm_step_and_explicit(tmp_path):
    assert job.job_dir_for(_info(1), root=tmp_path) == tmp_path / "77.0"
    assert job.job_dir_for(_info(1), explicit=tmp_path / "jobs" / "%j-of-%n") == tmp_path / "jobs" / "77-of-4"
    assert job.job_dir_for(_info(1), explicit="rel/x").is_absolute()
    with pytest.raises(BadInput, match="differ between ranks"):
        job.job_dir_for(_info(1), explicit=tmp_path / "r%r")
    with pytest.raises(BadInput, match="no job id is known"):
        job.job_dir_for(RankInfo(rank=0, world_size=2, source="pmi"), root=tmp_path)
    # One process, no job: a private folder, never shared by accident.
    assert job.job_dir_for(RankInfo(), root=tmp_path).name == f"local-{os.getpid()}"


def test_files_are_whole_json_and_leave_no_temporaries(tmp_path):
    info = _info(2)
    job.mark_started(tmp_path, info)
    job.mark_exit(tmp_path, 2, 0)
    job.write_report(tmp_path, 2, {"status": "ok", "path": "prof/ränk 2.pb"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-2.exit", "rank-2.json", "rank-2.start"]
    start = json.loads((tmp_path / "rank-2.start").read_text())
    assert (start["rank"], start["node_id"], start["job"], start["pid"]) == (2, 1, "77.0", os.getpid())
    assert json.loads((tmp_path / "rank-2.exit").read_text())["exit_code"] == 0
    assert json.loads((tmp_path / "rank-2.json").read_text())["path"] == "prof/ränk 2.pb"


def test_write_report_takes_a_report_object(tmp_path):
    from pgle.report import Report

    job.write_report(tmp_path, 0, Report(command="collect", status="ok", details={"rank": 0}))
    data = json.loads(job.report_path(tmp_path, 0).read_text())
    assert (data["command"], data["status"], data["rank"]) == ("collect", "ok", 0)


def test_a_reused_job_folder_is_refused_before_launch(tmp_path):
    job.mark_started(tmp_path, _info(1))
    with pytest.raises(BadInput, match=r"already holds rank-1\.start: another process was "
                                        r"given rank 1 too, or the files are from an earlier "
                                        r"launch"):
        job.mark_started(tmp_path, _info(1))
    job.mark_started(tmp_path, _info(2))  # another rank in the same folder is fine


def test_gather_from_eight_real_processes(tmp_path):
    world = 8
    t0 = time.monotonic()
    procs = _launch(tmp_path, world)
    reports, missing = job.gather(tmp_path, world, timeout_s=600)
    elapsed = time.monotonic() - t0
    _join(procs)
    assert missing == []
    assert list(reports) == list(range(world))
    assert all(reports[r]["rank"] == r for r in reports)
    assert elapsed < 300  # returned when the last one reported, not at the (far) timeout


def test_a_rank_that_never_reports_is_listed_after_the_timeout(tmp_path):
    world = 4
    # Ranks 0-2 finish first (starting processes takes a variable second or
    # two on a busy machine; the timeout must measure the silent rank only).
    _join(_launch(tmp_path, world, delays=[0.0, 0.1, 0.2, 0.0], silent={3}))
    t0 = time.monotonic()
    reports, missing = job.gather(tmp_path, world, timeout_s=1.5)
    elapsed = time.monotonic() - t0
    assert missing == [3]
    assert sorted(reports) == [0, 1, 2]
    assert 1.5 <= elapsed < 60  # waited the timeout, and no more than a loaded machine takes
    assert job.describe_missing(tmp_path, missing) == {3: "never started"}


def test_describe_missing_says_what_each_rank_got_to(tmp_path):
    job.mark_started(tmp_path, _info(0))
    job.mark_started(tmp_path, _info(1))
    job.mark_exit(tmp_path, 1, 137)
    job.mark_started(tmp_path, _info(2))
    job.mark_exit(tmp_path, 2, -15, stopped_for=1)
    (tmp_path / "rank-3.json").write_text("{not json")
    reports, missing = job.gather(tmp_path, 5, timeout_s=0)
    assert reports == {} and missing == [0, 1, 2, 3, 4]
    why = job.describe_missing(tmp_path, missing)
    assert why[0].startswith("started on ") and why[0].endswith("its workload has not exited")
    assert why[1].startswith("workload exited with code 137 on ") and why[1].endswith("; no report")
    assert "(stopped because rank 1 failed)" in why[2]
    assert why[3].startswith("report unreadable: ")
    assert why[4] == "never started"


def test_an_unreadable_report_ends_the_wait_for_its_rank(tmp_path):
    """Issue 37: a report gather cannot read is not read again (written atomically, it will not
    change), so the gather returns at once rather than at the timeout; a rank that never
    reported is still waited for."""
    job.write_report(tmp_path, 0, {"ok": 1})
    (tmp_path / "rank-1.json").write_text("{not json")
    t0 = time.monotonic()
    reports, missing = job.gather(tmp_path, 2, timeout_s=120)
    assert (list(reports), missing) == ([0], [1])
    assert time.monotonic() - t0 < 60  # not the 120 s timeout
    assert job.describe_missing(tmp_path, missing)[1].startswith("report unreadable: ")
    t0 = time.monotonic()
    reports, missing = job.gather(tmp_path, 3, timeout_s=1.0)
    assert (list(reports), missing) == ([0], [1, 2])
    assert time.monotonic() - t0 >= 1.0  # rank 2 may still come: waited for it


def test_gather_ignores_temporaries_and_ranks_outside_the_world(tmp_path):
    job.write_report(tmp_path, 0, {"ok": 1})
    job.write_report(tmp_path, 9, {"ok": 1})
    (tmp_path / ".rank-1.json.abc.tmp").write_text("{")
    reports, missing = job.gather(tmp_path, 2, timeout_s=0.2)
    assert list(reports) == [0] and missing == [1]


def test_gather_of_a_folder_that_never_appears_times_out(tmp_path):
    reports, missing = job.gather(tmp_path / "nothing-here", 2, timeout_s=0.3)
    assert reports == {} and missing == [0, 1]


@pytest.mark.parametrize("world,timeout", [(0, 1), (2, -1)])
def test_gather_bad_arguments(tmp_path, world, timeout):
    with pytest.raises(BadInput):
        job.gather(tmp_path, world, timeout_s=timeout)


def test_peer_failure(tmp_path):
    assert job.peer_failure(tmp_path, 0) is None  # no folder yet
    job.mark_exit(tmp_path, 1, 0)
    assert job.peer_failure(tmp_path, 0) is None  # a clean exit is no failure
    job.mark_exit(tmp_path, 2, 3)
    assert job.peer_failure(tmp_path, 0) == (2, 3)
    assert job.peer_failure(tmp_path, 2) is None  # its own failure is not a peer's
    # Ranks stopped because of rank 2 do not hide it.
    job.mark_exit(tmp_path, 0, -15, stopped_for=2)
    assert job.peer_failure(tmp_path, 3) == (2, 3)
    # A later failure of its own does not replace the first one.
    time.sleep(0.01)
    job.mark_exit(tmp_path, 3, 1)
    assert job.peer_failure(tmp_path, 0) == (2, 3)
    rank, code = job.peer_failure(tmp_path, 2)
    assert (rank, code) == (3, 1)


def test_watchdog_caches_a_failure_and_rate_limits(tmp_path):
    check = job.watchdog(tmp_path, 0, min_interval_s=60)
    assert check() is None
    job.mark_exit(tmp_path, 1, 2)
    assert check() is None  # within the interval: the filesystem is not asked
    check = job.watchdog(tmp_path, 0)
    assert check() == (1, 2)
    job.failed_path(tmp_path, 1).unlink()
    assert check() == (1, 2)  # seen once, kept


def test_a_crashing_rank_stops_its_peer_promptly(tmp_path):
    """Two real `pgle run` ranks (PGLE_RANK/PGLE_WORLD_SIZE, no SLURM): rank 1's workload
    exits 3; rank 0's pgle sees it through its real launcher's watchdog and stops its own
    workload (which would sleep 300 s), and the job folder says why."""
    from pgle.profiles.files import Profile, write_profile

    write_profile(Profile(costs=[("fusion.1", 1.0)]), tmp_path / "p.pb")
    jd = tmp_path / "job"
    script = tmp_path / "rank.py"
    script.write_text(
        "import os, sys, time\n"
        "open(os.environ['PIDS'] + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.rename(os.environ['PIDS'] + '.tmp', os.environ['PIDS'])\n"
        "if os.environ['PGLE_RANK'] == '1':\n"
        # Fails once rank 0's workload runs (a fixed sleep lost that race on a loaded machine).
        "    deadline = time.monotonic() + 120\n"
        "    while not os.path.exists(os.environ['PID0']) and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(3)\n"
        "time.sleep(300)\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "JAX_", "TF_CPP_", "PGLE_", "SLURM_"))}
    procs = []
    for rank in (0, 1):
        renv = {**env, "JAX_PLATFORMS": "cpu", "PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": "2",
                "PGLE_JOB_ID": "peer", "PIDS": str(tmp_path / f"pid{rank}"),
                "PID0": str(tmp_path / "pid0")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pgle", "run", "--profile", str(tmp_path / "p.pb"),
             "--job-dir", str(jd), "--gather-timeout", "5", str(script)],
            cwd=tmp_path, env=renv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        out1, err1 = procs[1].communicate(timeout=150)
        out0, err0 = procs[0].communicate(timeout=150)  # far less than the workload's 300 s
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1].returncode == 3, err1.decode()
    assert procs[0].returncode != 0, err0.decode()
    workload0 = int((tmp_path / "pid0").read_text())
    assert not os.path.exists(f"/proc/{workload0}") or \
        open(f"/proc/{workload0}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    assert job.peer_failure(jd, 0) == (1, 3)
    assert json.loads(job.exit_path(jd, 0).read_text())["stopped_for"] == 1


def test_rank_info_from_detect_feeds_the_job_folder(tmp_path):
    env = {"SLURM_JOB_ID": "55", "SLURM_STEP_ID": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}
    assert job.job_dir_for(detect(env), root=tmp_path) == tmp_path / "55.2"


def test_gather_says_which_ranks_it_still_waits_for(tmp_path, caplog):
    """Issue 13 case 7: rank 0's wait for the ranks' reports logs plain progress lines that
    name the missing ranks, rate-limited, and none once every rank has reported."""
    job.write_report(tmp_path, 0, {"ok": 1})
    job.write_report(tmp_path, 2, {"ok": 1})
    caplog.set_level("INFO", logger="pgle")
    reports, missing = job.gather(tmp_path, 4, timeout_s=0.6, progress_every_s=0.2)
    lines = [r.getMessage() for r in caplog.records]
    assert missing == [1, 3]
    assert lines and all("waiting for 2 of 4 rank reports (ranks 1, 3)" in l for l in lines)
    assert len(lines) <= 3  # one every 0.2 s over a 0.6 s wait, not one per poll
    caplog.clear()
    job.write_report(tmp_path, 1, {"ok": 1})
    job.write_report(tmp_path, 3, {"ok": 1})
    job.gather(tmp_path, 4, timeout_s=5, progress_every_s=0)
    assert caplog.records == []  # everyone reported at the first look: nothing to wait for
