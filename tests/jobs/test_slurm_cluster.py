"""The one-node SLURM cluster runs two real JAX processes with a real collective.

This is the ground the multi-process pgle tests stand on: if these fail, the
cluster (tests/cluster/slurm_up.sh) or jax.distributed under srun is broken,
not pgle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.slurm_fixture import requires_slurm, slurm_cluster  # noqa: F401  (fixture)

pytestmark = requires_slurm

REPO = Path(__file__).resolve().parents[2]
DIST_PSUM = REPO / "tests" / "workloads" / "dist_psum.py"


def _results(stdout: str) -> dict[int, dict]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("DIST_PSUM "):
            data = json.loads(line[len("DIST_PSUM "):])
            out[data["process_index"]] = data
    return out


@pytest.mark.parametrize(
    "mode,devices_per_process",
    [("auto", 1), ("explicit", 2)],
    ids=["jax-detects-slurm", "explicit-coordinator-2-devices-each"],
)
def test_two_jax_processes_psum_across_srun_tasks(slurm_cluster, mode, devices_per_process):
    args = [sys.executable, str(DIST_PSUM)] + (["--explicit"] if mode == "explicit" else [])
    env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_per_process}",
           "JAX_PLATFORMS": "cpu"}
    proc = slurm_cluster.srun(args, ntasks=2, env=env, cwd=REPO, timeout=240)
    assert proc.returncode == 0, f"srun failed ({proc.returncode}):\n{proc.stderr}\n{slurm_cluster.logs()}"
    results = _results(proc.stdout)
    assert sorted(results) == [0, 1], proc.stdout + proc.stderr
    world_devices = 2 * devices_per_process
    # sum over ranks of (rank + 1) per device: only right if both processes' data met.
    expected = float(sum((r + 1) * devices_per_process for r in range(2)))
    for rank, data in results.items():
        assert data["process_count"] == 2
        assert data["global_devices"] == world_devices
        assert data["local_devices"] == devices_per_process
        assert data["slurm_procid"] == str(rank)  # jax's process index is SLURM's task id
        assert data["psum"] == expected == data["expected"]


def test_sbatch_jobs_run_and_report_their_exit_code(slurm_cluster, tmp_path):
    out = tmp_path / "batch.out"
    result = slurm_cluster.sbatch(["-n", "2", "-t", "5", "-J", "pgle-test-sbatch", "-o", str(out),
                                   "--wrap", "srun hostname"], cwd=tmp_path)
    assert (result.state, result.exit_code) == ("COMPLETED", 0), slurm_cluster.logs()
    failing = slurm_cluster.sbatch(["-n", "1", "-t", "5", "-o", "/dev/null", "--wrap", "exit 7"], cwd=tmp_path)
    assert (failing.state, failing.exit_code) == ("FAILED", 7)
    assert len(out.read_text().split()) == 2


# A minimal per-rank wrapper, as pgle's launcher will be: start the workload,
# poll pgle.jobs.folder's watchdog twice a second, stop the workload when a peer failed.
WRAPPER = r"""
import json, os, subprocess, sys, time
from pgle.jobs import folder as job
from pgle.jobs import ranks
info = ranks.detect(os.environ)
jd = job.job_dir_for(info, explicit=sys.argv[1])
job.mark_started(jd, info)
t0 = time.monotonic()
child = subprocess.Popen(sys.argv[2:])
check = job.watchdog(jd, info.rank)
stopped_for = None
while child.poll() is None:
    failure = check()
    if failure is not None:
        stopped_for = failure.rank
        # jax.distributed installs a SIGTERM handler (preemption notice) that
        # does not exit: SIGTERM first for a clean exit, SIGKILL after a grace.
        child.terminate()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        break
    time.sleep(0.5)
job.mark_exit(jd, info.rank, child.returncode, stopped_for=stopped_for)
# A report in the shape rank 0 accepts (pgle.jobs.rank_data: `stopped_for` is an object).
job.write_report(jd, info.rank, {"rank": info.rank, "code": child.returncode,
                                 "stopped_for": None if stopped_for is None else {"rank": stopped_for},
                                 "seconds": time.monotonic() - t0})
if info.is_leader:
    reports, missing = job.gather(jd, info.world_size, timeout_s=30)
    print("GATHERED " + json.dumps({"reports": reports, "missing": missing}), flush=True)
sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
"""


def test_a_crashed_rank_stops_its_peer_through_the_job_folder(slurm_cluster, tmp_path):
    # Without the watchdog, rank 0 waits 30 s in gloo's context setup, then in
    # jax's shutdown barrier until the coordination service's heartbeat
    # timeout (100 s) and aborts (SIGABRT). With it: seconds.
    jd = tmp_path / "job-%j"
    cmd = [sys.executable, "-c", WRAPPER, str(jd), sys.executable, str(DIST_PSUM), "--crash-rank", "1"]
    proc = slurm_cluster.srun(cmd, ntasks=2, cwd=REPO, env={"JAX_PLATFORMS": "cpu"}, timeout=90)
    assert proc.returncode != 0
    line = next(l for l in proc.stdout.splitlines() if l.startswith("GATHERED "))
    gathered = json.loads(line[len("GATHERED "):])
    assert gathered["missing"] == [], (line, proc.stderr[-2000:])
    r0, r1 = gathered["reports"]["0"], gathered["reports"]["1"]
    assert (r1["code"], r1["stopped_for"]) == (3, None)
    assert r0["stopped_for"] == {"rank": 1} and r0["code"] in (-15, -9), r0
    assert r0["seconds"] < 30, r0
