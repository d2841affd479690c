"""A store in a run: add a run's per-module profiles, hand XLA a view, say what came from it.

Data only (rows and lines, no Report): `pgle store add`, `collect --store`, `run --store`,
`tune --store` and `auto --store` build their reports from these.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgle.phrases import plural
from pgle.profiles.files import Profile
from pgle.store.key import StoreKey
from pgle.store.policy import Policy, parse_policy
from pgle.store.store import Entry, ProfileStore
from pgle.units import human_seconds

STATUS_ADDED, STATUS_REFRESHED, STATUS_EMPTY = "added", "refreshed", "empty"


def add_profiles(
    store: ProfileStore,
    modules: Mapping[str, Profile],
    key: StoreKey,
    *,
    policy: Policy | str | None,
    source: str,
    names: Mapping[str, str] | None = None,
) -> list[dict]:
    """Add each module's profile under `key`; one row per module: added (a fingerprint new to
    the store for this key), refreshed (older entries exist; `removed` lists what the policy
    trimmed) or empty (not stored)."""
    pol = policy if isinstance(policy, Policy) else parse_policy(policy)
    rows: list[dict[str, Any]] = []
    for fp, prof in sorted(modules.items()):
        name = (names or {}).get(fp, "")
        if prof.is_empty():
            rows.append({"module": name or fp, "fingerprint": fp, "status": STATUS_EMPTY})
            continue
        had = bool(store.entries(fp, jax=key.jax, device_kind=key.device_kind))
        entry, removed = store.add(
            fp,
            prof,
            jax=key.jax,
            jaxlib=key.jaxlib or "unknown",
            device_kind=key.device_kind,
            device_count=key.device_count or 1,
            source=source,
            module=name,
            policy=pol,
        )
        rows.append(
            {
                "module": name or fp,
                "fingerprint": fp,
                "status": STATUS_REFRESHED if had else STATUS_ADDED,
                "entry": entry.entry_id,
                "removed": [e.entry_id for e in removed],
            }
        )
    return rows


def count_line(rows: list[dict], store: Any, pol: Policy | str | None, key: StoreKey) -> str:
    added = sum(r["status"] == STATUS_ADDED for r in rows)
    refreshed = sum(r["status"] == STATUS_REFRESHED for r in rows)
    empty = sum(r["status"] == STATUS_EMPTY for r in rows)
    pol = pol if isinstance(pol, Policy) else parse_policy(pol)
    return (
        f"store {store}: {plural(added, 'module')} added, {refreshed} refreshed"
        + (f", {empty} empty not stored" if empty else "")
        + f" (policy {pol}; {key.describe()})"
    )


def view_name(served: Mapping[str, list[Entry]], pol: Policy) -> str:
    """A name for the view that changes with its content: the entries served and the policy.
    XLA's compilation-cache key hashes the flag string, not the files, so an unchanged store
    keeps its cache hits and a changed one can never hit a stale executable."""
    h = hashlib.sha256(str(pol).encode())
    for fp in sorted(served):
        h.update(f"\n{fp}:{','.join(e.entry_id for e in served[fp])}".encode())
    return f"store-{h.hexdigest()[:16]}"


def prepare_view(
    store: ProfileStore, key: StoreKey, *, policy: Policy | str | None, views_root: Any
) -> tuple[Path | None, dict[str, list[Entry]]]:
    """The view for `key` under `views_root` (reused when it exists), and what it serves;
    (None, {}) when the store holds nothing for the key."""
    pol = policy if isinstance(policy, Policy) else parse_policy(policy)
    served = store.select(jax=key.jax, device_kind=key.device_kind, policy=pol)
    if not served:
        return None, {}
    target = Path(os.path.abspath(os.fspath(views_root))) / view_name(served, pol)
    if not _own_view(target):
        # Another rank may build the same view at the same time: both write the same files and
        # the atomic swap leaves one whole directory.
        store.materialize(target, jax=key.jax, device_kind=key.device_kind, policy=pol, force=True)
    return target, served


def _own_view(path: Path) -> bool:
    """A view this user built earlier (its name changes with its content): a real directory of
    ours. One made by anyone else, or a link, is rebuilt rather than handed to XLA."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def age_text(seconds: float) -> str:
    return human_seconds(
        seconds, ((3600, 60, "{:.0f}m"), (86400, 3600, "{:.1f}h"), (0, 86400, "{:.1f}d"))
    )


def mark_modules(
    modules: list[dict], served: Mapping[str, list[Entry]], now: dt.datetime | None = None
) -> dict:
    """Add `store` (the entry served, or None) and `store_age_seconds` to each module row that
    has a fingerprint; returns {'served': [...], 'missing': [...]} by fingerprint."""
    now = now or dt.datetime.now(dt.UTC)
    hit, missing = [], []
    for row in modules:
        fp = row.get("fingerprint")
        if not fp:
            continue
        entries = served.get(fp)
        if entries:
            newest = entries[-1]
            row["store"] = {
                "entries": [e.entry_id for e in entries],
                "created": newest.created,
                "source": newest.source,
            }
            row["store_age_seconds"] = round(newest.age_seconds(now), 1)
            hit.append(fp)
        else:
            row["store"] = None
            row["store_age_seconds"] = None
            missing.append(fp)
    return {"served": sorted(set(hit)), "missing": sorted(set(missing))}


def summary_lines(
    modules: list[dict], lookups: dict, view_size: int, store: Any, key: StoreKey
) -> list[str]:
    """The text summary: per module from the store and how old, then what it lacked."""
    lines = []
    shown = [r for r in modules if r.get("store")]
    if shown:
        lines.append(
            f"store {store} ({key.describe()}): {plural(len(lookups['served']), 'module')} "
            f"served from a view of {view_size}:"
        )
        lines += [
            f"  {r.get('module')}: {r['fingerprint']}, {age_text(r['store_age_seconds'])} old "
            f"({r['store']['source']})"
            for r in shown[:20]
        ]
        if len(shown) > 20:
            lines.append(f"  ... {len(shown) - 20} more (see --json)")
    else:
        lines.append(
            f"store {store} ({key.describe()}): a view of {plural(view_size, 'module profile')}; "
            "no module of this run was matched to it"
            + ("" if modules else " (the log names no module fingerprint)")
        )
    lacking = [r for r in modules if r.get("fingerprint") and r.get("store") is None]
    if lacking:
        names = ", ".join(f"{r.get('module')} ({r['fingerprint']})" for r in lacking[:10])
        lines.append(
            f"not in the store: {plural(len(lacking), 'module')}: {names}"
            + (", ..." if len(lacking) > 10 else "")
        )
    return lines
