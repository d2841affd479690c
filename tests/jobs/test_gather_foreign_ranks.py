"""Rank 0 gathers the reports of ranks 0 to N-1 only: a `rank-N.json` in the job folder (a
leftover of a bigger job, or planted) is not a rank of this one, counts for nothing and ends
no wait early (issue 37's independent mutants: rank N counted, so the job stopped waiting for
a real rank)."""

from __future__ import annotations

import json
import threading
import time

from pgle.jobs import folder


def test_a_report_of_rank_n_in_an_n_rank_job_is_ignored(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for rank in (0, 2, 7):
        folder.report_path(job, rank).write_text(json.dumps({"rank": rank, "status": "applied"}))
    got = folder.gather(job, 2, 0.3)
    assert (sorted(got.reports), got.missing) == ([0], [1])

    # Rank 1 reports late: the gather waits for it, whatever else is in the folder.
    def late() -> None:
        time.sleep(0.5)
        folder.report_path(job, 1).write_text(json.dumps({"rank": 1, "status": "applied"}))

    writer = threading.Thread(target=late)
    writer.start()
    got = folder.gather(job, 2, 60)
    writer.join()
    assert (sorted(got.reports), got.missing) == ([0, 1], [])


def test_a_rank_s_own_failure_is_no_peer_failure(tmp_path):
    # Every rank watches failed/ for a peer that failed on its own (then it stops its
    # workload for that peer): its own failure there is not a peer's.
    job = tmp_path / "job"
    job.mkdir()
    folder.mark_exit(job, 1, 3)
    assert folder.peer_failure(job, 1) is None
    peer = folder.peer_failure(job, 0)
    assert peer is not None and (peer.rank, peer.exit_code) == (1, 3)


def test_with_several_failed_ranks_the_first_to_fail_is_blamed(tmp_path):
    # The first failure is the likely cause: later ones often crashed on its collectives. By
    # the failing rank's clock, not by rank number.
    job = tmp_path / "job"
    for rank, code, when in ((1, 137, 1000.5), (3, 2, 1000.0), (2, 1, 1001.0)):
        folder.mark_exit(job, rank, code)
        path = folder.failed_path(job, rank)
        path.write_text(json.dumps({**json.loads(path.read_text()), "time": when}))
    peer = folder.peer_failure(job, 0)
    assert peer is not None and (peer.rank, peer.exit_code) == (3, 2)
