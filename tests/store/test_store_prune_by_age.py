"""`pgle store prune --older-than`: removes the entries written more than the duration ago, and
only those (issue 37's independent mutants: the comparison reversed removed the new ones)."""

from __future__ import annotations

import datetime as dt

from helpers.pgle_testing import report_of, run_pgle

from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

FP = "0123456789abcdef0123456789abcdef"


def test_prune_older_than_removes_the_old_entries_only(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    now = dt.datetime.now(dt.UTC)
    for days, cost in ((30, 1.0), (10, 2.0), (2, 3.0), (0, 4.0)):
        st.add(FP, Profile(costs=[("fusion.1", cost)]), jax="0.10.2", jaxlib="0.10.2",
               device_kind="NVIDIA H100", device_count=1, source="t", policy="keep:10",
               now=now - dt.timedelta(days=days, minutes=1))
    pruned = report_of(run_pgle("store", "prune", str(tmp_path / "s"), "--older-than", "7d",
                                "--yes", "--json", cwd=tmp_path))
    assert pruned["dry_run"] is False and len(pruned["modules"]) == 2, pruned
    left = ProfileStore(tmp_path / "s")
    # The 2-day-old and the new entry stay, oldest first.
    assert [left.read(e).costs[0][1] for e in left.entries(FP)] == [3.0, 4.0]
