"""Fleet forensics (issue 36) with real processes: two pgle ranks, two JAX processes joined by
jax.distributed on localhost (gloo), every step a cross-process all-reduce
(tests/workloads/dist_fleet.py); and the same under the CI's SLURM (`srun -n 2`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers.pgle_testing import WORKLOADS, pgle_env
from helpers.slurm_fixture import slurm_test

FLEET = WORKLOADS / "dist_fleet.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _profile(folder: Path) -> Path:
    path = folder / "p.pbtxt"
    path.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    return path


def _two_ranks(tmp: Path, pgle_args: list[str], workload: list[str], timeout: float = 240):
    """`pgle run ... dist_fleet.py -- WORKLOAD` as ranks 0 and 1 sharing one job folder;
    [(exit code, --json report, stderr)] per rank, and the wall time."""
    port = _free_port()
    job = tmp / "job"
    procs = []
    began = time.monotonic()
    for rank in (0, 1):
        env = pgle_env(PGLE_RANK=str(rank), PGLE_WORLD_SIZE="2", PGLE_JOB_ID="fleet",
                       DIST_PORT=str(port))
        argv = [sys.executable, "-m", "pgle", "run", "--profile", str(_profile(tmp)),
                "--job-dir", str(job), "--json", *pgle_args, str(FLEET), "--", *workload]
        procs.append(subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        text = stdout.decode().strip()
        out.append((proc.returncode, json.loads(text) if text.startswith("{") else None,
                    stderr.decode()))
    return out, time.monotonic() - began, job


def _identity_times(job: Path) -> list[float]:
    times = []
    for rank in (0, 1):
        for line in (job / f"rank-{rank}" / "events.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["kind"] == "module_identity" and r["module"] == "jit_train_step":
                times.append(r["t"])
    return times


def test_ranks_that_compile_different_programs_are_named_with_the_module(tmp_path):
    (r0, r1), _, job = _two_ranks(tmp_path, [], ["--diverge", "1"])
    code0, report, err0 = r0
    assert code0 == 0, err0[-3000:]
    (d,) = report["divergence"]
    assert d["module"] == "jit_train_step" and d["ranks"] == [1]
    assert sorted(d["fingerprints"].values()) == [[0], [1]]
    first = d["first_difference"]
    assert "2.000000e+00" in first["ranks"]["0"] and "3.000000e+00" in first["ranks"]["1"]
    assert "ranks compiled different programs for jit_train_step" in err0
    # Named within seconds of the second rank's compile, not at the end of the job.
    said = (job / "fleet" / "divergence.json").stat().st_mtime
    assert said - max(_identity_times(job)) < 10.0


def _fingerprints(job: Path) -> list[str]:
    return [m[1] for rank in (0, 1)
            for m in json.loads((job / "fleet" / f"rank-{rank}.json").read_text())["modules"]
            if m[0] == "jit_train_step"]


def test_require_same_program_stops_the_job_before_it_hangs(tmp_path):
    """Both ranks hang after their steps; the stall bound is 10 min: only the divergence can
    end the job within the test's time."""
    (r0, r1), wall, _ = _two_ranks(
        tmp_path, ["--require-same-program", "--stall-timeout", "10m"],
        ["--diverge", "1", "--hang-after"])
    code0, report, err0 = r0
    assert code0 == 3, err0[-3000:]
    assert r1[0] == 3, r1[2][-3000:]
    assert report["divergence"][0]["module"] == "jit_train_step"
    assert any("--require-same-program" in r for r in report["reasons"])
    assert not any("failed first" in r for r in report["reasons"])
    assert wall < 150


def test_stall_names_the_rank_that_stopped_first(tmp_path):
    """Rank 1 stops stepping after 3 steps; rank 0 goes into step 4 and waits for it in the
    all-reduce. Both stall; the report names rank 1, and rank 0 as waiting.

    Rank 0 enters step 4 6 s late (a printed line: progress), so its bound runs out 6 s after
    rank 1's: rank 1 must wait for rank 0's phase before pgle stops its workload, whose end
    (SIGTERM, then SIGKILL after 5 s) fails rank 0's all-reduce at once under gloo, before
    rank 0's stacks could be written (rank 0's phase was then unknown, and it was not named as
    waiting: the test flaked that way under load before fleet.PEER_PHASE_WAIT_S).

    Both ranks compile the same program: --require-same-program must find no divergence (it
    would end the job with 3 before the stall's 124), and both fingerprints are one."""
    (r0, r1), _, job = _two_ranks(tmp_path, ["--stall-timeout", "8s", "--require-same-program"],
                                  ["--stop", "1", "3", "--late", "0", "6", "--steps", "50"])
    code0, report, err0 = r0
    assert code0 == 124, err0[-3000:]
    assert "divergence" not in report, report["divergence"]
    assert not (job / "fleet" / "divergence.json").exists()
    fingerprints = _fingerprints(job)
    assert len(fingerprints) == 2 and len(set(fingerprints)) == 1, fingerprints
    stall = report["stall"]
    assert stall["first_rank"] == 1, stall
    assert stall["phase"] == "user_code" and "dist_fleet.py" in stall["what"], stall
    assert stall["steps"] == 3
    assert stall["waiting"] == [0]
    phases = {r["rank"]: r["phase"] for r in stall["ranks"]}
    assert phases == {0: "collective", 1: "user_code"}
    assert "rank 1 stopped progressing first" in report["error"]


# -- under SLURM: `srun -n 2` ------------------------------------------------------------------

def _rank0_json(stdout: str) -> dict:
    """Rank 0's --json report: the one JSON document on the job's stdout."""
    return json.JSONDecoder().raw_decode(stdout[stdout.index("{"):])[0]


@slurm_test
def test_srun_stall_names_rank_1_first(slurm_cluster, tmp_path):
    proc = slurm_cluster.srun(
        [sys.executable, "-m", "pgle", "run", "--profile", str(_profile(tmp_path)), "--json",
         "--stall-timeout", "8s", str(FLEET), "--", "--stop", "1", "3", "--steps", "50"],
        ntasks=2, cwd=tmp_path, env=pgle_env(), timeout=300)
    assert proc.returncode == 124, proc.stderr[-3000:]
    report = _rank0_json(proc.stdout)
    assert report["stall"]["first_rank"] == 1, report["stall"]
    assert report["stall"]["waiting"] == [0], report["stall"]
    # Every rank left its stacks in its own run folder of the SLURM job's folder.
    (jd,) = (tmp_path / ".pgle" / "jobs").iterdir()
    for rank in (0, 1):
        dump = (jd / f"rank-{rank}" / "stacks.txt").read_text()
        assert "dist_fleet.py" in dump, dump
