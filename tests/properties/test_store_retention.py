"""Store retention against a simple model (issue 37): the store keeps, per (module, jax version,
device kind), the N newest entries its policy says (keep:N, replace = keep:1); `store prune
--keep K` keeps the K newest of each such group and nothing else; a view serves the newest
entry of the asked jax version and device kind. Real stores on disk (pgle.store.store), a
generated sequence of adds."""

from __future__ import annotations

import datetime as dt
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from pgle.profiles.files import Profile, read_profile
from pgle.store.store import ProfileStore

FPS = ["a" * 32, "b" * 32]
JAXES = ["0.10.2", "0.11.2"]
KINDS = ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

adds = st.lists(st.tuples(st.sampled_from(FPS), st.sampled_from(JAXES), st.sampled_from(KINDS)),
                min_size=1, max_size=9)


def _fill(store: ProfileStore, sequence, policy: str):
    """Add the sequence one second apart; return the model's entries (all of them, in order)."""
    written = []
    for i, (fp, jax, kind) in enumerate(sequence):
        entry, _ = store.add(fp, Profile([("fusion.1", float(i + 1))]), jax=jax, jaxlib=jax,
                             device_kind=kind, device_count=8, source="test", policy=policy,
                             now=T0 + dt.timedelta(seconds=i))
        written.append((fp, jax, kind, entry.entry_id))
    return written


def _model_keep(written, keep: int) -> set[str]:
    groups: dict[tuple, list[str]] = {}
    for fp, jax, kind, eid in written:
        groups.setdefault((fp, jax, kind), []).append(eid)
    return {eid for ids in groups.values() for eid in ids[-keep:]}


@settings(max_examples=25)
@given(adds, st.integers(1, 3))
def test_the_policy_keeps_the_n_newest_per_module_jax_and_device(sequence, keep):
    with tempfile.TemporaryDirectory() as d:
        store = ProfileStore(d + "/s", create=True)
        written = _fill(store, sequence, "replace" if keep == 1 else f"keep:{keep}")
        assert {e.entry_id for e in store.entries()} == _model_keep(written, keep)


@settings(max_examples=25)
@given(adds, st.integers(1, 3), st.booleans())
def test_prune_keep_counts_within_each_jax_version_and_device_kind(sequence, keep, dry_run):
    with tempfile.TemporaryDirectory() as d:
        store = ProfileStore(d + "/s", create=True)
        written = _fill(store, sequence, "keep:10")
        removed = store.prune(keep=keep, dry_run=dry_run)
        kept = _model_keep(written, keep)
        assert {e.entry_id for e in removed} == {w[3] for w in written} - kept
        left = {e.entry_id for e in ProfileStore(d + "/s").entries()}
        assert left == ({w[3] for w in written} if dry_run else kept)


@settings(max_examples=25)
@given(adds, st.sampled_from(JAXES), st.sampled_from(KINDS))
def test_a_view_serves_the_newest_entry_of_its_jax_and_device(sequence, jax, kind):
    with tempfile.TemporaryDirectory() as d:
        store = ProfileStore(d + "/s", create=True)
        written = _fill(store, sequence, "keep:10")
        newest = {}
        for i, (fp, j, k, eid) in enumerate(written):
            if (j, k) == (jax, kind):
                newest[fp] = (eid, float(i + 1))
        if not newest:
            assert store.select(jax=jax, device_kind=kind) == {}
            return
        served = store.materialize(d + "/view", jax=jax, device_kind=kind)
        assert {fp: [e.entry_id for e in es] for fp, es in served.items()} == {
            fp: [eid] for fp, (eid, _) in newest.items()}
        for fp, (_, cost) in newest.items():
            assert dict(read_profile(f"{d}/view/{fp}.pbtxt").costs) == {"fusion.1": cost}
