"""Every launcher's environment read whole, and every refusal's exact words (issue 37).

`tests/jobs/test_ranks.py` checks the main fields of each launcher; these pin every field of
the RankInfo (local rank, node, job and step ids, coordinator) and the message and hint a user
reads when the variables are wrong, since a changed message is a behaviour too.
"""

from __future__ import annotations

import pytest

from pgle.errors import BadInput
from pgle.jobs.ranks import RankInfo, detect, expand_path, validate_template

COORD = {"JAX_COORDINATOR_ADDRESS": "node-0:1234"}
STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}


@pytest.mark.parametrize(
    "env,expected",
    [
        # pgle's own variables inside a SLURM step, no PGLE_JOB_ID: the step's job and step ids.
        ({**STEP, **COORD, "PGLE_RANK": "11", "PGLE_WORLD_SIZE": "12", "PGLE_LOCAL_RANK": "3"},
         RankInfo(rank=11, local_rank=3, world_size=12, job_id="77", step_id="3", source="pgle",
                  coordinator_address="node-0:1234")),
        # PGLE_JOB_ID names the launch alone: no step id.
        ({**STEP, "PGLE_RANK": "0", "PGLE_WORLD_SIZE": "1", "PGLE_JOB_ID": "exp"},
         RankInfo(rank=0, world_size=1, job_id="exp", step_id=None, source="pgle")),
        ({**COORD, "JOB_COMPLETION_INDEX": "2", "PGLE_WORLD_SIZE": "4"},
         RankInfo(rank=2, world_size=4, source="kubernetes", coordinator_address="node-0:1234")),
        # Open MPI inside an allocation: the scheduler's ids name the launch.
        ({**STEP, **COORD, "OMPI_COMM_WORLD_RANK": "10", "OMPI_COMM_WORLD_SIZE": "16",
          "OMPI_COMM_WORLD_LOCAL_RANK": "2", "PMIX_NAMESPACE": "prterun-x-1@1"},
         RankInfo(rank=10, local_rank=2, world_size=16, job_id="77", step_id="3", source="ompi",
                  coordinator_address="node-0:1234")),
        ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
          "OMPI_MCA_orte_hnp_uri": "1531576320.0.7;tcp://10.0.0.1:1;x.y"},
         RankInfo(rank=0, world_size=1, job_id="1531576320", source="ompi")),
        ({**STEP, **COORD, "SLURM_PROCID": "13", "SLURM_LOCALID": "5", "SLURM_NTASKS": "16",
          "SLURM_NODEID": "2"},
         RankInfo(rank=13, local_rank=5, world_size=16, node_id=2, job_id="77", step_id="3",
                  source="slurm", coordinator_address="node-0:1234")),
        # Only the new name of the task count set.
        ({**STEP, "SLURM_PROCID": "1", "SLURM_NTASKS": "2"},
         RankInfo(rank=1, world_size=2, job_id="77", step_id="3", source="slurm")),
        ({**STEP, **COORD, "PMI_RANK": "12", "PMI_SIZE": "16", "MPI_LOCALRANKID": "4",
          "PMI_LOCAL_RANK": "6"},
         RankInfo(rank=12, local_rank=4, world_size=16, job_id="77", step_id="3", source="pmi",
                  coordinator_address="node-0:1234")),
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "PMI_LOCAL_RANK": "1", "SLURM_STEP_ID": "3"},
         RankInfo(rank=1, local_rank=1, world_size=2, source="pmi")),
        # Half a launcher's pair is no launcher: one process, the job's ids and coordinator kept.
        ({**STEP, **COORD, "OMPI_COMM_WORLD_RANK": "1", "PMI_SIZE": "4"},
         RankInfo(job_id="77", step_id="3", coordinator_address="node-0:1234")),
        ({"OMPI_COMM_WORLD_SIZE": "4", "PMI_RANK": "1"}, RankInfo()),
    ],
)
def test_each_launcher_is_read_whole(env, expected):
    assert detect(env) == expected


def _refusal(env: dict[str, str]) -> tuple[str, str | None]:
    with pytest.raises(BadInput) as err:
        detect(env)
    return err.value.message, err.value.hint


@pytest.mark.parametrize(
    "env,message,hint",
    [
        ({"PGLE_WORLD_SIZE": "2"}, "PGLE_WORLD_SIZE is set but PGLE_RANK is not.",
         "Set PGLE_RANK to this process's rank (0 to PGLE_WORLD_SIZE-1)."),
        ({"PGLE_RANK": "1"}, "PGLE_RANK is set but PGLE_WORLD_SIZE is not.",
         "Set PGLE_WORLD_SIZE to the number of processes in the job."),
        ({"PGLE_RANK": "0", "PGLE_WORLD_SIZE": "0"},
         "environment variable PGLE_WORLD_SIZE=0 must be at least 1.", None),
        ({"PGLE_RANK": "12", "PGLE_WORLD_SIZE": "12"},
         "rank 12 (from PGLE_RANK) is not below the world size 12 (from PGLE_WORLD_SIZE).", None),
        ({"JOB_COMPLETION_INDEX": "4", "PGLE_WORLD_SIZE": "4"},
         "rank 4 (from JOB_COMPLETION_INDEX) is not below the world size 4 (from PGLE_WORLD_SIZE).",
         None),
        ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"},
         "environment variable OMPI_COMM_WORLD_SIZE=0 must be at least 1.", None),
        ({"OMPI_COMM_WORLD_RANK": "16", "OMPI_COMM_WORLD_SIZE": "16"},
         "rank 16 (from OMPI_COMM_WORLD_RANK) is not below the world size 16 "
         "(from OMPI_COMM_WORLD_SIZE).", None),
        ({**STEP, "SLURM_PROCID": "10", "SLURM_NPROCS": "10"},
         "rank 10 (from SLURM_PROCID) is not below the world size 10 (from SLURM_NTASKS).", None),
        ({"PMI_RANK": "0", "PMI_SIZE": "0"}, "environment variable PMI_SIZE=0 must be at least 1.",
         None),
        ({"PMI_RANK": "4", "PMI_SIZE": "4"},
         "rank 4 (from PMI_RANK) is not below the world size 4 (from PMI_SIZE).", None),
    ],
)
def test_each_refusal_names_its_variables(env, message, hint):
    assert _refusal(env) == (message, hint)


HELP = ("Placeholders: %r or {rank}, %l or {local_rank}, %n or {world_size}, %j or {job_id}; "
        "%% for %, {{ and }} for braces.")


@pytest.mark.parametrize(
    "template,message",
    [
        ("out/rank%", "output path 'out/rank%' ends in a lone %."),
        ("out/%x", "unknown placeholder %x in output path 'out/%x'."),
        ("out/{host}", "unknown placeholder {host} in output path 'out/{host}'."),
        ("out/{}", "unknown placeholder {} in output path 'out/{}'."),
        ("out/{rank", "unmatched '{' in output path 'out/{rank'."),
    ],
)
def test_a_bad_output_path_is_refused_with_the_placeholders_listed(template, message):
    with pytest.raises(BadInput) as err:
        validate_template(template)
    assert (err.value.message, err.value.hint) == (message, HELP)


def test_a_job_id_placeholder_outside_a_job_says_how_to_name_one():
    with pytest.raises(BadInput) as err:
        expand_path("out/%j/r%r", RankInfo(rank=1, world_size=2))
    assert (err.value.message, err.value.hint) == (
        "output path 'out/%j/r%r' uses %j but no job id is known (not inside a SLURM job, and "
        "PGLE_JOB_ID is not set).",
        "Set PGLE_JOB_ID, or leave the job id out of the path.")
