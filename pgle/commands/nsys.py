"""`pgle nsys --cache-dir DIR [NSYS OPTIONS] -- SCRIPT [ARGS]`: the Nsight Systems run.

The JAX profiler (auto PGLE) and Nsight Systems cannot both hold CUPTI, so the
Nsight run must load the executables `pgle prewarm` cached instead of
profiling: JAX_COMPILATION_CACHE_EXPECT_PGLE=true, auto PGLE off, and exactly
the environment that produced the cache keys (from DIR/pgle-manifest.json).
JAX then says, per module (jax 0.10.2, see pgle/evidence/jax_log.py):
`PGLE-optimized <m> loaded from compilation cache` (loaded_optimized),
`PERSISTENT CACHE MISS for PGLE-optimized <m> despite non-PGLE hit` (fell_back
to the first-pass executable, which also has command buffers off), or
`PERSISTENT CACHE WRITE with key <m>-...` / a cache miss (compiled_anew).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess

import pgle.cache.manifest  # `manifest`: the prewarm run's, read from it
from pgle.cache import entries, key_rules
from pgle.cache.manifest import MANIFEST_NAME, ROLE_PLAIN, is_remote, record_keys
from pgle.commands import auto_env
from pgle.errors import BadInput, PgleError
from pgle.evidence import jax_log
from pgle.jobs.layout import LayoutRequest, RankLayout
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.redact import REDACTED
from pgle.report import Report
from pgle.verdicts import auto_pgle
from pgle.verdicts.across_ranks import JobReports, ModuleRule, combine_modules
from pgle.verdicts.auto_pgle import STATUS_LOADED
from pgle.xla import versions

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "Install NVIDIA Nsight Systems (it ships with the CUDA toolkit, and as the "
    "`nsight-systems-cli` package in NVIDIA's CUDA/devtools apt and yum repositories; "
    "downloads at https://developer.nvidia.com/nsight-systems), then put its bin/ on "
    "PATH or pass --nsys /path/to/nsys."
)

# JAX_* variables that change logging or eviction only, never a cache key; and those
# pgle sets itself in this run. Neither counts as drift.
_NOT_IN_KEY = (
    frozenset(
        {
            "JAX_LOGGING_LEVEL",
            "JAX_DEBUG_LOG_MODULES",
            "JAX_LOG_COMPILES",
            "JAX_EXPLAIN_CACHE_MISSES",
            "JAX_TRACEBACK_FILTERING",
            "JAX_COMPILATION_CACHE_MAX_SIZE",
            "JAX_COMPILATION_CACHE_DIR",
            "JAX_ENABLE_COMPILATION_CACHE",
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
            "JAX_RAISE_PERSISTENT_CACHE_ERRORS",
        }
    )
    | auto_env.PHASE_VARIABLES
)


@dataclasses.dataclass(frozen=True)
class NsysOptions:
    workload: Workload
    cache_dir: str
    nsys_options: tuple[str, ...] = ()
    nsys: str | None = None  # --nsys PATH
    launcher: str | None = None  # --launcher CMD (e.g. nsys-jax): CMD [OPTIONS] -- python ...
    force: bool = False
    require_all: bool = False
    require: tuple[str, ...] = ()
    run_dir: str | None = None
    log: str | None = None
    ranks: tuple[int, ...] | None = None  # multi-process: only these ranks run under nsys


def parse_ranks(text: str) -> tuple[int, ...]:
    """'0,8' or '0-3,8' -> (0, 8) / (0, 1, 2, 3, 8)."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                if b < a:
                    raise ValueError
                out += range(a, b + 1)
            elif part:
                out.append(int(part))
    except ValueError:
        raise BadInput(f"--ranks {text!r} is not a list of ranks like 0,8 or 0-3.") from None
    if not out or min(out) < 0:
        raise BadInput(f"--ranks {text!r} is not a list of ranks like 0,8 or 0-3.")
    return tuple(sorted(set(out)))


# Tokens in an nsys `-o` that make the report name differ between ranks: pgle's (filled in by
# pgle) and nsys's own (%q{VAR} for the launcher's rank variable, %p for the process id).
_PER_RANK_TOKENS = (
    "%r",
    "{rank}",
    "%q{SLURM_PROCID}",
    "%q{OMPI_COMM_WORLD_RANK}",
    "%q{PMI_RANK}",
    "%q{PGLE_RANK}",
    "%q{JOB_COMPLETION_INDEX}",
    "%p",
)


def per_rank_options(options: tuple[str, ...], rank: int, profiled: int) -> tuple[str, ...]:
    """nsys options with %r / {rank} in `-o` filled in; BadInput when several ranks run under
    nsys and `-o` names one file for all of them."""
    out = output_option(options)
    if out is None:
        return options  # the default report lies in each rank's run folder
    if profiled > 1 and not any(t in out for t in _PER_RANK_TOKENS):
        raise BadInput(
            f"nsys -o {out} would be written by all {profiled} profiled ranks.",
            hint="Add %r (pgle fills in the rank) or %q{SLURM_PROCID} to it, or leave "
            "-o out: each rank's report then lies in its run folder.",
        )
    filled = out.replace("%r", str(rank)).replace("{rank}", str(rank))
    result = []
    for word in options:
        if word == out:
            result.append(filled)
        elif word.endswith("=" + out) or (word.startswith("-o") and word[2:] == out):
            result.append(word[: len(word) - len(out)] + filled)
        else:
            result.append(word)
    return tuple(result)


# -- the tool -----------------------------------------------------------------------
def find_tool(opts: NsysOptions, environ: dict[str, str]) -> tuple[str, str | None]:
    """(absolute path, version line) of nsys or the --launcher; one clear error if missing."""
    name = opts.launcher or opts.nsys or "nsys"
    path = _which(name, environ)
    if path is None:
        if opts.launcher:
            raise PgleError(
                f"launcher {opts.launcher!r} was not found (not on PATH, or not an "
                "executable file).",
                hint="Pass its full path to --launcher.",
            )
        where = f"at {opts.nsys}" if opts.nsys else "on PATH"
        raise PgleError(f"nsys (NVIDIA Nsight Systems) was not found {where}.", hint=INSTALL_HINT)
    version = None
    if not opts.launcher:
        try:
            out = (
                subprocess.run([path, "--version"], capture_output=True, timeout=60, env=environ)
                .stdout.decode(errors="replace")
                .strip()
            )
            version = out.splitlines()[0] if out else None
        except (OSError, subprocess.TimeoutExpired):
            version = None
    return path, version


def _which(name: str, environ: dict[str, str]) -> str | None:
    if os.sep in name:
        return os.path.abspath(name) if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=environ.get("PATH"))


def output_option(options: tuple[str, ...]) -> str | None:
    for i, word in enumerate(options):
        if word in ("-o", "--output") and i + 1 < len(options):
            return options[i + 1]
        if word.startswith("--output="):
            return word.split("=", 1)[1]
        if word.startswith("-o") and len(word) > 2 and not word.startswith("--"):
            return word[2:]
    return None


def command_prefix(tool: str, opts: NsysOptions, run_path: str) -> tuple[list[str], str | None]:
    """The words before `python harness.py ...`, and where the report will be."""
    options = list(opts.nsys_options)
    if opts.launcher:
        out = output_option(opts.nsys_options)
        return [tool, *options, "--"], out
    out = output_option(opts.nsys_options)
    if out is None:
        # A report inside the run folder: never clobbers, always found.
        out = os.path.join(run_path, "nsys-report")
        options = ["-o", out, *options]
    report = out if out.endswith((".nsys-rep", ".qdrep")) else out + ".nsys-rep"
    return [tool, "profile", *options], os.path.abspath(report)


# -- drift ----------------------------------------------------------------------------
def resolve_cache_dir(given: str, manifest_env: dict) -> tuple[str, list[str]]:
    """The cache dir string to hand JAX, and drift sentences about it."""
    recorded = manifest_env.get("cache_path")
    norm = auto_env.normalize_cache_dir(given)
    if not recorded or norm == recorded:
        return norm, []
    if not is_remote(norm) and not is_remote(recorded):
        try:
            if os.path.samefile(norm, recorded):
                return recorded, []  # same directory, other spelling: use the recorded string
        except OSError:
            pass
    if manifest_env.get("relocatable"):
        return norm, []
    version = versions.parse_version(manifest_env.get("jax")) or versions.jax_version()
    caches = (manifest_env.get("jax_variables") or {}).get(key_rules.XLA_CACHES_VAR)
    if not key_rules.key_holds_cache_dir(version, caches):
        return norm, []  # jax 0.4.35, jax >= 0.11: the key does not hold the path
    return norm, [
        (
            f"the cache was prewarmed at {recorded} and is now at {norm}: the cache key "
            "includes the directory path (prewarm with --relocatable to allow moving it)"
        )
    ]


def drift(manifest_env: dict, environ: dict[str, str], workload: Workload) -> list[str]:
    """What differs from the prewarm run in ways that change cache keys."""
    out = []
    for package in ("jax", "jaxlib"):
        then, now = manifest_env.get(package), versions.installed(package)
        if then and now and then != now:
            out.append(f"{package} {then} prewarmed the cache, {package} {now} runs now")
    user_flags = environ.get("XLA_FLAGS")
    if user_flags is not None and user_flags.strip():
        version = versions.parse_version(manifest_env.get("jax")) or versions.jax_version()
        then_words = jax_log.key_flag_words(manifest_env.get("user_XLA_FLAGS"), version=version)
        now_words = jax_log.key_flag_words(user_flags, version=version)
        if then_words != now_words:
            out.append(
                "XLA_FLAGS differ from the prewarm run: "
                f"then {' '.join(then_words) or '(none)'}, "
                f"now {' '.join(now_words) or '(none)'}"
            )
    then_argv = sorted(manifest_env.get("argv_xla_flags") or [])
    now_argv = sorted(a for a in workload.args if a.startswith("--xla"))
    if then_argv != now_argv:
        out.append(f"the workload's --xla arguments differ: then {then_argv}, now {now_argv}")
    recorded = manifest_env.get("jax_variables") or {}
    for name in sorted(k for k in environ if k.startswith("JAX_") and k not in _NOT_IN_KEY):
        if recorded.get(name) == REDACTED:
            continue  # a secret the manifest never held (pgle.redact): nothing to compare
        if recorded.get(name) != environ[name]:
            then = recorded.get(name)
            out.append(
                f"{name}={environ[name]} is set now, "
                + (
                    f"{name}={then} in the prewarm run"
                    if then is not None
                    else "unset in the prewarm run"
                )
            )
    return out


# -- the workflow ---------------------------------------------------------------------
def request(opts: NsysOptions) -> LayoutRequest:
    return LayoutRequest(
        run_dir=opts.run_dir,
        log=opts.log,
        inputs={"cache_dir": opts.cache_dir},
        selected_ranks=opts.ranks,
    )


RULE = ModuleRule(
    STATUS_LOADED, auto_pgle.nsys_status, "nsys", "loaded PGLE-optimized", ("cache_dir", "drift")
)


def combine(opts: NsysOptions, layout: RankLayout, job: JobReports) -> Report:
    report = combine_modules(job, RULE, opts.require_all, opts.require)
    found = {
        r: (rep.get("nsys") or {}).get("report")
        for r, rep in sorted(job.reports.items())
        if (rep.get("nsys") or {}).get("profiled")
    }
    report.details["nsys_reports"] = found
    if found:
        report.summary.append(
            "Nsight Systems reports: " + ", ".join(f"rank {r}: {path}" for r, path in found.items())
        )
    return report


def body(opts: NsysOptions, layout: RankLayout, launch, environ: dict[str, str]) -> Report:
    """The Nsight run and its verdict. In a job the ranks in --ranks (all by default) run under
    nsys (layout.selected), the others in the very same environment without it."""
    auto_env.require_expect_pgle()
    given_cache = layout.input("cache_dir")
    manifest = pgle.cache.manifest.load(auto_env.normalize_cache_dir(given_cache))
    if manifest is None or not manifest.get("environment"):
        raise BadInput(
            f"{given_cache} holds no finished `pgle prewarm` (no "
            f"{MANIFEST_NAME} with an environment).",
            hint=f"Run `pgle prewarm --cache-dir {given_cache} SCRIPT` first.",
        )
    profiled = layout.selected
    menv = manifest["environment"]
    if profiled:
        opts = dataclasses.replace(
            opts, nsys_options=per_rank_options(opts.nsys_options, layout.rank, layout.n_selected)
        )
        tool, version = find_tool(opts, environ)
    else:
        tool, version = None, None
    cache_dir, path_drift = resolve_cache_dir(given_cache, menv)
    drifted = path_drift + drift(menv, environ, opts.workload)
    if drifted and not opts.force:
        raise BadInput(
            "this run would not find the prewarmed executables (cache keys would "
            "differ): " + "; ".join(drifted) + ".",
            hint="Restore the prewarm environment, prewarm again, or pass --force.",
        )
    warnings = [f"drift (--force): {d}" for d in drifted]
    present = {e.key for e in entries.list_entries(cache_dir)}
    missing = entries.manifest_keys_missing(manifest, present)
    if missing:
        warnings.append(
            "PGLE-optimized entries recorded by prewarm are gone (pruned or evicted): "
            + ", ".join(sorted({m["module"] for m in missing}))
        )
    warnings += auto_env.size_cap_warnings(environ)
    for w in warnings:
        log.warning(w)
    child = auto_env.nsys_environment(menv, environ, cache_dir)
    for line in child.notices:
        log.info(line)
    run = RunFolder.create("nsys", layout.run_dir)
    if tool is not None:  # found for the profiled ranks only
        prefix, report_path = command_prefix(tool, opts, str(run.path))
        log.info(
            f"running under {' '.join(prefix[:2])} with JAX_COMPILATION_CACHE_EXPECT_PGLE: "
            f"{opts.workload.describe()} (run folder {run.path})"
        )
    else:
        prefix, report_path = [], None
        log.info(
            f"running without nsys (--ranks {','.join(map(str, opts.ranks or ()))}) with "
            f"JAX_COMPILATION_CACHE_EXPECT_PGLE: {opts.workload.describe()} "
            f"(run folder {run.path})"
        )
    ex = launch(opts.workload, run, child, prefix=prefix, log_copy=layout.log, **auto_env.LAUNCH)
    facts = jax_log.summarize(ex.events.records)
    modules = auto_pgle.nsys_modules(facts, manifest)
    if layout.writes_shared:  # JAX writes from process 0 only
        _record_plain_writes(cache_dir, facts)
    # nsys returns the application's code; the harness saw the workload's own.
    workload_code = ex.events.exit.code if ex.events.exit else ex.exit_code
    report = Report(
        "nsys",
        auto_pgle.nsys_status(modules),
        workload_exit_code=workload_code,
        log_path=str(ex.run.log),
        run_dir=str(ex.run.path),
        modules=modules,
    )
    report.warnings += warnings + child.warnings + _backend_drift(menv, ex.events.backend_record)
    report.details.update(
        {
            "cache_dir": cache_dir,
            "nsys": {
                "path": tool,
                "version": version,
                "launcher": opts.launcher,
                "argv": prefix,
                "exit_code": ex.exit_code,
                "report": report_path,
                "profiled": profiled,
                "report_exists": report_path is not None and os.path.exists(report_path),
            },
            "drift": drifted,
            "backend": ex.events.backend_record,
        }
    )
    if not modules:
        report.reasons.append(
            "no module went through the compilation cache: is the workload using "
            "jax.jit, and did the harness start under the launcher?"
        )
    auto_env.summarize(report, RULE)
    if report_path:
        report.summary.append(f"Nsight Systems report: {report_path}")
    report.exit_code = auto_env.finish_code(
        report, ex, STATUS_LOADED, opts.require_all, opts.require
    )
    return report


def _backend_drift(menv: dict, backend: dict | None) -> list[str]:
    if not backend:
        return []
    out = []
    for field in ("platform", "device_kind", "device_count"):
        then, now = menv.get(field), backend.get(field)
        if then is not None and now is not None and then != now:
            out.append(f"prewarm ran with {field} {then}, this run with {now}: cache keys differ")
    return out


def _record_plain_writes(cache_dir: str, facts: jax_log.RunFacts) -> None:
    """Entries JAX wrote in this run were compiled without PGLE: `pgle cache ls` shows them as
    plain."""
    written = {name: m.writes for name, m in facts.modules.items() if m.writes}
    if not written:
        return

    def change(data: dict) -> None:
        for name, keys in written.items():
            record_keys(data, name, ROLE_PLAIN, keys)

    pgle.cache.manifest.update(cache_dir, change)
