"""The child environments of the auto-PGLE family, in one place: `pgle auto` (auto PGLE on),
`pgle prewarm` (auto PGLE and a persistent cache that keeps every module) and `pgle nsys` (the
prewarm environment replayed, PGLE-optimized entries expected, auto PGLE off), with what the
harness captures for their verdicts and the checks made before their launch.
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import TYPE_CHECKING

from pgle.cache import key_rules, manifest
from pgle.commands.options import AutoPgleOptions
from pgle.errors import BadInput
from pgle.evidence import jax_log
from pgle.evidence.events import workload_exit_phrase
from pgle.launch import childenv
from pgle.launch.workload import Workload
from pgle.redact import REDACTED
from pgle.report import Report
from pgle.verdicts import auto_pgle
from pgle.verdicts.across_ranks import ModuleRule
from pgle.verdicts.rows import module_lines
from pgle.xla import flag_table, versions

if TYPE_CHECKING:
    from pgle.launch.execution import Execution

# What the harness must capture for the verdicts of auto, prewarm and nsys.
CAPTURE_LOGGERS = list(jax_log.CAPTURE_LOGGERS)
WARNINGS_ALWAYS = list(jax_log.WARNING_CATEGORIES)
# How the three launch (pgle nsys adds its prefix): no per-call work their verdicts do not need.
LAUNCH = {
    "capture_loggers": CAPTURE_LOGGERS,
    "warnings_always": WARNINGS_ALWAYS,
    "count_jits": False,
}
# auto and prewarm: auto PGLE's sessions observed, progress shown.
AUTO_PGLE_LAUNCH = {**LAUNCH, "observe_pgle": True, "progress": True}

# Variables pgle sets differently in the Nsight run; never part of the replayed environment.
PHASE_VARIABLES = frozenset(
    {
        "JAX_ENABLE_PGLE",
        "JAX_PGLE_PROFILING_RUNS",
        "JAX_PGLE_AGGREGATION_PERCENTILE",
        "JAX_COMPILATION_CACHE_EXPECT_PGLE",
    }
)


def percentile_index(runs: int, percentile: int) -> int:
    """The sorted position jaxlib's aggregate_profiled_instructions picks: int(p/100*(n-1))."""
    return int(percentile / 100 * (runs - 1))


def check_pgle_params(runs: int, percentile: int) -> list[str]:
    """Refuse values JAX would silently turn into no PGLE (AutoPgleOptions); warn on
    degenerate ones."""
    AutoPgleOptions(runs, percentile)
    warnings = []
    index = percentile_index(runs, percentile)
    if runs >= 2 and index == 0 and percentile > 0:
        warnings.append(
            f"with --runs {runs}, --percentile {percentile} picks the fastest of the {runs} "
            f"profiled executions for every instruction "
            f"(index int({percentile}/100*{runs - 1}) = 0); use --runs {_runs_for(percentile)} "
            "or more, or --percentile 100, for a real percentile."
        )
    return warnings


def _runs_for(percentile: int) -> int:
    n = 2
    while percentile > 0 and percentile_index(n, percentile) == 0 and n < 100:
        n += 1
    return n


_AOT_LOWER = re.compile(r"\.lower\(")
_AOT_COMPILE = re.compile(r"\.compile\(")
_AOT_DESERIALIZE = re.compile(r"deserialize_and_load|deserialize_executable")


def aot_sites(workload: Workload) -> list[str]:
    """Lines of the script that compile ahead of time (auto PGLE never re-optimizes those).

    A plain-text scan of the script only (never importing the user's code).
    """
    path = workload.script
    if path is None and workload.module and "." not in workload.module:
        candidate = os.path.join(os.getcwd(), workload.module + ".py")
        path = candidate if os.path.isfile(candidate) else None
    if not path:
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    text = "\n".join(lines)
    sites = []
    if _AOT_LOWER.search(text):
        sites += [
            f"{os.path.basename(path)}:{i}: {line.strip()}"
            for i, line in enumerate(lines, 1)
            if _AOT_COMPILE.search(line) and not line.lstrip().startswith("#")
        ]
    sites += [
        f"{os.path.basename(path)}:{i}: {line.strip()}"
        for i, line in enumerate(lines, 1)
        if _AOT_DESERIALIZE.search(line) and not line.lstrip().startswith("#")
    ]
    return sites


def pgle_variables(runs: int, percentile: int) -> dict[str, str]:
    return {
        "JAX_ENABLE_PGLE": "true",
        "JAX_PGLE_PROFILING_RUNS": str(runs),
        "JAX_PGLE_AGGREGATION_PERCENTILE": str(percentile),
    }


def pgle_xla_flags() -> dict[str, str | None]:
    """jax <= 0.5.0 runs the latency-hiding scheduler only when asked, profile or not."""
    return {flag_table.LHS: "true"} if versions.needs_lhs_flag(versions.jax_version()) else {}


def pre_launch_warnings(workload: Workload, runs: int, percentile: int) -> list[str]:
    warnings = check_pgle_params(runs, percentile)
    sites = aot_sites(workload)
    if sites:
        warnings.append(
            "the workload compiles ahead of time (`.lower(...).compile()` or a "
            "deserialized executable); auto PGLE never profiles or re-optimizes those "
            "executables: " + "; ".join(sites[:3]) + (" ..." if len(sites) > 3 else "")
        )
    return warnings


def summarize(report: Report, rule: ModuleRule, where: str = "") -> None:
    """The verdict's line (`auto PGLE: optimized: 2 of 3 modules optimized`), then a line per
    module."""
    count = auto_pgle.count_line(report.modules, rule.ok, rule.what)
    report.summary.append(f"{rule.headline}: {report.status}: {count}{where}")
    report.summary += module_lines(report.modules)


def finish_code(
    report: Report, ex: Execution, ok: str, require_all: bool, require: tuple[str, ...]
) -> int:
    """The exit code: the workload's own failure first, as its events tell it; then
    --require-all / --require (pgle.verdicts.auto_pgle.finish_code)."""
    phrase = workload_exit_phrase(ex.exit_code, ex.events, command=ex.spec.command_mode)
    return auto_pgle.finish_code(report, ex.exit_code, ok, require_all, require, phrase)


# -- the cache (prewarm, nsys) ---------------------------------------------------------
def require_expect_pgle(consequence: str = "") -> None:
    """prewarm and nsys need JAX_COMPILATION_CACHE_EXPECT_PGLE (jax >= 0.5.1)."""
    if not versions.supports_expect_pgle(versions.jax_version()):
        raise BadInput(
            f"jax {versions.installed('jax')} has no JAX_COMPILATION_CACHE_EXPECT_PGLE "
            f"(added in jax 0.5.1){consequence}; upgrade jax."
        )


def normalize_cache_dir(path: str) -> str:
    """The exact string JAX gets: absolute, user-expanded, no trailing '/'; URLs untouched."""
    if manifest.is_remote(path):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def cache_variables(cache_dir: str, relocatable: bool) -> dict[str, str]:
    variables = {
        "JAX_ENABLE_COMPILATION_CACHE": "true",
        "JAX_COMPILATION_CACHE_DIR": cache_dir,
        # Write every module, however fast it compiled or small it is (defaults: 1 s, and
        # a filesystem-dependent minimum size; -1 also stops JAX overriding it).
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
    }
    if relocatable:
        # Only where the key holds the cache path (jax 0.4.36-0.10.2): XLA's autotune cache
        # then goes off; jax >= 0.11 keeps it (pgle.cache.key_rules).
        variables.update(key_rules.relocatable_variables(versions.jax_version()))
    return variables


def size_cap_warnings(environ: dict[str, str]) -> list[str]:
    cap = environ.get("JAX_COMPILATION_CACHE_MAX_SIZE", "").strip()
    if not cap or cap == "-1":
        return []
    out = [
        (
            f"JAX_COMPILATION_CACHE_MAX_SIZE={cap} caps the cache: JAX evicts the least "
            "recently used entries, PGLE-optimized ones included, so they may be gone before the "
            "Nsight run; unset it (or -1) for the prewarm and Nsight runs."
        )
    ]
    if cap == "0":
        out.append("JAX_COMPILATION_CACHE_MAX_SIZE=0 disables the cache: nothing will be written.")
    if importlib.util.find_spec("filelock") is None:
        out.append(
            "a size-capped cache needs the `filelock` package, which is not installed: JAX "
            "warns once and then uses no cache at all (pip install filelock)."
        )
    return out


def replay_environment(
    child_env: dict[str, str],
    user_env: dict[str, str],
    cache_dir: str,
    workload: Workload,
    relocatable: bool,
) -> dict:
    """What `pgle nsys` must reproduce for every cache key to match."""
    jax_vars = {
        k: v
        for k, v in sorted(child_env.items())
        if k.startswith("JAX_") and k not in PHASE_VARIABLES
    }
    return {
        "XLA_FLAGS": child_env.get("XLA_FLAGS", ""),
        "user_XLA_FLAGS": user_env.get("XLA_FLAGS", ""),
        "jax_variables": jax_vars,
        "user_jax_variables": {k: v for k, v in sorted(user_env.items()) if k.startswith("JAX_")},
        "argv_xla_flags": [a for a in workload.args if a.startswith("--xla")],
        "LIBTPU_INIT_ARGS": child_env.get("LIBTPU_INIT_ARGS"),
        "jax": versions.installed("jax"),
        "jaxlib": versions.installed("jaxlib"),
        "cache_path": cache_dir,
        "relocatable": relocatable,
        "device_kind": None,
        "device_count": None,
        "platform": None,
        "process_count": None,
    }


def nsys_environment(manifest_env: dict, environ: dict[str, str], cache_dir: str):
    """The prewarm environment replayed, with EXPECT_PGLE on and auto PGLE off."""
    environ = dict(environ)
    if not (environ.get("XLA_FLAGS") or "").strip() and manifest_env.get("user_XLA_FLAGS"):
        environ["XLA_FLAGS"] = manifest_env["user_XLA_FLAGS"]
    variables = {
        **cache_variables(cache_dir, False),
        "JAX_COMPILATION_CACHE_EXPECT_PGLE": "true",
        "JAX_ENABLE_PGLE": "false",
    }
    defaults = {
        k: v
        for k, v in (manifest_env.get("jax_variables") or {}).items()
        if k not in variables and v != REDACTED
    }
    return childenv.build(environ, xla=pgle_xla_flags(), variables=variables, defaults=defaults)
