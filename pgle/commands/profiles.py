"""`pgle inspect`, `pgle diff`, `pgle merge`, `pgle convert`: Reports over profiles.

The profiles themselves (read, write, stats, merge, convert) are data in pgle.profiles; this
module turns them into the commands' reports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from pgle.atomic import check_writable_target
from pgle.errors import EXIT_ERROR, BadInput, ProfileError
from pgle.profiles.files import (BINARY, EXTENSIONS, SUFFIX, TEXT, Profile, ProfileSource,
                                 check_directory_output, check_fingerprint, load_profile_source, module_view, output_kind, profile_format,
                                 qualified_fingerprints, qualify_profile, split_qualified,
                                 write_profile, write_profile_directory)
from pgle.report import Report


def convert_report(src: Any, out: Any, *, module: Sequence[str] = (), qualify: str | None = None,
                   fmt: str | None = None, stat: str | None = None, skip: int | None = None,
                   dump: Any = None, log_path: Any = None, qualify_all: bool = False,
                   force: bool = False):
    """`pgle convert`: an Nsight Systems input, a trace run folder, or a profile."""
    # A local .pb/.pbtxt file is neither of the first two, so their converters (about a fifth
    # of a bare interpreter's start-up to import) are imported only when the input may be one.
    if not (os.path.isfile(src) and os.path.splitext(src)[1] in EXTENSIONS):
        from pgle.profiles.convert import is_trace_run_dir
        from pgle.profiles.nsys_convert import is_nsys_input

        if is_nsys_input(src):
            return nsys_report(src, out, stat=stat, skip=skip, dump=dump, force=force)
        if is_trace_run_dir(src):
            return trace_report(src, out, stat=stat or "median", log_path=log_path,
                                qualify=qualify_all, force=force)
    return convert_profile(src, out, module=module, qualify=qualify, fmt=fmt, force=force)


def convert_profile(src: Any, out: Any, *, module: Sequence[str] = (), qualify: str | None = None,
                    fmt: str | None = None, force: bool = False):
    """Convert between binary/text, single file, fingerprint-qualified file and directory.

    - file -> file: same entries in the format of OUT's extension; `qualify=FP`
      prefixes bare names with FP; `module=[FP]` writes XLA's view of module FP.
    - file -> directory: one `<fp>` file per module named by `module` or by the
      file's `<fp>::` qualifiers, each holding exactly what XLA would use for it.
    - directory -> file: every name qualified `<fp>::name`, so one file still
      applies each module's own costs.
    - directory -> directory: re-encode (`fmt`), optionally only the `module` list.
    """

    kind = output_kind(out)
    if kind == "directory":
        check_directory_output(out, force=force, inputs=[src])  # before reading anything
    source = load_profile_source(src)
    warnings: list[str] = list(source.warnings)
    module = [check_fingerprint(fp) for fp in module]
    if qualify is not None:
        check_fingerprint(qualify)
        if source.kind != "file" or kind != "file":
            raise BadInput("--qualify works from one profile file to one profile file.")
        if module:
            raise BadInput("use either --qualify or --module, not both.")
    if fmt is not None and fmt not in SUFFIX:
        raise BadInput(f"unknown format '{fmt}': use binary or text.")

    if source.kind == "file":
        profile = source.modules[""]
        if kind == "file":
            if len(module) > 1:
                raise BadInput("a single output file takes at most one --module.")
            if module:
                result = module_view(profile, module[0])
            elif qualify:
                result = qualify_profile(profile, qualify)
            else:
                result = profile
            written = write_profile(result, out, force=force)
            modules_out = {"": result}
        else:
            fps = module or qualified_fingerprints(profile)
            if not fps:
                raise ProfileError(
                    f"profile {source.path} has no <fingerprint>::name entries, so it does not say which "
                    "module each cost belongs to.",
                    hint="Pass --module FP for each module that should get this profile, or collect "
                         "per-module profiles with `pgle collect --per-module`.")
            modules_out = {fp: module_view(profile, fp) for fp in fps}
            malformed = [n for n, _ in profile.costs if split_qualified(n)[0] == ""]
            if malformed:
                warnings.append(f"{len(malformed)} names with more than one '::' (such as {malformed[0]}) "
                                "match no module in XLA; they were left out.")
            written = write_profile_directory(modules_out, out, fmt=fmt or profile_format(source.files[0]),
                                              force=force, inputs=[src])
    else:
        chosen = {fp: p for fp, p in source.modules.items() if not module or fp in module}
        missing = [fp for fp in module if fp not in source.modules]
        if missing:
            raise ProfileError(f"profile directory {source.path} has no module {missing[0]}.")
        if kind == "file":
            merged = Profile()
            for fp, p in chosen.items():
                q = qualify_profile(p, fp)
                merged.costs += q.costs
                merged.latencies += q.latencies
            warnings.append("in one file, modules without entries get an empty profile (XLA's accuracy "
                            "checker then reports every instruction missing) instead of no profile.")
            written = write_profile(merged, out, force=force)
            modules_out = {"": merged}
        else:
            fmt = fmt or (TEXT if all(f.suffix == ".pbtxt" for f in source.files) else BINARY)
            written = write_profile_directory(chosen, out, fmt=fmt, force=force, inputs=[src])
            modules_out = chosen
    if source.shadowed:
        warnings.append(f"{len(source.shadowed)} .pb files in {source.path} are shadowed by .pbtxt "
                        "files of the same module (XLA reads the .pbtxt) and were not converted.")
    empty = [fp or str(written) for fp, p in modules_out.items() if p.is_empty()]
    if empty:
        warnings.append(f"{len(empty)} written profiles are empty ({', '.join(empty[:3])}).")
    out_source = load_profile_source(written)
    return Report(
        command="convert", status="ok", profile=out_source.to_dict(),
        details={"input": source.to_dict(), "output": str(written)},
        warnings=warnings,
        summary=[f"wrote {out_source.kind} {written}: {out_source.instruction_count} instructions, "
                 f"{out_source.latency_count} latencies"
                 + (f", {len(out_source.modules)} modules" if out_source.kind == "directory" else "")],
    )


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
    report = Report(command="inspect", status="ok", profile=source.to_dict(), details={"inspect": data},
                    warnings=list(source.warnings))
    s = report.summary
    s.append(f"{_describe(source)}: {data['instruction_count']} instructions, "
             f"{data['latency_count']} latencies, total {_us(data['total_cost_us'])}")
    if source.is_empty():
        report.status, report.exit_code = "empty", EXIT_ERROR
        report.reasons.append("the profile holds no instruction costs: XLA would schedule with its "
                              "default estimates. A CPU run, CUPTI held by another tool (Nsight, DCGM) "
                              "or kernels hidden in CUDA graphs all give empty profiles.")
        s.append("the profile is empty.")
        return report
    cats = data["categories"]
    s.append("by category: " + ", ".join(
        f"{cat} {cats[cat]['share']:.1%} ({cats[cat]['count']})" for cat in CATEGORIES if cats[cat]["count"]))
    coll = data["collectives"]["kinds"]
    if coll:
        s.append("collectives: " + "; ".join(
            f"{kind} {row['count']} ({row['pairs']} start/done pairs) {_us(row['cost_us'])}"
            for kind, row in coll.items()))
    for name, fps_ in data["fingerprint_aliases"].items():
        s.append(f"fingerprints {', '.join(fps_)} are aliases of one module ({name})")
    fps = data["fingerprints"]
    if source.kind == "directory":
        for fp, row in fps.items():
            s.append(f"module {fp}: {row['instruction_count']} instructions, {_us(row['total_cost_us'])}")
    elif fps:
        s.append(f"fingerprint-qualified: {len(fps['qualified'])} modules, "
                 f"{fps['bare_instructions']} bare names (bare names apply to every module)")
        if fps["malformed"]:
            report.warnings.append(f"{fps['malformed']} names contain '::' more than once; XLA applies "
                                   "them to no module.")
    if data["top"]:
        s.append(f"top {len(data['top'])}:")
        for row in data["top"]:
            cost = row["cost_us"]
            s.append(f"  {_us(cost) if cost is not None else 'nan':>14} {row['share']:6.1%}  "
                     f"{row['category']:<10} {row['name']}")
    if data["duplicates"]:
        report.warnings.append(f"{data['duplicates']} names appear more than once; XLA keeps the last "
                               "entry of each, or averages them all when the profile has .rematN entries.")
    if data["bad_values"]:
        report.warnings.append(f"{data['bad_values']} costs are negative, NaN or infinite.")
    if source.empty_modules and source.kind == "directory":
        report.warnings.append(f"{len(source.empty_modules)} module files are empty: "
                               f"{', '.join(source.empty_modules[:3])}.")
    if source.shadowed:
        report.warnings.append(f"{len(source.shadowed)} .pb files are shadowed by a .pbtxt of the same "
                               "module; XLA reads only the .pbtxt.")
    return report


def diff_report(a_path: Any, b_path: Any, *, top: int = 20):

    a, b = load_profile_source(a_path), load_profile_source(b_path)
    from pgle.profiles.stats import diff_sources

    data = diff_sources(a, b, top=top)
    report = Report(command="diff", status="ok", profile=None,
                    details={"a": a.to_dict(), "b": b.to_dict(), "diff": data})
    s = report.summary
    s.append(f"A {_describe(a)}: {data['a_count']} instructions")
    s.append(f"B {_describe(b)}: {data['b_count']} instructions")
    s.append(f"common {data['common']} ({data['overlap']:.0%} of all names); only in A {len(data['only_in_a'])}"
             f"; only in B {len(data['only_in_b'])}")
    for label, names in (("only in A", data["only_in_a"]), ("only in B", data["only_in_b"])):
        if names:
            s.append(f"{label}: {', '.join(names[:10])}{', ...' if len(names) > 10 else ''}")
    ta, tb = data["total_a_us"], data["total_b_us"]
    rel = f" ({(tb - ta) / ta:+.1%})" if ta else ""
    s.append(f"total {_us(ta)} -> {_us(tb)}{rel}")
    s.append("by category: " + "; ".join(
        f"{cat} {_us(row['a_us'])} -> {_us(row['b_us'])}" for cat, row in data["categories"].items()
        if row["a_count"] or row["b_count"]))
    if data["largest_changes"]:
        s.append("largest changes:")
        for row in data["largest_changes"]:
            r = f"{row['relative']:+.1%}" if row["relative"] is not None else "new cost"
            s.append(f"  {row['delta_us']:+14.3f} us {r:>9}  {row['name']}  ({_us(row['a_us'])} -> "
                     f"{_us(row['b_us'])})")
    if data["overlap"] < 0.5 and (data["a_count"] and data["b_count"]):
        hint = " (one is a directory and one a file: convert one first)" if a.kind != b.kind else ""
        report.warnings.append(f"A and B share only {data['overlap']:.0%} of their names: they probably "
                               f"come from different programs{hint}.")
    return report


def merge_report(inputs: Sequence[Any], out: Any, *, method: str = "percentile", percentile: int = 90,
                 force: bool = False):
    """`pgle merge`: files into one file, or per-module directories into one directory."""
    from pgle.profiles.merge import (check_method, check_percentile, merge_directory_modules,
                                     merge_profiles, name_overlap, overlap_warnings)

    if not inputs:
        raise BadInput("merge needs at least one input profile.")
    check_percentile(percentile)
    check_method(method, percentile)
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
        raise BadInput("merge inputs mix profile files and directories.",
                       hint="Merge files into a file, or directories into a directory.")
    in_kind = kinds.pop()
    if in_kind != kind:
        raise BadInput(f"the inputs are {in_kind}s but the output {out} is a {kind}.",
                       hint="Use a .pb/.pbtxt output for files, a directory for directories.")
    warnings: list[str] = [w for s in sources for w in s.warnings]
    modules_report = []
    aliases: dict[str, list[str]] = {}
    if in_kind == "file":
        labelled = [(str(s.path), s.modules[""]) for s in sources]
        overlaps = name_overlap(labelled)
        warnings += overlap_warnings(overlaps)
        merged = merge_profiles([p for _, p in labelled], method=method, percentile=percentile)
        written = write_profile(merged, out, force=force)
        inputs_report = [dataclasses.asdict(o) | {"low_overlap": o.low} for o in overlaps]
    else:
        merged_modules, aliases, fps = merge_directory_modules(sources, method=method,
                                                               percentile=percentile)
        for fp, labelled in fps.items():
            overlaps = name_overlap(labelled)
            for w in overlap_warnings(overlaps):
                warnings.append(f"module {fp}: {w}")
            modules_report.append({"module": fp, "status": "merged", "inputs": len(labelled),
                                   "instruction_count": merged_modules[fp].instruction_count})
            if len(labelled) < len(sources):
                warnings.append(f"module {fp} is in {len(labelled)} of {len(sources)} inputs.")
        all_text = all(f.suffix == ".pbtxt" for s in sources for f in s.files)
        written = write_profile_directory(merged_modules, out, fmt="text" if all_text else BINARY,
                                          force=force, inputs=inputs)
        if aliases:
            _record_aliases(written, aliases)
        inputs_report = [{"label": str(s.path), "modules": len(s.modules)} for s in sources]
    return _merge_result(written, len(sources), in_kind, method, percentile, modules_report, warnings,
                         inputs_report, aliases)


def _merge_columns(inputs: Sequence[Any], out: Any, kind: str, *, method: str, percentile: int,
                   force: bool):
    """Files into a file, or per-module folders into a folder, as numpy columns
    (pgle.profiles.merge.ColumnMerge): the same result as the general path below, at
    jaxlib's speed and a fraction of the input in memory (issue 25). None when the general
    path must do it: latencies, NaN costs, layouts only protobuf reads, inputs that mix files
    and folders or do not match the output (its errors are the messages)."""
    from pgle.profiles.columns import read_all
    from pgle.profiles.merge import ColumnMerge, InputOverlap, overlap_warnings

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
        merged = merge.merge(method, percentile)
        if merged is None:
            return None
        names, costs = merged
        written = write_profile(Profile(costs=list(zip(names, costs.tolist()))), out, force=force)
        overlaps = [InputOverlap(label=label, names=count, shared=shared)
                    for label, (count, shared) in zip(labels, merge.overlaps())]
        inputs_report = [dataclasses.asdict(o) | {"low_overlap": o.low} for o in overlaps]
        return _merge_result(written, len(inputs), "file", method, percentile, [],
                             overlap_warnings(overlaps), inputs_report, {})
    return _merge_directory_columns(inputs, out, method=method, percentile=percentile,
                                    force=force, merge_class=ColumnMerge)


def _merge_directory_columns(inputs, out, *, method, percentile, force, merge_class):
    """Per-module folders: one ColumnMerge per module, fed folder by folder (a folder's columns
    are dropped once added: memory follows the merge, not the input). Fingerprints of one
    module (the folders' manifests) merge together, module by module as the general path
    orders them; only their columns wait until every folder is read."""
    from types import SimpleNamespace

    from pgle.profiles.merge import (InputOverlap, fingerprint_aliases, module_names,
                                     overlap_warnings)

    aliases = fingerprint_aliases([module_names(SimpleNamespace(kind="directory", path=p))
                                   for p in inputs])
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
            merges.setdefault(key, merge_class()).add(c.names, c.costs)
            labels.setdefault(key, []).append(str(folder.path))
        folders.append((str(folder.path), len(folder.modules)))
        folder.modules = {}
    for key, by_fp in waiting.items():
        merge = merges[key] = merge_class()
        for fp in key:
            for label, c in by_fp.get(fp, []):
                merge.add(c.names, c.costs)
                labels.setdefault(key, []).append(label)
    done: dict[tuple[str, ...], tuple[Profile, list]] = {}
    for key, merge in merges.items():
        result = merge.merge(method, percentile)
        if result is None:
            return None
        done[key] = (Profile(costs=list(zip(result[0], result[1].tolist()))),
                     [InputOverlap(label=label, names=count, shared=shared)
                      for label, (count, shared) in zip(labels[key], merge.overlaps())])
    merged_modules: dict[str, Profile] = {}
    warnings: list[str] = []
    modules_report = []
    for fp in seen:
        profile, overlaps = done[key_of.get(fp, (fp,))]
        merged_modules[fp] = profile
        for w in overlap_warnings(overlaps):
            warnings.append(f"module {fp}: {w}")
        modules_report.append({"module": fp, "status": "merged", "inputs": len(overlaps),
                               "instruction_count": profile.instruction_count})
        if len(overlaps) < len(folders):
            warnings.append(f"module {fp} is in {len(overlaps)} of {len(folders)} inputs.")
    written = write_profile_directory(merged_modules, out, fmt="text" if all_text else BINARY,
                                      force=force, inputs=inputs)
    if aliases:
        _record_aliases(written, aliases)
    inputs_report = [{"label": label, "modules": count} for label, count in folders]
    return _merge_result(written, len(folders), "directory", method, percentile, modules_report,
                         warnings, inputs_report, aliases)


def _merge_result(written, n_sources: int, in_kind: str, method: str, percentile: int,
                  modules_report, warnings, inputs_report, aliases) -> Report:
    from pgle.profiles.merge import alias_lines

    result = load_profile_source(written)
    desc = f"percentile {percentile} (jaxlib's rule)" if method == "percentile" else method
    return Report(
        command="merge", status="ok", profile=result.to_dict(), modules=modules_report,
        warnings=warnings,
        details={"method": method, "percentile": percentile if method == "percentile" else None,
                 "inputs": inputs_report, "fingerprint_aliases": aliases},
        summary=[f"merged {n_sources} {in_kind}s by {desc} into {written}: "
                 f"{result.instruction_count} instructions, {result.latency_count} latencies"]
        + alias_lines(aliases),
    )


def _record_aliases(directory: Any, aliases: Mapping[str, Sequence[str]]) -> None:
    """Keep in the merged directory's manifest which fingerprints are one module (inspect)."""
    from pgle.profiles import manifest

    path = manifest.manifest_path(directory)
    man = manifest.read(path) or {}
    man["fingerprint_aliases"] = {n: list(f) for n, f in aliases.items()}
    manifest.write(path, man)


def trace_report(run_dir: Any, out: Any, *, stat: str = "median", log_path: Any = None,
                 qualify: bool = False, force: bool = False):
    """`pgle convert RUN_DIR OUT`: a directory OUT gets one profile per module, a file OUT one file."""

    kind = output_kind(out)
    if kind == "directory":  # refuse before converting
        check_directory_output(out, force=force, inputs=[p for p in (run_dir, log_path) if p])
    from pgle.profiles.convert import convert_trace_detailed

    result = convert_trace_detailed(run_dir, per_module=(kind == "directory"), stat=stat,
                                    log_path=log_path, qualify=qualify)
    no_gpu = (f"the trace in {run_dir} has no GPU plane (a CPU run, or the GPU was not "
              "traced), so it gives an empty profile: no GPU instruction timings to convert")
    if kind == "directory":
        if not result.profiles and result.device_planes == 0:
            raise ProfileError(f"{no_gpu}.", hint="Collect the trace on an NVIDIA GPU.")
        if not result.profiles:
            raise ProfileError(f"no module in {run_dir} has a known fingerprint, so there is no "
                               "per-module profile to write.",
                               hint="Pass the run's log (--log) captured with TF_CPP_VMODULE=gpu_hlo_schedule=1.")
        written = write_profile_directory(result.profiles, out, force=force,
                                          inputs=[p for p in (run_dir, log_path) if p])
    elif result.profiles[""].is_empty():
        # An empty profile is nothing XLA can use, and an empty file at OUT would pass for
        # one: write nothing (a CPU trace has no device plane).
        why = (no_gpu if result.device_planes == 0 else
               f"{run_dir} gave an empty profile (no GPU instruction timings)")
        report = Report(command="convert", status="empty", exit_code=EXIT_ERROR,
                        trace_dir=str(run_dir), warnings=list(result.warnings),
                        details={"trace": result.to_dict()},
                        reasons=[f"{why}; nothing was written."])
        report.summary.append(f"convert failed: {why}; {out} was not written")
        return report
    else:
        written = write_profile(result.profiles[""], out, force=force)
    source = load_profile_source(written)
    report = Report(command="convert", status="ok", profile=source.to_dict(), trace_dir=str(run_dir),
                    modules=[m.to_dict() | {"status": "written" if m.fingerprint and kind == "directory"
                                            else ("no fingerprint" if kind == "directory" else "pooled")}
                             for m in result.modules],
                    warnings=list(result.warnings), details={"trace": result.to_dict()})
    report.summary.append(
        f"converted {len(result.xplane_files)} trace files ({result.device_planes} device planes, "
        f"{result.events_used} events, stat {result.stat}) into {written}: "
        f"{source.instruction_count} instructions" +
        (f" in {len(source.modules)} modules" if kind == "directory" else ""))
    if source.is_empty():
        report.status, report.exit_code = "empty", EXIT_ERROR
        report.reasons.append("the trace gave an empty profile.")
    return report


def nsys_report(src: Any, out: Any, *, stat: str | None = None, skip: int | None = None,
                dump: Any = None, force: bool = False):
    """The Report of `pgle convert NSIGHT_INPUT OUT`: a directory OUT gets `<fingerprint>.pbtxt|.pb`."""
    kind = output_kind(out)
    if kind == "directory":  # refuse before converting
        check_directory_output(out, force=force, inputs=[p for p in (src, dump) if p])
    from pgle.profiles.nsys_convert import convert_nsys

    result = convert_nsys(src, stat=stat, skip=skip, dump=dump)
    if not result.profiles:
        raise ProfileError(f"no module in {src} could be keyed by fingerprint and costed.",
                           hint="See the warnings above; an nsys-jax archive needs its dump/ folder.")
    if kind == "directory":
        # Text like nsys-jax's own output: one greppable <fingerprint>.pbtxt per module.
        written = write_profile_directory(result.profiles, out, fmt=TEXT, force=force,
                                          inputs=[p for p in (src, dump) if p])
    else:
        merged = Profile()
        for fp, p in result.profiles.items():
            merged.costs += qualify_profile(p, fp).costs
        written = write_profile(merged, out, force=force)
    source = load_profile_source(written)
    report = Report(command="convert", status="ok", profile=source.to_dict(),
                    modules=[m.to_dict() for m in result.modules], warnings=list(result.warnings),
                    details={"nsys": result.to_dict(), "input": str(src)})
    report.summary.append(
        f"converted {src} ({result.thunks_used} steady-state thunk executions, stat {result.stat}) "
        f"into {written}: {source.instruction_count} instructions in {len(result.profiles)} modules")
    if source.is_empty():
        report.status, report.exit_code = "empty", EXIT_ERROR
        report.reasons.append("the Nsight data gave an empty profile.")
    return report
