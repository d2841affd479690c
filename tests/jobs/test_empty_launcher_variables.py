"""A launcher variable exported empty (`export PGLE_RANK=` in a wrapper script, a scheduler
that sets `OMPI_COMM_WORLD_SIZE=""` outside a job) is unset: the process is a single one, not
a malformed rank (issue 37's independent mutants: an empty value counted as set)."""

from __future__ import annotations

from pgle.jobs import ranks as jobrun


def test_empty_launcher_variables_count_as_unset():
    for env in ({"PGLE_RANK": "", "PGLE_WORLD_SIZE": " "},
                {"PGLE_RANK": ""},
                {"OMPI_COMM_WORLD_RANK": "", "OMPI_COMM_WORLD_SIZE": ""},
                {"PGLE_WORLD_SIZE": "2", "PGLE_RANK": "1", "PGLE_LOCAL_RANK": ""}):
        info = jobrun.detect(env)
        if "PGLE_LOCAL_RANK" in env:
            assert (info.rank, info.world_size, info.local_rank) == (1, 2, 0), env
        else:
            assert (info.rank, info.world_size) == (0, 1) and not info.is_multiprocess, env
