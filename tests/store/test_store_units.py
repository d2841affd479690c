"""The store's key (jax, device kind), its policies at their edges, the path checks before a
shared folder is touched, and the size/duration units every prune reads (README "Profile store",
docs/reference/cli.md). Real files in a real store folder."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from pgle.commands.runs import RunEntry, select
from pgle.errors import BadInput
from pgle.profiles.files import Profile
from pgle.shared_folders import check_inside, is_inside
from pgle.store.key import StoreKey, mismatch
from pgle.store.policy import parse_policy
from pgle.store.store import Entry, ProfileStore
from pgle.units import parse_duration, parse_size

FP = "0123456789abcdef0123456789abcdef"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def add(st: ProfileStore, value: float, *, jax: str = "0.10.2", kind: str = "NVIDIA H100 80GB HBM3",
        minute: int = 0, policy: str = "keep:3") -> None:
    st.add(FP, Profile(costs=[("fusion.1", value)]), jax=jax, jaxlib=jax, device_kind=kind,
           device_count=8, source="test", policy=policy, now=T0 + dt.timedelta(minutes=minute))


def test_the_store_key_holds_the_device_kind_and_the_jax(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    add(st, 10.0, kind="NVIDIA H100 80GB HBM3", minute=0)
    add(st, 99.0, kind="NVIDIA A100-SXM4-80GB", minute=1)  # newer, but another GPU
    add(st, 77.0, jax="0.9.0", minute=2)  # newer, but another jax
    served, used = st.serve(FP, jax="0.10.2", device_kind="NVIDIA H100 80GB HBM3")
    assert served.costs == [("fusion.1", 10.0)] and len(used) == 1
    assert st.serve(FP, jax="0.10.2", device_kind="NVIDIA B200") is None
    assert st.serve(FP, jax="0.11.0", device_kind="NVIDIA H100 80GB HBM3") is None
    # Each (jax, device kind) keeps its own entries under the policy.
    assert len(st.entries(FP)) == 3


def test_a_run_on_another_device_kind_than_its_view_is_reported():
    planned = StoreKey("0.10.2", "NVIDIA H100 80GB HBM3")
    assert mismatch(planned, StoreKey("0.10.2", "NVIDIA H100 80GB HBM3")) is None
    said = mismatch(planned, StoreKey("0.10.2", "NVIDIA A100-SXM4-80GB"))
    assert said is not None and "device kind" in said and "A100" in said
    assert "jax" in (mismatch(planned, StoreKey("0.9.0", "NVIDIA H100 80GB HBM3")) or "")


def test_keep_n_keeps_exactly_the_n_newest_and_serves_the_newest(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    for i, v in enumerate((10.0, 20.0, 30.0, 40.0, 50.0)):
        add(st, v, minute=i, policy="keep:2")
    kept = [st.read(e).costs[0][1] for e in st.entries(FP)]
    assert kept == [40.0, 50.0]
    served, _ = st.serve(FP, jax="0.10.2", device_kind="NVIDIA H100 80GB HBM3", policy="keep:2")
    assert served.costs == [("fusion.1", 50.0)]
    # merge:2 serves from the 2 newest (40, 50), never from what a larger keep once held.
    add(st, 60.0, minute=9, policy="keep:5")
    merged, used = st.serve(FP, jax="0.10.2", device_kind="NVIDIA H100 80GB HBM3",
                            policy="merge:2:p0")
    assert merged.costs == [("fusion.1", 50.0)] and len(used) == 2


def test_policy_edges():
    assert parse_policy("merge:3").percentile == 90  # jaxlib's aggregate_profiled_instructions
    assert parse_policy("keep:1").keep == 1 and str(parse_policy("keep:1")) == "replace"
    for bad in ("keep:0", "merge:0", "merge:2:p101", "keep:-1", "newest"):
        with pytest.raises(BadInput):
            parse_policy(bad)


def test_is_inside_refuses_a_sibling_with_the_same_prefix(tmp_path: Path):
    root = tmp_path / "store"
    (root / "fp").mkdir(parents=True)
    (tmp_path / "store-evil").mkdir()
    assert is_inside(root, root / "fp" / "x.pb")
    assert is_inside(root, root / "x.pb")
    assert not is_inside(root, tmp_path / "store-evil" / "x.pb")
    # A link among the folders above the file leads elsewhere: refused before anything is touched.
    os.symlink(tmp_path / "store-evil", root / "planted")
    with pytest.raises(BadInput, match="outside"):
        check_inside(root, root / "planted" / "x.pb", "profile")
    assert check_inside(root, root / "fp" / "x.pb") == os.fspath(root / "fp" / "x.pb")


def test_sizes_are_binary_units_as_documented():
    assert parse_size("2048") == 2048
    assert parse_size("1K") == 1024
    assert parse_size("500M") == 500 * 1024 ** 2
    assert parse_size("5G") == 5 * 1024 ** 3 and parse_size("5GiB") == 5 * 1024 ** 3
    assert parse_size("1.5g") == int(1.5 * 1024 ** 3)
    assert parse_size("1T") == 1024 ** 4
    with pytest.raises(BadInput):
        parse_size("5 parsecs")


def test_durations():
    assert parse_duration("30s") == 30 and parse_duration("90m") == 5400
    assert parse_duration("12h") == 12 * 3600 and parse_duration("7d") == 7 * 86400
    assert parse_duration("2w") == 14 * 86400 and parse_duration("1d12h") == 36 * 3600


def run(name: str, size: int, age_days: float, now: float, live: bool = False) -> RunEntry:
    return RunEntry(name, f"/runs/{name}", size, now - age_days * 86400, None, live)


def test_runs_prune_by_size_keeps_what_fits_exactly():
    now = 1_800_000_000.0
    runs = [run("a", 100, 0, now), run("b", 100, 1, now), run("c", 100, 2, now), run("d", 100, 3, now)]
    # 300 bytes fit 3 folders of 100 exactly: only the oldest goes.
    assert [r.name for r in select(runs, older_than=None, max_size=300, keep_last=None, now=now)] == ["d"]
    assert [r.name for r in select(runs, older_than=None, max_size=250, keep_last=None, now=now)] == ["c", "d"]
    # A deleted folder no longer counts: after c and d go, b still fits in 250.
    assert [r.name for r in select(runs, older_than=None, max_size=199, keep_last=None, now=now)] == ["b", "c", "d"]
    # A big folder deleted frees its room: the smaller, older one after it is kept.
    runs = [run("a", 100, 0, now), run("big", 300, 1, now), run("c", 50, 2, now)]
    assert [r.name for r in select(runs, older_than=None, max_size=200, keep_last=None, now=now)] == ["big"]


def test_runs_prune_never_selects_a_live_folder():
    now = 1_800_000_000.0
    runs = [run("a", 100, 0, now), run("b", 100, 10, now, live=True), run("c", 100, 20, now)]
    chosen = select(runs, older_than=86400, max_size=None, keep_last=None, now=now)
    assert [r.name for r in chosen] == ["c"]
    assert [r.name for r in select(runs, older_than=None, max_size=None, keep_last=1, now=now)] == ["c"]


ID = "20260101T000000000000Z-0123456789ab"


def _id(n: int) -> str:
    return ID[:-2] + f"{n:02x}"


def test_a_write_sweeps_exactly_what_killed_writers_left_and_nothing_else(tmp_path: Path):
    """What a killed writer leaves (a profile or a calibration without its metadata, a temp
    file of pgle.atomic's name) is removed under the lock and listed in `swept`, once per
    store object; an entry whole or as metadata alone, a user's files, a folder named like an
    entry and anything outside a fingerprint folder are never touched."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)  # makes profiles/FP with one whole entry
    folder = root / "profiles" / FP
    whole = sorted(p.name for p in folder.iterdir())
    left = [f"{_id(2)}.pbtxt", f"{_id(3)}.pb", f"{_id(4)}.calibration.jsonl",
            f".{_id(5)}.json.k3j2.tmp", f".{_id(6)}.pbtxt.0f9e.tmp"]
    kept = [f"{_id(7)}.json", "notes.txt", f"{_id(8)}.pbtxt.bak", f"x{_id(9)}.pbtxt",
            f"{_id(10)}.json.tmp", f".{_id(11)}.pbtxt.tmp"]
    for name in left + kept:
        (folder / name).write_text("x")
    (folder / f"{_id(12)}.pbtxt").mkdir()  # a folder, not an entry file
    other = root / "profiles" / "not-a-fingerprint"
    other.mkdir()
    (other / f"{_id(13)}.pbtxt").write_text("x")
    st2 = ProfileStore(root)
    add(st2, 2.0, minute=1)
    names = {p.name for p in folder.iterdir()}
    assert not names & set(left)
    assert set(kept) | set(whole) | {f"{_id(12)}.pbtxt"} <= names
    assert (other / f"{_id(13)}.pbtxt").exists()
    assert sorted(Path(p).name for p in st2.swept) == sorted(left)
    # once per store object: a leftover made after its sweep waits for the next store
    (folder / f"{_id(14)}.pbtxt").write_text("x")
    add(st2, 3.0, minute=2)
    assert (folder / f"{_id(14)}.pbtxt").exists() and len(st2.swept) == len(left)
    # prune sweeps too, unless it is a dry run
    st3 = ProfileStore(root)
    st3.prune(dry_run=True)
    assert (folder / f"{_id(14)}.pbtxt").exists() and st3.swept == []
    st4 = ProfileStore(root)
    assert st4.prune(keep=10) == []  # nothing beyond the policy: only the leftover goes
    assert not (folder / f"{_id(14)}.pbtxt").exists()
    assert [Path(p).name for p in st4.swept] == [f"{_id(14)}.pbtxt"]
    assert len(st4.entries(FP)) == 3


GOOD = {"fingerprint": FP, "entry_id": "20260101T000000000000Z-cd340b165df9", "jax": "0.10.2",
        "jaxlib": "0.10.2", "device_kind": "NVIDIA H100", "device_count": 8,
        "created": "2026-01-01T00:00:00+00:00", "source": "test", "module": "", "instructions": 1}
NAME = GOOD["entry_id"] + ".json"


@pytest.mark.parametrize("change, error, says", [
    ({"jax": None}, TypeError, "jax None is not a string"),
    ({"module": 3}, TypeError, "module 3 is not a string"),
    ({"created": {"a": 1}}, TypeError, "created a JSON object is not a string"),
    ({"source": ["x"]}, TypeError, "source a JSON array is not a string"),
    ({"device_count": -1}, ValueError, "device_count -1 is not a count"),
    ({"device_count": True}, ValueError, "device_count True is not a count"),
    ({"instructions": 1.5}, ValueError, "instructions 1.5 is not a count"),
    ({"fingerprint": "f" * 32}, ValueError, f"fingerprint {'f' * 32!r} is not its folder's ({FP})"),
    ({"fingerprint": FP.upper()}, ValueError, f"fingerprint {FP.upper()!r} is not its folder's ({FP})"),
    ({"entry_id": "20260101T000000000000Z-cd340b165df8"}, ValueError,
     "entry_id '20260101T000000000000Z-cd340b165df8' is not its file's name"),
    ({"created": "yesterday"}, ValueError, "created 'yesterday' is not a time"),
    ({"created": "2026-01-01T00:00:00"}, ValueError, "created '2026-01-01T00:00:00' has no time zone"),
    ({"created": "2026-01-01T00:00:01+00:00"}, ValueError,
     "entry_id '20260101T000000000000Z-cd340b165df9' is not dated by its created time "
     "(2026-01-01T00:00:01+00:00)"),
    ({"created": "2026-01-01T01:00:00+01:00"}, None, None),  # the same instant: an entry
    ({"newer_field": 1}, None, None),  # a newer pgle's field is ignored
])
def test_store_metadata_is_checked_field_by_field(change, error, says):
    """A store's metadata files are written by every user of the store: each field is
    checked, and the refusal names the field and its value (never a repr of an object)."""
    data = dict(GOOD, **change)
    if error is None:
        entry = Entry.from_metadata(data, FP, NAME)
        assert entry.entry_id == GOOD["entry_id"] and not hasattr(entry, "newer_field")
        return
    with pytest.raises(error) as e:
        Entry.from_metadata(data, FP, NAME)
    assert str(e.value) == says


def test_store_metadata_missing_fields_and_the_future():
    for name in ("fingerprint", "entry_id", "jax", "jaxlib", "device_kind", "device_count",
                 "created", "source"):
        data = {k: v for k, v in GOOD.items() if k != name}
        with pytest.raises(ValueError, match=f"^no {name!r} field$"):
            Entry.from_metadata(data, FP, NAME)
    for bad in ([], "x", None):
        with pytest.raises(TypeError, match="^not a JSON object$"):
            Entry.from_metadata(bad, FP, NAME)
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=50)
    late = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=70)
    for when, ok in ((soon, True), (late, False)):
        stamp = when.strftime("%Y%m%dT%H%M%S%fZ")
        data = dict(GOOD, created=when.isoformat(), entry_id=f"{stamp}-cd340b165df9")
        if ok:
            assert Entry.from_metadata(data, FP, f"{stamp}-cd340b165df9.json").created == when.isoformat()
        else:
            with pytest.raises(ValueError, match="is in the future$"):
                Entry.from_metadata(data, FP, f"{stamp}-cd340b165df9.json")
    long = "v" * 100
    with pytest.raises(TypeError) as e:
        Entry.from_metadata(dict(GOOD, jaxlib=1.5), FP, NAME)
    assert str(e.value) == "jaxlib 1.5 is not a string"
    with pytest.raises(ValueError) as e:
        Entry.from_metadata(dict(GOOD, fingerprint=long), FP, NAME)
    assert str(e.value) == f"fingerprint {repr(long)[:57]}... is not its folder's ({FP})"
