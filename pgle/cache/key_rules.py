"""What JAX's persistent-cache key holds, per jax version (read in each version's
jax/_src/cache_key.py, compiler.py and config.py, in the lane's venvs, 2026-11-25).

- The XLA_FLAGS words that never enter the key (`xla_flags_to_exclude_from_cache_key`): 21
  flags in jax 0.4.35; 0.4.36-0.10.2 add `--xla_gpu_experimental_autotune_cache_mode` and two
  TPU SDC-checker flags (24); jax >= 0.11 adds `--xla_gpu_per_fusion_autotune_cache_dir` and
  `--xla_tpu_compiler_variant` (26).
- The cache directory: since jax 0.4.36 the persistent cache turns XLA's own caches on inside
  it (`JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES`, default `xla_gpu_per_fusion_autotune_cache_dir`;
  `all` adds `xla_gpu_kernel_cache_file`), whose paths land in the compile options the key
  hashes. jax <= 0.10.2 hashes the autotune path; jax >= 0.11 clears it from the key (and only
  the kernel cache file, when turned on, still holds the path). jax 0.4.35 has no such option:
  its key never held the directory.
"""

from __future__ import annotations

Version = tuple[int, ...]

XLA_CACHES_VAR = "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"
AUTOTUNE_CACHE = "xla_gpu_per_fusion_autotune_cache_dir"
KERNEL_CACHE = "xla_gpu_kernel_cache_file"
XLA_CACHES_SINCE = (0, 4, 36)
AUTOTUNE_PATH_NOT_IN_KEY_SINCE = (0, 11, 0)

_BASE = frozenset(
    (
        "xla_dump_compress_protos",
        "xla_dump_module_metadata",
        "xla_dump_max_hlo_modules",
        "xla_dump_include_timestamp",
        "xla_dump_hlo_pass_re",
        "xla_dump_hlo_module_re",
        "xla_dump_hlo_snapshots",
        "xla_dump_fusion_visualization",
        "xla_dump_hlo_as_url",
        "xla_dump_hlo_as_proto",
        "xla_dump_hlo_as_text",
        "xla_dump_hlo_as_long_text",
        "xla_dump_hlo_as_html",
        "xla_dump_hlo_as_dot",
        "xla_dump_to",
        "xla_force_host_platform_device_count",
        "xla_dump_disable_metadata",
        "xla_dump_hlo_pipeline_re",
        "xla_tpu_sdc_checker_streamz_metric",
        "xla_tpu_sdc_checker_enable_sdc_event_callbacks",
        "xla_gpu_cuda_data_dir",
    )
)
_SINCE_0_4_36 = _BASE | {
    "xla_tpu_sdc_checker_enable_coresweep_ng_callbacks",
    "xla_tpu_sdc_checker_no_logging_if_callbacks_are_present",
    "xla_gpu_experimental_autotune_cache_mode",
}
_SINCE_0_11 = _SINCE_0_4_36 | {"xla_gpu_per_fusion_autotune_cache_dir", "xla_tpu_compiler_variant"}


def key_excluded_flags(version: Version | None) -> frozenset[str]:
    """Flag names (without dashes) that never enter the key; unknown versions count as new."""
    if version is None or version >= AUTOTUNE_PATH_NOT_IN_KEY_SINCE:
        return _SINCE_0_11
    return _SINCE_0_4_36 if version >= XLA_CACHES_SINCE else _BASE


def key_holds_cache_dir(version: Version | None, xla_caches: str | None) -> bool:
    """Whether the key depends on the cache directory's path string (so a moved cache misses).

    `xla_caches`: JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES as the run had it (None: unset)."""
    if version is not None and version < XLA_CACHES_SINCE:
        return False
    value = (AUTOTUNE_CACHE if xla_caches is None else xla_caches).strip()
    kernel = value == "all" or KERNEL_CACHE in value
    autotune = value == "all" or AUTOTUNE_CACHE in value
    if version is None or version >= AUTOTUNE_PATH_NOT_IN_KEY_SINCE:
        return kernel
    return kernel or autotune


def relocatable_variables(version: Version | None) -> dict[str, str]:
    """What `pgle prewarm --relocatable` must set so the cache may move: nothing where the key
    does not hold the path by default (jax 0.4.35, jax >= 0.11: XLA's autotune cache stays
    on); XLA's caches off otherwise."""
    if not key_holds_cache_dir(version, None):
        return {}
    return {XLA_CACHES_VAR: "none"}
