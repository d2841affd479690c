"""A store is a shared folder: a FIFO planted where an entry's metadata belongs is never read
(it could block, or, with a writer behind it, never end); the entry is skipped as damaged and
the warning says why (issue 37's independent mutants: the regular-file check was gone)."""

from __future__ import annotations

import os

from helpers.pgle_testing import report_of, run_pgle
from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

FP = "00112233445566778899aabbccddeeff"


def test_a_fifo_as_metadata_is_skipped_as_not_a_regular_file(tmp_path):
    st = ProfileStore(tmp_path / "s", create=True)
    entry, _ = st.add(FP, Profile(costs=[("fusion.1", 1.0)]), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="NVIDIA H100", device_count=1, source="t")
    meta = tmp_path / "s" / "profiles" / FP / f"{entry.entry_id}.json"
    data = meta.read_bytes()
    meta.unlink()
    os.mkfifo(meta)
    proc = run_pgle("store", "ls", str(tmp_path / "s"), "--json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert report_of(proc)["modules"] == []
    err = proc.stderr.decode()
    assert "damaged store entr" in err and "not a regular file" in err, err
    # The same bytes as a regular file again: the entry is back.
    meta.unlink()
    meta.write_bytes(data)
    assert len(report_of(run_pgle("store", "ls", str(tmp_path / "s"), "--json",
                                  cwd=tmp_path))["modules"]) == 1
