"""A store entry's age: `pgle store prune --older-than` removes the entries written more than the
duration ago, and only those; an entry dated in the future beyond clock skew is never served
(issue 37's independent mutants: the comparison reversed removed the new ones; a skew allowance
in milliseconds' worth of seconds let an entry dated days ahead win)."""

from __future__ import annotations

import datetime as dt

from helpers.pgle_testing import report_of, run_pgle
from pgle.profiles.files import Profile, read_profile
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


def test_an_entry_dated_in_the_future_is_not_served(tmp_path):
    # A clock minutes ahead is tolerated (an hour); an entry dated days ahead would sort as the
    # newest for days and push out every real one: damaged, skipped, named.
    st = ProfileStore(tmp_path / "s", create=True)
    now = dt.datetime.now(dt.UTC)
    for ahead, cost in ((dt.timedelta(minutes=20), 1.0), (dt.timedelta(days=2), 2.0)):
        st.add(FP, Profile(costs=[("fusion.1", cost)]), jax="0.10.2", jaxlib="0.10.2",
               device_kind="NVIDIA H100", device_count=1, source="t", policy="keep:10",
               now=now + ahead)
    proc = run_pgle("store", "get", str(tmp_path / "s"), str(tmp_path / "view"), "--jax", "0.10.2",
                    "--device-kind", "NVIDIA H100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    served = list((tmp_path / "view").iterdir())
    assert [p.name for p in served] == [f"{FP}.pbtxt"]
    assert read_profile(served[0]).costs == [("fusion.1", 1.0)]
    assert "in the future" in proc.stderr.decode()
