"""`pgle convert IN OUT`: every kind of input pgle turns into profiles, in one registry.

CONVERTERS lists one Converter per kind of input, in the order they are tried: `detect(IN)`
looks at IN once (cheaply: no converter module is imported for a local profile file) and
returns what its `convert` needs (the trace folder's files, the Nsight input's kind), or None
when IN is not its kind. The first converter that recognises IN converts it; the last one
takes whatever is left (a per-module profile directory, or something whose error says what is
wrong). A new kind of input is one row here (docs/architecture.md, "How to add a converter").
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pgle.errors import EXIT_ERROR, BadInput, ProfileError
from pgle.phrases import plural
from pgle.profiles.files import (
    BINARY,
    EXTENSIONS,
    SUFFIX,
    TEXT,
    Profile,
    check_directory_output,
    check_fingerprint,
    load_profile_source,
    module_view,
    output_kind,
    profile_format,
    qualified_fingerprints,
    qualify_profile,
    split_qualified,
    write_profile,
    write_profile_directory,
)
from pgle.report import Report
from pgle.verdicts.statuses import Collected, Written

Found = TypeVar("Found")


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """`pgle convert`'s options; each converter reads those that apply to its input."""

    module: tuple[str, ...] = ()  # profiles: the modules to write (XLA's view of each)
    qualify: str | None = None  # profile file -> file: prefix bare names with FP::
    format: str | None = None  # profiles -> directory: binary | text (default: the input's)
    stat: str | None = None  # trace, Nsight: the statistic per instruction
    skip: int | None = None  # Nsight: executions of every module to drop
    dump: str | None = None  # Nsight: the XLA dump folder
    log: str | None = None  # trace: the run's log (fingerprints)
    qualify_all: bool = False  # trace -> file: qualify every name
    force: bool = False  # replace OUT


@dataclasses.dataclass(frozen=True)
class Converter(Generic[Found]):
    """One kind of input: `detect(IN)` -> what `convert` needs of it, or None (not this kind)."""

    name: str
    detect: Callable[[str], Found | None]
    convert: Callable[[Found, str, ConvertOptions], Report]


def _profile_file(src: str) -> str | None:
    """A local .pb/.pbtxt file: the common case, converted without importing any converter."""
    return src if os.path.isfile(src) and os.path.splitext(src)[1] in EXTENSIONS else None


def _nsight_input(src: str) -> tuple[str, str] | None:
    from pgle.profiles.nsys_convert import nsight_kind

    kind = nsight_kind(src)
    return (src, kind) if kind else None


def _trace_folder(src: str) -> tuple[str, list[str]] | None:
    from pgle.profiles.convert import trace_files

    files = trace_files(src)
    return (src, files) if files else None


def _anything(src: str) -> str:
    return src


def _from_profile(src: str, out: str, opts: ConvertOptions) -> Report:
    return convert_profile(
        src, out, module=opts.module, qualify=opts.qualify, fmt=opts.format, force=opts.force
    )


def _from_nsight(found: tuple[str, str], out: str, opts: ConvertOptions) -> Report:
    src, kind = found
    return nsys_report(
        src, out, nsight=kind, stat=opts.stat, skip=opts.skip, dump=opts.dump, force=opts.force
    )


def _from_trace(found: tuple[str, list[str]], out: str, opts: ConvertOptions) -> Report:
    src, files = found
    return trace_report(
        src,
        out,
        files=files,
        stat=opts.stat or "median",
        log_path=opts.log,
        qualify=opts.qualify_all,
        force=opts.force,
    )


CONVERTERS: tuple[Converter[Any], ...] = (
    Converter("profile file", _profile_file, _from_profile),
    Converter("Nsight Systems", _nsight_input, _from_nsight),
    Converter("trace folder", _trace_folder, _from_trace),
    Converter("profiles", _anything, _from_profile),
)


def convert(src: Any, out: Any, opts: ConvertOptions | None = None) -> Report:
    """`pgle convert IN OUT`: the first converter that recognises IN converts it."""
    opts = opts or ConvertOptions()
    src, out = os.fspath(src), os.fspath(out)
    for converter in CONVERTERS:
        found = converter.detect(src)
        if found is not None:
            return converter.convert(found, out, opts)
    raise AssertionError("the last converter takes every input")


def convert_profile(
    src: Any,
    out: Any,
    *,
    module: Sequence[str] = (),
    qualify: str | None = None,
    fmt: str | None = None,
    force: bool = False,
) -> Report:
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
                    f"profile {source.path} has no <fingerprint>::name entries, so it does not "
                    "say which module each cost belongs to.",
                    hint="Pass --module FP for each module that should get this profile, or "
                    "collect per-module profiles with `pgle collect --per-module`.",
                )
            modules_out = {fp: module_view(profile, fp) for fp in fps}
            malformed = [n for n, _ in profile.costs if split_qualified(n)[0] == ""]
            if malformed:
                warnings.append(
                    f"{len(malformed)} names with more than one '::' (such as {malformed[0]}) "
                    "match no module in XLA; they were left out."
                )
            written = write_profile_directory(
                modules_out,
                out,
                fmt=fmt or profile_format(source.files[0]),
                force=force,
                inputs=[src],
            )
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
            warnings.append(
                "in one file, modules without entries get an empty profile (XLA's accuracy "
                "checker then reports every instruction missing) instead of no profile."
            )
            written = write_profile(merged, out, force=force)
            modules_out = {"": merged}
        else:
            fmt = fmt or (TEXT if all(f.suffix == ".pbtxt" for f in source.files) else BINARY)
            written = write_profile_directory(chosen, out, fmt=fmt, force=force, inputs=[src])
            modules_out = chosen
    if source.shadowed:
        warnings.append(
            f"{len(source.shadowed)} .pb files in {source.path} are shadowed by .pbtxt "
            "files of the same module (XLA reads the .pbtxt) and were not converted."
        )
    empty = [fp or str(written) for fp, p in modules_out.items() if p.is_empty()]
    if empty:
        warnings.append(f"{len(empty)} written profiles are empty ({', '.join(empty[:3])}).")
    out_source = load_profile_source(written)
    return Report(
        command="convert",
        status="ok",
        profile=out_source.to_dict(),
        details={"input": source.to_dict(), "output": str(written)},
        warnings=warnings,
        summary=[
            f"wrote {out_source.kind} {written}: "
            f"{plural(out_source.instruction_count, 'instruction')}, "
            f"{out_source.latency_count} latencies"
            + (f", {len(out_source.modules)} modules" if out_source.kind == "directory" else "")
        ],
    )


def trace_report(
    run_dir: Any,
    out: Any,
    *,
    files: list[str] | None = None,
    stat: str = "median",
    log_path: Any = None,
    qualify: bool = False,
    force: bool = False,
) -> Report:
    """`pgle convert RUN_DIR OUT`: a directory OUT gets one profile per module, a file OUT one
    file."""

    kind = output_kind(out)
    if kind == "directory":  # refuse before converting
        check_directory_output(out, force=force, inputs=[p for p in (run_dir, log_path) if p])
    from pgle.profiles.convert import convert_trace_detailed

    result = convert_trace_detailed(
        run_dir,
        per_module=(kind == "directory"),
        stat=stat,
        log_path=log_path,
        qualify=qualify,
        files=files,
    )
    no_gpu = (
        f"the trace in {run_dir} has no GPU plane (a CPU run, or the GPU was not "
        "traced), so it gives an empty profile: no GPU instruction timings to convert"
    )
    if kind == "directory":
        if not result.profiles and result.device_planes == 0:
            raise ProfileError(f"{no_gpu}.", hint="Collect the trace on an NVIDIA GPU.")
        if not result.profiles:
            raise ProfileError(
                f"no module in {run_dir} has a known fingerprint, so there is no "
                "per-module profile to write.",
                hint="Pass the run's log (--log) captured with TF_CPP_VMODULE=gpu_hlo_schedule=1.",
            )
        written = write_profile_directory(
            result.profiles, out, force=force, inputs=[p for p in (run_dir, log_path) if p]
        )
    elif result.profiles[""].is_empty():
        # An empty profile is nothing XLA can use, and an empty file at OUT would pass for
        # one: write nothing (a CPU trace has no device plane).
        why = (
            no_gpu
            if result.device_planes == 0
            else f"{run_dir} gave an empty profile (no GPU instruction timings)"
        )
        report = Report(
            command="convert",
            status=Collected.EMPTY,
            exit_code=EXIT_ERROR,
            trace_dir=str(run_dir),
            warnings=list(result.warnings),
            details={"trace": result.to_dict()},
            reasons=[f"{why}; nothing was written."],
        )
        report.summary.append(f"convert failed: {why}; {out} was not written")
        return report
    else:
        written = write_profile(result.profiles[""], out, force=force)
    source = load_profile_source(written)
    report = Report(
        command="convert",
        status="ok",
        profile=source.to_dict(),
        trace_dir=str(run_dir),
        modules=[
            m.to_dict()
            | {
                "status": Written.WRITTEN
                if m.fingerprint and kind == "directory"
                else (Written.NO_FINGERPRINT if kind == "directory" else Written.POOLED)
            }
            for m in result.modules
        ],
        warnings=list(result.warnings),
        details={"trace": result.to_dict()},
    )
    report.summary.append(
        f"converted {plural(len(result.xplane_files), 'trace file')} "
        f"({plural(result.device_planes, 'device plane')}, "
        f"{plural(result.events_used, 'event')}, stat {result.stat}) into {written}: "
        f"{plural(source.instruction_count, 'instruction')}"
        + (f" in {plural(len(source.modules), 'module')}" if kind == "directory" else "")
    )
    if source.is_empty():
        report.status, report.exit_code = Collected.EMPTY, EXIT_ERROR
        report.reasons.append("the trace gave an empty profile.")
    return report


def nsys_report(
    src: Any,
    out: Any,
    *,
    nsight: str | None = None,
    stat: str | None = None,
    skip: int | None = None,
    dump: Any = None,
    force: bool = False,
) -> Report:
    """The Report of `pgle convert NSIGHT_INPUT OUT`: a directory OUT gets
    `<fingerprint>.pbtxt|.pb`."""
    kind = output_kind(out)
    if kind == "directory":  # refuse before converting
        check_directory_output(out, force=force, inputs=[p for p in (src, dump) if p])
    from pgle.profiles.nsys_convert import convert_nsys

    result = convert_nsys(src, kind=nsight, stat=stat, skip=skip, dump=dump)
    if not result.profiles:
        raise ProfileError(
            f"no module in {src} could be keyed by fingerprint and costed.",
            hint="See the warnings above; an nsys-jax archive needs its dump/ folder.",
        )
    if kind == "directory":
        # Text like nsys-jax's own output: one greppable <fingerprint>.pbtxt per module.
        written = write_profile_directory(
            result.profiles, out, fmt=TEXT, force=force, inputs=[p for p in (src, dump) if p]
        )
    else:
        merged = Profile()
        for fp, p in result.profiles.items():
            merged.costs += qualify_profile(p, fp).costs
        written = write_profile(merged, out, force=force)
    source = load_profile_source(written)
    report = Report(
        command="convert",
        status="ok",
        profile=source.to_dict(),
        modules=[m.to_dict() for m in result.modules],
        warnings=list(result.warnings),
        details={"nsys": result.to_dict(), "input": str(src)},
    )
    report.summary.append(
        f"converted {src} ({result.thunks_used} steady-state thunk executions, stat {result.stat}) "
        f"into {written}: {plural(source.instruction_count, 'instruction')} in "
        f"{plural(len(result.profiles), 'module')}"
    )
    if source.is_empty():
        report.status, report.exit_code = Collected.EMPTY, EXIT_ERROR
        report.reasons.append("the Nsight data gave an empty profile.")
    return report
