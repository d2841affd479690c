"""`pgle store ls|add|get|prune`: each returns a Report (cli/store.py renders it)."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
from typing import Any

from pgle.errors import BadInput, ProfileError
from pgle.report import Report
from pgle.store.policy import parse_policy
from pgle.store.store import ProfileStore


def installed_version(dist: str) -> str:
    """The installed jax/jaxlib version without importing jax (the CLI must stay fast)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _age(seconds: float) -> str:
    from pgle.store.serving import age_text

    return age_text(seconds)


def ls_report(store: Any, *, fingerprint: str | None = None, jax: str | None = None,
              device_kind: str | None = None) -> Report:
    st = ProfileStore(store)
    entries = st.entries(fingerprint, jax=jax, device_kind=device_kind)
    rows = [e.to_dict() | {"age_seconds": round(e.age_seconds(), 1)} for e in entries]
    report = Report(command="store ls", status="ok", modules=rows,
                    details={"store": str(store), "fingerprints": len({e.fingerprint for e in entries})})
    for e in entries:
        report.summary.append(f"{e.fingerprint}  {e.entry_id}  jax {e.jax}  {e.device_kind} x{e.device_count}  "
                              f"{e.instructions} instr  {_age(e.age_seconds())} old  {e.module or '-'}  {e.source}")
    report.summary.append(f"{len(entries)} profiles of {len({e.fingerprint for e in entries})} modules in {store}")
    return report


def _modules_of(path: Any) -> dict:
    from pgle.profiles.files import load_profile_source, module_view, qualified_fingerprints

    source = load_profile_source(path)
    if source.kind == "directory":
        return dict(source.modules)
    profile = source.modules[""]
    fps = qualified_fingerprints(profile)
    if not fps:
        raise ProfileError(f"{path} has no <fingerprint>::name entries, so it does not say which module "
                           "each cost belongs to; the store keeps per-module profiles.",
                           hint="Add a per-module profile directory (pgle collect --per-module, or "
                                "pgle convert of an Nsight report).")
    return {fp: module_view(profile, fp) for fp in fps}


def add_report(store: Any, profile: Any, *, jax: str | None = None, jaxlib: str | None = None,
               device_kind: str, device_count: int, source: str | None = None,
               policy: str | None = None) -> Report:
    pol = parse_policy(policy)
    modules = _modules_of(profile)
    st = ProfileStore(store, create=True)
    jax = jax or installed_version("jax")
    jaxlib = jaxlib or installed_version("jaxlib")
    from pgle.store import serving
    from pgle.store.key import StoreKey

    key = StoreKey(jax, device_kind, device_count, jaxlib)
    all_rows = serving.add_profiles(st, modules, key, policy=pol, source=source or str(profile))
    rows = [r for r in all_rows if r["status"] != serving.STATUS_EMPTY]
    skipped = [r["fingerprint"] for r in all_rows if r["status"] == serving.STATUS_EMPTY]
    report = Report(command="store add", status="ok", modules=rows,
                    details={"store": str(store), "policy": str(pol), "jax": jax, "device_kind": device_kind})
    if skipped:
        report.warnings.append(f"{len(skipped)} empty module profiles were not stored ({skipped[0]}).")
    added = sum(r["status"] == "added" for r in rows)
    report.summary.append(f"stored {len(rows)} module profiles in {store} ({added} new modules, "
                          f"{len(rows) - added} refreshed; policy {pol}; jax {jax}, {device_kind})")
    return report


def get_report(store: Any, out: Any, *, jax: str | None = None, device_kind: str,
               policy: str | None = None, force: bool = False) -> Report:
    st = ProfileStore(store)
    jax = jax or installed_version("jax")
    served = st.materialize(out, jax=jax, device_kind=device_kind, policy=policy, force=force)
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{"module": fp, "fingerprint": fp, "status": "served", "entries": [e.entry_id for e in es],
             "age_seconds": round(min(e.age_seconds(now) for e in es), 1)} for fp, es in served.items()]
    report = Report(command="store get", status="ok", modules=rows,
                    details={"store": str(store), "output": str(out), "jax": jax, "device_kind": device_kind})
    report.summary.append(f"wrote {len(rows)} module profiles for jax {jax} on {device_kind} to {out}; "
                          f"point --xla_gpu_pgle_profile_file_or_directory_path at it")
    return report


def prune_report(store: Any, *, keep: int | None = None, older_than_days: float | None = None,
                 jax: str | None = None, dry_run: bool = False) -> Report:
    if keep is None and older_than_days is None and jax is None:
        raise BadInput("prune needs --keep, --older-than or --jax (what to remove).")
    st = ProfileStore(store)
    removed = st.prune(keep=keep, older_than_days=older_than_days, jax=jax, dry_run=dry_run)
    report = Report(command="store prune", status="ok",
                    modules=[e.to_dict() | {"module": e.fingerprint, "status": "would remove" if dry_run
                                            else "removed"} for e in removed],
                    details={"store": str(store), "dry_run": dry_run})
    report.summary.append(f"{'would remove' if dry_run else 'removed'} {len(removed)} profiles from {store}")
    return report
