"""A store in a run, in process on a real store folder (issue 37): the rows and lines `pgle store
add`, `collect --store` and `run --store` print, the view XLA is handed, the store key from a
run's events or the probe, and the calibration records `tune --compare --predict --store` keeps.
mutmut maps no test to code reached only through `pgle` subprocesses; these call it directly.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path

import pytest

from pgle.errors import ProfileError
from pgle.evidence import schema
from pgle.evidence.events import read_events
from pgle.profiles.files import Profile
from pgle.store import calibration, key, serving
from pgle.store.calibration import Calibration
from pgle.store.key import StoreKey
from pgle.store.store import Entry, ProfileStore
from pgle.xla.versions import installed
from helpers.gs_mock import mock_gs

A, B, C = "a" * 32, "b" * 32, "c" * 32
KEY = StoreKey("0.10.2", "NVIDIA H100 80GB HBM3", 8, "0.10.2")
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _prof(v: float) -> Profile:
    return Profile(costs=[("fusion.1", v)])


def test_adding_a_runs_modules_says_added_refreshed_or_empty(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    rows = serving.add_profiles(st, {B: _prof(1.0), A: _prof(2.0), C: Profile()}, KEY,
                                policy="keep:1", source="collect", names={A: "jit_step"})
    assert [(r["module"], r["fingerprint"], r["status"]) for r in rows] == \
        [("jit_step", A, "added"), (B, B, "added"), (C, C, "empty")]
    assert rows[0]["removed"] == [] and "entry" not in rows[2]
    (entry,) = st.entries(A)
    assert rows[0]["entry"] == entry.entry_id
    assert (entry.module, entry.source, entry.jaxlib, entry.device_count) == \
        ("jit_step", "collect", "0.10.2", 8)
    again = serving.add_profiles(st, {A: _prof(3.0)}, KEY, policy="keep:1", source="collect")
    assert again[0]["status"] == "refreshed" and again[0]["removed"] == [entry.entry_id]
    assert [e.entry_id for e in st.entries(A)] == [again[0]["entry"]]
    # Another jax: added (the key's own first), nothing of the other key removed.
    other = StoreKey("0.9.0", KEY.device_kind, None, None)
    third = serving.add_profiles(st, {A: _prof(4.0)}, other, policy=None, source="run")
    assert third[0]["status"] == "added" and third[0]["removed"] == []
    (e9,) = st.entries(A, jax="0.9.0")
    assert (e9.jaxlib, e9.device_count) == ("unknown", 1)
    assert serving.count_line(rows + again, "S", "keep:1", KEY) == \
        "store S: 2 modules added, 1 refreshed, 1 empty not stored (policy replace; jax 0.10.2 " \
        "on NVIDIA H100 80GB HBM3)"
    assert serving.count_line(third, "S", None, other) == \
        f"store S: 1 module added, 0 refreshed (policy {serving.parse_policy(None)}; jax 0.9.0 " \
        "on NVIDIA H100 80GB HBM3)"


def test_a_view_is_named_by_what_it_serves_and_reused(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    views = tmp_path / "views"
    assert serving.prepare_view(st, KEY, policy=None, views_root=views) == (None, {})
    serving.add_profiles(st, {A: _prof(1.0), B: _prof(2.0)}, KEY, policy=None, source="t")
    path, served = serving.prepare_view(st, KEY, policy="keep:2", views_root=views)
    assert sorted(served) == [A, B] and path.parent == views.absolute()
    assert path.name == serving.view_name(served, serving.parse_policy("keep:2"))
    assert path.name.startswith("store-") and len(path.name) == len("store-") + 16
    assert sorted(p.name for p in path.iterdir()) == sorted(os.listdir(path))
    assert len(list(path.iterdir())) == 2
    # The same content and policy: the same name, the view reused as it is.
    marker = path / "kept"
    marker.write_text("x")
    assert serving.prepare_view(st, KEY, policy="keep:2", views_root=views)[0] == path
    assert marker.exists()
    # Another policy, or another entry: another name.
    assert serving.prepare_view(st, KEY, policy="keep:1", views_root=views)[0] != path
    serving.add_profiles(st, {A: _prof(5.0)}, KEY, policy=None, source="t")
    newer = serving.prepare_view(st, KEY, policy="keep:2", views_root=views)[0]
    assert newer != path and newer.is_dir()
    # A link planted at a view's name is rebuilt, never handed to XLA.
    served = st.select(jax=KEY.jax, device_kind=KEY.device_kind,
                       policy=serving.parse_policy("keep:3"))
    planted = views / serving.view_name(served, serving.parse_policy("keep:3"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted.symlink_to(elsewhere)
    got = serving.prepare_view(st, KEY, policy="keep:3", views_root=views)[0]
    assert got == planted and not got.is_symlink() and got.is_dir()
    assert list(elsewhere.iterdir()) == []



def test_a_view_folder_another_user_made_is_rebuilt_not_handed_to_xla(tmp_path):
    # The views root is shared: a folder at the view's name that another user made (with
    # whatever profiles it holds) is rebuilt as ours, never served as it is.
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder owned by another user")
    st = ProfileStore(tmp_path / "s", create=True)
    serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
    pol = serving.parse_policy("keep:1")
    views = tmp_path / "views"
    planted = views / serving.view_name(st.select(jax=KEY.jax, device_kind=KEY.device_kind,
                                                  policy=pol), pol)
    planted.mkdir(parents=True)
    (planted / f"{A}.pbtxt").write_text('costs { name: "fusion.1" cost_us: 99999.0 }\n')
    os.chown(planted / f"{A}.pbtxt", 65534, 65534)
    os.chown(planted, 65534, 65534)
    got = serving.prepare_view(st, KEY, policy=pol, views_root=views)[0]
    assert got == planted and os.lstat(got).st_uid == os.geteuid()
    assert "99999" not in (got / f"{A}.pbtxt").read_text()


def test_view_names_change_with_each_entry_and_the_policy():
    pol = serving.parse_policy("keep:2")
    e1 = Entry(A, "e1", "j", "j", "k", 1, "t", "s")
    e2 = Entry(A, "e2", "j", "j", "k", 1, "t", "s")
    names = {serving.view_name({A: [e1]}, pol), serving.view_name({A: [e2]}, pol),
             serving.view_name({A: [e1, e2]}, pol), serving.view_name({B: [e1]}, pol),
             serving.view_name({A: [e1]}, serving.parse_policy("keep:3"))}
    assert len(names) == 5
    assert serving.view_name({A: [e1], B: [e2]}, pol) == serving.view_name({B: [e2], A: [e1]}, pol)


@pytest.mark.parametrize("seconds, text", [
    (0, "0m"), (59, "1m"), (3599, "60m"), (3600, "1.0h"), (86399, "24.0h"), (86400, "1.0d"),
    (36 * 3600, "1.5d")])
def test_ages(seconds, text):
    assert serving.age_text(seconds) == text


def _entry(fp: str, minutes: int, source: str = "collect") -> Entry:
    created = T0 - dt.timedelta(minutes=minutes)
    return Entry(fp, f"e{minutes}", "0.10.2", "0.10.2", "k", 1, created.isoformat(), source)


def test_module_rows_are_marked_with_what_the_store_served():
    served = {A: [_entry(A, 120, "old"), _entry(A, 90, "tune")], B: []}
    rows = [{"module": "jit_a", "fingerprint": A}, {"module": "jit_b", "fingerprint": B},
            {"module": "no fp"}, {"module": "jit_a again", "fingerprint": A},
            {"module": "jit_c", "fingerprint": C}]
    got = serving.mark_modules(rows, served, now=T0)
    assert got == {"served": [A], "missing": [B, C]}
    assert rows[0]["store"] == {"entries": ["e120", "e90"], "created": _entry(A, 90).created,
                                "source": "tune"}
    assert rows[0]["store_age_seconds"] == 5400.0
    assert (rows[1]["store"], rows[1]["store_age_seconds"]) == (None, None)
    assert "store" not in rows[2]
    lines = serving.summary_lines(rows, got, 7, "S", KEY)
    assert lines == [
        "store S (jax 0.10.2 on NVIDIA H100 80GB HBM3): 1 module served from a view of 7:",
        f"  jit_a: {A}, 1.5h old (tune)",
        f"  jit_a again: {A}, 1.5h old (tune)",
        f"not in the store: 2 modules: jit_b ({B}), jit_c ({C})",
    ]
    # Without `now`: the age from the clock (the entry was made in the past).
    again = [{"fingerprint": A}]
    serving.mark_modules(again, {A: [_entry(A, 0)]})
    assert again[0]["store_age_seconds"] >= (dt.datetime.now(dt.UTC) - T0).total_seconds() - 5


def test_summary_lines_when_nothing_matched_or_much_did():
    assert serving.summary_lines([], {"served": [], "missing": []}, 1, "S", KEY) == [
        "store S (jax 0.10.2 on NVIDIA H100 80GB HBM3): a view of 1 module profile; no module "
        "of this run was matched to it (the log names no module fingerprint)"]
    rows = [{"module": f"m{i}", "fingerprint": f"{i:032x}"} for i in range(12)]
    serving.mark_modules(rows, {}, now=T0)
    lines = serving.summary_lines(rows, {"served": [], "missing": []}, 3, "S", KEY)
    assert lines[0] == ("store S (jax 0.10.2 on NVIDIA H100 80GB HBM3): a view of 3 module "
                        "profiles; no module of this run was matched to it")
    assert lines[1].startswith("not in the store: 12 modules: m0 (") and lines[1].endswith(", ...")
    assert lines[1].count("(") == 10
    many = [{"module": f"m{i}", "fingerprint": f"{i:032x}"} for i in range(22)]
    got = serving.mark_modules(many, {r["fingerprint"]: [_entry(A, 30)] for r in many}, now=T0)
    lines = serving.summary_lines(many, got, 22, "S", KEY)
    assert lines[0].endswith("22 modules served from a view of 22:")
    assert len(lines) == 1 + 20 + 1 and lines[-1] == "  ... 2 more (see --json)"
    assert lines[1] == f"  m0: {0:032x}, 30m old (collect)"
    exactly = many[:20]
    assert serving.summary_lines(exactly, got, 22, "S", KEY)[-1] == \
        f"  m19: {19:032x}, 30m old (collect)"
    ten = [{"module": f"m{i}", "fingerprint": f"{i:032x}", "store": None} for i in range(10)]
    assert not serving.summary_lines(ten, got, 1, "S", KEY)[-1].endswith(", ...")


# -- the store key -----------------------------------------------------------------------------


def test_the_key_from_the_probe():
    assert key.from_probe({"jax": "0.10.2", "kinds": ["NVIDIA H200"], "count": 8}) == \
        (StoreKey("0.10.2", "NVIDIA H200", 8), None)
    assert key.from_probe({"kinds": ["cpu"]}) == (StoreKey("unknown", "cpu", None), None)
    assert key.from_probe({"error": "no GPU", "kinds": ["cpu"]}) == \
        (None, "jax could not start a backend: no GPU")
    assert key.from_probe({"kinds": ["NVIDIA H100", "NVIDIA A100"]}) == \
        (None, "the devices are of several kinds (NVIDIA H100, NVIDIA A100)")
    assert key.from_probe({}) == (None, "jax listed no devices")
    assert key.from_probe({"kinds": []}) == (None, "jax listed no devices")
    assert KEY.describe() == "jax 0.10.2 on NVIDIA H100 80GB HBM3"


def _events(tmp_path: Path, *lines: dict) -> Path:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run / "events.jsonl"


def test_the_key_from_a_runs_events(tmp_path):
    imported = {"kind": schema.JAX_IMPORTED, "t": 1.0, "version": "0.10.2"}
    backend = {"kind": schema.BACKEND, "t": 2.0, "platform": "gpu", "device_count": 4,
               "device_kind": "NVIDIA H200"}
    got = key.from_events(read_events(_events(tmp_path, imported, backend)))
    assert got == (StoreKey("0.10.2", "NVIDIA H200", 4, installed("jaxlib")), None)
    assert key.from_events(read_events(_events(tmp_path, backend))) == \
        (None, "the run never imported jax (no jax_imported event)")
    assert key.from_events(read_events(_events(
        tmp_path, {**imported, "version": None}, imported, backend)))[0].jax == "0.10.2"
    assert key.from_events(read_events(_events(tmp_path, imported))) == \
        (None, "the run reported no backend (it compiled nothing with JAX)")
    assert key.from_events(read_events(_events(tmp_path, imported,
                                               {**backend, "device_kind": ""}))) == \
        (None, "the run reported no backend (it compiled nothing with JAX)")


# -- calibration records ----------------------------------------------------------------------


def _record(**kw) -> dict:
    base = {"arm": "o1+pgle", "predicted_ratio": 0.9, "measured_ratio": 1.1, "target": "h100",
            "device_kind": "NVIDIA H100", "device_count": 8, "jax": "0.10.2", "pgle": "1.0",
            "created": "2026-01-01T00:00:00+00:00"}
    return {**base, **kw}


def test_a_calibration_record_round_trips():
    rec = Calibration.from_dict(_record())
    assert rec.to_dict() == _record()
    assert Calibration.from_dict(_record(predicted_ratio=None, measured_ratio=2,
                                         device_count=0)).measured_ratio == 2
    assert Calibration.from_dict(_record(arm="x" * 200, target="t" * 200)).arm == "x" * 200
    assert dt.datetime.fromisoformat(Calibration.now()).tzinfo is not None
    assert Calibration.now().endswith("+00:00") and "." not in Calibration.now()


@pytest.mark.parametrize("data, error, phrase", [
    ([], TypeError, "^not a JSON object$"),
    ({k: v for k, v in _record().items() if k != "jax"}, ValueError, "^no 'jax' field$"),
    ({k: v for k, v in _record().items() if k != "arm"}, ValueError, "^no 'arm' field$"),
    (_record(arm=1), TypeError, "^arm is not a short string$"),
    (_record(target="t" * 201), TypeError, "^target is not a short string$"),
    (_record(created=None), TypeError, "^created is not a short string$"),
    (_record(pgle=None), TypeError, "^pgle is not a short string$"),
    (_record(device_kind=5), TypeError, "^device_kind is not a short string$"),
    (_record(jax=[]), TypeError, "^jax is not a short string$"),
    (_record(arm=""), ValueError, "^arm '' is not an arm name$"),
    (_record(arm="O1"), ValueError, "^arm 'O1' is not an arm name$"),
    (_record(arm="o1 pgle"), ValueError, "is not an arm name$"),
    (_record(predicted_ratio=True), TypeError, "^predicted_ratio is not a number$"),
    (_record(measured_ratio="1"), TypeError, "^measured_ratio is not a number$"),
    (_record(measured_ratio=0), ValueError, "^measured_ratio 0 is not a positive ratio$"),
    (_record(predicted_ratio=-1.0), ValueError, "^predicted_ratio -1.0 is not a positive ratio$"),
    (_record(predicted_ratio=float("inf")), ValueError, "is not a positive ratio$"),
    (_record(device_count=-1), ValueError, "^device_count is not a count$"),
    (_record(device_count=True), ValueError, "^device_count is not a count$"),
    (_record(device_count=1.0), ValueError, "^device_count is not a count$"),
    (_record(created="yesterday"), ValueError, "yesterday"),
])
def test_a_foreign_calibration_record_says_why_not(data, error, phrase):
    with pytest.raises(error, match=phrase):
        Calibration.from_dict(data)


def test_records_encode_one_a_line_and_decode_skipping_the_bad():
    recs = [Calibration.from_dict(_record(arm=f"a{i}")) for i in range(calibration.MAX_RECORDS + 2)]
    raw = calibration.encode(recs)
    lines = raw.decode().splitlines()
    assert len(lines) == calibration.MAX_RECORDS and json.loads(lines[0])["arm"] == "a2"
    assert raw.endswith(b"\n")
    got, bad = calibration.decode(raw + b"\n  \n[1]\nnot json\n" + b"[" * 5000 + b"\n" +
                                  json.dumps(_record(arm="")).encode() + b"\n\xff\n")
    assert (len(got), bad) == (calibration.MAX_RECORDS, 5)
    assert got[-1].arm == f"a{calibration.MAX_RECORDS + 1}"
    assert calibration.decode(b"") == ([], 0)


def test_the_store_keeps_calibration_next_to_its_entry(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    (row,) = serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="tune")
    entry = st.entries(A)[0]
    assert st.calibration(entry) == []
    one = Calibration.from_dict(_record(arm="pgle"))
    two = Calibration.from_dict(_record(arm="o1"))
    st.add_calibration(A, row["entry"], [one])
    st.add_calibration(A, row["entry"], [two])
    assert st.calibration(entry) == [one, two]
    path = Path(st.root) / "profiles" / A / f"{entry.entry_id}{calibration.SUFFIX}"
    assert path.read_text().count("\n") == 2
    with pytest.raises(ProfileError) as err:
        st.add_calibration(A, "20260101T000000Z-0000", [one])
    assert err.value.message == f"store {st.root}: no entry 20260101T000000Z-0000 for module {A}."
    with pytest.raises(ProfileError):
        st.add_calibration(B, row["entry"], [one])
    # A line another user damaged is skipped and named once.
    with open(path, "a") as f:
        f.write("junk\nmore junk\n")
    assert st.calibration(entry) == [one, two]
    assert st.damaged == {str(path): "2 lines not a calibration record"}
    path.write_text(path.read_text().splitlines()[0] + "\n{}\n")
    st.damaged.clear()
    assert st.calibration(entry) == [one] and list(st.damaged.values()) == \
        ["1 line not a calibration record"]
    # A link in its place is refused, and a file too big to be pgle's.
    path.unlink()
    (tmp_path / "planted").write_text(json.dumps(_record()) + "\n")
    path.symlink_to(tmp_path / "planted")
    st.damaged.clear()
    assert st.calibration(entry) == [] and st.damaged == {str(path): "a symbolic link"}
    path.unlink()
    with open(path, "wb") as f:
        f.truncate(calibration.MAX_BYTES + 1)
    st.damaged.clear()
    assert st.calibration(entry) == [] and list(st.damaged) == [str(path)]
    path.unlink()
    # Its entry gone: nothing to read.
    gone = dataclasses.replace(entry, fingerprint=C)
    assert st.calibration(gone) == []
    assert st.profile_path(entry) == str(Path(st.root) / "profiles" / A / f"{entry.entry_id}.pbtxt")


# -- damaged entries, in one warning ---------------------------------------------------------


def _meta(st: ProfileStore, name: str, content: bytes | str) -> Path:
    folder = Path(st.root) / "profiles" / A
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_damaged_entries_are_named_in_one_warning(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    assert st.damaged_warning() is None
    serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
    (good,) = st.entries(A)
    meta = json.loads((Path(st.root) / "profiles" / A / f"{good.entry_id}.json").read_text())
    one = _meta(st, "20260101T000000000000Z-000000000001.json", "{not json")
    st.entries(A)
    assert st.damaged_warning() == (
        f"skipped 1 damaged store entry: {one} (not JSON). pgle neither reads nor deletes it; "
        "remove or fix by hand.")
    two = _meta(st, "20260101T000000000000Z-000000000002.json", b'{"a": "\xff"}')
    three = _meta(st, "20260101T000000000000Z-000000000003.json", json.dumps(
        {**meta, "fingerprint": B}))
    four = _meta(st, "20260101T000000000000Z-000000000004.json", json.dumps(
        {**meta, "device_count": {"x": 1}}))
    five = _meta(st, "20260101T000000000000Z-000000000005.json", "[" * 100000)
    st.damaged.clear()
    assert [e.entry_id for e in st.entries(A)] == [good.entry_id]
    assert st.damaged == {
        str(one): "not JSON", str(two): "not UTF-8 text",
        str(three): f"fingerprint {B!r} is not its folder's ({A})",
        str(four): "device_count a JSON object is not a count",
        str(five): "JSON nested deeper than Python reads"}
    assert st.damaged_warning() == (
        f"skipped 5 damaged store entries: {one} (not JSON); {two} (not UTF-8 text); {three} "
        f"(fingerprint {B!r} is not its folder's ({A})); and 2 more. pgle neither reads nor "
        "deletes them; remove or fix by hand.")
    st.damaged.clear()
    for p in (three, four, five):
        p.unlink()
    st.entries(A)
    assert st.damaged_warning().startswith("skipped 2 damaged store entries: ")
    assert "more" not in st.damaged_warning()


@pytest.mark.parametrize("change, why", [
    ({"jax": 10}, "jax 10 is not a string"),
    ({"module": None}, "module None is not a string"),
    ({"source": ["x"]}, "source a JSON array is not a string"),
    ({"instructions": -1}, "instructions -1 is not a count"),
    ({"instructions": True}, "instructions True is not a count"),
    ({"device_count": "8"}, "device_count '8' is not a count"),
    ({"fingerprint": "x" * 70}, "fingerprint '" + "x" * 56 + "... is not its folder's"),
    ({"created": "2026-01-01T00:00:00"}, "has no time zone"),
    ({"created": "soon"}, "created 'soon' is not a time"),
    ({"entry_id": "bad"}, "entry_id 'bad' is not its file's name"),
    ({"created": "2025-01-01T00:00:00+00:00"}, "is not dated by its created time"),
])
def test_an_entry_another_user_wrote_is_checked_field_by_field(tmp_path, change, why):
    st = ProfileStore(tmp_path / "s", create=True)
    serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
    (good,) = st.entries(A)
    path = Path(st.root) / "profiles" / A / f"{good.entry_id}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    assert st.entries(A) == []
    assert why in st.damaged[str(path)]


def test_the_key_a_view_was_made_for_against_the_runs_own():
    planned = StoreKey("0.10.2", "NVIDIA H100")
    assert key.mismatch(planned, None) is None
    assert key.mismatch(planned, StoreKey("0.10.2", "NVIDIA H100", 4, "x")) is None
    assert key.mismatch(planned, StoreKey("0.9.0", "NVIDIA H100")) == \
        "the run reported jax '0.9.0' (the view was for '0.10.2')"
    assert key.mismatch(planned, StoreKey("0.9.0", "cpu")) == \
        "the run reported jax '0.9.0' (the view was for '0.10.2') and device kind 'cpu' " \
        "(the view was for 'NVIDIA H100')"


# -- a gs:// store, mapped onto a local folder with etils' own epath.testing.mock_epath ----------


def _gs(tmp_path: Path):
    """etils' mock of its gs:// backend over `tmp_path/bucket` (as tests/store/test_store.py)."""
    bucket = tmp_path / "bucket"
    return mock_gs(bucket), bucket / "team" / "store"


def test_a_gs_store_adds_reads_views_calibrates_and_prunes(tmp_path):
    mock, on_disk = _gs(tmp_path)
    with mock:
        st = ProfileStore("gs://team/store", create=True)
        assert str(st) == "gs://team/store" and st.fingerprints() == []
        assert st.entries() == []
        rows = serving.add_profiles(st, {A: _prof(1.0), B: _prof(2.0)}, KEY, policy=None,
                                    source="t")
        assert st.fingerprints() == [A, B]
        ea, eb = st.entries(A)[0], st.entries(B)[0]
        assert st.read(ea).costs == [("fusion.1", 1.0)]
        assert str(st.profile_path(ea)) == f"gs://team/store/profiles/{A}/{ea.entry_id}.pbtxt"
        # An old binary entry: read as binary.
        from pgle.profiles.files import BINARY, encode_profile
        text = on_disk / "profiles" / B / f"{eb.entry_id}.pbtxt"
        (text.parent / f"{eb.entry_id}.pb").write_bytes(encode_profile(_prof(7.0), BINARY))
        text.unlink()
        assert st.read(eb).costs == [("fusion.1", 7.0)]
        view = tmp_path / "view"
        served = st.materialize(view, jax=KEY.jax, device_kind=KEY.device_kind)
        assert sorted(served) == [A, B]
        assert sorted(p.name for p in view.iterdir()) == [f"{A}.pbtxt", f"{B}.pb"]
        assert (view / f"{A}.pbtxt").read_bytes() == \
            (on_disk / "profiles" / A / f"{ea.entry_id}.pbtxt").read_bytes()
        # Calibration next to an entry, as a local store keeps it.
        one = Calibration.from_dict(_record(arm="pgle"))
        assert st.calibration(ea) == []
        st.add_calibration(A, rows[0]["entry"], [one])
        st.add_calibration(A, rows[0]["entry"], [one])
        assert st.calibration(ea) == [one, one]
        cal = on_disk / "profiles" / A / f"{ea.entry_id}{calibration.SUFFIX}"
        assert cal.read_text().count("\n") == 2
        assert [p.name for p in cal.parent.iterdir() if p.name.endswith(".tmp")] == []
        with open(cal, "ab") as f:
            f.truncate(calibration.MAX_BYTES + 1)
        assert st.calibration(ea) == []
        assert st.damaged == {f"gs://team/store/profiles/{A}/{ea.entry_id}{calibration.SUFFIX}":
                              "larger than pgle writes"}
        # Prune: a dry run removes nothing; then B's entry and all of its files go.
        assert [e.entry_id for e in st.prune(older_than=0, dry_run=True)] == \
            sorted([ea.entry_id, eb.entry_id], key=lambda i: (i != ea.entry_id))
        assert len(list((on_disk / "profiles" / B).iterdir())) == 2
        gone = st.prune(keep=0)
        assert sorted(e.fingerprint for e in gone) == [A, B]
        assert list((on_disk / "profiles" / A).iterdir()) == []
        assert list((on_disk / "profiles" / B).iterdir()) == []
        assert st.entries() == []


def test_a_gs_store_skips_names_that_are_not_fingerprints(tmp_path):
    mock, on_disk = _gs(tmp_path)
    with mock:
        st = ProfileStore("gs://team/store", create=True)
        serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
        (on_disk / "profiles" / "notes").mkdir()
        (on_disk / "profiles" / "notes" / "x.json").write_text("{}")
        assert [e.fingerprint for e in st.entries()] == [A]
        assert st.entries(B) == []


def test_a_merged_view_is_the_percentile_of_the_newest_entries(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    for v in (1.0, 2.0, 9.0):
        serving.add_profiles(st, {A: _prof(v)}, KEY, policy="keep:3", source="t")
    serving.add_profiles(st, {B: _prof(4.0)}, KEY, policy="keep:3", source="t")
    view = tmp_path / "view"
    served = st.materialize(view, jax=KEY.jax, device_kind=KEY.device_kind, policy="merge:3:p50")
    assert [len(served[A]), len(served[B])] == [3, 1]
    from pgle.profiles.files import read_profile
    assert read_profile(str(view / f"{A}.pbtxt")).costs == [("fusion.1", 2.0)]
    assert read_profile(str(view / f"{B}.pbtxt")).costs == [("fusion.1", 4.0)]
    # One entry's view is its own file, linked or copied, never a link to the store.
    assert not (view / f"{B}.pbtxt").is_symlink()
    served = st.materialize(view, jax=KEY.jax, device_kind=KEY.device_kind, policy="keep:1",
                            force=True)
    assert read_profile(str(view / f"{A}.pbtxt")).costs == [("fusion.1", 9.0)]
    profile, used = st.serve(A, jax=KEY.jax, device_kind=KEY.device_kind, policy="merge:2:p100")
    assert profile.costs == [("fusion.1", 9.0)] and len(used) == 2
    profile, used = st.serve(A, jax=KEY.jax, device_kind=KEY.device_kind, policy="merge:2:p0")
    assert profile.costs == [("fusion.1", 2.0)]
    with pytest.raises(ProfileError) as err:
        st.materialize(tmp_path / "v2", jax="0.1", device_kind=KEY.device_kind)
    assert err.value.message == (f"profile store {st.root} has no profile for jax 0.1 on "
                                 f"{KEY.device_kind}.")


def test_a_store_profile_that_cannot_be_read_says_which(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
    (entry,) = st.entries(A)
    prof = Path(st.root) / "profiles" / A / f"{entry.entry_id}.pbtxt"
    prof.unlink()
    prof.mkdir()
    from pgle.shared_folders import NotAFile
    with pytest.raises(NotAFile) as err:
        st.read(entry)
    assert err.value.message == f"store profile {prof} is not a regular file."
    prof.rmdir()
    prof.write_text("not a profile {")
    with pytest.raises(ProfileError) as err:
        st.read(entry)
    assert str(prof) in err.value.message


# -- issue 37: what the store package's first mutmut run left alive in serving and a gs:// store,
# each pinned by what a user sees.


def test_a_runs_modules_are_added_under_a_policy_given_as_an_object_or_a_name(tmp_path):
    """An empty module sorted first stops nothing; `added` means new for this key (an entry on
    another GPU does not make it `refreshed`)."""
    st = ProfileStore(tmp_path / "s", create=True)
    other_gpu = StoreKey(KEY.jax, "NVIDIA A100-SXM4-80GB", 8, "0.10.2")
    serving.add_profiles(st, {B: _prof(9.0)}, other_gpu, policy=None, source="t")
    pol = serving.parse_policy("keep:1")
    rows = serving.add_profiles(st, {A: Profile(), B: _prof(1.0)}, KEY, policy=pol, source="t")
    assert [(r["fingerprint"], r["status"]) for r in rows] == [(A, "empty"), (B, "added")]
    assert serving.count_line(rows, "S", pol, KEY) == \
        "store S: 1 module added, 0 refreshed, 1 empty not stored (policy replace; jax 0.10.2 " \
        "on NVIDIA H100 80GB HBM3)"


def test_a_view_serves_only_its_keys_entries_under_its_policy(tmp_path):
    """Newer entries of another jax or GPU are neither served nor merged into the view; the
    policy given (a merge here) picks what is served and names the view."""
    st = ProfileStore(tmp_path / "s", create=True)
    for v in (1.0, 9.0):
        serving.add_profiles(st, {A: _prof(v)}, KEY, policy=None, source="t")
    for other in (StoreKey("0.9.0", KEY.device_kind, 8, "0.9.0"),
                  StoreKey(KEY.jax, "NVIDIA A100-SXM4-80GB", 8, "0.10.2")):
        serving.add_profiles(st, {A: _prof(50.0)}, other, policy=None, source="t")
    pol = serving.parse_policy("merge:2:p0")
    path, served = serving.prepare_view(st, KEY, policy=pol, views_root=tmp_path / "views")
    assert served[A] == st.entries(A, jax=KEY.jax, device_kind=KEY.device_kind)
    assert path.name == serving.view_name(served, pol)
    from pgle.profiles.files import read_profile
    assert read_profile(str(path / f"{A}.pbtxt")).costs == [("fusion.1", 1.0)]
    # No policy given: the default's name, not "None"'s.
    path, served = serving.prepare_view(st, KEY, policy=None, views_root=tmp_path / "views")
    assert path.name == serving.view_name(served, serving.parse_policy(None))
    assert read_profile(str(path / f"{A}.pbtxt")).costs == [("fusion.1", 9.0)]


@pytest.mark.parametrize("seconds, text", [(4861, "1.4h"), (116641, "1.4d")])
def test_ages_are_hours_and_days_of_3600_and_86400_seconds(seconds, text):
    assert serving.age_text(seconds) == text  # 1.35028 h and 1.350012 d, rounded up


def test_a_modules_store_age_is_kept_to_a_tenth_of_a_second():
    rows = [{"module": "m", "fingerprint": A}]
    serving.mark_modules(rows, {A: [_entry(A, 0)]}, now=T0 + dt.timedelta(seconds=90.37))
    assert rows[0]["store_age_seconds"] == 90.4


def test_summary_lines_cut_after_20_served_and_10_missing():
    many = [{"module": f"m{i}", "fingerprint": f"{i:032x}"} for i in range(21)]
    got = serving.mark_modules(many, {r["fingerprint"]: [_entry(A, 30)] for r in many}, now=T0)
    assert serving.summary_lines(many, got, 21, "S", KEY)[-1] == "  ... 1 more (see --json)"
    lacking = [{"module": f"m{i}", "fingerprint": f"{i:032x}", "store": None} for i in range(11)]
    line = serving.summary_lines(lacking, got, 1, "S", KEY)[-1]
    assert line.startswith("not in the store: 11 modules: ") and line.endswith(", ...")


def test_a_calibration_record_checks_each_ratio_and_takes_every_arm_character():
    every = "abcdefghijklmnopqrstuvwxyz0123456789+"
    assert Calibration.from_dict(_record(arm=every)).arm == every
    with pytest.raises(ValueError) as e:
        Calibration.from_dict(_record(predicted_ratio=None, measured_ratio=-1.0))
    assert str(e.value) == "measured_ratio -1.0 is not a positive ratio"


def test_a_gs_store_trims_only_its_keys_entries_of_one_module(tmp_path):
    mock, on_disk = _gs(tmp_path)
    with mock:
        st = ProfileStore("gs://team/store", create=True)
        others = [StoreKey("0.9.0", KEY.device_kind, 8, "0.9.0"),
                  StoreKey(KEY.jax, "NVIDIA A100-SXM4-80GB", 8, "0.10.2")]
        for k in others:
            serving.add_profiles(st, {A: _prof(5.0)}, k, policy="keep:1", source="t")
        serving.add_profiles(st, {B: _prof(6.0)}, KEY, policy="keep:1", source="t")
        first = serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy="keep:1", source="t")
        second = serving.add_profiles(st, {A: _prof(2.0)}, KEY, policy="keep:1", source="t")
        assert second[0]["status"] == "refreshed"
        assert second[0]["removed"] == [first[0]["entry"]]
        assert [e.entry_id for e in st.entries(A, jax=KEY.jax, device_kind=KEY.device_kind)] == \
            [second[0]["entry"]]
        assert len(st.entries(A)) == 3 and len(st.entries(B)) == 1
        folder = on_disk / "profiles" / A
        assert not [p for p in folder.iterdir() if p.name.startswith(first[0]["entry"])]
        st.close()  # nothing opened locally: nothing to close, no error


def test_a_gs_store_names_its_damaged_files_by_url(tmp_path):
    mock, on_disk = _gs(tmp_path)
    with mock:
        st = ProfileStore("gs://team/store", create=True)
        rows = serving.add_profiles(st, {A: _prof(1.0)}, KEY, policy=None, source="t")
        entry_id = rows[0]["entry"]
        folder = on_disk / "profiles" / A
        (folder / "20260101T000000000000Z-0123456789ab.json").write_text("not json")
        (entry,) = st.entries(A)
        assert st.damaged == {
            f"gs://team/store/profiles/{A}/20260101T000000000000Z-0123456789ab.json": "not JSON"}
        (folder / f"{entry_id}.pbtxt").write_text("not a profile {")
        with pytest.raises(ProfileError) as err:
            st.read(entry)
        assert f"gs://team/store/profiles/{A}/{entry_id}.pbtxt" in err.value.message
        # A calibration file of exactly the largest size pgle writes is read.
        line = json.dumps(Calibration.from_dict(_record(arm="pgle")).to_dict()) + "\n"
        cal = folder / f"{entry_id}{calibration.SUFFIX}"
        cal.write_text(line + "\n" * (calibration.MAX_BYTES - len(line)))
        assert cal.stat().st_size == calibration.MAX_BYTES
        assert [r.arm for r in st.calibration(entry)] == ["pgle"]
