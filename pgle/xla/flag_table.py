"""What pgle knows about XLA flags that matter to PGLE.

Versions are jax releases (jaxlib ships XLA). Sources: docs/xla-facts.md sections 3
and 6, the JAX GPU performance guide, XLA's debug_options_flags.cc, and the
installed jaxlib 0.10.2 itself (flag names, defaults, and what it aborts on).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re


@dataclasses.dataclass(frozen=True)
class RemovedFlag:
    pattern: str  # flag name, or an fnmatch pattern for a family
    removed_in: tuple[int, ...]  # first jax release whose XLA aborts on it
    replacement: str  # what to use instead, in words a user can paste


REMOVED_FLAGS: tuple[RemovedFlag, ...] = (
    RemovedFlag(
        "xla_gpu_enable_async_*", (0, 4, 28),
        "collectives are async by default; to turn some off use "
        "--xla_gpu_disable_async_collectives=ALLREDUCE,ALLGATHER,... instead",
    ),
    RemovedFlag(
        "xla_gpu_enable_pgle_accuracy_checker", (0, 4, 36),
        "use --xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN (or _ERROR, _OFF)",
    ),
    RemovedFlag(
        "xla_gpu_lhs_enable_gpu_async_tracker", (0, 4, 38),
        "the GPU async tracker is always on; delete the flag",
    ),
    RemovedFlag(
        "xla_gpu_enable_triton_softmax_fusion", (0, 5, 1),
        "XLA decides on Triton softmax fusion itself; delete the flag",
    ),
    RemovedFlag(
        "xla_gpu_enable_pipelined_collectives", (0, 6, 0),
        "use --xla_gpu_enable_pipelined_all_reduce, --xla_gpu_enable_pipelined_all_gather and "
        "--xla_gpu_enable_pipelined_reduce_scatter",
    ),
    RemovedFlag(
        "xla_gpu_graph_level", (0, 7, 2),
        "use --xla_gpu_enable_command_buffer (e.g. --xla_gpu_enable_command_buffer='' to turn "
        "CUDA graphs off)",
    ),
)


def removed_flag(name: str, jax_version: tuple[int, ...] | None) -> RemovedFlag | None:
    """The removal entry for `name` if the installed jax no longer knows it.

    An unknown jax version counts as new: pgle targets current jax.
    """
    for entry in REMOVED_FLAGS:
        if fnmatch.fnmatchcase(name, entry.pattern):
            if jax_version is None or jax_version >= entry.removed_in:
                return entry
    return None


# --- Flags that matter to PGLE --------------------------------------------------
# Defaults are the installed jaxlib 0.10.2's (read from its DebugOptions); `since` is
# the first jax release whose XLA knows the flag, None when it predates jax 0.4.31.
# pgle supports jax >= 0.4.34: the oldest whose XLA:GPU compiler the deviceless lane can drive
# (0.4.31 and 0.4.33's CUDA plugin cannot build a topology without a GPU;
# docs/gpu-validation.md). Where the first release is not pinned down the note
# says so, and `pgle doctor --probe` asks the installed jaxlib instead.
DEFAULTS_FROM = (0, 10, 2)
OLDEST_SUPPORTED_JAX = (0, 4, 34)
_BOOL_TRUE = ("true", "1")
_BOOL_FALSE = ("false", "0")
_INT = re.compile(r"^\s*[-+]?\d+\s*$")  # absl::SimpleAtoi: no hex, no exponent


@dataclasses.dataclass(frozen=True)
class FlagInfo:
    name: str
    kind: str  # bool | int | string | enum | enum_list
    default: str  # as XLA has it in DEFAULTS_FROM; "" is empty
    meaning: str
    pgle: str = ""  # why it matters to PGLE, with the jax versions where that changed
    since: tuple[int, ...] | None = None
    values: tuple[str, ...] = ()  # enum values XLA accepts (as of DEFAULTS_FROM)
    # False: jax 0.10.2 has it, but the first release that does is not pinned down.
    since_pinned: bool = True


def _f(name, kind, default, meaning, pgle="", since=None, values=(), pinned=True):
    return FlagInfo(name, kind, default, meaning, pgle, since, tuple(values), pinned)


FLAGS: dict[str, FlagInfo] = {f.name: f for f in (
    _f("xla_gpu_pgle_profile_file_or_directory_path", "string", "",
       "PGLE profile for the latency-hiding scheduler: one .pb/.pbtxt file for every module, or a "
       "directory holding <fingerprint>.pbtxt / <fingerprint>.pb per module.",
       "The file type comes from the extension only: since jax 0.5.1 any other extension is "
       "silently ignored. A profile handed over by auto PGLE wins over this flag. `pgle run` "
       "sets it itself."),
    _f("xla_gpu_enable_latency_hiding_scheduler", "bool", "false",
       "Run the latency-hiding scheduler (overlap async collectives with compute).",
       "Needed for a profile to matter on jax <= 0.5.0; since 0.5.1 LHS runs anyway when a PGLE "
       "profile is present, at optimization level O1+, or with the speed-of-light estimator "
       "(Hopper/Blackwell, jax >= 0.7.2)."),
    _f("xla_gpu_pgle_accuracy_checker", "enum", "PGLE_STRICTNESS_LEVEL_WARN",
       "What XLA does when the profile misses instructions of a module: OFF says nothing, WARN "
       "logs 'Missing <N> instructions from the profile.', ERROR fails the compilation.",
       "Replaced --xla_gpu_enable_pgle_accuracy_checker in jax 0.4.36; the WARN lines are the "
       "evidence pgle reads, so OFF hides whether the profile fits.",
       since=(0, 4, 36),
       values=("PGLE_STRICTNESS_LEVEL_OFF", "PGLE_STRICTNESS_LEVEL_WARN",
               "PGLE_STRICTNESS_LEVEL_ERROR")),
    _f("xla_gpu_enable_command_buffer", "enum_list",
       "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,DYNAMIC_SLICE_FUSION",
       "Which commands XLA records into command buffers (CUDA graphs); '' turns them off, "
       "+TYPE/-TYPE edit the default list.",
       "Kernels inside a CUDA graph can be missing from a profile; auto PGLE turns command "
       "buffers off for its profiling compile and `pgle collect` for the profiling run. Replaced "
       "--xla_gpu_graph_level (removed in jax 0.7.2). The default list changes between releases.",
       values=("FUSION", "CUBLAS", "CUBLASLT", "CUDNN", "COLLECTIVES", "CONDITIONAL", "WHILE",
               "CUSTOM_CALL", "DYNAMIC_SLICE_FUSION", "CONVOLUTION")),
    _f("xla_enable_command_buffers_during_profiling", "bool", "false",
       "Keep command buffers while a profiler is active; by default XLA runs them op by op "
       "while profiling.",
       "true makes a collected profile time whole CUDA graphs instead of their kernels.",
       pinned=False),
    _f("xla_gpu_experimental_dump_fdo_profiles", "bool", "false",
       "Dump the FDO (PGLE) profile each module was compiled with, as text, under --xla_dump_to.",
       "Shows exactly what XLA received, e.g. from auto PGLE.", pinned=False),
    _f("xla_gpu_all_reduce_combine_threshold_bytes", "int", "31457287",
       "Combine all-reduces up to this many bytes into one.",
       "Changes the HLO before scheduling, so it must be identical in the collect and run "
       "phases. The default is 30 MiB + 7 bytes (the JAX GPU guide's '256' is wrong)."),
    _f("xla_gpu_all_gather_combine_threshold_bytes", "int", "31457287",
       "Combine all-gathers up to this many bytes into one.",
       "Changes the HLO before scheduling: keep it identical in both phases."),
    _f("xla_gpu_reduce_scatter_combine_threshold_bytes", "int", "31457287",
       "Combine reduce-scatters up to this many bytes into one.",
       "Changes the HLO before scheduling: keep it identical in both phases."),
    _f("xla_gpu_collective_permute_combine_threshold_bytes", "int", "31457287",
       "Combine collective-permutes up to this many bytes into one.",
       "Changes the HLO before scheduling: keep it identical in both phases.", pinned=False),
    _f("xla_gpu_memory_limit_slop_factor", "int", "95",
       "Percent of device memory the latency-hiding scheduler may plan for before it trades "
       "overlap for lower memory use.",
       "Lower it if a PGLE-scheduled module runs out of memory."),
    _f("xla_gpu_enable_highest_priority_async_stream", "bool", "true",
       "Give the async (collective) stream the highest priority."),
    _f("xla_gpu_enable_pipelined_all_reduce", "bool", "false",
       "Pipeline all-reduces across loop iterations.",
       "Replaces part of --xla_gpu_enable_pipelined_collectives (removed in jax 0.6.0); changes "
       "the HLO before scheduling."),
    _f("xla_gpu_enable_pipelined_all_gather", "bool", "false",
       "Pipeline all-gathers across loop iterations.",
       "Replaces part of --xla_gpu_enable_pipelined_collectives (removed in jax 0.6.0); changes "
       "the HLO before scheduling."),
    _f("xla_gpu_enable_pipelined_reduce_scatter", "bool", "true",
       "Pipeline reduce-scatters across loop iterations.",
       "Replaces part of --xla_gpu_enable_pipelined_collectives (removed in jax 0.6.0); changes "
       "the HLO before scheduling."),
    _f("xla_gpu_enable_pipelined_p2p", "bool", "false",
       "Pipeline send/recv (collective-permute) across loop iterations."),
    _f("xla_gpu_disable_async_collectives", "enum_list", "",
       "Collectives to run synchronously: ALLREDUCE, ALLGATHER, REDUCESCATTER, "
       "COLLECTIVEBROADCAST, ALLTOALL, COLLECTIVEPERMUTE, RAGGEDALLTOALL or ALLCOLLECTIVES.",
       "Replaced the --xla_gpu_enable_async_* flags (removed in jax 0.4.28); a synchronous "
       "collective leaves the scheduler nothing to overlap.",
       values=("NOOP", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "COLLECTIVEBROADCAST",
               "ALLTOALL", "COLLECTIVEPERMUTE", "RAGGEDALLTOALL", "ALLCOLLECTIVES")),
    _f("xla_gpu_enable_while_loop_double_buffering", "bool", "false",
       "Double-buffer while loops so one iteration's collectives overlap the next one's compute."),
    _f("xla_gpu_experimental_pipeline_parallelism_opt_level", "enum",
       "PIPELINE_PARALLELISM_OPT_LEVEL_DISABLE",
       "SPMD pipeline-parallelism scheduling optimizations (the JAX GPU guide recommends ENABLE "
       "for pipelined models).",
       values=("PIPELINE_PARALLELISM_OPT_LEVEL_DISABLE", "PIPELINE_PARALLELISM_OPT_LEVEL_ENABLE"),
       pinned=False),
    _f("xla_gpu_enable_analytical_latency_estimator", "bool", "false",
       "Use the analytical cost model instead of the default latency estimator in LHS.",
       "A PGLE profile takes precedence over it."),
    _f("xla_gpu_enable_analytical_sol_latency_estimator", "bool", "true",
       "Use the speed-of-light analytical latency estimator in LHS (tunable with "
       "--xla_gpu_analytical_latency_estimator_options).",
       "With it on, LHS runs on Hopper/Blackwell even without a profile (jax >= 0.7.2); true by "
       "default in jax 0.10.2. A PGLE profile takes precedence.", pinned=False),
    _f("xla_gpu_triton_gemm_any", "bool", "true",
       "Use the Triton GEMM emitter for any GEMM it supports.",
       "true by default in jax 0.10.2 (the JAX GPU guide's 'False' held for jaxlib 0.4.18)."),
    _f("xla_disable_hlo_passes", "string", "",
       "Comma-separated HLO passes to skip (e.g. collective-permute-motion for pipeline "
       "parallelism).",
       "Changes the HLO before scheduling: keep it identical in both phases."),
    _f("xla_gpu_autotune_level", "int", "4",
       "GEMM/convolution autotuning level, 0 (off) to 4."),
    _f("xla_dump_to", "string", "",
       "Directory for HLO dumps.",
       "The after-optimizations dump header carries fingerprint_before_lhs, the name XLA looks "
       "for in a profile directory. Dump flags are left out of the compilation-cache key."),
    _f("xla_dump_latency_hiding_schedule", "bool", "false",
       "Dump the schedule the latency-hiding scheduler chose (under --xla_dump_to)."),
    _f("xla_force_host_platform_device_count", "int", "1",
       "Number of CPU devices XLA:CPU creates.",
       "pgle's tests use it for real collectives on CPU; XLA:CPU ignores PGLE profiles."),
)}


def flag_info(name: str) -> FlagInfo | None:
    return FLAGS.get(name)


def value_error(info: FlagInfo, value: str | None) -> str | None:
    """Why XLA would reject `value` for this flag (it aborts: 'Flag parsing failed'), or None.

    Checked against jaxlib 0.10.2: bools take true/false (any case), 1 or 0, or no value;
    ints take decimal only; enums take their names exactly.
    """
    if info.kind == "bool":
        if value is None or value.lower() in _BOOL_TRUE + _BOOL_FALSE:
            return None
        return f"{value!r} is not a boolean (use true or false)"
    if value is None:
        return f"--{info.name} needs a value"
    if info.kind == "int" and not _INT.match(value):
        return f"{value!r} is not a decimal integer"
    if info.kind == "enum" and value not in info.values:
        return f"{value!r} is not one of {', '.join(info.values)}"
    if info.kind == "enum_list" and value:
        names = [v.strip().lstrip("+-") for v in value.split(",")]
        bad = [v for v in names if v not in info.values]
        if bad:
            return f"{', '.join(repr(b) for b in bad)} not among {', '.join(info.values)}"
    return None


def exists_in(info: FlagInfo, jax_version: tuple[int, ...] | None) -> bool:
    """Whether that jax's XLA knows the flag (unknown versions count as new)."""
    return info.since is None or jax_version is None or jax_version >= info.since


def versions_text(name: str) -> str:
    """'jax >= 0.4.36', 'removed in jax 0.7.2', ... for tables and explanations."""
    removed = next((e for e in REMOVED_FLAGS if fnmatch.fnmatchcase(name, e.pattern)), None)
    info = FLAGS.get(name)
    since = info.since if info else None
    parts = []
    if info and not info.since_pinned:
        parts.append(f"in jax {_v(DEFAULTS_FROM)}; first release not pinned down")
    elif since:
        parts.append(f"jax >= {_v(since)}")
    elif info:
        parts.append(f"in every jax pgle supports (>= {_v(OLDEST_SUPPORTED_JAX)})")
    if removed:
        parts.append(f"removed in jax {_v(removed.removed_in)}")
    return "; ".join(parts) or "not in pgle's table"


def _v(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def explain_flag(name: str, value: str | None, raw: str, jax: tuple[int, ...] | None) -> dict:
    """One flag: meaning, default, versions, and ok / warn / error / unknown with why."""
    info = flag_info(name)
    row = {"flag": raw, "name": name, "value": value, "status": "ok", "message": "",
           "meaning": info.meaning if info else "", "default": info.default if info else None,
           "pgle": info.pgle if info else "", "versions": versions_text(name)}

    def verdict(status, message):
        row.update(status=status, message=message)
        return row

    removed = removed_flag(name, jax)
    if removed is not None:
        return verdict("error", f"removed in jax {_v(removed.removed_in)}: "
                                f"XLA aborts on it; {removed.replacement}")
    if not raw.startswith("--") or raw.startswith("---"):
        return verdict("error", "XLA only reads flags written with exactly two dashes; it aborts "
                                "on this one ('Unknown flag in XLA_FLAGS')")
    if info is None:
        return verdict("unknown", "not in pgle's table; `--probe` asks the installed jaxlib")
    if not exists_in(info, jax):
        return verdict("error", f"needs jax >= {_v(info.since)}: this jax "
                                f"aborts on it ('Unknown flag in XLA_FLAGS')")
    bad = value_error(info, value)
    if bad:
        # Enum lists grow between releases: the table's list may be behind this jaxlib.
        return verdict("warn" if info.kind == "enum_list" else "error",
                       f"{bad}; XLA aborts ('Flag parsing failed')")
    hazard = _flag_hazard(name, value, jax)
    return verdict("warn", hazard) if hazard else row


def _flag_hazard(name: str, value: str | None, jax: tuple[int, ...] | None) -> str:
    """Values XLA accepts that quietly defeat PGLE or pgle's verdict."""
    if name == ACCURACY_CHECKER and value.endswith("_OFF"):
        return "OFF hides the 'Missing <N> instructions' lines: pgle cannot tell whether the " \
               "profile fits"
    if name == ACCURACY_CHECKER and value.endswith("_ERROR"):
        return "ERROR fails the compilation when the profile misses any instruction"
    if name == PGLE_PROFILE_PATH and value:
        if not value.endswith((".pb", ".pbtxt")) and not os.path.isdir(value) \
                and (jax is None or jax >= (0, 5, 1)):
            return "neither a .pb/.pbtxt file nor a directory: XLA silently ignores it"
        return "set globally, every module of every run gets this profile; give it per run " \
               "with `pgle run --profile`"
    if name == "xla_enable_command_buffers_during_profiling" and (value or "true").lower() in (
            "true", "1"):
        return "a collected profile times whole CUDA graphs, not their kernels"
    return ""


def explain_all(flags, jax: tuple[int, ...] | None) -> list[dict]:
    """`explain_flag` for each parsed flag (`xla_flags.Flag`); an earlier duplicate is a
    warning, since the last one wins."""
    rows = [explain_flag(f.name, f.value, f.raw, jax) for f in flags]
    for f, r in zip(flags, rows):
        if getattr(f, "unterminated", False):
            r.update(status="error", message=(
                "its quote is never closed, so XLA reads the rest of XLA_FLAGS as this value "
                "and every flag after it (pgle's included) is lost; close the quote"))
    last = {r["name"]: i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        if i != last[r["name"]] and r["status"] in ("ok", "unknown"):
            r.update(status="warn", message="given again later: the last one wins")
    return rows


# Flags pgle itself sets; named here once so every module agrees.
PGLE_PROFILE_PATH = "xla_gpu_pgle_profile_file_or_directory_path"
LHS = "xla_gpu_enable_latency_hiding_scheduler"
COMMAND_BUFFER = "xla_gpu_enable_command_buffer"
ACCURACY_CHECKER = "xla_gpu_pgle_accuracy_checker"
ACCURACY_CHECKER_SINCE = (0, 4, 36)
# Its predecessor (jax <= 0.4.35): a bool, and strict only: any missing instruction fails the
# compile (`Found N missing instructions. Discarding the profile.`; seen on jax 0.4.34).
OLD_ACCURACY_CHECKER = "xla_gpu_enable_pgle_accuracy_checker"
HOST_DEVICE_COUNT = "xla_force_host_platform_device_count"
