"""The store's key (jax, device kind), its policies at their edges, the path checks before a
shared folder is touched, and the size/duration units every prune reads (README "Profile store",
docs/reference/cli.md). Real files in a real store folder."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from helpers.fs_limits import no_descriptor_left
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


# -- issue 37: what the store package's first mutmut run left alive, each pinned by what a user
# sees (a refusal's sentence, an entry served or kept, a damaged file named). Real store folders.

import dataclasses  # noqa: E402
import fcntl  # noqa: E402
import hashlib  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

from pgle.atomic import WriteFailed  # noqa: E402
from pgle.errors import PgleError, ProfileError  # noqa: E402
from pgle.profiles.files import BINARY, TEXT, encode_profile, read_profile  # noqa: E402
from pgle.shared_folders import NotAFile  # noqa: E402
from pgle.store import calibration  # noqa: E402
from pgle.store import store as store_mod  # noqa: E402
from pgle.store.store import is_remote  # noqa: E402

KIND = "NVIDIA H100 80GB HBM3"


def _one(st: ProfileStore) -> Entry:
    (entry,) = st.entries(FP)
    return entry


def _store_with_one(tmp_path: Path) -> tuple[Path, ProfileStore, Entry, Path]:
    """A new store at tmp_path/s with one entry: (root, store, entry, its fingerprint folder)."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    return root, st, _one(st), root / "profiles" / FP


def test_a_missing_store_or_a_file_is_refused_in_one_line_and_nothing_is_made(tmp_path: Path):
    missing = tmp_path / "nope"
    with pytest.raises(BadInput) as e:
        ProfileStore(missing)
    assert e.value.message == f"profile store {missing} does not exist."
    assert e.value.hint == "`pgle store add` creates it, or pass an existing folder."
    assert not missing.exists()
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(BadInput) as e:
        ProfileStore(afile)
    assert e.value.message == f"profile store {afile} is not a directory."


def test_a_store_that_cannot_be_opened_is_one_line(tmp_path: Path):
    """The store is there, but opening it fails (no descriptor left: EMFILE): one line with the
    system's reason, not a traceback."""
    root, st, _, _ = _store_with_one(tmp_path)
    st.close()
    with pytest.raises(BadInput) as e, no_descriptor_left():
        ProfileStore(root)
    assert e.value.message == f"cannot open profile store {root}: Too many open files."
    assert len(ProfileStore(root).entries(FP)) == 1  # with descriptors again


def test_closing_a_store_releases_its_folder(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    fd = st.dir.fd
    os.fstat(fd)
    st.close()
    assert st.dir.fd == -1
    st.close()  # twice: nothing more to release


def test_object_store_urls_are_remote_and_a_local_path_is_not():
    """An `s3://` store is never made as a local folder named `s3:`."""
    assert is_remote("gs://bucket/store") and is_remote("s3://bucket/store")
    assert not is_remote("store") and not is_remote("/data/s3://x")


def test_a_refused_value_is_shown_whole_up_to_60_characters():
    for n, shown in ((58, repr("f" * 58)), (59, repr("f" * 59)[:57] + "...")):
        with pytest.raises(ValueError) as e:  # repr adds two quotes: 60 and 61 characters
            Entry.from_metadata(dict(GOOD, fingerprint="f" * n), FP, NAME)
        assert str(e.value) == f"fingerprint {shown} is not its folder's ({FP})"


@pytest.mark.parametrize("field", ["fingerprint", "entry_id", "device_kind"])
def test_a_metadata_name_field_that_is_not_a_string_is_refused_by_name(field):
    with pytest.raises(TypeError) as e:
        Entry.from_metadata(dict(GOOD, **{field: 5}), FP, NAME)
    assert str(e.value) == f"{field} 5 is not a string"


def test_metadata_of_an_older_pgle_without_module_or_instruction_count_is_an_entry():
    older = {k: v for k, v in GOOD.items() if k not in ("module", "instructions")}
    entry = Entry.from_metadata(older, FP, NAME)
    assert (entry.module, entry.instructions) == ("", 0)
    assert Entry.from_metadata(dict(GOOD, instructions=0), FP, NAME).instructions == 0


def test_a_future_entry_is_refused_naming_its_time():
    late = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=70)
    stamp = late.strftime("%Y%m%dT%H%M%S%fZ")
    data = dict(GOOD, created=late.isoformat(), entry_id=f"{stamp}-cd340b165df9")
    with pytest.raises(ValueError) as e:
        Entry.from_metadata(data, FP, f"{stamp}-cd340b165df9.json")
    assert str(e.value) == f"created {late.isoformat()!r} is in the future"


def test_entries_are_dated_in_utc_on_a_host_in_another_time_zone(tmp_path: Path, monkeypatch):
    """Ids and the `created` check are UTC whatever the host's zone: an entry written on a host
    5.5 h ahead of UTC is read back (not refused as misdated) and sorts with everyone's."""
    monkeypatch.setenv("TZ", "XST-05:30")  # a POSIX zone string: no tz database needed
    time.tzset()
    try:
        st = ProfileStore(tmp_path / "s", create=True)
        add(st, 1.0)
        entry = _one(st)
        assert entry.entry_id.startswith("20260101T000000000000Z-") and st.damaged == {}
        same = dict(GOOD, created="2026-01-01T05:30:00+05:30")
        assert Entry.from_metadata(same, FP, NAME).entry_id == GOOD["entry_id"]
    finally:
        monkeypatch.undo()
        time.tzset()


def _args(**kw):
    return {"jax": "0.10.2", "jaxlib": "0.10.2", "device_kind": KIND, "device_count": 8,
            "source": "test", "now": T0, **kw}


def test_add_refuses_an_empty_key_or_profile_in_one_line(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    prof = Profile(costs=[("fusion.1", 1.0)])
    for change, what in (({"jax": " "}, "jax version"), ({"device_kind": ""}, "device kind")):
        with pytest.raises(BadInput) as e:
            st.add(FP, prof, **_args(**change))
        assert e.value.message == f"the {what} of a store entry cannot be empty."
    with pytest.raises(ProfileError) as e:
        st.add(FP, Profile(), **_args())
    assert e.value.message == f"refusing to store an empty profile for module {FP}."
    assert st.entries() == []


def test_an_entry_records_its_module_and_instruction_count(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    st.add(FP, Profile(costs=[("fusion.1", 1.0), ("fusion.2", 2.0)]), **_args())
    entry = _one(st)
    assert (entry.module, entry.instructions) == ("", 2)  # no module name given: none shown


def test_a_store_write_that_fails_names_the_store_file(tmp_path: Path):
    """A store file that cannot be written (here: a folder in its place) is one line naming
    it; the profile is written first, the metadata last, a calibration beside them."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    prof = Profile(costs=[("fusion.1", 1.0)])
    entry_id = f"{T0.strftime('%Y%m%dT%H%M%S%fZ')}-" \
        f"{hashlib.sha256(encode_profile(prof, TEXT)).hexdigest()[:12]}"
    folder = root / "profiles" / FP
    folder.mkdir(parents=True)
    for suffix in (".pbtxt", ".json"):
        (folder / f"{entry_id}{suffix}").mkdir()
        with pytest.raises(WriteFailed) as e:
            st.add(FP, prof, **_args())
        assert e.value.message == \
            f"cannot write store file {folder / (entry_id + suffix)}: it is a directory."
        (folder / f"{entry_id}{suffix}").rmdir()
    st.add(FP, prof, **_args())
    entry = _one(st)
    cal = folder / f"{entry_id}{calibration.SUFFIX}"
    cal.mkdir()
    rec = calibration.Calibration.from_dict(
        {"arm": "pgle", "predicted_ratio": 0.9, "measured_ratio": 1.1, "target": "h100",
         "device_kind": KIND, "device_count": 8, "jax": "0.10.2", "pgle": "1.0",
         "created": "2026-01-01T00:00:00+00:00"})
    with pytest.raises(WriteFailed) as e:
        st.add_calibration(FP, entry.entry_id, [rec])
    assert e.value.message == f"cannot write store file {cal}: it is a directory."
    assert st.damaged == {str(cal): "not a regular file"}


def test_store_files_larger_than_pgle_writes_are_damaged_not_read(tmp_path: Path):
    root, st, entry, folder = _store_with_one(tmp_path)
    cal = folder / f"{entry.entry_id}{calibration.SUFFIX}"
    with open(cal, "wb") as f:
        f.truncate(calibration.MAX_BYTES + 1)
    assert st.calibration(entry) == []
    assert st.damaged == {str(cal): f"larger than {calibration.MAX_BYTES} bytes"}
    # Valid metadata padded past 1 MiB: not read (MAX_METADATA_BYTES), named as damaged.
    meta = folder / f"{entry.entry_id}.json"
    meta.write_bytes(meta.read_bytes() + b" " * store_mod.MAX_METADATA_BYTES)
    st2 = ProfileStore(root)
    assert st2.entries() == []
    assert st2.damaged == {str(meta): f"larger than {store_mod.MAX_METADATA_BYTES} bytes"}


def test_a_hidden_json_file_is_neither_an_entry_nor_damaged(tmp_path: Path):
    root, st, entry, folder = _store_with_one(tmp_path)
    meta = (folder / f"{entry.entry_id}.json").read_bytes()
    (folder / f".{entry.entry_id}.json").write_bytes(meta)
    st2 = ProfileStore(root)
    assert [e.entry_id for e in st2.entries()] == [entry.entry_id] and st2.damaged == {}


def _socket_at(folder: Path, name: str, monkeypatch) -> socket.socket:
    """A unix socket named like a store file: opening it fails (ENXIO) past every file check.
    Bound by a relative name: a store path is longer than a socket address allows."""
    monkeypatch.chdir(folder)
    s = socket.socket(socket.AF_UNIX)
    s.bind(name)
    return s


def test_metadata_that_is_a_link_a_folder_or_unreadable_is_named_with_why(tmp_path: Path,
                                                                           monkeypatch):
    root, st, entry, folder = _store_with_one(tmp_path)
    link, adir, sock = (folder / f"{_id(n)}.json" for n in (1, 2, 3))
    os.symlink(folder / f"{entry.entry_id}.json", link)
    adir.mkdir()
    s = _socket_at(folder, sock.name, monkeypatch)
    try:
        st2 = ProfileStore(root)
        assert [e.entry_id for e in st2.entries()] == [entry.entry_id]
        assert st2.damaged == {str(link): "a symbolic link", str(adir): "not a regular file",
                               str(sock): "No such device or address"}
        # The same for a calibration file that cannot be opened.
        cal = folder / f"{entry.entry_id}{calibration.SUFFIX}"
        s2 = _socket_at(folder, cal.name, monkeypatch)
        s2.close()
        assert st2.calibration(entry) == []
        assert st2.damaged[str(cal)] == "No such device or address"
    finally:
        s.close()


def test_a_profiles_folder_that_is_a_link_or_a_file_is_named_never_followed(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    st = ProfileStore(elsewhere, create=True)
    add(st, 1.0)
    root = tmp_path / "s"
    root.mkdir()
    os.symlink(elsewhere / "profiles", root / "profiles")
    st2 = ProfileStore(root)
    assert st2.entries() == []
    assert st2.damaged == {str(root / "profiles"): "a symbolic link, not the store's folder"}
    (root / "profiles").unlink()
    (root / "profiles").write_text("x")
    st3 = ProfileStore(root)
    assert st3.entries() == []
    assert st3.damaged == {str(root / "profiles"): "not a folder"}


def test_names_in_profiles_that_are_not_fingerprint_folders_never_hide_the_rest(tmp_path: Path):
    """Listed by name: a file not named like a fingerprint, a link named like one (named as
    damaged) and a file named like one all sort before the real folder and are passed over."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    profiles = root / "profiles"
    (profiles / ".DS_Store").write_text("x")
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "other", profiles / ("0" * 32))
    (profiles / ("0" * 31 + "1")).write_text("x")
    st2 = ProfileStore(root)
    assert [e.fingerprint for e in st2.entries()] == [FP]
    assert st2.damaged == {str(profiles / ("0" * 32)): "a symbolic link, not a folder"}


def _damaged_store(root: Path, n: int) -> ProfileStore:
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    for i in range(n):
        (root / "profiles" / FP / f"{_id(i + 1)}.json").write_text("not json")
    st = ProfileStore(root)
    st.entries()
    return st


def test_the_damaged_warning_names_three_files_then_counts_the_rest(tmp_path: Path):
    folder = tmp_path / "a" / "profiles" / FP
    three = _damaged_store(tmp_path / "a", 3).damaged_warning()
    named = "; ".join(f"{folder / f'{_id(i)}.json'} (not JSON)" for i in (1, 2, 3))
    assert three == f"skipped 3 damaged store entries: {named}. pgle neither reads nor deletes " \
        "them; remove or fix by hand."
    four = _damaged_store(tmp_path / "b", 4).damaged_warning()
    assert four is not None and "(not JSON); and 1 more. pgle neither" in four


def test_an_entry_built_by_hand_names_nothing_outside_its_folder(tmp_path: Path):
    """pgle as a library: an Entry not read from a store is checked before it becomes a path."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    entry = _one(st)
    with pytest.raises(ProfileError) as e:
        st.profile_path(dataclasses.replace(entry, fingerprint="xyz"))
    assert e.value.message.startswith("'xyz' is not a module fingerprint")
    newline = FP + "\n"  # FINGERPRINT_RE's `$` lets it by; the store's own check does not
    with pytest.raises(BadInput) as e:
        st.profile_path(dataclasses.replace(entry, fingerprint=newline))
    assert e.value.message == f"{newline!r} is not a module fingerprint."
    with pytest.raises(BadInput) as e:
        st.profile_path(dataclasses.replace(entry, entry_id="../x"))
    assert e.value.message == "store entry id '../x' is not an entry id."


def test_a_store_path_through_a_link_is_refused_naming_the_store_file(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    entry = _one(st)
    (root / "profiles").rename(tmp_path / "moved")
    os.symlink(tmp_path / "moved", root / "profiles")
    path = root / "profiles" / FP / f"{entry.entry_id}.pbtxt"
    with pytest.raises(BadInput) as e:
        st.profile_path(entry)
    assert e.value.message.startswith(f"store file {path} is outside {root} ")


def test_an_old_binary_entry_is_read_served_and_viewed_as_binary(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    entry = _one(st)
    text = root / "profiles" / FP / f"{entry.entry_id}.pbtxt"
    text.unlink()
    old = encode_profile(Profile(costs=[("fusion.1", 7.0)]), BINARY)
    (text.with_suffix(".pb")).write_bytes(old)
    assert str(st.profile_path(entry)).endswith(f"{entry.entry_id}.pb")
    assert st.read(entry).costs == [("fusion.1", 7.0)]
    st.materialize(tmp_path / "view", jax="0.10.2", device_kind=KIND)
    assert [p.name for p in (tmp_path / "view").iterdir()] == [f"{FP}.pb"]
    (text.with_suffix(".pb")).unlink()
    with pytest.raises(ProfileError) as e:
        st.read(entry)
    assert e.value.message == \
        f"cannot read store profile of {FP}/{entry.entry_id}: No such file or directory."


def test_a_view_is_refused_over_a_folder_of_other_files_or_inside_the_store(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    view = tmp_path / "view"
    view.mkdir()
    (view / f"{FP}.pbtxt").write_text("old")
    with pytest.raises(ProfileError) as e:  # not empty, no --force
        st.materialize(view, jax="0.10.2", device_kind=KIND)
    assert e.value.message == f"store view {view} already exists and is not empty."
    assert e.value.hint == "Pass --force to replace it."
    assert (view / f"{FP}.pbtxt").read_text() == "old"
    st.materialize(view, jax="0.10.2", device_kind=KIND, force=True)
    assert read_profile(str(view / f"{FP}.pbtxt")).costs == [("fusion.1", 1.0)]
    with pytest.raises(ProfileError) as e:
        st.materialize(root / "view", jax="0.10.2", device_kind=KIND)
    assert "never replaces a folder it reads from" in e.value.message
    assert not (root / "view").exists()
    with pytest.raises(ProfileError) as e:
        st.materialize(tmp_path / "v2", jax="0.1", device_kind=KIND)
    assert e.value.hint == "`pgle store ls` shows what it holds."


def test_a_merge_view_of_two_entries_is_their_percentile(tmp_path: Path):
    """Two entries are merged at the percentile given: p100 of (1, 9) is 9, where the older
    entry alone or the default p90 (the lower of two) would give 1."""
    st = ProfileStore(tmp_path / "s", create=True)
    add(st, 1.0, minute=0)
    add(st, 9.0, minute=1)
    st.materialize(tmp_path / "view", jax="0.10.2", device_kind=KIND, policy="merge:2:p100")
    assert read_profile(str(tmp_path / "view" / f"{FP}.pbtxt")).costs == [("fusion.1", 9.0)]


def test_a_view_whose_profile_is_not_a_file_names_the_store_profile(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    prof = root / "profiles" / FP / f"{_one(st).entry_id}.pbtxt"
    prof.unlink()
    prof.mkdir()
    with pytest.raises(NotAFile) as e:
        st.materialize(tmp_path / "view", jax="0.10.2", device_kind=KIND)
    assert e.value.message == f"store profile {prof} is not a regular file."


def test_readers_share_the_lock_a_reader_holds(tmp_path: Path, monkeypatch):
    """A view built, a module served and a dry-run prune go on while another reader holds the
    store's lock shared (only a writer waits for it)."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    monkeypatch.setattr(store_mod, "LOCK_TIMEOUT", 1.0)  # a writer's wait would fail in 1 s
    fd = os.open(root / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        st.materialize(tmp_path / "view", jax="0.10.2", device_kind=KIND)
        assert st.serve(FP, jax="0.10.2", device_kind=KIND) is not None
        assert st.prune(keep=1, older_than=0, now=T0 + dt.timedelta(days=1), dry_run=True) != []
        with pytest.raises(PgleError, match="timed out after 1 s waiting for the store lock"):
            st.prune(keep=1)
    finally:
        os.close(fd)


def test_prune_by_age_counts_from_the_time_given_and_keeps_the_boundary(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    add(st, 1.0, minute=0)
    add(st, 2.0, minute=60)
    at = T0 + dt.timedelta(hours=1)
    assert st.prune(older_than=3600, now=at) == []  # exactly an hour old: not older
    gone = st.prune(older_than=3599, now=at)
    assert [e.created for e in gone] == [T0.isoformat()]
    assert [st.read(e).costs[0][1] for e in st.entries(FP)] == [2.0]


def test_prune_by_jax_removes_the_other_versions(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    add(st, 1.0, jax="0.9.0", minute=0)
    add(st, 2.0, jax="0.10.2", minute=1)
    assert [e.jax for e in st.prune(jax="0.10.2")] == ["0.9.0"]
    assert [e.jax for e in st.entries(FP)] == ["0.10.2"]


def test_a_store_file_that_cannot_be_removed_stops_prune_naming_it(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0, minute=0)
    old = _one(st)
    add(st, 2.0, minute=1)
    stuck = root / "profiles" / FP / f"{old.entry_id}.pb"
    stuck.mkdir()  # unlink(2) refuses a folder: EISDIR
    with pytest.raises(PgleError) as e:
        st.prune(keep=1)
    assert e.value.message == f"cannot remove store file {stuck}: Is a directory."


def test_serve_and_select_take_a_policy_or_its_name(tmp_path: Path):
    st = ProfileStore(tmp_path / "s", create=True)
    add(st, 1.0, minute=0)
    add(st, 9.0, minute=1)
    newest = st.entries(FP)[-1]
    prof, used = st.serve(FP, jax="0.10.2", device_kind=KIND, policy=parse_policy("keep:2"))
    assert prof.costs == [("fusion.1", 9.0)] and used == [newest]
    prof, used = st.serve(FP, jax="0.10.2", device_kind=KIND, policy="keep:3")
    assert used == [newest]
    assert len(st.select(jax="0.10.2", device_kind=KIND, policy="merge:2")[FP]) == 2
    assert st.select(jax="0.10.2", device_kind=KIND, policy="keep:2")[FP] == [newest]


def test_a_link_named_like_a_leftover_is_swept_its_target_untouched(tmp_path: Path):
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    target = tmp_path / "target"
    target.mkdir()
    link = root / "profiles" / FP / f"{_id(1)}.pbtxt"
    os.symlink(target, link)
    st2 = ProfileStore(root)
    add(st2, 2.0, minute=1)
    assert not os.path.lexists(link) and target.is_dir()
    assert st2.swept == [str(link)]


def test_a_store_folder_of_another_user_is_named_once_per_owner(tmp_path: Path, caplog):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user (chown)")
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    for p in (root, root / "profiles", root / "profiles" / FP):
        os.chown(p, 4242, 4242)
    with caplog.at_level("WARNING", logger="pgle"):
        add(ProfileStore(root), 2.0, minute=1)
    named = [r.getMessage() for r in caplog.records if "belongs to" in r.getMessage()]
    assert named == [(f"profile store {root} belongs to uid 4242, not to you: its owner can "
                      "replace or remove what pgle stores there (a shared store).")]


# -- another process (or the kernel) between two of the store's system calls, at one exact point
# (helpers/races.py): what a shared store meets when other users' pgle runs work in it too.

import resource  # noqa: E402
import shutil  # noqa: E402
from collections.abc import Iterator, Mapping  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import Any  # noqa: E402

from helpers.gs_mock import mock_gs  # noqa: E402
from helpers.races import before_call, before_calls  # noqa: E402

FP2 = "fedcba9876543210fedcba9876543210"  # listed after FP


def _lowest_free_descriptor() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


@contextmanager
def _descriptor_limit_restored() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _no_descriptor_left(_: Mapping[str, Any]) -> None:
    """The next descriptor this process takes fails with EMFILE (helpers/fs_limits.py)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (_lowest_free_descriptor(), hard))


def _descriptors_again(soft: int) -> Any:
    def then(_: Mapping[str, Any]) -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return then


def _add_fp2(st: ProfileStore) -> None:
    st.add(FP2, Profile(costs=[("fusion.2", 2.0)]), jax="0.10.2", jaxlib="0.10.2",
           device_kind=KIND, device_count=8, source="test", now=T0)


def _opening(name: str) -> Any:
    return lambda names: names.get("name") == name


def test_a_store_replaced_by_a_file_before_its_open_is_one_line(tmp_path: Path):
    """The store's folder is checked, then replaced by a file before pgle opens it: the same
    one line as a file named as the store."""
    root = tmp_path / "s"
    root.mkdir()

    def replace(_: Mapping[str, Any]) -> None:
        root.rmdir()
        root.write_text("x")

    with before_call(os.open, lambda names: names.get("path") == str(root), replace) as done, \
            pytest.raises(BadInput) as e:
        ProfileStore(root)
    assert done
    assert e.value.message == f"profile store {root} is not a directory."


def test_a_new_gs_store_another_writer_makes_at_the_same_time_is_opened(tmp_path: Path):
    """Two `pgle store add` onto a new gs:// store at once: the folder the other one made
    between this one's look and its mkdir is the store, not an error."""
    bucket = tmp_path / "bucket"
    on_disk = bucket / "team" / "store"

    def made_by_the_other(_: Mapping[str, Any]) -> None:
        on_disk.mkdir(parents=True)

    with mock_gs(bucket), before_call(
        os.mkdir, lambda names: names.get("name") == str(on_disk), made_by_the_other
    ) as done:
        st = ProfileStore("gs://team/store", create=True)
        assert done
        assert st.entries() == [] and on_disk.is_dir()


def test_a_fingerprint_folder_removed_while_listed_hides_no_other(tmp_path: Path):
    """Another user removes a fingerprint folder between pgle's listing and its open: the
    other fingerprints' entries are still listed."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    _add_fp2(st)

    with before_call(os.open, _opening(FP), lambda _: shutil.rmtree(root / "profiles" / FP)) \
            as done:
        listed = st.entries()
    assert done
    assert [e.fingerprint for e in listed] == [FP2] and st.damaged == {}


def test_a_fingerprint_folder_that_cannot_be_listed_hides_no_other(tmp_path: Path):
    """A fingerprint folder opened but not listed (no descriptor left for the listing: EMFILE)
    is skipped; the next folder's entries are still listed."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    _add_fp2(st)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    def listing(folder: str) -> Any:
        return lambda names: getattr(names.get("self"), "path", None) == folder

    with _descriptor_limit_restored(), before_calls(
        (os.scandir, listing(str(root / "profiles" / FP)), _no_descriptor_left),
        (os.open, _opening(FP2), _descriptors_again(soft)),
    ) as done:
        listed = st.entries()
    assert len(done) == 2
    assert [e.fingerprint for e in listed] == [FP2]


def test_a_sweep_goes_on_past_a_folder_it_cannot_list(tmp_path: Path):
    """The sweep cannot list one fingerprint folder (EMFILE): what killed writers left in the
    next one is still removed."""
    root = tmp_path / "s"
    st = ProfileStore(root, create=True)
    add(st, 1.0)
    _add_fp2(st)
    left = [root / "profiles" / fp / f"{_id(2)}.pbtxt" for fp in (FP, FP2)]
    for p in left:
        p.write_text("x")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    st2 = ProfileStore(root)
    with _descriptor_limit_restored(), before_calls(
        (os.scandir, lambda names: names.get("_fp") == FP, _no_descriptor_left),
        (os.open, _opening(FP2), _descriptors_again(soft)),
    ) as done:
        assert st2.prune(keep=10) == []
    assert len(done) == 2
    assert left[0].exists() and not left[1].exists()
    assert st2.swept == [str(left[1])]


def test_a_calibration_for_an_entry_removed_while_it_waited_for_the_lock_is_refused(
    tmp_path: Path,
):
    """The entry is there when asked, then removed (another user's prune) before this writer
    holds the lock: one line saying so, and no calibration file is left alone in the folder."""
    root, st, entry, folder = _store_with_one(tmp_path)
    rec = calibration.Calibration.from_dict(
        {"arm": "pgle", "predicted_ratio": 0.9, "measured_ratio": 1.1, "target": "h100",
         "device_kind": KIND, "device_count": 8, "jax": "0.10.2", "pgle": "1.0",
         "created": "2026-01-01T00:00:00+00:00"})

    def pruned(_: Mapping[str, Any]) -> None:
        for p in folder.iterdir():
            p.unlink()

    with before_call(fcntl.flock, lambda _: True, pruned) as done, \
            pytest.raises(ProfileError) as e:
        st.add_calibration(FP, entry.entry_id, [rec])
    assert done
    assert e.value.message == f"store {root}: entry {entry.entry_id} was just removed."
    assert list(folder.iterdir()) == []


# -- a gs:// store whose server refuses: gcsfs (etils' gs:// backend) against a local HTTP server
# standing in for Cloud Storage (STORAGE_EMULATOR_HOST), in a `python -c` (fsspec reads its
# FSSPEC_* settings once, at import).

import http.server  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from helpers.pgle_testing import pgle_env  # noqa: E402


class _Forbidden(http.server.BaseHTTPRequestHandler):
    """Cloud Storage's answer to a caller without access: 403 and a JSON error."""

    def do_GET(self) -> None:
        body = b'{"error": {"code": 403, "message": "pgle-test may not read this bucket"}}'
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_gs_store_its_server_refuses_is_one_line_with_the_servers_reason():
    pytest.importorskip("gcsfs", reason="etils' gs:// backend (gcsfs) is not installed")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    code = ("from pgle.errors import BadInput\n"
            "from pgle.store.store import ProfileStore\n"
            "try:\n"
            "    ProfileStore('gs://team/store')\n"
            "except BadInput as e:\n"
            "    print(e.message)\n")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
            env=pgle_env(STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{server.server_address[1]}",
                         FSSPEC_GS_TOKEN="anon"))
    finally:
        server.shutdown()
        server.server_close()
    said = out.stdout.strip()
    assert said.startswith("cannot reach profile store gs://team/store: "), out.stderr[-2000:]
    assert "pgle-test may not read this bucket" in said and said.endswith(".")
