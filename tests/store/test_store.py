"""`pgle store`: per-module profiles keyed by fingerprint, jax version and device kind."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers.pgle_testing import DATA, REPO, TESTS, pgle_env, report_of, run_pgle

from pgle.profiles.files import Profile, read_profile
from pgle.store.store import ProfileStore

FP = [f"{i:032x}" for i in range(1, 4)]
REFERENCE = DATA / "nsys" / "pgle_costs_reference"  # real per-module profiles (nsys-jax output)


def test_add_refresh_get_prune_through_the_cli(tmp_path):
    store = tmp_path / "store"
    add = ("store", "add", str(store), str(REFERENCE), "--device-kind", "NVIDIA A100", "--jax", "0.4.30",
           "--json")
    first = run_pgle(*add, cwd=tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    assert {m["status"] for m in report_of(first)["modules"]} == {"added"}
    second = run_pgle(*add, "--policy", "replace", cwd=tmp_path)
    rows = report_of(second)["modules"]
    assert {m["status"] for m in rows} == {"refreshed"} and all(len(m["removed"]) == 1 for m in rows)
    ls = report_of(run_pgle("store", "ls", str(store), "--json", cwd=tmp_path))
    assert len(ls["modules"]) == 6 and {m["jax"] for m in ls["modules"]} == {"0.4.30"}
    view = tmp_path / "view"
    got = run_pgle("store", "get", str(store), str(view), "--device-kind", "NVIDIA A100", "--jax", "0.4.30",
                   cwd=tmp_path)
    assert got.returncode == 0, got.stderr.decode()
    for ref in REFERENCE.glob("*.pbtxt"):
        assert read_profile(view / f"{ref.stem}.pbtxt").costs == read_profile(ref).costs
    # Another device kind is not served; a clear error, nothing written.
    other = run_pgle("store", "get", str(store), str(tmp_path / "v2"), "--device-kind", "H100",
                     "--jax", "0.4.30", cwd=tmp_path)
    assert other.returncode == 2 and "no profile for jax 0.4.30 on H100" in other.stderr.decode()
    assert not (tmp_path / "v2").exists()
    # The view is never overwritten silently.
    again = run_pgle("store", "get", str(store), str(view), "--device-kind", "NVIDIA A100", "--jax", "0.4.30",
                     cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr.decode()
    # prune previews unless --yes (as `cache prune` and `runs prune` do).
    preview = report_of(run_pgle("store", "prune", str(store), "--jax", "0.10.2", "--json", cwd=tmp_path))
    assert len(preview["modules"]) == 6 and preview["dry_run"] is True
    assert len(report_of(run_pgle("store", "ls", str(store), "--json", cwd=tmp_path))["modules"]) == 6
    pruned = report_of(run_pgle("store", "prune", str(store), "--jax", "0.10.2", "--yes", "--json",
                                cwd=tmp_path))
    assert len(pruned["modules"]) == 6 and pruned["dry_run"] is False
    assert report_of(run_pgle("store", "ls", str(store), "--json", cwd=tmp_path))["modules"] == []


def test_policies_keep_and_merge(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    for v in (10.0, 20.0, 30.0, 40.0):
        st.add(FP[0], Profile(costs=[("fusion.1", v)]), jax="j", jaxlib="j", device_kind="d",
               device_count=1, source="t", policy="keep:3")
    assert [st.read(e).costs[0][1] for e in st.entries(FP[0])] == [20.0, 30.0, 40.0]
    newest, _ = st.serve(FP[0], jax="j", device_kind="d", policy="keep:3")
    assert newest.costs == [("fusion.1", 40.0)]
    merged, used = st.serve(FP[0], jax="j", device_kind="d", policy="merge:3:p50")
    assert merged.costs == [("fusion.1", 30.0)] and len(used) == 3  # index int(0.5*2) of sorted
    assert st.serve(FP[0], jax="other", device_kind="d") is None


def test_a_merge_view_merges_the_newest_entries(tmp_path):
    """`store get --policy merge:2` over a module with four entries: the two newest merged, as
    auto PGLE aggregates its latest runs; the older two are history, not the profile."""
    st = ProfileStore(tmp_path / "s", create=True)
    for v in (10.0, 20.0, 30.0, 40.0):
        st.add(FP[0], Profile(costs=[("fusion.1", v)]), jax="j", jaxlib="j", device_kind="d",
               device_count=1, source="t", policy="keep:5")
    entries = st.entries(FP[0])
    served = st.materialize(tmp_path / "view", jax="j", device_kind="d", policy="merge:2:p0")
    assert served == {FP[0]: entries[-2:]}
    # p0 of the two newest (30, 40) is 30; of the two oldest it would be 10.
    assert read_profile(tmp_path / "view" / f"{FP[0]}.pbtxt").costs == [("fusion.1", 30.0)]


def test_bad_policy_and_missing_store(tmp_path):
    proc = run_pgle("store", "add", str(tmp_path / "s"), str(REFERENCE), "--device-kind", "x",
                    "--policy", "newest", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown store policy" in proc.stderr.decode()
    assert not (tmp_path / "s").exists()
    proc = run_pgle("store", "ls", str(tmp_path / "nope"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.decode().startswith("pgle: error: profile store")


def test_concurrent_writers_in_real_processes(tmp_path):
    store = tmp_path / "shared"
    env = pgle_env(PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, str(TESTS / "helpers" / "store_writer.py"), str(store),
                               str(w), "8"], env=env) for w in range(4)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0, 0, 0]
    st = ProfileStore(store)
    for m in range(3):
        fp = f"{m:032x}"
        entries = st.entries(fp)
        assert len(entries) == 3  # keep:3 held under 4 concurrent writers
        for e in entries:
            assert st.read(e).instruction_count == 50
        files = sorted(p.name for p in (store / "profiles" / fp).iterdir())
        assert len(files) == 6 and not [f for f in files if f.endswith(".tmp")]


def test_gs_store_through_etils_mock(tmp_path):
    """A gs:// store, mapped onto a local folder with etils' own epath.testing.mock_epath."""
    from etils import epath
    from helpers.gs_mock import mock_gs

    bucket_root = tmp_path / "bucket"
    with mock_gs(bucket_root):
        st = ProfileStore("gs://team-bucket/pgle-store", create=True)
        assert st.remote
        entry, _ = st.add(FP[1], Profile(costs=[("all-gather-start", 12.5)]), jax="0.10.2",
                          jaxlib="0.10.2", device_kind="H100", device_count=8, source="gs test")
        assert [e.entry_id for e in st.entries()] == [entry.entry_id]
        profile, _ = st.serve(FP[1], jax="0.10.2", device_kind="H100")
        assert profile.costs == [("all-gather-start", 12.5)]
        assert epath.Path("gs://team-bucket/pgle-store").exists()
    on_disk = bucket_root / "team-bucket" / "pgle-store" / "profiles" / FP[1]
    assert sorted(p.suffix for p in on_disk.iterdir()) == [".json", ".pbtxt"]
