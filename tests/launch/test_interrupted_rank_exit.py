"""A rank of a job interrupted by SIGINT records the exit code the command itself exits with
(128 + 2 = 130), where the other ranks and `pgle runs` read it, not the signal's number (issue
37's independent mutants: the rank's exit file said 2, an ordinary failure)."""

from __future__ import annotations

import json
import signal

from helpers.pgle_testing import WORKLOADS, pgle_env, write_profile
from helpers.processes import kill_all, start_pgle, wait_until

RECORDER = str(WORKLOADS / "signal_recorder.py")


def test_an_interrupted_rank_records_130(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    signals = project / "signals"
    signals.mkdir()
    job_dir = project / "job"
    env = pgle_env(SIGNAL_DIR=str(signals), PGLE_RANK="0", PGLE_WORLD_SIZE="2",
                   PGLE_JOB_ID="j1")
    proc = start_pgle("run", "--profile", "p.pb", "--job-dir", str(job_dir),
                      "--gather-timeout", "5", RECORDER, cwd=project, env=env)
    ready = signals / "ready"
    pids: list[int] = []
    try:
        wait_until(ready.exists, "the workload's handlers", proc=proc)
        pids = list(map(int, ready.read_text().split()))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(pids)
    assert proc.returncode == 130, err.decode()[-3000:]
    record = json.loads((job_dir / "rank-0.exit").read_text())
    assert record["exit_code"] == 130, record
