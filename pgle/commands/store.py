"""`pgle store ls|add|get|prune`: each returns a Report (cli/store.py renders it)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pgle.errors import BadInput, ProfileError
from pgle.phrases import plural
from pgle.report import Report
from pgle.store.policy import parse_policy
from pgle.store.store import ProfileStore
from pgle.xla.versions import installed


def _store_warnings(report: Report, st: ProfileStore) -> Report:
    """What every store command says about the store itself: leftovers of interrupted writers
    it removed (only a writing command sweeps), damaged entries it skipped."""
    if st.swept:
        report.summary.append(
            f"removed {plural(len(st.swept), 'file')} an interrupted writer "
            f"left behind ({st.swept[0]})"
        )
    warning = st.damaged_warning()
    if warning:
        report.warnings.append(warning)
    report.details["damaged"] = [
        {"file": path, "reason": why} for path, why in sorted(st.damaged.items())
    ]
    return report


def ls_report(store: Any, fingerprint: str | None, jax: str | None, kind: str | None) -> Report:
    """The entries (of `fingerprint`, `jax`, device `kind` where given) as `modules` rows
    (cli/store.py prints them on stdout); a count line."""
    st = ProfileStore(store)
    entries = st.entries(fingerprint, jax=jax, device_kind=kind)
    now = dt.datetime.now(dt.UTC)
    from pgle.store.serving import age_text

    rows = [
        e.to_dict()
        | {"age_seconds": round(e.age_seconds(now), 1), "age": age_text(e.age_seconds(now))}
        for e in entries
    ]
    modules = len({e.fingerprint for e in entries})
    report = Report(
        command="store ls",
        status="ok",
        modules=rows,
        details={"store": str(store), "fingerprints": modules},
    )
    report.summary.append(
        f"{plural(len(entries), 'profile')} of {plural(modules, 'module')} in {store}"
    )
    return _store_warnings(report, st)


def _modules_of(path: Any) -> dict:
    from pgle.profiles.files import load_profile_source, module_view, qualified_fingerprints

    source = load_profile_source(path)
    if source.kind == "directory":
        return dict(source.modules)
    profile = source.modules[""]
    fps = qualified_fingerprints(profile)
    if not fps:
        raise ProfileError(
            f"{path} has no <fingerprint>::name entries, so it does not say which module "
            "each cost belongs to; the store keeps per-module profiles.",
            hint="Add a per-module profile directory (pgle collect --per-module, or "
            "pgle convert of an Nsight report).",
        )
    return {fp: module_view(profile, fp) for fp in fps}


def add_report(
    store: Any,
    profile: Any,
    *,
    jax: str | None = None,
    jaxlib: str | None = None,
    device_kind: str,
    device_count: int,
    source: str | None = None,
    policy: str | None = None,
) -> Report:
    pol = parse_policy(policy)
    modules = _modules_of(profile)
    st = ProfileStore(store, create=True)
    jax = jax or installed("jax") or "unknown"
    jaxlib = jaxlib or installed("jaxlib") or "unknown"
    from pgle.store import serving
    from pgle.store.key import StoreKey

    key = StoreKey(jax, device_kind, device_count, jaxlib)
    all_rows = serving.add_profiles(st, modules, key, policy=pol, source=source or str(profile))
    rows = [r for r in all_rows if r["status"] != serving.STATUS_EMPTY]
    skipped = [r["fingerprint"] for r in all_rows if r["status"] == serving.STATUS_EMPTY]
    report = Report(
        command="store add",
        status="ok",
        modules=rows,
        details={
            "store": str(store),
            "policy": str(pol),
            "jax": jax,
            "device_kind": device_kind,
            "swept": list(st.swept),
        },
    )
    if skipped:
        report.warnings.append(
            f"{plural(len(skipped), 'empty module profile')} "
            f"{'was' if len(skipped) == 1 else 'were'} not stored ({skipped[0]})."
        )
    added = sum(r["status"] == "added" for r in rows)
    report.summary.append(
        f"stored {plural(len(rows), 'module profile')} in {store} ({added} new, "
        f"{len(rows) - added} refreshed; policy {pol}; jax {jax}, "
        f"{device_kind})"
    )
    return _store_warnings(report, st)


def get_report(
    store: Any,
    out: Any,
    *,
    jax: str | None = None,
    device_kind: str,
    policy: str | None = None,
    force: bool = False,
) -> Report:
    st = ProfileStore(store)
    jax = jax or installed("jax") or "unknown"
    served = st.materialize(out, jax=jax, device_kind=device_kind, policy=policy, force=force)
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "module": fp,
            "fingerprint": fp,
            "status": "served",
            "entries": [e.entry_id for e in es],
            "age_seconds": round(min(e.age_seconds(now) for e in es), 1),
        }
        for fp, es in served.items()
    ]
    report = Report(
        command="store get",
        status="ok",
        modules=rows,
        details={"store": str(store), "output": str(out), "jax": jax, "device_kind": device_kind},
    )
    report.summary.append(
        f"wrote {plural(len(rows), 'module profile')} for jax {jax} on "
        f"{device_kind} to {out}; point "
        "--xla_gpu_pgle_profile_file_or_directory_path at it"
    )
    return _store_warnings(report, st)


def prune_report(
    store: Any,
    *,
    keep: int | None = None,
    older_than: float | None = None,
    jax: str | None = None,
    yes: bool = False,
) -> Report:
    """Remove entries by count, age (`older_than` seconds) or jax version; a preview (nothing
    removed) unless `yes`, as `pgle cache prune` and `pgle runs prune`."""
    if keep is None and older_than is None and jax is None:
        raise BadInput(
            "prune needs --keep, --older-than or --jax (what to remove).",
            hint="e.g. `pgle store prune STORE --keep 3 --yes`.",
        )
    st = ProfileStore(store)
    removed = st.prune(keep=keep, older_than=older_than, jax=jax, dry_run=not yes)
    verb = "removed" if yes else "would remove"
    report = Report(
        command="store prune",
        status="ok",
        modules=[e.to_dict() | {"module": e.fingerprint, "status": verb} for e in removed],
        details={"store": str(store), "dry_run": not yes, "swept": list(st.swept)},
    )
    report.summary.append(
        f"{verb} {plural(len(removed), 'profile')} from {store}"
        + ("" if yes else "; dry run, pass --yes to delete")
    )
    return _store_warnings(report, st)
