"""`pgle nsys --ranks R,...` in a job of N ranks: ranks 0 to N-1 only; naming rank N (a count
mistaken for the last rank) is one clear error before anything runs (issue 37's independent
mutants: rank N was accepted and no rank was profiled)."""

from __future__ import annotations

import pytest

from pgle.errors import BadInput
from pgle.jobs import layout
from pgle.jobs import ranks as jobrun
from pgle.jobs.layout import JobOptions, LayoutRequest


def _resolve(world: int, selected: tuple[int, ...], rank: int = 0):
    env = {"PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": str(world), "PGLE_JOB_ID": "j9"}
    info = jobrun.detect(env)
    return layout.resolve(LayoutRequest(selected_ranks=selected), info,
                          layout.job_dir(info, JobOptions(None)))


def test_ranks_beyond_the_job_are_refused():
    with pytest.raises(BadInput, match=r"--ranks 1,2: this job has ranks 0 to 1 only"):
        _resolve(2, (1, 2))
    with pytest.raises(BadInput, match=r"--ranks 4: this job has ranks 0 to 3 only"):
        _resolve(4, (4,), rank=3)
    # The last rank is a rank.
    assert _resolve(2, (1,)) is not None
