"""The XLA flags pgle knows, per jax release: when each exists, its kind, default and values.

Every release pgle supports (jax 0.4.34 to 0.12.0.1, 29 releases) was asked which flags its
XLA accepts, and how its DebugOptions declares them (tests/xla_gpu/flag_inventory.py;
tests/data/xla_gpu/flags/<version>.txt, checked against this table by
tests/xla/test_flag_inventory.py). Meanings are XLA's own help text (`<version>.usage.txt`
there), shortened; "pgle" notes say why a flag matters to PGLE. `since` is the first release
whose XLA knows the flag (None: every release pgle supports); `default` is the newest
release's (CHECKED_THROUGH), `older_defaults` the earlier ones.
"""

from __future__ import annotations

import dataclasses

Version = tuple[int, ...]
OLDEST_SUPPORTED_JAX: Version = (0, 4, 34)
CHECKED_THROUGH: Version = (0, 12, 0, 1)  # the newest release inventoried
DEFAULTS_FROM = CHECKED_THROUGH  # `FlagInfo.default` is this release's


@dataclasses.dataclass(frozen=True)
class RemovedFlag:
    pattern: str  # flag name, or an fnmatch pattern for a family
    removed_in: Version  # first jax release whose XLA aborts on it
    replacement: str = "delete the flag"  # what to use instead, in words a user can paste
    since: Version | None = None  # first release that had it (None: before jax 0.4.34)


@dataclasses.dataclass(frozen=True)
class FlagInfo:
    name: str
    kind: str  # bool | int | string | enum | enum_list
    default: str  # as XLA of CHECKED_THROUGH has it; "" is empty
    meaning: str
    pgle: str = ""  # why it matters to PGLE, with the jax versions where that changed
    since: Version | None = None
    values: tuple[str, ...] = ()  # enum values XLA of CHECKED_THROUGH accepts
    # (first release of the next default, the default before it), ascending.
    older_defaults: tuple[tuple[Version, str], ...] = ()
    value_since: tuple[tuple[str, Version], ...] = ()  # values added after the flag itself
    # Values XLA no longer accepts: (value, first release with it or None, removed in).
    old_values: tuple[tuple[str, Version | None, Version], ...] = ()
    ignore_case: bool = False  # XLA reads the enum value case-insensitively


REMOVED_FLAGS: tuple[RemovedFlag, ...] = (
    RemovedFlag(
        "xla_gpu_enable_async_*",
        (0, 4, 28),
        "collectives are async by default; to turn some off use "
        "--xla_gpu_disable_async_collectives=ALLREDUCE,ALLGATHER,... instead",
    ),
    RemovedFlag(
        "xla_gpu_enable_pgle_accuracy_checker",
        (0, 4, 36),
        "use --xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN (or _ERROR, _OFF)",
    ),
    RemovedFlag(
        "xla_gpu_lhs_enable_gpu_async_tracker",
        (0, 4, 38),
        "the GPU async tracker is always on; delete the flag",
    ),
    RemovedFlag(
        "xla_gpu_enable_triton_softmax_fusion",
        (0, 5, 1),
        "XLA decides on Triton softmax fusion itself; delete the flag",
    ),
    RemovedFlag(
        "xla_gpu_enable_pipelined_collectives",
        (0, 6, 0),
        "use --xla_gpu_enable_pipelined_all_reduce, --xla_gpu_enable_pipelined_all_gather and "
        "--xla_gpu_enable_pipelined_reduce_scatter (jax >= 0.11.1: --xla_gpu_pipeline_all_reduce "
        "and friends)",
    ),
    RemovedFlag(
        "xla_gpu_graph_level",
        (0, 7, 2),
        "use --xla_gpu_enable_command_buffer (e.g. --xla_gpu_enable_command_buffer='' to turn "
        "CUDA graphs off)",
    ),
    # Removed after jax 0.10.2 (the inventories of 0.11.0-0.12.0.1).
    RemovedFlag("xla_gpu_enable_llvm_module_compilation_parallelism", (0, 11, 0)),
    RemovedFlag("xla_gpu_experimental_enable_nvshmem", (0, 11, 0), since=(0, 6, 1)),
    RemovedFlag("xla_gpu_experimental_ragged_all_to_all_zero_copy", (0, 11, 0), since=(0, 10, 1)),
    RemovedFlag("xla_gpu_use_embeded_device_lib", (0, 11, 0), since=(0, 8, 0)),
    RemovedFlag("xla_gpu_use_inprocess_lld", (0, 11, 0), since=(0, 6, 2)),
    RemovedFlag("xla_cpu_use_fusion_emitters", (0, 11, 1), since=(0, 5, 3)),
    RemovedFlag("xla_gpu_experimental_aot_compiled_thunks", (0, 11, 1), since=(0, 8, 2)),
    RemovedFlag("xla_gpu_experimental_autotuner_cache_dir", (0, 11, 1), since=(0, 8, 0)),
    RemovedFlag("xla_gpu_experimental_ragged_all_to_all_use_barrier", (0, 11, 1), since=(0, 9, 1)),
    RemovedFlag("xla_gpu_experimental_use_raft_select_k", (0, 11, 1), since=(0, 8, 0)),
    RemovedFlag("xla_gpu_fused_attention_use_cudnn_rng", (0, 11, 1)),
    RemovedFlag("xla_llvm_force_inline_before_split", (0, 11, 1)),
)


def _f(
    name: str,
    kind: str,
    default: str,
    meaning: str,
    pgle: str = "",
    since: Version | None = None,
    values: tuple[str, ...] = (),
    **more,
) -> FlagInfo:
    return FlagInfo(name, kind, default, meaning, pgle, since, tuple(values), **more)


_CB_VALUES = (
    "FUSION",
    "CUBLAS",
    "CUBLASLT",
    "CUDNN",
    "COLLECTIVES",
    "CONDITIONAL",
    "WHILE",
    "CUSTOM_CALL",
    "DYNAMIC_SLICE_FUSION",
    "CONVOLUTION",
    "HOST_EXECUTE",
    "COLLECTIVES_KERNEL",
)
_COLLECTIVE_OPS = (
    "NOOP",
    "ALLREDUCE",
    "ALLGATHER",
    "REDUCESCATTER",
    "COLLECTIVEBROADCAST",
    "ALLTOALL",
    "COLLECTIVEPERMUTE",
    "RAGGEDALLTOALL",
    "ALLCOLLECTIVES",
)
_PIPELINE_MODES = ("default", "off", "on", "explicit")
_PIPELINED_ALIAS = (
    "Since jax 0.11.1 a deprecated alias of --xla_gpu_pipeline_{op}: true maps to `on`, false "
    "to `default`, which follows the optimization effort: false no longer promises no "
    "pipelining there; use --xla_gpu_pipeline_{op}=off. Changes the HLO before scheduling: "
    "keep it identical in the collect and run phases."
)
_PIPELINE = (
    "Replaces --xla_gpu_enable_pipelined_{op} (jax >= 0.11.1). Pipelining changes the HLO "
    "before scheduling (and so instruction names and fingerprints): keep it identical in the "
    "collect and run phases."
)
_SAME_IN_BOTH = "Changes the HLO before scheduling: keep it identical in both phases."


def _pipelined(op: str, default: str, **more) -> FlagInfo:
    """--xla_gpu_enable_pipelined_{op}, one per collective."""
    return _f(
        f"xla_gpu_enable_pipelined_{op}",
        "bool",
        default,
        f"Pipeline {op.replace('_', '-')}s across loop iterations.",
        _PIPELINED_ALIAS.format(op=op),
        **more,
    )


def _pipeline(op: str, default: str) -> FlagInfo:
    """--xla_gpu_pipeline_{op} (jax >= 0.11.1), one per collective."""
    words = op.replace("_", "-")
    return _f(
        f"xla_gpu_pipeline_{op}",
        "enum",
        default,
        f"{words.capitalize()} pipelining: default follows the optimization effort, off "
        f"disables the pass, on considers every eligible {words}, explicit only those marked "
        "is_pipelineable.",
        _PIPELINE.format(op=op),
        since=(0, 11, 1),
        values=_PIPELINE_MODES,
        ignore_case=True,
    )


FLAGS: dict[str, FlagInfo] = {
    f.name: f
    for f in (
        _f(
            "xla_gpu_pgle_profile_file_or_directory_path",
            "string",
            "",
            "PGLE profile for the latency-hiding scheduler: one .pb/.pbtxt file for every module, or a "
            "directory holding <fingerprint>.pbtxt / <fingerprint>.pb per module.",
            "The file type comes from the extension only: since jax 0.5.1 any other extension is "
            "silently ignored. A profile handed over by auto PGLE wins over this flag. `pgle run` "
            "sets it itself.",
        ),
        _f(
            "xla_gpu_enable_latency_hiding_scheduler",
            "bool",
            "false",
            "Run the latency-hiding scheduler (overlap async collectives with compute).",
            "Needed for a profile to matter on jax <= 0.5.0; since 0.5.1 LHS runs anyway when a PGLE "
            "profile is present, at optimization level O1+, or with the speed-of-light estimator "
            "(Hopper/Blackwell, jax >= 0.7.2).",
        ),
        _f(
            "xla_gpu_pgle_accuracy_checker",
            "enum",
            "PGLE_STRICTNESS_LEVEL_WARN",
            "What XLA does when the profile misses instructions of a module: OFF says nothing, WARN "
            "logs 'Missing <N> instructions from the profile.', ERROR fails the compilation.",
            "Replaced --xla_gpu_enable_pgle_accuracy_checker in jax 0.4.36; the WARN lines are the "
            "evidence pgle reads, so OFF hides whether the profile fits.",
            since=(0, 4, 36),
            values=(
                "PGLE_STRICTNESS_LEVEL_OFF",
                "PGLE_STRICTNESS_LEVEL_WARN",
                "PGLE_STRICTNESS_LEVEL_ERROR",
            ),
        ),
        _f(
            "xla_gpu_enable_command_buffer",
            "enum_list",
            "COLLECTIVES_KERNEL,CONDITIONAL,CUBLAS,CUBLASLT,CUDNN,CUSTOM_CALL,DYNAMIC_SLICE_FUSION,"
            "FUSION",
            "Which commands XLA records into command buffers (CUDA graphs); '' turns them off, "
            "+TYPE/-TYPE edit the default list.",
            "Kernels inside a CUDA graph can be missing from a profile; auto PGLE turns command "
            "buffers off for its profiling compile and `pgle collect` for the profiling run. Replaced "
            "--xla_gpu_graph_level (removed in jax 0.7.2). The default list changes between "
            "releases (jax 0.12.0 added COLLECTIVES_KERNEL).",
            values=_CB_VALUES,
            older_defaults=(
                ((0, 5, 3), "FUSION,CUBLAS,CUSTOM_CALL,CUDNN"),
                ((0, 6, 0), "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL"),
                ((0, 8, 2), "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"),
                (
                    (0, 9, 0),
                    (
                        "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,"
                        "DYNAMIC_SLICE_FUSION,DYNAMIC_SLICE_COPY_FUSION"
                    ),
                ),
                ((0, 10, 2), ("FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION")),
                (
                    (0, 12, 0),
                    ("CONDITIONAL,CUBLAS,CUBLASLT,CUDNN,CUSTOM_CALL,DYNAMIC_SLICE_FUSION,FUSION"),
                ),
            ),
            value_since=(
                ("CONDITIONAL", (0, 4, 36)),
                ("WHILE", (0, 4, 36)),
                ("DYNAMIC_SLICE_FUSION", (0, 4, 36)),
                ("CONVOLUTION", (0, 10, 1)),
                ("HOST_EXECUTE", (0, 12, 0)),
                ("COLLECTIVES_KERNEL", (0, 12, 0)),
            ),
            old_values=(
                ("CONDITIONALS", None, (0, 4, 36)),
                ("DYNAMIC_SLICE", (0, 4, 35), (0, 4, 36)),
                ("DYNAMIC_SLICE_COPY_FUSION", (0, 7, 0), (0, 10, 2)),
            ),
        ),
        _f(
            "xla_enable_command_buffers_during_profiling",
            "bool",
            "false",
            "Keep command buffers while a profiler is active; by default XLA runs them op by op "
            "while profiling.",
            "true makes a collected profile time whole CUDA graphs instead of their kernels.",
        ),
        _f(
            "xla_gpu_experimental_dump_fdo_profiles",
            "bool",
            "false",
            "Dump the FDO (PGLE) profile each module was compiled with, as text, under --xla_dump_to.",
            "Shows exactly what XLA received, e.g. from auto PGLE.",
            since=(0, 4, 35),
        ),
        _f(
            "xla_gpu_all_reduce_combine_threshold_bytes",
            "int",
            "31457287",
            "Combine all-reduces up to this many bytes into one.",
            "Changes the HLO before scheduling, so it must be identical in the collect and run "
            "phases. The default is 30 MiB + 7 bytes since jax 0.4.35 (30 MiB before; the JAX GPU "
            "guide's '256' is wrong).",
            older_defaults=(((0, 4, 35), "31457280"),),
        ),
        _f(
            "xla_gpu_all_gather_combine_threshold_bytes",
            "int",
            "31457287",
            "Combine all-gathers up to this many bytes into one.",
            _SAME_IN_BOTH,
            older_defaults=(((0, 4, 35), "31457280"),),
        ),
        _f(
            "xla_gpu_reduce_scatter_combine_threshold_bytes",
            "int",
            "31457287",
            "Combine reduce-scatters up to this many bytes into one.",
            _SAME_IN_BOTH,
            older_defaults=(((0, 4, 35), "31457280"),),
        ),
        _f(
            "xla_gpu_collective_permute_combine_threshold_bytes",
            "int",
            "31457287",
            "Combine collective-permutes up to this many bytes into one.",
            _SAME_IN_BOTH,
            since=(0, 5, 3),
        ),
        _f(
            "xla_gpu_memory_limit_slop_factor",
            "int",
            "95",
            "Percent of device memory the latency-hiding scheduler may plan for before it trades "
            "overlap for lower memory use.",
            "Lower it if a PGLE-scheduled module runs out of memory.",
        ),
        _f(
            "xla_gpu_enable_highest_priority_async_stream",
            "bool",
            "true",
            "Give the async (collective) stream the highest priority.",
        ),
        _pipelined("all_reduce", "false"),
        _pipelined("all_gather", "false"),
        _pipelined("reduce_scatter", "true", older_defaults=(((0, 4, 35), "false"),)),
        _pipeline("all_reduce", "default"),
        _pipeline("all_gather", "default"),
        _pipeline("reduce_scatter", "on"),
        _f(
            "xla_gpu_enable_pipelined_p2p",
            "bool",
            "false",
            "Pipeline send/recv (collective-permute) across loop iterations.",
        ),
        _f(
            "xla_gpu_disable_async_collectives",
            "enum_list",
            "",
            "Collectives to run synchronously: ALLREDUCE, ALLGATHER, REDUCESCATTER, "
            "COLLECTIVEBROADCAST, ALLTOALL, COLLECTIVEPERMUTE, RAGGEDALLTOALL or ALLCOLLECTIVES.",
            "Replaced the --xla_gpu_enable_async_* flags (removed in jax 0.4.28); a synchronous "
            "collective leaves the scheduler nothing to overlap.",
            values=_COLLECTIVE_OPS,
            value_since=(("RAGGEDALLTOALL", (0, 4, 38)), ("ALLCOLLECTIVES", (0, 5, 1))),
        ),
        _f(
            "xla_gpu_enable_while_loop_double_buffering",
            "bool",
            "false",
            "Double-buffer while loops so one iteration's collectives overlap the next one's compute.",
        ),
        _f(
            "xla_gpu_experimental_pipeline_parallelism_opt_level",
            "enum",
            "PIPELINE_PARALLELISM_OPT_LEVEL_DISABLE",
            "SPMD pipeline-parallelism scheduling optimizations (the JAX GPU guide recommends ENABLE "
            "for pipelined models).",
            since=(0, 5, 1),
            values=(
                "PIPELINE_PARALLELISM_OPT_LEVEL_DISABLE",
                "PIPELINE_PARALLELISM_OPT_LEVEL_ENABLE",
            ),
            old_values=(
                ("PIPELINE_PARALLELISM_OPT_LEVEL_ENABLE_CYCLE_DECOMPOSER", None, (0, 6, 1)),
            ),
        ),
        _f(
            "xla_gpu_enable_analytical_latency_estimator",
            "bool",
            "false",
            "Use the analytical cost model instead of the default latency estimator in LHS.",
            "A PGLE profile takes precedence over it.",
        ),
        _f(
            "xla_gpu_enable_analytical_sol_latency_estimator",
            "bool",
            "true",
            "Use the speed-of-light analytical latency estimator in LHS (tunable with "
            "--xla_gpu_analytical_latency_estimator_options).",
            "With it on, LHS runs on Hopper/Blackwell even without a profile (jax >= 0.7.2); true by "
            "default since jax 0.7.2. A PGLE profile takes precedence.",
            since=(0, 5, 0),
            older_defaults=(((0, 7, 2), "false"),),
        ),
        _f(
            "xla_gpu_triton_gemm_any",
            "bool",
            "true",
            "Use the Triton GEMM emitter for any GEMM it supports.",
            "true by default since jax 0.5.1 (the JAX GPU guide's 'False' held for jaxlib 0.4.18).",
            older_defaults=(((0, 5, 1), "false"),),
        ),
        _f(
            "xla_disable_hlo_passes",
            "string",
            "",
            "Comma-separated HLO passes to skip (e.g. collective-permute-motion for pipeline "
            "parallelism).",
            _SAME_IN_BOTH,
        ),
        _f(
            "xla_gpu_autotune_level", "int", "4", "GEMM/convolution autotuning level, 0 (off) to 4."
        ),
        _f(
            "xla_dump_to",
            "string",
            "",
            "Directory for HLO dumps.",
            "The after-optimizations dump header carries fingerprint_before_lhs, the name XLA looks "
            "for in a profile directory. Dump flags are left out of the compilation-cache key.",
        ),
        _f(
            "xla_dump_latency_hiding_schedule",
            "bool",
            "false",
            "Dump the schedule the latency-hiding scheduler chose (under --xla_dump_to).",
        ),
        _f(
            "xla_force_host_platform_device_count",
            "int",
            "1",
            "Number of CPU devices XLA:CPU creates.",
            "pgle's tests use it for real collectives on CPU; XLA:CPU ignores PGLE profiles.",
        ),
        # --- new in jax 0.11 / 0.12 (XLA's help of jax 0.12.0.1) ------------------------------
        _f(
            "xla_gpu_enable_cupti_multi_subscriber",
            "bool",
            "true",
            "Use CUPTI's V2 multi-subscriber APIs for GPU profiling when available.",
            "CUPTI is what the JAX profiler (`pgle collect`) and Nsight Systems (`pgle nsys`) record "
            "kernel timings through; pgle has not seen this flag on a GPU.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes",
            "int",
            "-1",
            "Buffers of at least this many bytes are fenced by the SchedulerMemoryFencing pass "
            "before latency-hiding scheduling: -1 turns the pass off, 0 uses 1% of the scheduler's "
            "memory limit.",
            "It constrains the pre-LHS schedule the profile is applied to: keep it identical in the "
            "collect and run phases.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_experimental_scheduler_memory_fencing_slack_windows",
            "int",
            "1",
            "How many async-operation windows the users of a fenced buffer may be deferred past its "
            "last-use window in the pre-LHS schedule.",
            "Only with --xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes >= 0; keep it "
            "identical in both phases.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_experimental_parallel_scale_up_collective_overlap_limit",
            "int",
            "1",
            "How many scale-up-fabric collectives the latency-hiding scheduler may keep in flight; "
            "0 is unlimited.",
            "A limit the scheduler keeps whatever the profile's timings say.",
            since=(0, 11, 2),
        ),
        _f(
            "xla_gpu_experimental_enable_selective_memcpy_overlap",
            "bool",
            "false",
            "Let the latency-hiding scheduler overlap async device-to-device copies with "
            "compute-bound kernels.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_async_copy_min_bytes",
            "int",
            "-1",
            "Device-to-device copies of at least this many bytes become async copy-start/copy-done "
            "pairs the scheduler can overlap; -1 turns that off.",
            _SAME_IN_BOTH,
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_trace_annotation_level",
            "int",
            "0",
            "Detail of GPU trace annotations: 0 compact instruction names, 1 also detailed HLO and "
            "collective metadata in XProf annotation names (NVTX names stay compact).",
            "`pgle collect` reads instruction names from the trace; pgle has converted traces of "
            "level 0 only.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_enable_collectives_command_buffer_filter",
            "enum_list",
            "ALLCOLLECTIVES",
            "Only these collectives run inside a command buffer (when --xla_gpu_enable_command_buffer "
            "has COLLECTIVES).",
            "Kernels inside a CUDA graph can be missing from a profile.",
            since=(0, 11, 0),
            values=_COLLECTIVE_OPS,
        ),
        _f(
            "xla_gpu_experimental_use_collective_kernels",
            "enum_list",
            "COLLECTIVE_KERNEL_ALL_REDUCE",
            "Collectives that use XLA's own kernels (e.g. Triton one-shot/two-shot) instead of NCCL; "
            "+/- edit the default, names case-insensitive, the COLLECTIVE_KERNEL_ prefix optional.",
            "Changes which kernels implement the collectives a profile times.",
            since=(0, 11, 1),
            values=(
                "ALL_REDUCE",
                "ALL_GATHER",
                "REDUCE_SCATTER",
                "ALL_TO_ALL",
                "ALL_COLLECTIVES",
                "COLLECTIVE_KERNEL_ALL_REDUCE",
                "COLLECTIVE_KERNEL_ALL_GATHER",
                "COLLECTIVE_KERNEL_REDUCE_SCATTER",
                "COLLECTIVE_KERNEL_ALL_TO_ALL",
                "COLLECTIVE_KERNEL_ALL_COLLECTIVES",
            ),
            value_since=tuple(
                (v, (0, 12, 0))
                for v in (
                    "REDUCE_SCATTER",
                    "ALL_TO_ALL",
                    "ALL_COLLECTIVES",
                    "COLLECTIVE_KERNEL_REDUCE_SCATTER",
                    "COLLECTIVE_KERNEL_ALL_TO_ALL",
                    "COLLECTIVE_KERNEL_ALL_COLLECTIVES",
                )
            ),
            ignore_case=True,
        ),
        _f(
            "xla_gpu_all_reduce_splitter_ignore_profitability_check",
            "bool",
            "false",
            "Let the AllReduceSplitter rewrite all-reduce + dynamic-slice patterns even where its "
            "profitability heuristic says no.",
            _SAME_IN_BOTH,
            since=(0, 11, 1),
        ),
        _f(
            "xla_while_loop_all_reduce_dus_code_motion_max_size_bytes",
            "int",
            "10240",
            "Largest all-reduce (bytes) the while-loop all-reduce code motion pass may hoist out of "
            "a loop for dynamic-update-slice patterns.",
            _SAME_IN_BOTH,
            since=(0, 11, 1),
        ),
        _f(
            "xla_spmd_enable_dynamic_slice_collective_broadcast",
            "bool",
            "false",
            "SPMD lowering that broadcasts one dynamic slice from its sharded owner instead of "
            "all-gathering the whole operand.",
            _SAME_IN_BOTH,
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_collective_domain_assignment",
            "string",
            "",
            "Comma-separated collective communication domains to assign automatically.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_experimental_emit_collective_reduce",
            "bool",
            "false",
            "Emit a CollectiveReduceThunk for collective-reduce instructions.",
            since=(0, 12, 0),
        ),
        _f(
            "xla_enable_nccl_symmetric_buffers_for_collectives",
            "string",
            "",
            "NCCL symmetric buffer registration for some collectives and sizes "
            "(op:size:op_type or op, e.g. AllReduce:1024:F32,AllGather:2048,ReduceScatter,all).",
            since=(0, 11, 0),
        ),
        _f(
            "xla_gpu_enable_nccl_user_buffers_in_default_space",
            "bool",
            "false",
            "Register NCCL user buffers in the default space with the allocator's memory "
            "registration.",
            since=(0, 11, 0),
        ),
        _f(
            "xla_gpu_enable_persistent_symmetric_memory",
            "bool",
            "false",
            "Skip defensive copies for collective-memory parameters that alias an output and run on "
            "every device of the topology.",
            since=(0, 11, 2),
        ),
        _f(
            "xla_gpu_allow_ragged_all_to_all_nccl_send_recv_fallback",
            "bool",
            "false",
            "Let ragged all-to-all fall back to NCCL send/recv.",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_experimental_ragged_all_to_all_use_device_kernel",
            "bool",
            "false",
            "Use the device-initiated (NCCL GIN + LSA) kernel for ragged all-to-all (NCCL >= 2.29).",
            since=(0, 11, 1),
        ),
        _f(
            "xla_gpu_enable_gxl_ragged_all_to_all",
            "bool",
            "false",
            "Use the GXL library for NCCL collectives (ragged all-to-all).",
            since=(0, 11, 0),
        ),
        _f(
            "xla_gpu_gxl_scratch_size_bytes",
            "int",
            "67108864",
            "Scratch buffer size of GXL collectives, in bytes.",
            since=(0, 11, 0),
        ),
        _f(
            "xla_gpu_unsupported_use_cross_host_one_shot_kernel",
            "enum_list",
            "ALLCOLLECTIVES",
            "Collectives that use the cross-host one-shot kernel.",
            since=(0, 11, 2),
            values=_COLLECTIVE_OPS,
            older_defaults=(((0, 12, 0), ""),),
        ),
        # Issue 32: set by large public training stacks, unknown to pgle before.
        _f(
            "xla_gpu_experimental_parallel_collective_overlap_limit",
            "int",
            "1",
            "How many collectives the latency-hiding scheduler may keep in flight at once.",
            "Changes the schedule PGLE's costs are used for: keep it equal between the "
            "profiling run and the PGLE run.",
            since=(0, 4, 35),
        ),
        _f(
            "xla_gpu_command_buffer_scheduling_mode",
            "enum",
            "LHS",
            "How XLA:GPU schedules the commands of a command buffer (CUDA graph): SERIALIZE, "
            "CONCURRENT, LHS (the latency-hiding scheduler's order) or CONCURRENT_REGIONS.",
            "Kernels inside a CUDA graph can be missing from a profile (see "
            "--xla_gpu_enable_command_buffer).",
            since=(0, 7, 1),
            values=("SERIALIZE", "CONCURRENT", "LHS", "CONCURRENT_REGIONS"),
            value_since=(("CONCURRENT_REGIONS", (0, 10, 0)),),
        ),
        _f(
            "xla_gpu_enable_pipelined_host_offloading",
            "bool",
            "false",
            "Pipeline host-offloading instructions (copy-start/copy-done across loop iterations).",
            "Host copies are scheduled like collectives: pgle counts a missing "
            "copy-start/-done with them, never as compute.",
            since=(0, 8, 2),
        ),
        _f(
            "xla_gpu_nccl_termination_timeout_seconds",
            "int",
            "-1",
            "Seconds before XLA terminates a job stuck in an NCCL rendezvous (-1: never).",
        ),
    )
}
