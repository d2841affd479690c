"""`pgle doctor`: what would make a PGLE job fail silently, found before launch.

Each check says what it found, whether that is ok, a warning or an error, and
what to do. jax is imported only in a child process with a timeout, so a broken
CUDA install can neither hang nor kill the doctor. `explain_flags` is the
per-flag half of the XLA_FLAGS check, used by `pgle flags explain` too.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pgle.errors import EXIT_ERROR, EXIT_OK, FlagError, PgleError
from pgle.launch.probe import backend_info, cupti_trace
from pgle.phrases import plural
from pgle.report import Report
from pgle.units import human_bytes
from pgle.verdicts.statuses import Optimized
from pgle.xla import flag_probe, flag_table, versions
from pgle.xla.env import NotABoolean, bool_env
from pgle.xla.flags import XlaFlags

WORKFLOWS = ("manual", "auto", "prewarm", "nsys")
NSYS_TIMEOUT_S = 15.0
# pgle's own floor, not NVIDIA's: older Nsight Systems predate the CUDA 12.x
# runtimes that jax's CUDA 12 wheels ship.
NSYS_MIN = (2024, 1)
CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")
GPU_DEVICE_FILES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")  # as jax's hardware_utils


@dataclasses.dataclass
class Check:
    check: str
    status: str  # ok | warn | error
    found: str
    todo: str = ""


def _ok(check, found, todo=""):
    return Check(check, "ok", found, todo)


def _warn(check, found, todo):
    return Check(check, "warn", found, todo)


def _error(check, found, todo):
    return Check(check, "error", found, todo)


@dataclasses.dataclass
class Context:
    """What every check reads: the workflow, the environment, and what is installed."""

    workflow: str
    environ: dict[str, str]
    cache_dir: str | None
    jax: tuple[int, ...] | None
    gpu_visible: bool
    plugins: dict[str, str]  # installed CUDA plugin packages -> version

    @classmethod
    def detect(
        cls,
        workflow: str = "manual",
        environ: dict[str, str] | None = None,
        cache_dir: str | None = None,
    ) -> Context:
        if workflow not in WORKFLOWS:
            from pgle.errors import BadInput

            raise BadInput(f"unknown workflow {workflow!r}: use one of {', '.join(WORKFLOWS)}.")
        return cls(
            workflow,
            dict(os.environ if environ is None else environ),
            cache_dir,
            versions.jax_version(),
            any(os.path.exists(p) for p in GPU_DEVICE_FILES),
            {p: v for p in CUDA_PLUGINS if (v := versions.installed(p))},
        )


def doctor(
    workflow: str = "manual",
    cache_dir: str | None = None,
    probe: bool = False,
    environ: dict[str, str] | None = None,
) -> Report:
    ctx = Context.detect(workflow, environ, cache_dir)
    environ = ctx.environ
    # The slow parts (the jax child, nsys, the probe) run while the rest is checked.
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        backend = pool.submit(backend_info, environ)
        nsys = pool.submit(nsys_info, environ)
        probed = (
            pool.submit(flag_probe.probe, environ.get("XLA_FLAGS"), environ=environ)
            if probe and environ.get("XLA_FLAGS")
            else None
        )
        python = _ok("python", f"{sys.version.split()[0]} ({sys.executable})")
        checks = [python, *jax_checks(ctx), workflow_check(ctx)]
        flags, hazards, cache = flag_checks(ctx), hazard_checks(ctx), cache_checks(ctx)
        info = backend.result()
        # --probe: a one-second trace, only where a GPU backend could be traced.
        traced = (
            pool.submit(cupti_trace, environ)
            if probe and info.get("platform") in ("gpu", "cuda")
            else None
        )
        checks += [
            *backend_checks(ctx, info),
            cuda_plugin_check(ctx),
            cupti_check(ctx),
            nsys_check(ctx, nsys.result()),
            *flags,
        ]
        if probe:
            checks += probe_checks(probed.result() if probed else None)
            checks.append(cupti_trace_check(info, traced.result() if traced else None))
        checks += [*hazards, *cache]
    return _report("doctor", checks, {"workflow": workflow})


def _report(command: str, checks: list[Check], details: dict) -> Report:
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "error")}
    status = "error" if counts["error"] else "warn" if counts["warn"] else "ok"
    report = Report(command, status, exit_code=EXIT_ERROR if counts["error"] else EXIT_OK)
    report.details.update(details)
    report.details["checks"] = [dataclasses.asdict(c) for c in checks]
    report.reasons = [f"{c.check}: {c.found}" for c in checks if c.status == "error"]
    label = f"{command} ({details['workflow']})" if "workflow" in details else command
    report.summary = [
        (
            f"{label}: {counts['ok']} ok, {plural(counts['warn'], 'warning')}, "
            f"{plural(counts['error'], 'error')}"
        )
    ]
    return report


# --- python, jax, workflows ----------------------------------------------------


def jax_checks(ctx: Context) -> list[Check]:
    jax, jaxlib = versions.installed("jax"), versions.installed("jaxlib")
    if jax is None:
        return [_error("jax", "jax is not installed", "pip install -U 'jax[cuda12]'")]
    if jaxlib is None:
        return [_error("jax", f"jax {jax}, but no jaxlib", "pip install -U 'jax[cuda12]'")]
    found = f"jax {jax}, jaxlib {jaxlib}"
    if not versions.at_least(ctx.jax, flag_table.OLDEST_SUPPORTED_JAX):
        return [
            _error(
                "jax",
                found,
                f"pgle needs jax >= "
                f"{versions.version_string(flag_table.OLDEST_SUPPORTED_JAX)}: "
                "pip install -U 'jax[cuda12]'",
            )
        ]
    if versions.parse_version(jaxlib) != versions.parse_version(jax):
        return [_warn("jax", found, "install matching versions: pip install -U 'jax[cuda12]'")]
    return [_ok("jax", found)]


def workflow_check(ctx: Context) -> Check:
    v = ctx.jax
    manual = (
        "manual: yes (pgle adds --xla_gpu_enable_latency_hiding_scheduler=true, needed "
        "up to jax 0.5.0)"
        if versions.needs_lhs_flag(v)
        else "manual: yes"
    )
    expect = versions.supports_expect_pgle(v)
    found = f"{manual}; auto: yes; prewarm/nsys: {'yes' if expect else 'no (needs jax >= 0.5.1)'}"
    if ctx.workflow in ("prewarm", "nsys") and not expect:
        return _error(
            "workflows",
            found,
            "JAX_COMPILATION_CACHE_EXPECT_PGLE needs jax >= 0.5.1: pip install -U 'jax[cuda12]'",
        )
    return _ok("workflows", found)


# --- backend, CUDA plugin, CUPTI, nsys -------------------------------------------


def backend_checks(ctx: Context, info: dict) -> list[Check]:
    if "error" in info:
        platforms = ctx.environ.get("JAX_PLATFORMS")
        if platforms:
            return [
                _error(
                    "backend",
                    f"{info['error']} (with JAX_PLATFORMS={platforms!r})",
                    "unset JAX_PLATFORMS, or install what it names",
                )
            ]
        return [
            _error(
                "backend",
                info["error"],
                "run `python -c 'import jax; print(jax.devices())'` to see the full error",
            )
        ]
    kinds = ", ".join(info.get("kinds", []))
    found = f"{info['platform']}: {info['count']} x {kinds}"
    version = info.get("platform_version", "")
    if info["platform"] == "gpu" and "rocm" in version.lower():
        return [_warn("backend", found + " (ROCm)", "pgle is built for NVIDIA GPUs; expect gaps")]
    if info["platform"] == "gpu":
        return [_ok("backend", found)]
    cuda_error = info.get("backend_errors", {}).get("cuda")
    if ctx.gpu_visible:
        why = f" (cuda: {cuda_error[:200]})" if cuda_error else ""
        return [
            _error(
                "backend",
                f"{found}, but an NVIDIA GPU is visible{why}",
                "install the CUDA plugin matching jaxlib: pip install -U 'jax[cuda12]'",
            )
        ]
    return [
        _warn(
            "backend",
            f"{found}; no NVIDIA GPU visible",
            "PGLE has no effect off NVIDIA GPUs (profiles come out empty); run on a GPU node",
        )
    ]


def cuda_plugin_check(ctx: Context) -> Check:
    jaxlib = versions.installed("jaxlib")
    if not ctx.plugins:
        if ctx.gpu_visible:
            return _error(
                "cuda plugin",
                "none installed, but an NVIDIA GPU is visible",
                "pip install -U 'jax[cuda12]' (or jax[cuda13])",
            )
        return _warn(
            "cuda plugin",
            "none installed (jax runs on CPU only)",
            "on a GPU node: pip install -U 'jax[cuda12]'",
        )
    found = ", ".join(f"{p} {v}" for p, v in ctx.plugins.items())
    mismatched = [
        p
        for p, v in ctx.plugins.items()
        if versions.parse_version(v) != versions.parse_version(jaxlib)
    ]
    if mismatched:
        return _warn(
            "cuda plugin",
            f"{found}; jaxlib {jaxlib}",
            "versions must match jaxlib: pip install -U 'jax[cuda12]'",
        )
    if {p.split("-")[1] for p in ctx.plugins} == {"cuda12", "cuda13"}:
        return _warn("cuda plugin", found, "uninstall one CUDA major version's plugin")
    return _ok("cuda plugin", found)


def find_cupti(environ: dict[str, str]) -> tuple[list[str], list[str]]:
    """libcupti.so* the dynamic loader can find (NVIDIA's wheels, which jax preloads,
    LD_LIBRARY_PATH, the ldconfig cache), and copies it cannot (a toolkit's extras/)."""
    loadable: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        loadable += [Path(root, "cuda_cupti", "lib"), Path(root, "cu13", "lib")]
    loadable += [Path(d) for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    elsewhere = [
        Path(environ[v], "extras", "CUPTI", "lib64")
        for v in ("CUDA_HOME", "CUDA_PATH")
        if environ.get(v)
    ] + [Path("/usr/local/cuda/extras/CUPTI/lib64")]
    found = _glob_cupti(loadable) + _ldconfig_cupti(environ)
    return list(dict.fromkeys(found)), [p for p in _glob_cupti(elsewhere) if p not in found]


def _glob_cupti(dirs: list[Path]) -> list[str]:
    out = []
    for d in dirs:
        try:
            out += sorted(str(p) for p in d.glob("libcupti.so*"))
        except OSError:
            continue
    return out


def _ldconfig_cupti(environ: dict[str, str]) -> list[str]:
    ldconfig = shutil.which("ldconfig", path=environ.get("PATH", "")) or "/sbin/ldconfig"
    try:
        out = subprocess.run(
            [ldconfig, "-p"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.rsplit("=>", 1)[-1].strip() for ln in out.splitlines() if "libcupti.so" in ln]


def cupti_check(ctx: Context) -> Check:
    libs, elsewhere = find_cupti(ctx.environ)
    # XLA opens libcupti.so.<CUDA major> of the plugin it was built for.
    majors = sorted({p.split("-")[1][4:] for p in ctx.plugins})
    missing = [
        m for m in majors if not any(Path(p).name.startswith(f"libcupti.so.{m}") for p in libs)
    ]
    todo = (
        "pip install -U 'jax[cuda12]' (brings nvidia-cuda-cupti-cu12) or add the CUDA "
        "toolkit's extras/CUPTI/lib64 to LD_LIBRARY_PATH"
    )
    if libs and not missing:
        more = f" (+{len(libs) - 1} more)" if len(libs) > 1 else ""
        return _ok("cupti", libs[0] + more)
    if elsewhere and not libs:
        return _warn(
            "cupti",
            f"{elsewhere[0]} exists but the loader will not find it",
            f"export LD_LIBRARY_PATH={Path(elsewhere[0]).parent}:$LD_LIBRARY_PATH",
        )
    what = (
        f"no libcupti.so.{'/'.join(missing)} for the installed CUDA plugin"
        if libs
        else "libcupti.so not found"
    )
    if ctx.plugins or ctx.gpu_visible:
        return _error("cupti", f"{what}: the JAX profiler cannot time GPU kernels", todo)
    return _warn("cupti", f"{what} (needed on GPU nodes only)", todo)


def cupti_trace_check(backend: dict, traced: dict | None) -> Check:
    """`--probe`: did a one-second JAX trace of this GPU hold device events PGLE can use
    (pgle.launch.probe.cupti_trace)? Another CUPTI client (DCGM's profiling module, Nsight,
    another profiler) makes every trace come back empty."""
    name = "cupti trace"
    platform = backend.get("platform")
    if traced is None:
        why = (
            f"backend {platform}"
            if platform
            else f"no jax backend ({backend.get('error') or 'unknown'})"
        )
        return _ok(
            name,
            f"not applicable: {why}: CUPTI traces NVIDIA GPUs only; the JAX "
            "profiler records no device events here, so there is nothing to probe",
        )
    if traced.get("error"):
        return _error(
            name,
            f"the one-second trace failed: {traced['error']}",
            "run `pgle doctor --probe` on a GPU node with nothing else attached",
        )
    lines = traced.get("cupti_lines") or []
    if traced.get("profile_bytes"):
        return _ok(
            name,
            f"a one-second trace of {traced.get('executions')} matmuls held device "
            f"events ({traced['profile_bytes']}-byte PGLE profile)",
        )
    said = f" (XLA: {lines[0]})" if lines else ""
    return _error(
        name,
        f"a one-second trace of {traced.get('executions')} matmuls held no "
        f"device events{said}: another CUPTI client holds the GPU (DCGM's "
        "profiling module, Nsight Systems/Compute, another profiler), so every "
        "PGLE profile will be empty",
        "stop it for the profiled run (e.g. `dcgmi profile --pause`; exit nsys), "
        "then rerun `pgle doctor --probe`",
    )


def nsys_info(environ: dict[str, str]) -> dict:
    path = shutil.which("nsys", path=environ.get("PATH", ""))
    if path is None:
        return {}
    try:
        proc = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=NSYS_TIMEOUT_S,
            env=environ,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"path": path, "error": f"`nsys --version` did not answer in {NSYS_TIMEOUT_S:g} s"}
    except OSError as e:
        return {"path": path, "error": f"cannot run it: {e.strerror}"}
    m = re.search(r"(\d{4})\.(\d+)(?:\.\d+)*", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not m:
        return {
            "path": path,
            "error": f"`nsys --version` printed no version (exit code {proc.returncode})",
        }
    return {"path": path, "version": m.group(0), "tuple": (int(m.group(1)), int(m.group(2)))}


def nsys_check(ctx: Context, info: dict) -> Check:
    needed = ctx.workflow == "nsys"
    if not info:
        if needed:
            return _error(
                "nsys",
                "not on PATH",
                "install Nsight Systems (e.g. apt install "
                "nsight-systems-cli) and put its bin/ on PATH",
            )
        return _ok("nsys", "not on PATH (only `pgle nsys` needs it)")
    if "error" in info:
        check = _error if needed else _warn
        return check("nsys", f"{info['path']}: {info['error']}", "reinstall Nsight Systems")
    found = f"{info['version']} ({info['path']})"
    if tuple(info["tuple"]) < NSYS_MIN:
        return _warn(
            "nsys", found + " is old", f"update to Nsight Systems >= {NSYS_MIN[0]}.{NSYS_MIN[1]}"
        )
    return _ok("nsys", found)


# --- XLA_FLAGS ---------------------------------------------------------------


def explain_flags(text: str | None, *, probe: bool = False) -> Report:
    """`pgle flags explain`: each flag's meaning and status; removed or rejected ones are errors."""
    flags = XlaFlags.parse(text)  # FlagError (exit 2) for an unreadable file of flags
    rows = flag_table.explain_all(flags.flags, versions.jax_version())
    result = None
    if probe and text:
        result = flag_probe.probe(text)
        verdicts = {v.name: v for v in result.verdicts}
        for r in rows:
            v = verdicts.get(r["name"])
            if v and v.status in ("unknown", "bad_value"):
                r.update(
                    status="error",
                    message=f"rejected by jaxlib {result.jaxlib_version}: {v.message}",
                )
            elif v and v.status == "accepted" and r["status"] == "unknown":
                r.update(status="ok", message=f"accepted by jaxlib {result.jaxlib_version}")
    report = Report("flags", "ok")
    report.details.update(
        flags=rows,
        ignored_tail=flags.ignored_tail or None,
        source_file=flags.source_file,
        jax_version=versions.installed("jax"),
        probe=result.to_dict() if result else None,
    )
    if flags.ignored_tail:
        report.warnings.append(
            f"XLA stops reading at {flags.ignored_tail.split()[0]!r}: "
            f"everything from there on is ignored"
        )
    if result and result.error:
        report.warnings.append(f"probe failed: {result.error}")
    errors = [r for r in rows if r["status"] == "error"]
    if errors:
        report.status, report.exit_code = "error", EXIT_ERROR
        report.reasons = [f"{r['flag']}: {r['message']}" for r in errors]
    elif report.warnings or any(r["status"] == "warn" for r in rows):
        report.status = "warn"
    report.summary = [
        (
            f"{plural(len(rows), 'flag')}: {plural(len(errors), 'error')}, "
            f"{plural(sum(r['status'] == 'warn' for r in rows), 'warning')}, "
            f"{sum(r['status'] == 'unknown' for r in rows)} not in pgle's table"
        )
    ]
    return report


def flag_checks(ctx: Context) -> list[Check]:
    text = ctx.environ.get("XLA_FLAGS")
    if not text:
        return [_ok("XLA_FLAGS", "unset")]
    try:
        flags = XlaFlags.parse(text)
    except FlagError as e:
        return [_error("XLA_FLAGS", e.message, e.hint or "")]
    rows = flag_table.explain_all(flags.flags, ctx.jax)
    checks = []
    for r in rows:
        if r["status"] == "error":
            checks.append(
                _error(
                    "XLA_FLAGS",
                    f"{r['flag']}: {r['message']}",
                    "remove or fix it: every process of the job would abort",
                )
            )
        elif r["status"] == "warn":
            checks.append(
                _warn(
                    "XLA_FLAGS",
                    f"{r['flag']}: {r['message']}",
                    f"see `pgle flags explain` for --{r['name']}",
                )
            )
    if flags.ignored_tail:
        checks.append(
            _warn(
                "XLA_FLAGS",
                f"XLA stops reading at {flags.ignored_tail.split()[0]!r}; the rest is ignored",
                "start every flag with '--'",
            )
        )
    unknown = sum(r["status"] == "unknown" for r in rows)
    src = f" (from file {flags.source_file})" if flags.source_file else ""
    if not checks:
        found = f"{plural(len(rows), 'flag')}{src}"
        found += f", {unknown} not in pgle's table" if unknown else ""
        checks.append(
            _ok(
                "XLA_FLAGS",
                found,
                "`pgle doctor --probe` asks jaxlib about the rest" if unknown else "",
            )
        )
    return checks


def probe_checks(result: flag_probe.ProbeResult | None) -> list[Check]:
    if result is None:
        return [_ok("probe", "XLA_FLAGS unset: nothing to ask jaxlib")]
    if result.error:
        return [_error("probe", result.error, "fix XLA_FLAGS, then rerun with --probe")]
    rejected = result.rejected()
    if not rejected:
        return [
            _ok(
                "probe",
                f"jaxlib {result.jaxlib_version} accepted all "
                f"{plural(len(result.verdicts), 'flag')}",
            )
        ]
    return [
        _error(
            "probe",
            f"jaxlib {result.jaxlib_version} rejects {v.flag}: {v.message}",
            "remove or fix it: every process of the job would abort",
        )
        for v in rejected
    ]


# --- environment hazards -------------------------------------------------------


def _bool_env(environ: dict[str, str], name: str) -> bool | None | str:
    """True/False as jax reads the variable (pgle.xla.env), None when unset, the text when jax
    rejects it."""
    try:
        return bool_env(environ, name)
    except NotABoolean as e:
        return str(e)


def hazard_checks(ctx: Context) -> list[Check]:
    env, wf = ctx.environ, ctx.workflow
    checks = []
    pgle_on = _bool_env(env, "JAX_ENABLE_PGLE")
    if isinstance(pgle_on, str):
        checks.append(
            _error(
                "JAX_ENABLE_PGLE", f"{pgle_on!r} is not a boolean: jax fails at import", "unset it"
            )
        )
    elif pgle_on and wf == "manual":
        # The same rule as collect's guard (pgle.commands.collect.preflight): it refuses to start.
        checks.append(
            _error(
                "JAX_ENABLE_PGLE",
                "exported globally: `pgle collect` refuses to "
                "start (auto PGLE's profiler session would collide with its own)",
                "unset it for collect/tune, or use `pgle auto`",
            )
        )
    elif pgle_on and wf == "nsys":
        checks.append(
            _warn(
                "JAX_ENABLE_PGLE",
                "exported globally",
                "unset it: a profiler session while auto PGLE profiles can kill the "
                "job (ALREADY_EXISTS); pgle sets it per run",
            )
        )
    else:
        checks.append(
            _ok(
                "JAX_ENABLE_PGLE",
                "set (pgle sets it itself for auto/prewarm)" if pgle_on else "unset",
            )
        )
    expect = _bool_env(env, "JAX_COMPILATION_CACHE_EXPECT_PGLE")
    if isinstance(expect, str):
        checks.append(
            _error(
                "EXPECT_PGLE",
                f"JAX_COMPILATION_CACHE_EXPECT_PGLE={expect!r} is not "
                "a boolean: jax fails at import",
                "unset it",
            )
        )
    elif expect and wf != "nsys":
        checks.append(
            _warn(
                "EXPECT_PGLE",
                "JAX_COMPILATION_CACHE_EXPECT_PGLE exported globally",
                "unset it: only the Nsight run wants it, and `pgle nsys` sets it",
            )
        )
    level = env.get("TF_CPP_MIN_LOG_LEVEL")
    if level is None or level.strip() in ("", "0"):
        checks.append(
            _ok(
                "log level",
                "TF_CPP_MIN_LOG_LEVEL unset (pgle sets 0 for its runs)"
                if level is None
                else f"TF_CPP_MIN_LOG_LEVEL={level!r}",
            )
        )
    else:
        checks.append(
            _warn(
                "log level",
                f"TF_CPP_MIN_LOG_LEVEL={level} hides XLA's INFO lines "
                "('Using PGLE profile', 'Found profile for module')",
                "unset it or set it to 0, or pgle cannot verify that XLA used the profile",
            )
        )
    checks.append(_command_buffers(ctx))
    warn_filter = env.get("PYTHONWARNINGS", "")
    if "ignore" in warn_filter:
        checks.append(
            _warn(
                "warnings",
                f"PYTHONWARNINGS={warn_filter!r} hides JAX's PGLE warnings "
                "('PGLE collected an empty trace', 'PERSISTENT CACHE MISS ...')",
                "drop 'ignore' from PYTHONWARNINGS",
            )
        )
    return checks


def _command_buffers(ctx: Context) -> Check:
    try:
        flags = XlaFlags.parse(ctx.environ.get("XLA_FLAGS"))
    except FlagError:
        return _ok("command buffers", "XLA_FLAGS unreadable (see above)")
    during = flags.value("xla_enable_command_buffers_during_profiling", "false").lower()
    cb = flags.value(flag_table.COMMAND_BUFFER)
    if cb == "":
        return _ok("command buffers", "off (--xla_gpu_enable_command_buffer='')")
    if during in ("true", "1") and ctx.workflow in ("manual", "auto", "prewarm"):
        return _warn(
            "command buffers",
            "on while profiling (--xla_enable_command_buffers_during_profiling=true)",
            "drop that flag: kernels inside CUDA graphs go missing from the profile",
        )
    who = {
        "manual": "`pgle collect` turns them off for the profiling run",
        "auto": "auto PGLE turns them off for its profiling compile",
        "prewarm": "auto PGLE turns them off for its profiling compile",
    }.get(ctx.workflow)
    if cb is not None and ctx.workflow == "manual":
        who = "kept as you set them; XLA runs them op by op while the profiler is on"
    return _ok(
        "command buffers", f"{'default' if cb is None else repr(cb)}" + (f" ({who})" if who else "")
    )


# --- compilation cache ---------------------------------------------------------


def cache_checks(ctx: Context) -> list[Check]:
    env, wf = ctx.environ, ctx.workflow
    needs_cache = wf in ("prewarm", "nsys")
    cache_dir = ctx.cache_dir or env.get("JAX_COMPILATION_CACHE_DIR")
    checks = [_size_cap(ctx, in_use=bool(cache_dir))]
    if not cache_dir:
        if needs_cache:
            checks.append(
                _error(
                    "cache dir",
                    "none given",
                    "pass --cache-dir DIR (an absolute path every node sees)",
                )
            )
        return checks
    checks += _cache_dir(ctx, cache_dir)
    if wf == "nsys" and "://" not in cache_dir and Path(cache_dir).is_dir():
        checks.append(_manifest(Path(cache_dir)))
    return checks


def _size_cap(ctx: Context, in_use: bool) -> Check:
    cap = ctx.environ.get("JAX_COMPILATION_CACHE_MAX_SIZE", "-1").strip()
    has_filelock = importlib.util.find_spec("filelock") is not None
    if cap in ("-1", ""):
        return _ok("cache size cap", "none (JAX_COMPILATION_CACHE_MAX_SIZE=-1)")
    found = f"JAX_COMPILATION_CACHE_MAX_SIZE={cap}"
    needs_cache = ctx.workflow in ("prewarm", "nsys")
    if not has_filelock:
        todo = "pip install filelock, or unset JAX_COMPILATION_CACHE_MAX_SIZE"
        if needs_cache:
            return _error(
                "cache size cap",
                f"{found} without the filelock package: jax leaves the cache unused",
                todo,
            )
        if in_use:
            return _warn("cache size cap", f"{found} without filelock: the cache goes unused", todo)
        return _ok("cache size cap", f"{found} (no cache in use)")
    if needs_cache:
        return _warn(
            "cache size cap",
            f"{found}: LRU eviction can drop PGLE-optimized entries "
            "between prewarm and the Nsight run",
            "unset it (-1) for these runs",
        )
    return _ok("cache size cap", found + " (filelock installed)")


def _cache_dir(ctx: Context, cache_dir: str) -> list[Check]:
    if "://" in cache_dir:
        return [_ok("cache dir", f"{cache_dir} (remote: not checked)")]
    path = Path(cache_dir)
    checks = []
    if not path.is_absolute():
        checks.append(
            _warn(
                "cache dir",
                f"{cache_dir} is relative (here: {path.resolve()})",
                "pass an absolute path: the cache key includes it, so prewarm and "
                "nsys must see the same one",
            )
        )
    if not path.exists():
        if ctx.workflow == "nsys":
            return checks + [
                _error(
                    "cache dir",
                    f"{path} does not exist",
                    "run `pgle prewarm --cache-dir` with this directory first",
                )
            ]
        parent = next((p for p in path.resolve().parents if p.exists()), None)
        if parent is None or not _writable(parent):
            return checks + [
                _error(
                    "cache dir",
                    f"{path} does not exist and {parent} is not writable",
                    "create it, or pick a writable location",
                )
            ]
        return checks + [_ok("cache dir", f"{path} does not exist yet (will be created)")]
    if not path.is_dir():
        return checks + [_error("cache dir", f"{path} is not a directory", "pick a directory")]
    entries = [p for p in path.iterdir() if p.name.endswith("-cache")]
    size = sum(p.stat().st_size for p in entries if p.is_file())
    found = f"{path}: {plural(len(entries), 'entry')}, {human_bytes(size)}"
    if not _writable(path):
        # The Nsight run only reads; prewarm and the other workflows write entries.
        check = _warn if ctx.workflow == "nsys" else _error
        return checks + [
            check(
                "cache dir",
                f"{found}; not writable",
                "fix its permissions or pick another directory",
            )
        ]
    return checks + [_ok("cache dir", found + ", writable")]


def _writable(path: Path) -> bool:
    """Really try: os.access says yes to root on read-only mounts and 0555 directories alike."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=".pgle-doctor-", dir=path)
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def _manifest(cache_dir: Path) -> Check:
    """The manifest `pgle prewarm` writes (format: pgle/cache/manifest.py)."""
    from pgle.cache import manifest

    name = manifest.MANIFEST_NAME
    try:
        data = manifest.load(str(cache_dir))
    except PgleError as e:  # corrupt, not a pgle manifest, other format
        return _error("cache manifest", e.message, e.hint or "rerun `pgle prewarm`")
    if data is None:
        return _error(
            "cache manifest",
            f"no {name} in {cache_dir}",
            "run `pgle prewarm --cache-dir` with this directory first",
        )
    env = data.get("environment")
    if not env:
        return _error(
            "cache manifest",
            f"{name} records no finished prewarm run",
            "let `pgle prewarm` finish, then run nsys",
        )
    for package in ("jax", "jaxlib"):
        then, now = env.get(package), versions.installed(package)
        if then and then != now:
            return _error(
                "cache manifest",
                f"prewarmed by {package} {then}, installed {now}: the "
                "cache keys differ, nothing would load",
                f"rerun `pgle prewarm` with {package} {now}",
            )
    optimized = sum(m.get("status") == Optimized.OPTIMIZED for m in data["modules"].values())
    found = (
        f"jax {env.get('jax')}; {plural(len(data['modules']), 'module')}, "
        f"{optimized} PGLE-optimized"
    )
    if not optimized:
        # Nothing for nsys to load: its every module would fall back.
        return _warn(
            "cache manifest",
            found,
            "prewarm on an NVIDIA GPU (`pgle prewarm`): on any other backend no module is "
            "re-optimized",
        )
    return _ok("cache manifest", found)
