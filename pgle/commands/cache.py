"""`pgle cache ls|stats|prune DIR`: Reports over the persistent compilation cache
(pgle.cache.entries holds the entries themselves)."""

from __future__ import annotations

import time

from pgle.cache.entries import (
    check_writable_dir,
    delete_entries,
    list_entries,
    manifest_keys_missing,
    select,
    selected,
    totals,
)
from pgle.cache.manifest import ROLE_LABELS, load, local_form, runs_in_progress
from pgle.errors import BadInput, PgleError
from pgle.phrases import plural
from pgle.report import Report
from pgle.units import human_bytes, iso


def ls(cache_dir: str, *, modules: tuple[str, ...] = ()) -> Report:
    cache_dir = local_form(cache_dir)
    manifest = load(cache_dir)
    entries = [e for e in list_entries(cache_dir, manifest) if selected(e.module, modules)]
    per_module = totals(entries)
    total_bytes = sum(e.size for e in entries)
    report = Report(command="cache ls", status="ok", modules=per_module)
    report.details = {
        "cache_dir": cache_dir,
        "manifest": manifest is not None,
        "entries": [e.to_dict() for e in entries],
        "role_labels": ROLE_LABELS,
        "total": {"entries": len(entries), "bytes": total_bytes, "modules": len(per_module)},
    }
    report.summary = [
        f"{plural(len(entries), 'entry')}, {human_bytes(total_bytes)}, "
        f"{plural(len(per_module), 'module')} in {cache_dir}"
        + ("" if manifest else " (no pgle manifest: roles unknown)")
    ]
    return report


def stats(cache_dir: str) -> Report:
    cache_dir = local_form(cache_dir)
    manifest = load(cache_dir)
    entries = list_entries(cache_dir, manifest)
    per_module = totals(entries)
    roles: dict[str, dict] = {}
    for e in entries:
        r = roles.setdefault(e.role, {"entries": 0, "bytes": 0})
        r["entries"] += 1
        r["bytes"] += e.size
    report = Report(command="cache stats", status="ok", modules=per_module)
    missing = manifest_keys_missing(manifest, {e.key for e in entries})
    report.details = {
        "cache_dir": cache_dir,
        "manifest": manifest is not None,
        "roles": roles,
        "role_labels": ROLE_LABELS,
        "total": {
            "entries": len(entries),
            "bytes": sum(e.size for e in entries),
            "modules": len(per_module),
        },
        "oldest": iso(min((e.mtime for e in entries), default=0.0)),
        "newest": iso(max((e.mtime for e in entries), default=0.0)),
        "manifest_keys_missing": missing,
        "runs_in_progress": runs_in_progress(manifest),
    }
    # The totals per role and module are the product (cli/cache.py prints them on stdout).
    report.summary = [
        (
            f"{plural(len(entries), 'entry')}, "
            f"{human_bytes(report.details['total']['bytes'])}, "
            f"{plural(len(per_module), 'module')} in {cache_dir}"
        )
    ]
    if missing:
        report.warnings.append(
            f"{plural(len(missing), 'entry')} recorded in the manifest "
            f"{'is' if len(missing) == 1 else 'are'} gone (pruned or evicted); "
            "`pgle nsys` will fall back for those modules until you prewarm again."
        )
    return report


def prune(
    cache_dir: str,
    *,
    older_than: float | None = None,
    modules: tuple[str, ...] = (),
    yes: bool = False,
    now: float | None = None,
) -> Report:
    """Delete entries last used more than `older_than` seconds ago and/or of `modules`.

    Dry run unless `yes`. Needs at least one criterion, so a bare `prune` can
    never empty a cache.
    """
    cache_dir = local_form(cache_dir)
    if older_than is None and not modules:
        raise BadInput(
            "prune needs --older-than DURATION and/or --module NAME.",
            hint="e.g. `pgle cache prune DIR --older-than 7d`.",
        )
    if yes:
        check_writable_dir(cache_dir, create=False, what="prune")
    manifest = load(cache_dir)
    busy = runs_in_progress(manifest)
    if busy and yes:
        run = busy[0]
        raise PgleError(
            f"a pgle prewarm (pid {run.get('pid')} on {run.get('host')}) is writing to "
            f"{cache_dir}; prune after it finishes."
        )
    now = time.time() if now is None else now
    entries = list_entries(cache_dir, manifest)
    chosen = select(cache_dir, entries, older_than=older_than, modules=modules, now=now)
    deleted, errors = delete_entries(cache_dir, chosen) if yes else ([], [])
    freed = sum(e.size for e in (deleted if yes else chosen))
    report = Report(
        command="cache prune",
        status="ok" if not errors else "error",
        exit_code=0 if not errors else 1,
        modules=totals(chosen),
    )
    report.details = {
        "cache_dir": cache_dir,
        "dry_run": not yes,
        "selected": [e.to_dict() for e in chosen],
        "deleted": [e.key for e in deleted],
        "bytes": freed,
        "errors": errors,
    }
    verb = "deleted" if yes else "would delete"
    report.summary = [
        f"{verb} {len(deleted) if yes else len(chosen)} of "
        f"{plural(len(entries), 'entry')} "
        f"({human_bytes(freed)})" + ("" if yes else "; dry run, pass --yes to delete")
    ]
    if busy and not yes:
        report.warnings.append(
            f"a pgle prewarm (pid {busy[0].get('pid')}) is writing to this cache; "
            "--yes will refuse until it finishes."
        )
    report.reasons += errors
    return report
