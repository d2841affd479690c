"""Store metadata naming another fingerprint than its folder is refused (issue 37: accepting it
survived every test, whose planted fingerprints all failed the pattern check first). A well-
formed fingerprint of another module, in a file another user may have written, would serve one
module's profile as another's."""

from __future__ import annotations

import json

import pytest

from pgle.errors import ProfileError
from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

A, B = "a" * 32, "b" * 32


def test_metadata_naming_another_valid_fingerprint_is_skipped_and_never_served(tmp_path):
    store = ProfileStore(tmp_path / "s", create=True)
    entry, _ = store.add(A, Profile([("fusion.1", 5.0)]), jax="0.10.2", jaxlib="0.10.2",
                         device_kind="NVIDIA H100", device_count=8, source="t")
    meta = tmp_path / "s" / "profiles" / A / f"{entry.entry_id}.json"
    data = json.loads(meta.read_text())
    data["fingerprint"] = B  # well formed, and another module's
    meta.write_text(json.dumps(data))
    reader = ProfileStore(tmp_path / "s")
    assert reader.entries() == [] and reader.entries(B) == [] and reader.entries(A) == []
    warning = reader.damaged_warning()
    assert warning is not None and str(meta) in warning and "is not its folder's" in warning
    with pytest.raises(ProfileError, match="has no profile for jax 0.10.2"):
        reader.materialize(tmp_path / "view", jax="0.10.2", device_kind="NVIDIA H100")
    assert not (tmp_path / "view").exists()
