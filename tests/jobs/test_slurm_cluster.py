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
