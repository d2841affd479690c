"""`pgle inspect`, `pgle diff`, `pgle merge`: Reports over profiles (`pgle convert`:
pgle.commands.convert).

The profiles themselves (read, write, stats, merge) are data in pgle.profiles; this module
turns them into the commands' reports.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pgle.atomic import check_writable_target
from pgle.errors import EXIT_ERROR, BadInput
from pgle.phrases import plural, plural_of
from pgle.profiles.files import (
    BINARY,
    Profile,
    ProfileSource,
    check_directory_output,
    load_profile_source,
    output_kind,
    write_profile,
    write_profile_directory,
)
from pgle.report import Report
from pgle.verdicts.statuses import Collected


def _us(x: float) -> str:
    return f"{x:,.1f} us" if abs(x) >= 1 or x == 0 else f"{x:.3g} us"


def _describe(source: ProfileSource) -> str:
    if source.kind == "directory":
        return f"{source.path} (directory of {len(source.modules)} modules)"
    return f"{source.path} ({'text' if source.path.suffix == '.pbtxt' else 'binary'})"


def inspect_report(path: Any, *, top: int = 20):
    """`pgle inspect`: exit 0, or 1 when the profile is empty (so it works as a check)."""

    source = load_profile_source(path)
    from pgle.profiles.stats import CATEGORIES, inspect_source

    data = inspect_source(source, top=top)
    report = Report(
        command="inspect",
        status="ok",
        profile=source.to_dict(),
        details={"inspect": data},
        warnings=list(source.warnings),
    )
    s = report.summary
    s.append(
        f"{_describe(source)}: {plural(data['instruction_count'], 'instruction')}, "
        f"{data['latency_count']} latencies, total {_us(data['total_cost_us'])}"
    )
    if source.is_empty():
        report.status, report.exit_code = Collected.EMPTY, EXIT_ERROR
        report.reasons.append(
            "the profile holds no instruction costs: XLA would schedule with its "
            "default estimates. A CPU run, CUPTI held by another tool (Nsight, DCGM) "
            "or kernels hidden in CUDA graphs all give empty profiles."
        )
        s.append("the profile is empty.")
        return report
    cats = data["categories"]
    s.append(
        "by category: "
        + ", ".join(
            f"{cat} {cats[cat]['share']:.1%} ({cats[cat]['count']})"
            for cat in CATEGORIES
            if cats[cat]["count"]
        )
    )
    coll = data["collectives"]["kinds"]
    if coll:
        s.append(
            "collectives: "
            + "; ".join(
                f"{kind} {row['count']} ({row['pairs']} start/done pairs) {_us(row['cost_us'])}"
                for kind, row in coll.items()
            )
        )
    for name, fps_ in data["fingerprint_aliases"].items():
        s.append(f"fingerprints {', '.join(fps_)} are aliases of one module ({name})")
    fps = data["fingerprints"]
    if source.kind == "directory":
        for fp, row in fps.items():
            s.append(
                f"module {fp}: {plural(row['instruction_count'], 'instruction')}, "
                f"{_us(row['total_cost_us'])}"
            )
    elif fps:
        s.append(
            f"fingerprint-qualified: {len(fps['qualified'])} modules, "
            f"{fps['bare_instructions']} bare names (bare names apply to every module)"
        )
        if fps["malformed"]:
            report.warnings.append(
                f"{fps['malformed']} names contain '::' more than once; XLA applies "
                "them to no module."
            )
    if data["top"]:
        s.append(f"top {len(data['top'])}:")
        for row in data["top"]:
            cost = row["cost_us"]
            s.append(
                f"  {_us(cost) if cost is not None else 'nan':>14} {row['share']:6.1%}  "
                f"{row['category']:<10} {row['name']}"
            )
    if data["duplicates"]:
        report.warnings.append(
            f"{data['duplicates']} names appear more than once; XLA keeps the last "
            "entry of each, or averages them all when the profile has .rematN entries."
        )
    if data["bad_values"]:
        report.warnings.append(f"{data['bad_values']} costs are negative, NaN or infinite.")
    if source.empty_modules and source.kind == "directory":
        report.warnings.append(
            f"{len(source.empty_modules)} module files are empty: "
            f"{', '.join(source.empty_modules[:3])}."
        )
    if source.shadowed:
        report.warnings.append(
            f"{len(source.shadowed)} .pb files are shadowed by a .pbtxt of the same "
            "module; XLA reads only the .pbtxt."
        )
    return report


def diff_report(a_path: Any, b_path: Any, *, top: int = 20):

    a, b = load_profile_source(a_path), load_profile_source(b_path)
    from pgle.profiles.stats import diff_sources

    data = diff_sources(a, b, top=top)
    report = Report(
        command="diff",
        status="ok",
        profile=None,
        details={"a": a.to_dict(), "b": b.to_dict(), "diff": data},
    )
    s = report.summary
    s.append(f"A {_describe(a)}: {plural(data['a_count'], 'instruction')}")
    s.append(f"B {_describe(b)}: {plural(data['b_count'], 'instruction')}")
    s.append(
        f"common {data['common']} ({data['overlap']:.0%} of all names); "
        f"only in A {len(data['only_in_a'])}; only in B {len(data['only_in_b'])}"
    )
    for label, names in (("only in A", data["only_in_a"]), ("only in B", data["only_in_b"])):
        if names:
            s.append(f"{label}: {', '.join(names[:10])}{', ...' if len(names) > 10 else ''}")
    ta, tb = data["total_a_us"], data["total_b_us"]
    rel = f" ({(tb - ta) / ta:+.1%})" if ta else ""
    s.append(f"total {_us(ta)} -> {_us(tb)}{rel}")
    s.append(
        "by category: "
        + "; ".join(
            f"{cat} {_us(row['a_us'])} -> {_us(row['b_us'])}"
            for cat, row in data["categories"].items()
            if row["a_count"] or row["b_count"]
        )
    )
    if data["largest_changes"]:
        s.append("largest changes:")
        for row in data["largest_changes"]:
            r = f"{row['relative']:+.1%}" if row["relative"] is not None else "new cost"
            s.append(
                f"  {row['delta_us']:+14.3f} us {r:>9}  {row['name']}  ({_us(row['a_us'])} -> "
                f"{_us(row['b_us'])})"
            )
    if data["overlap"] < 0.5 and (data["a_count"] and data["b_count"]):
        hint = " (one is a directory and one a file: convert one first)" if a.kind != b.kind else ""
        report.warnings.append(
            f"A and B share only {data['overlap']:.0%} of their names: they probably "
            f"come from different programs{hint}."
        )
    return report


def merge_report(
    inputs: Sequence[Any],
    out: Any,
    *,
    method: str = "percentile",
    percentile: int = 90,
    force: bool = False,
):
    """`pgle merge`: files into one file, or per-module directories into one directory."""
    from pgle.profiles.merge import (
        check_merge,
        merge_directory_modules,
        merge_profiles,
        name_overlap,
    )

    if not inputs:
        raise BadInput("merge needs at least one input profile.")
    check_merge(method, percentile)
    kind = output_kind(out)
    if kind == "file":
        check_writable_target(out, force=force, what="profile")  # refuse before reading 256 files
    else:
        check_directory_output(out, force=force, inputs=inputs)
    fast = _merge_columns(inputs, out, kind, method=method, percentile=percentile, force=force)
    if fast is not None:
        return fast
    sources = [load_profile_source(p) for p in inputs]
    kinds = {s.kind for s in sources}
    if len(kinds) > 1:
        raise BadInput(
            "merge inputs mix profile files and directories.",
            hint="Merge files into a file, or directories into a directory.",
        )
    in_kind = kinds.pop()
    if in_kind != kind:
        raise BadInput(
            f"the inputs are {plural_of(in_kind)} but the output {out} is a {kind}.",
            hint="Use a .pb/.pbtxt output for files, a directory for directories.",
        )
    warnings: list[str] = [w for s in sources for w in s.warnings]
    if in_kind == "file":
        labelled = [(str(s.path), s.modules[""]) for s in sources]
        merged = merge_profiles([p for _, p in labelled], method=method, percentile=percentile)
        written = write_profile(merged, out, force=force)
        return _file_result(written, name_overlap(labelled), warnings, method, percentile)
    merged_modules, aliases, fps = merge_directory_modules(
        sources, method=method, percentile=percentile
    )
    return _directory_result(
        {fp: (merged_modules[fp], name_overlap(labelled)) for fp, labelled in fps.items()},
        out,
        [{"label": str(s.path), "modules": len(s.modules)} for s in sources],
        warnings,
        aliases,
        text=all(f.suffix == ".pbtxt" for s in sources for f in s.files),
        inputs=inputs,
        force=force,
        method=method,
        percentile=percentile,
    )


def _merge_columns(
    inputs: Sequence[Any], out: Any, kind: str, *, method: str, percentile: int, force: bool
):
    """Files into a file, or per-module folders into a folder, as numpy columns
    read straight into the merge engine (pgle.profiles.merge.ColumnMerge, which the general
    path below uses too): jaxlib's speed and a fraction of the input in memory (issue 25). None
    when the general path must read the inputs: latencies, layouts only protobuf reads, inputs
    that mix files and folders or do not match the output (its errors are the messages)."""
    from pgle.profiles.columns import read_all
    from pgle.profiles.merge import ColumnMerge

    is_dir = [os.path.isdir(os.fspath(p)) if "://" not in os.fspath(p) else False for p in inputs]
    if any(d != (kind == "directory") for d in is_dir):
        return None
    if kind == "file":
        merge = ColumnMerge()
        labels = []
        for cols in read_all(list(inputs), directories=False):
            if cols is None:
                return None
            labels.append(str(cols.path))
            merge.add(cols.names, cols.costs)
        names, costs = merge.merge(method, percentile)
        written = write_profile(
            Profile(costs=list(zip(names, costs.tolist(), strict=False))), out, force=force
        )
        return _file_result(written, merge.overlaps(labels), [], method, percentile)
    return _merge_directory_columns(inputs, out, method=method, percentile=percentile, force=force)


def _merge_directory_columns(inputs, out, *, method, percentile, force):
    """Per-module folders: one ColumnMerge per module, fed folder by folder (a folder's columns
    are dropped once added: memory follows the merge, not the input). Fingerprints of one
    module (the folders' manifests) merge together, module by module as the general path
    orders them; only their columns wait until every folder is read."""
    from types import SimpleNamespace

    from pgle.profiles.merge import ColumnMerge, fingerprint_aliases, module_names

    aliases = fingerprint_aliases(
        [module_names(SimpleNamespace(kind="directory", path=p)) for p in inputs]
    )
    key_of = {fp: tuple(fps) for fps in aliases.values() for fp in fps}
    merges: dict[tuple[str, ...], Any] = {}
    labels: dict[tuple[str, ...], list[str]] = {}
    waiting: dict[tuple[str, ...], dict[str, list]] = {}
    seen: dict[str, int] = {}  # fingerprint -> inputs holding it, in first-seen order
    from pgle.profiles.columns import read_all

    folders, all_text = [], True
    for folder in read_all(list(inputs), directories=True):
        if folder is None:
            return None
        for fp, c in folder.modules.items():
            seen[fp] = seen.get(fp, 0) + 1
            all_text &= str(c.path).endswith(".pbtxt")
            key = key_of.get(fp, (fp,))
            if len(key) > 1:
                waiting.setdefault(key, {}).setdefault(fp, []).append((str(folder.path), c))
                continue
            merges.setdefault(key, ColumnMerge()).add(c.names, c.costs)
            labels.setdefault(key, []).append(str(folder.path))
        folders.append((str(folder.path), len(folder.modules)))
        folder.modules = {}
    for key, by_fp in waiting.items():
        merge = merges[key] = ColumnMerge()
        for fp in key:
            for label, c in by_fp.get(fp, []):
                merge.add(c.names, c.costs)
                labels.setdefault(key, []).append(label)
    done: dict[tuple[str, ...], tuple[Profile, list]] = {}
    for key, merge in merges.items():
        result = merge.merge(method, percentile)
        done[key] = (
            Profile(costs=list(zip(result[0], result[1].tolist(), strict=False))),
            merge.overlaps(labels[key]),
        )
    return _directory_result(
        {fp: done[key_of.get(fp, (fp,))] for fp in seen},
        out,
        [{"label": label, "modules": count} for label, count in folders],
        [],
        aliases,
        text=all_text,
        inputs=inputs,
        force=force,
        method=method,
        percentile=percentile,
    )


def _file_result(
    written: Any, overlaps: Sequence[Any], warnings: list[str], method: str, percentile: int
) -> Report:
    """The report of files merged into a file: an overlap row per input."""
    from pgle.profiles.merge import overlap_warnings

    inputs_report = [dataclasses.asdict(o) | {"low_overlap": o.low} for o in overlaps]
    warnings = warnings + overlap_warnings(overlaps)
    return _merge_result(
        written, len(overlaps), "file", method, percentile, [], warnings, inputs_report, {}
    )


def _directory_result(
    merged: Mapping[str, tuple[Profile, Sequence[Any]]],
    out: Any,
    inputs_report: list[dict[str, Any]],
    warnings: list[str],
    aliases: Mapping[str, Sequence[str]],
    *,
    text: bool,
    inputs: Sequence[Any],
    force: bool,
    method: str,
    percentile: int,
) -> Report:
    """Write the merged modules (fingerprint -> (profile, the inputs' overlaps)) into the folder
    `out`, and report a row per module; a warning where names overlap little or inputs lack
    the module."""
    from pgle.profiles.merge import overlap_warnings

    rows = []
    for fp, (profile, overlaps) in merged.items():
        warnings += [f"module {fp}: {w}" for w in overlap_warnings(overlaps)]
        rows.append(
            {
                "module": fp,
                "status": "merged",
                "inputs": len(overlaps),
                "instruction_count": profile.instruction_count,
            }
        )
        if len(overlaps) < len(inputs_report):
            warnings.append(f"module {fp} is in {len(overlaps)} of {len(inputs_report)} inputs.")
    written = write_profile_directory(
        {fp: profile for fp, (profile, _) in merged.items()},
        out,
        fmt="text" if text else BINARY,
        force=force,
        inputs=inputs,
    )
    if aliases:
        _record_aliases(written, aliases)
    n = len(inputs_report)
    return _merge_result(
        written, n, "directory", method, percentile, rows, warnings, inputs_report, aliases
    )


def _merge_result(
    written,
    n_sources: int,
    in_kind: str,
    method: str,
    percentile: int,
    modules_report,
    warnings,
    inputs_report,
    aliases,
) -> Report:
    from pgle.profiles.merge import alias_lines

    result = load_profile_source(written)
    desc = f"percentile {percentile} (jaxlib's rule)" if method == "percentile" else method
    return Report(
        command="merge",
        status="ok",
        profile=result.to_dict(),
        modules=modules_report,
        warnings=warnings,
        details={
            "method": method,
            "percentile": percentile if method == "percentile" else None,
            "inputs": inputs_report,
            "fingerprint_aliases": aliases,
        },
        summary=[
            (
                f"merged {plural(n_sources, in_kind)} by {desc} into {written}: "
                f"{plural(result.instruction_count, 'instruction')}, "
                f"{plural(result.latency_count, 'latency')}"
            )
        ]
        + alias_lines(aliases),
    )


def _record_aliases(directory: Any, aliases: Mapping[str, Sequence[str]]) -> None:
    """Keep in the merged directory's manifest which fingerprints are one module (inspect)."""
    from pgle.profiles import manifest

    path = manifest.manifest_path(directory)
    man = manifest.read(path) or {}
    man["fingerprint_aliases"] = {n: list(f) for n, f in aliases.items()}
    manifest.write(path, man)
