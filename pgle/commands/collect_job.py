"""The profile of a multi-process `pgle collect`: what rank 0 makes of the ranks' profiles.

Where each rank writes is pgle.jobs.layout.OutputPlan; three ways, decided by `-o` and
`--rank` (README "Running on a cluster"):

- `-o` with a rank placeholder (`profiles/rank%r.pb`): every rank writes its own profile there;
  rank 0's job report lists them (no merge: `pgle merge` them when you like).
- `-o` without one (`profile.pb`): every rank writes `<job_dir>/profiles/rank-<r>.pb` (or a
  directory `rank-<r>/` with --per-module), and rank 0 merges them into `-o` with jaxlib's rule
  (percentile 90 by default, as JAX auto PGLE aggregates), with a manifest beside it.
- `--rank N`: rank N alone runs the profiler and writes `-o`; the others run unprofiled, as
  MaxText profiles one host.

Every rank profiles the same step window. A rank whose profile is empty, or whose instruction
names barely overlap the other ranks' (another program: other flags, shapes or sharding), is
named by number in the job report. A merge uses every non-empty rank profile: pipeline stages
legitimately compile different programs, and their union is what XLA looks names up in.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from pgle.commands.collect import STATUS_NOT_PROFILED, CollectOptions
from pgle.errors import EXIT_ERROR, BadInput
from pgle.jobs import rank_data, ranks
from pgle.jobs.layout import OutputPlan, RankLayout
from pgle.phrases import plural, ranks_phrase
from pgle.profiles import files, manifest, merge
from pgle.report import Report
from pgle.verdicts.across_ranks import JobReports, aggregate_modules
from pgle.verdicts.statuses import Collected, Written

# -- rank 0 -----------------------------------------------------------------------------------


def combine(opts: CollectOptions, layout: RankLayout, job: JobReports) -> Report:
    """The job report of `pgle collect`, and for a merge the merged profile itself."""
    plan, reports = layout.plan, job.reports
    force, allow_empty, percentile = opts.force, opts.allow_empty, opts.merge_percentile
    collected = {
        r: rep for r, rep in sorted(reports.items()) if rep.get("status") == Collected.COLLECTED
    }
    profiled = {
        r: rep for r, rep in sorted(reports.items()) if rep.get("status") != STATUS_NOT_PROFILED
    }
    not_collected = {r: rep for r, rep in profiled.items() if r not in collected}
    report = Report("collect", Collected.COLLECTED)
    own = job.own
    report.log_path, report.trace_dir = own.get("log_path"), own.get("trace_dir")
    report.details["mode"] = plan.mode
    report.details["backend"] = own.get("backend")
    report.details["window"] = own.get("window")  # rank 0's; every rank's below
    report.details["windows"] = {r: rep.get("window") for r, rep in profiled.items()}
    report.warnings += _window_warnings(profiled)
    report.details["rank_profiles"] = [
        _rank_row(r, rep, _derived(opts, layout)) for r, rep in sorted(reports.items())
    ]
    by_rank = {r: rep.get("modules") or [] for r, rep in profiled.items()}
    if any(by_rank.values()):  # --per-module: which module got a file on which rank
        report.modules = aggregate_modules(by_rank, ok=Written.WRITTEN)

    if plan.mode == "one_rank":
        assert plan.only_rank is not None  # mode one_rank is --rank N
        return _one_rank(report, plan.only_rank, reports, _rank_output(opts, layout))

    sources = _load_rank_profiles(collected, report, layout, opts)
    for r in sorted(set(collected) - set(sources)):
        not_collected[r] = collected.pop(r)
    report.warnings += _overlap_warnings(sources)
    if not_collected:
        by_status: dict[str, list[int]] = {}
        for r, rep in not_collected.items():
            by_status.setdefault(rep.get("status") or Collected.FAILED, []).append(r)
        for status, rs in by_status.items():
            why = "; ".join(
                dict.fromkeys(
                    (not_collected[r].get("reasons") or ["no reason given"])[0] for r in rs
                )
            )
            report.reasons.append(f"{ranks_phrase(rs)}: {status}: {why}")
    if not sources:
        statuses = {rep.get("status") for rep in not_collected.values()}
        report.status = Collected.EMPTY if statuses == {Collected.EMPTY} else Collected.FAILED
        report.exit_code = next(
            (int(rep["exit_code"]) for rep in not_collected.values() if rep.get("exit_code")),
            EXIT_ERROR,
        )
        if allow_empty and report.status == Collected.EMPTY:
            # --allow-empty: an empty profile is a result, as in one process (exit 0).
            report.exit_code = 0
            where = _rank_output(opts, layout)
            written = {
                r: {**rep["profile"], "path": where(r)}
                for r, rep in not_collected.items()
                if (rep.get("profile") or {}).get("path")
            }
            if plan.mode == "per_rank" and written:
                report.profile = {"ranks": written}
                report.summary.append(
                    f"{plural(len(written), 'rank profile')} written, all empty (--allow-empty)"
                )
                return report
            if plan.mode == "merge" and written:
                # As one process does: the (empty) profile at -o, with its manifest.
                return _merge_empty(
                    report, job.world_size, plan, written, per_module=opts.per_module, force=force
                )
        report.summary.append(
            f"collect failed: no rank produced a profile "
            f"({'; '.join(report.reasons) or 'no rank reported'})"
        )
        return report
    if not_collected:
        report.status = Collected.PARTIAL
        report.warnings.append(
            f"{ranks_phrase(not_collected)} gave no profile; "
            + ("merged" if plan.mode == "merge" else "kept")
            + f" those of {ranks_phrase(sources)}"
        )
    if plan.mode == "per_rank":
        where = _rank_output(opts, layout)
        report.profile = {
            "ranks": {r: {**(collected[r].get("profile") or {}), "path": where(r)} for r in sources}
        }
        total = sum((collected[r].get("profile") or {}).get("instructions") or 0 for r in sources)
        report.summary.append(
            f"{plural(len(sources), 'rank profile')} written "
            f"({plural(total, 'instruction')} in all); merge them with `pgle merge`"
        )
        return report
    return _merge(report, job.world_size, layout, sources, force=force, percentile=percentile)


def _merge_empty(
    report: Report,
    world_size: int,
    plan: OutputPlan,
    written: Mapping[int, Any],
    *,
    per_module: bool,
    force: bool,
) -> Report:
    """--allow-empty, every rank's profile empty: -o gets an empty profile (a directory with
    --per-module), so that the next step finds the file the command line named. Nothing a
    rank wrote is read: its report is the whole evidence that its profile is empty."""
    out = plan.merged_output
    assert out is not None  # mode merge always has -o (pgle.jobs.layout)
    if per_module:
        path = files.write_profile_directory({}, out, force=force)
    else:
        path = files.write_profile(files.Profile(), out, force=force)
    result = files.load_profile_source(path)
    report.profile = {**result.to_dict(), "sha256": result.sha256, "instructions": 0}
    report.profile.pop("ignored", None)
    man = {
        "profile": report.profile,
        "merge": {"ranks": sorted(written), "world_size": world_size, "all_empty": True},
    }
    man_path = manifest.manifest_path(path)
    manifest.write(man_path, man)
    report.details["manifest"] = str(man_path)
    report.reasons = list(dict.fromkeys(report.reasons))
    report.summary.append(
        f"wrote an empty profile to {out}: every rank's profile is empty "
        f"({ranks_phrase(written)}), written because of --allow-empty"
    )
    return report


def _rank_output(opts: CollectOptions, layout: RankLayout) -> Callable[[int], str | None]:
    """Where rank r wrote its profile, as rank 0 derives it from -o and r (never from the
    rank's word: a rank contributes bytes, never paths; pgle.jobs.rank_data)."""

    def where(rank: int) -> str | None:
        if opts.output is None:
            return None
        info = dataclasses.replace(layout.info, rank=rank)
        # Absolute, as the rank's own report named it (the ranks start in one folder).
        return os.path.abspath(ranks.expand_path(os.fspath(opts.output), info))

    return where


def _one_rank(
    report: Report,
    only: int,
    reports: Mapping[int, dict],
    where: Callable[[int], str | None],
) -> Report:
    rep = reports.get(only)
    if rep is None:
        report.status = Collected.FAILED
        report.exit_code = EXIT_ERROR
        report.reasons.append(f"rank {only}, the one profiled (--rank {only}), never reported.")
        return report
    report.status = rep.get("status") or Collected.FAILED
    report.exit_code = rep.get("exit_code") or 0
    report.profile = rep.get("profile")
    if isinstance(report.profile, dict):
        # Its own -o, as rank 0 expands it; the rank's word about it is not taken.
        report.profile = {**report.profile, "path": where(only)}
    report.trace_dir = rep.get("trace_dir")
    report.details["manifest"] = rep.get("manifest")
    report.reasons += rep.get("reasons") or []
    report.summary.append(f"rank {only} profiled (--rank {only}); the others ran unprofiled")
    report.summary += [s for s in rep.get("summary") or [] if not s.startswith("rank ")]
    return report


def _derived(opts: CollectOptions, layout: RankLayout) -> Callable[[int], str | None]:
    """Where rank r's profile is by rank 0's own reckoning: in the job folder for a merge, at
    its -o otherwise."""
    plan, job_dir = layout.plan, layout.job_dir
    if plan.mode == "merge" and job_dir is not None and plan.rank_output is not None:
        suffix = os.path.splitext(plan.rank_output)[1]
        return lambda r: str(job_dir / rank_data.profile_rel(r, suffix))
    return _rank_output(opts, layout)


def _rank_row(rank: int, rep: dict, where: Callable[[int], str | None]) -> dict:
    prof = rep.get("profile") or {}
    return {
        "rank": rank,
        "status": rep.get("status"),
        "profile_path": where(rank) if prof else None,
        "instructions": prof.get("instructions", prof.get("instruction_count")),
        "sha256": prof.get("sha256"),
        "window": rep.get("window"),
    }


def _load_rank_profiles(
    collected: Mapping[int, dict], report: Report, layout: RankLayout, opts: CollectOptions
) -> dict[int, Any]:
    """Each rank's profile from where rank 0 derives it: in the job folder for a merge (read
    there as foreign data: no links, this account's files, bounded; pgle.jobs.rank_data), or
    the rank's own -o for per-rank outputs. What a rank's report says the path is, is not read."""
    plan, job_dir = layout.plan, layout.job_dir
    where = _rank_output(opts, layout)
    out = {}
    for r in collected:
        try:
            if plan.mode == "merge" and job_dir is not None and plan.rank_output is not None:
                suffix = os.path.splitext(plan.rank_output)[1]
                source = rank_data.load_rank_profile(job_dir, r, suffix)
            else:
                path = where(r)
                try:
                    source = files.load_profile_source(path)
                except BadInput as e:
                    why = f"its profile {path} cannot be read: {e}"
                    raise rank_data.RankDataError(r, why) from None
        except rank_data.RankDataError as e:
            report.warnings.append(str(e))
            continue
        if source.is_empty():
            continue
        out[r] = source
    return out


def _overlap_warnings(sources: Mapping[int, Any]) -> list[str]:
    """Ranks whose instruction names barely overlap the other ranks' (per module for
    directories), named by number."""
    if len(sources) < 2:
        return []
    out = []
    fps = sorted({fp for s in sources.values() for fp in s.modules})
    for fp in fps:
        labelled = [(str(r), s.modules[fp]) for r, s in sources.items() if fp in s.modules]
        low = [o for o in merge.name_overlap(labelled) if o.low]
        for o in low:
            where = f" in module {fp}" if fp else ""
            out.append(
                f"rank {o.label}'s profile shares only {o.shared:.0%} of its {o.names} "
                f"instruction names with the other ranks{where}: it probably ran another "
                "program (other flags, shapes, sharding or jax version)."
            )
    return out


def _window_warnings(profiled: Mapping[int, dict]) -> list[str]:
    seen: dict[tuple, list[int]] = {}
    for r, rep in profiled.items():
        w = rep.get("window") or {}
        if w.get("first_step") is None:
            continue
        seen.setdefault((w.get("first_step"), w.get("steps")), []).append(r)
    if len(seen) < 2:
        return []
    parts = [f"{ranks_phrase(rs)}: steps {a}..{a + (n or 1) - 1}" for (a, n), rs in seen.items()]
    return ["the ranks profiled different steps (" + "; ".join(parts) + ")."]


def _merge(
    report: Report,
    world_size: int,
    layout: RankLayout,
    sources: Mapping[int, Any],
    *,
    force: bool,
    percentile: int,
) -> Report:
    plan = layout.plan
    out = plan.merged_output
    first = min(sources)
    kinds = {s.kind for s in sources.values()}
    aliases: dict[str, list[str]] = {}
    if kinds == {"file"}:
        merged = merge.merge_profiles(
            [s.modules[""] for s in sources.values()], percentile=percentile
        )
        written = files.write_profile(merged, out, force=force)
    else:
        modules, aliases, _ = merge.merge_directory_modules(
            list(sources.values()), percentile=percentile
        )
        fmt = (
            files.TEXT
            if all(f.suffix == ".pbtxt" for s in sources.values() for f in s.files)
            else files.BINARY
        )
        written = files.write_profile_directory(modules, out, fmt=fmt, force=force)
    # No wider than its inputs: a merge of 0600 profiles is 0600 (issue 31).
    inputs = [p for s in sources.values() for p in (s.path, *s.files)]
    narrowest = rank_data.narrowest_mode(inputs)
    rank_data.restrict(written, narrowest)
    result = files.load_profile_source(written)
    sha = result.sha256
    report.profile = {
        **result.to_dict(),
        "sha256": sha,
        "instructions": result.instruction_count,
        "latencies": result.latency_count,
        "merged_from": {r: str(s.path) for r, s in sources.items()},
        "method": "percentile",
        "percentile": percentile,
    }
    report.profile.pop("ignored", None)
    if kinds != {"file"} and aliases:
        report.details["fingerprint_aliases"] = aliases
        report.summary += merge.alias_lines(aliases)
    # The manifest: the first rank's, for the merged profile, with the merge recorded.
    rank_manifest = _rank_manifest(layout, first, sources[first].path)
    man = {
        **rank_manifest,
        "profile": report.profile,
        **(
            {"fingerprint_aliases": report.details["fingerprint_aliases"]}
            if report.details.get("fingerprint_aliases")
            else {}
        ),
        "merge": {
            "method": "percentile",
            "percentile": percentile,
            "ranks": sorted(sources),
            "rule": "jaxlib's aggregate_profiled_instructions",
            "world_size": world_size,
        },
    }
    man_path = manifest.manifest_path(written)
    manifest.write(man_path, man)
    rank_data.restrict(man_path, narrowest)
    report.details["manifest"] = str(man_path)
    report.summary.append(
        f"merged {plural(len(sources), 'rank profile')} ({ranks_phrase(sources)}; percentile "
        f"{percentile}, jaxlib's rule) into {out}: "
        f"{plural(result.instruction_count, 'instruction')}, "
        f"{plural(result.latency_count, 'latency')} (sha256 {sha[:12]}), manifest {man_path}"
    )
    return report


def _rank_manifest(layout: RankLayout, rank: int, profile: Any) -> dict[str, Any]:
    """The manifest beside rank `rank`'s profile: in the job folder, foreign data (bounded, no
    links, typed as an object); elsewhere (per-rank -o) the user's own file."""
    path = manifest.manifest_path(profile)
    job_dir = layout.job_dir
    if job_dir is None or not str(path).startswith(str(job_dir) + os.sep):
        return manifest.read(path) or {}
    try:
        data = rank_data.loads(
            rank_data.read_under(
                job_dir, os.path.relpath(path, job_dir), rank_data.MAX_REPORT_BYTES
            ),
            f"rank {rank}'s manifest",
        )
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
