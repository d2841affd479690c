"""Predicted beside measured ratios kept next to a store entry (pgle.store.calibration, issue
34): written, read back, removed with their entry, swept when the entry is gone, and read as
untrusted (a bad line skipped and named, a link refused). Real files in a real store folder."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from pgle.errors import ProfileError
from pgle.profiles.files import Profile
from pgle.store.calibration import SUFFIX, Calibration
from pgle.store.store import PROFILES, ProfileStore

FP = "0123456789abcdef0123456789abcdef"


def _record(arm="pgle", predicted=0.93, measured=0.95):
    return Calibration(arm=arm, predicted_ratio=predicted, measured_ratio=measured,
                       target="h100", device_kind="NVIDIA H100 80GB HBM3", device_count=8,
                       jax="0.10.2", pgle="0.1.0", created=Calibration.now())


def _store(tmp_path, minute=0):
    st = ProfileStore(tmp_path / "s", create=True)
    entry, _ = st.add(FP, Profile(costs=[("fusion.1", 3.0)]), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="NVIDIA H100 80GB HBM3", device_count=8, source="test",
                      now=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10 - minute))
    return st, entry


def test_records_are_kept_next_to_their_entry_and_read_back(tmp_path):
    st, entry = _store(tmp_path)
    st.add_calibration(FP, entry.entry_id, [_record("default", 1.0, 1.0), _record()])
    st.add_calibration(FP, entry.entry_id, [_record("o1", None, 1.02)])
    path = tmp_path / "s" / PROFILES / FP / (entry.entry_id + SUFFIX)
    assert path.is_file()
    got = ProfileStore(tmp_path / "s").calibration(entry)
    assert [(r.arm, r.predicted_ratio, r.measured_ratio) for r in got] == [
        ("default", 1.0, 1.0), ("pgle", 0.93, 0.95), ("o1", None, 1.02)]
    assert st.entries(FP) == [entry]  # the record file is never read as an entry
    assert st.damaged_warning() is None


def test_no_records_for_an_entry_that_is_not_there(tmp_path):
    st, entry = _store(tmp_path)
    with pytest.raises(ProfileError, match="no entry"):
        st.add_calibration(FP, "20260101T000000000000Z-000000000000", [_record()])


def test_records_go_with_their_entry(tmp_path):
    st, first = _store(tmp_path, minute=0)
    st.add_calibration(FP, first.entry_id, [_record()])
    _, second = _store(tmp_path, minute=1)
    removed = st.prune(keep=1)
    assert [e.entry_id for e in removed] == [first.entry_id]
    names = os.listdir(tmp_path / "s" / PROFILES / FP)
    assert not any(n.startswith(first.entry_id) for n in names), names
    # A records file whose entry is gone (a writer killed between the two) is swept.
    orphan = tmp_path / "s" / PROFILES / FP / (first.entry_id + SUFFIX)
    orphan.write_text(json.dumps(_record().to_dict()) + "\n")
    st2, _ = _store(tmp_path, minute=2)
    assert not orphan.exists()


def test_records_are_untrusted(tmp_path):
    st, entry = _store(tmp_path)
    path = tmp_path / "s" / PROFILES / FP / (entry.entry_id + SUFFIX)
    good = _record().to_dict()
    lines = [good, {**good, "predicted_ratio": -1}, {**good, "arm": "../x"}, {**good, "jax": 3},
             {k: v for k, v in good.items() if k != "target"}, {**good, "measured_ratio": True}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    st = ProfileStore(tmp_path / "s")
    assert [r.arm for r in st.calibration(entry)] == ["pgle"]
    assert "6 lines not a calibration record" in (st.damaged_warning() or "")
    path.unlink()
    (tmp_path / "elsewhere").write_text(json.dumps(good) + "\n")
    path.symlink_to(tmp_path / "elsewhere")
    st = ProfileStore(tmp_path / "s")
    assert st.calibration(entry) == []
    assert "a symbolic link" in (st.damaged_warning() or "")
