"""Rank detection and per-rank output paths (pgle.jobs.ranks).

The environment dicts below are what each launcher really sets (the SLURM
ones were captured from srun and sbatch on the test cluster; the last tests
check them against a live srun and sbatch again).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pgle.errors import BadInput
from pgle.jobs.ranks import RankInfo, detect, expand_path, fields_in, has_rank_placeholder, validate_template
from helpers.slurm_fixture import slurm_cluster, slurm_test  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]

# `srun -n 2` task 1 on the one-node cluster (variables pgle reads, as srun sets them).
SRUN_TASK1 = {
    "SLURM_JOB_ID": "2", "SLURM_JOBID": "2", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
    "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NODEID": "0",
    "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_STEP_NODELIST": "localhost",
}
# The sbatch script itself (the batch step): PROCID and NTASKS, but no step id.
SBATCH_SCRIPT = {
    "SLURM_JOB_ID": "3", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
    "SLURM_NTASKS": "2", "SLURM_NPROCS": "2",
}


def test_no_launcher_is_one_process():
    info = detect({"HOME": "/root", "PATH": "/usr/bin"})
    assert info == RankInfo()
    assert (info.rank, info.local_rank, info.world_size, info.source) == (0, 0, 1, "single")
    assert not info.is_multiprocess and info.is_leader and info.job_key is None


def test_slurm_step_task():
    info = detect(SRUN_TASK1)
    assert (info.rank, info.local_rank, info.world_size, info.node_id) == (1, 1, 2, 0)
    assert (info.job_id, info.step_id, info.source, info.job_key) == ("2", "0", "slurm", "2.0")
    assert info.is_multiprocess and not info.is_leader


def test_slurm_old_variable_names():
    env = {"SLURM_JOBID": "9", "SLURM_STEPID": "4", "SLURM_PROCID": "3", "SLURM_NPROCS": "8"}
    info = detect(env)
    assert (info.rank, info.world_size, info.job_key) == (3, 8, "9.4")


def test_sbatch_script_itself_is_one_process_of_the_job():
    # pgle run directly in the batch script must not wait for N-1 peers that
    # do not exist; the job id still names the job.
    info = detect(SBATCH_SCRIPT)
    assert (info.rank, info.world_size, info.source, info.job_id, info.step_id) == (0, 1, "single", "3", None)


def test_open_mpi():
    env = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911"}
    info = detect(env)
    assert (info.rank, info.local_rank, info.world_size, info.source, info.job_id) == (5, 1, 8, "ompi", "1531576320")
    pmix = detect({**env, "PMIX_NAMESPACE": "prterun-node1-4242@1"})
    assert pmix.job_id == "prterun-node1-4242@1"


def test_open_mpi_inside_slurm_allocation_wins_over_slurm():
    # mpirun in an allocation launches its daemons as one srun task per node:
    # SLURM_PROCID is the daemon's index, the MPI rank is what matters.
    env = {**SRUN_TASK1, "SLURM_PROCID": "0", "SLURM_NTASKS": "1",
           "OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8"}
    info = detect(env)
    assert (info.rank, info.world_size, info.source, info.job_key) == (6, 8, "ompi", "2.0")


def test_pmi_launchers():
    info = detect({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"})
    assert (info.rank, info.world_size, info.local_rank, info.source) == (2, 4, 0, "pmi")


def test_explicit_pgle_variables_win_and_carry_a_job_id():
    env = {**SRUN_TASK1, "PGLE_RANK": "7", "PGLE_WORLD_SIZE": "16", "PGLE_LOCAL_RANK": "3", "PGLE_JOB_ID": "exp1"}
    info = detect(env)
    assert (info.rank, info.world_size, info.local_rank, info.source, info.job_key) == (7, 16, 3, "pgle", "exp1")


def test_kubernetes_indexed_job_needs_the_world_size():
    pod = {"JOB_COMPLETION_INDEX": "3", "HOSTNAME": "train-workers-0-3-abcde",
           "JAX_COORDINATOR_ADDRESS": "train-workers-0-0.train:1234"}
    # Nothing in the pod says how many pods there are: one process, as jax would not know either.
    assert detect(pod).world_size == 1
    info = detect({**pod, "PGLE_WORLD_SIZE": "4", "PGLE_JOB_ID": "train-1"})
    assert (info.rank, info.world_size, info.source, info.job_id) == (3, 4, "kubernetes", "train-1")
    assert info.coordinator_address == "train-workers-0-0.train:1234"


@pytest.mark.parametrize(
    "env,words",
    [
        ({**SRUN_TASK1, "SLURM_PROCID": "one"}, "SLURM_PROCID='one' is not a whole number"),
        ({**SRUN_TASK1, "SLURM_PROCID": "2"}, "rank 2 (from SLURM_PROCID) is not below the world size 2"),
        ({**SRUN_TASK1, "SLURM_NTASKS": "0", "SLURM_NPROCS": "0"}, "SLURM_NTASKS=0 must be at least 1"),
        ({"PGLE_RANK": "1"}, "PGLE_RANK is set but PGLE_WORLD_SIZE is not"),
        ({"PGLE_WORLD_SIZE": "2"}, "PGLE_WORLD_SIZE is set but PGLE_RANK is not"),
        ({"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "2"}, "must be at least 0"),
    ],
)
def test_malformed_launcher_variables_are_bad_input(env, words):
    with pytest.raises(BadInput) as err:
        detect(env)
    assert words in str(err.value)
    assert "\n" not in str(err.value)


# --- placeholders ------------------------------------------------------------

INFO = RankInfo(rank=3, local_rank=1, world_size=8, node_id=1, job_id="4242", step_id="0", source="slurm")


@pytest.mark.parametrize(
    "template,expected",
    [
        ("profiles/rank%r.pb", "profiles/rank3.pb"),
        ("profiles/rank{rank}.pb", "profiles/rank3.pb"),
        ("out/%j/r%r-of-%n-l%l.pbtxt", "out/4242/r3-of-8-l1.pbtxt"),
        ("out/{job_id}/r{rank}-of-{world_size}-l{local_rank}.pb", "out/4242/r3-of-8-l1.pb"),
        ("100%%/a{{b}}.pb", "100%/a{b}.pb"),
        ("gs://bucket/run 1/ränk-%r.pb", "gs://bucket/run 1/ränk-3.pb"),
        ("plain.pb", "plain.pb"),
        ("%r%r", "33"),
    ],
)
def test_expand_path(template, expected):
    assert expand_path(template, INFO) == expected


@pytest.mark.parametrize(
    "template,words",
    [
        ("rank%x.pb", "unknown placeholder %x"),
        ("rank{host}.pb", "unknown placeholder {host}"),
        ("rank{ rank }.pb", "unknown placeholder { rank }"),
        ("rank%", "ends in a lone %"),
        ("rank{rank.pb", "unmatched '{'"),
        ("rank}.pb", "unmatched '}'"),
    ],
)
def test_unknown_placeholders_are_bad_input(template, words):
    with pytest.raises(BadInput) as err:
        expand_path(template, INFO)
    assert words in str(err.value)
    with pytest.raises(BadInput):
        validate_template(template)


def test_job_id_placeholder_without_a_job_id_is_bad_input():
    with pytest.raises(BadInput, match="no job id is known"):
        expand_path("p/%j/rank%r.pb", RankInfo())


def test_rank_placeholder_detection():
    assert has_rank_placeholder("p/rank%r.pb") and has_rank_placeholder("p/{rank}.pb")
    # local ranks repeat on every node: not unique in a shared folder.
    assert not has_rank_placeholder("p/local%l.pb")
    assert not has_rank_placeholder("p/100%%r.pb")
    assert fields_in("%j/{rank}-%n") == {"job_id", "rank", "world_size"}


# --- against a live SLURM ----------------------------------------------------

DETECT = (
    "import json, os; from pgle.jobs.ranks import detect, expand_path; i = detect(os.environ); "
    "print('RANKINFO ' + json.dumps({**i.to_dict(), 'path': expand_path('p/%j/rank%r-of-%n.pb', i)}))"
)


def _infos(text: str) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in text.splitlines() if line.startswith("RANKINFO ")]


@slurm_test
def test_detect_under_real_srun(slurm_cluster):
    proc = slurm_cluster.srun([sys.executable, "-c", DETECT], ntasks=2, cwd=REPO,
                              env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    infos = sorted(_infos(proc.stdout), key=lambda i: i["rank"])
    assert [i["rank"] for i in infos] == [0, 1]
    assert {i["world_size"] for i in infos} == {2}
    assert {i["source"] for i in infos} == {"slurm"}
    assert [i["local_rank"] for i in infos] == [0, 1]  # one node: local rank = rank
    job, step = infos[0]["job_id"], infos[0]["step_id"]
    assert job and step is not None and all((i["job_id"], i["step_id"]) == (job, step) for i in infos)
    assert [i["path"] for i in infos] == [f"p/{job}/rank0-of-2.pb", f"p/{job}/rank1-of-2.pb"]


@slurm_test
def test_detect_in_a_real_sbatch_script_is_one_process(slurm_cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n'{sys.executable}' -c \"{DETECT}\"\n")
    out = tmp_path / "job.out"
    result = slurm_cluster.sbatch(["-n", "2", "-t", "5", "-J", "pgle-test-detect", "-o", str(out), str(script)],
                                  cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert (result.state, result.exit_code) == ("COMPLETED", 0), out.read_text()
    [info] = _infos(out.read_text())
    assert (info["rank"], info["world_size"], info["source"], info["step_id"]) == (0, 1, "single", None)
    assert info["job_id"]
