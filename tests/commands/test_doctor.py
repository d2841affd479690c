"""`pgle doctor`: each check's ok / warn / error path on CPU, from the test's own environment.

Checks that read only the environment run in-process on a `Context` built from
a test environment; what depends on installed packages (CUDA plugin, filelock,
the jax version) runs `pgle doctor` in a subprocess whose PYTHONPATH carries
stand-in package metadata. Stand-in `nsys` and `ldconfig` scripts sit on PATH.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from helpers.pgle_testing import (REPO, pgle_env, pgle_lines, python_without, report_of,
                                  run_pgle)
from pgle.commands import doctor
from pgle.errors import EXIT_USAGE, BadInput
from pgle.xla import flag_table, versions
from pgle.xla import flag_table
from pgle.xla import versions

JAX = versions.installed("jax")
JAXLIB = versions.installed("jaxlib")


def script(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_dist(site: Path, name: str, version: str) -> None:
    """Package metadata only: importlib.metadata sees `name` installed; nothing is importable."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def env_for(tmp_path: Path, site: list[Path] = (), **extra: str) -> dict[str, str]:
    env = pgle_env(**extra)
    env["PATH"] = str(tmp_path / "bin")  # stand-ins only: no real nsys
    env["PYTHONPATH"] = os.pathsep.join([*map(str, site), str(REPO)])
    for key in ("LD_LIBRARY_PATH", "PYTHONWARNINGS", "CUDA_HOME", "CUDA_PATH"):
        env.pop(key, None)
    env.update(extra)
    return env


def run_doctor(tmp_path: Path, *args: str, site: list[Path] = (), **extra: str):
    proc = run_pgle("doctor", "--json", *args, cwd=tmp_path, env=env_for(tmp_path, site, **extra),
                    timeout=120)
    return proc.returncode, report_of(proc)


def rows(report_or_checks, name: str) -> list[dict]:
    checks = report_or_checks["checks"] if isinstance(report_or_checks, dict) else [
        vars(c) for c in report_or_checks]
    return [c for c in checks if c["check"] == name]


def status(report_or_checks, name: str) -> str:
    found = rows(report_or_checks, name)
    assert len(found) == 1, found
    return found[0]["status"]


def ctx(tmp_path: Path, workflow: str = "manual", cache_dir: str | None = None, **extra: str):
    return doctor.Context.detect(workflow, env_for(tmp_path, **extra), cache_dir)


# --- end to end ------------------------------------------------------------------

def test_clean_cpu_machine_passes_with_a_table_and_a_report(tmp_path):
    script(tmp_path / "bin", "nsys",
           'echo "NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0"')
    env = env_for(tmp_path)
    proc = run_pgle("doctor", "--report", str(tmp_path / "r.json"), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    table = proc.stdout.decode().splitlines()
    assert table[0].split() == ["CHECK", "STATUS", "FOUND", "->", "WHAT", "TO", "DO"]
    assert pgle_lines(proc) == [next(l for l in pgle_lines(proc) if "doctor (manual)" in l)]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["command"] == "doctor" and report["exit_code"] == 0 and report["modules"] == []
    assert report["workflow"] == "manual"
    for name in ("python", "jax", "workflows", "XLA_FLAGS", "JAX_ENABLE_PGLE", "log level",
                 "command buffers", "cache size cap"):
        assert status(report, name) == "ok", name
    assert rows(report, "jax")[0]["found"] == f"jax {JAX}, jaxlib {JAXLIB}"
    backend = rows(report, "backend")[0]
    assert backend["status"] == "warn" and backend["found"].startswith("cpu: 1 x cpu")
    assert rows(report, "nsys")[0]["found"].startswith("2025.3.1.90 (")
    assert status(report, "cuda plugin") == "warn"  # none installed on this CPU machine


def test_flags_and_hazards_that_would_sink_a_big_job(tmp_path):
    script(tmp_path / "bin", "nsys", 'echo "NVIDIA Nsight Systems version 2023.2.1.122-32598524v0"')
    code, report = run_doctor(
        tmp_path, XLA_FLAGS=(
            "--xla_gpu_graph_level=0 -xla_gpu_triton_gemm_any --xla_gpu_triton_gemm_any=yes "
            "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_OFF "
            "--xla_enable_command_buffers_during_profiling=true --xla_some_flag=1 oops --x=1"),
        JAX_ENABLE_PGLE="true", JAX_COMPILATION_CACHE_EXPECT_PGLE="1", TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONWARNINGS="ignore::UserWarning")
    assert code == 1 and report["status"] == "error"
    flags = [(c["status"], c["found"]) for c in rows(report, "XLA_FLAGS")]
    assert [s for s, _ in flags] == ["error", "error", "error", "warn", "warn", "warn"]
    assert "removed in jax 0.7.2" in flags[0][1]
    assert "--xla_gpu_enable_command_buffer" in flags[0][1]  # the replacement
    assert "two dashes" in flags[1][1] and "'yes' is not a boolean" in flags[2][1]
    assert "'oops'" in flags[5][1]
    assert not any("xla_some_flag" in f for _, f in flags)  # unknown to the table: no verdict
    for name in ("EXPECT_PGLE", "log level", "command buffers", "warnings", "nsys"):
        assert status(report, name) == "warn", name
    # What `pgle collect` refuses is an error here too (the manual workflow is the default).
    assert status(report, "JAX_ENABLE_PGLE") == "error"
    assert report["reasons"] and all("\n" not in r for r in report["reasons"])
    # The backend child ran without the broken flags.
    assert status(report, "backend") == "warn"


def test_cuda_plugin_and_cupti_from_installed_packages(tmp_path):
    site = tmp_path / "site"
    fake_dist(site, "jax-cuda12-plugin", JAXLIB)
    fake_dist(site, "jax-cuda12-pjrt", "0.0.1")
    script(tmp_path / "bin", "ldconfig", 'echo "0 libs found in cache"')
    code, report = run_doctor(tmp_path, site=[site])
    assert code == 1
    plugin = rows(report, "cuda plugin")[0]
    assert plugin["status"] == "warn" and "jax-cuda12-pjrt 0.0.1" in plugin["found"]
    assert status(report, "cupti") == "error"
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libcupti.so.12").write_bytes(b"")
    code, report = run_doctor(tmp_path, site=[site], LD_LIBRARY_PATH=str(tmp_path / "lib"))
    assert rows(report, "cupti")[0] == {
        "check": "cupti", "status": "ok", "found": str(tmp_path / "lib" / "libcupti.so.12"),
        "todo": ""}


def test_an_old_jax_cannot_run_the_nsys_workflow(tmp_path):
    site = tmp_path / "site"
    fake_dist(site, "jax", "0.5.0")  # only the metadata: the real jax still imports
    code, report = run_doctor(tmp_path, "--workflow", "nsys", "--cache-dir", str(tmp_path),
                              site=[site])
    assert code == 1
    workflows = rows(report, "workflows")[0]
    assert workflows["status"] == "error" and "needs jax >= 0.5.1" in workflows["found"]
    assert "needed up to jax 0.5.0" in workflows["found"]
    assert status(report, "jax") == "warn"  # jax 0.5.0 with jaxlib 0.10.2
    assert status(report, "nsys") == "error"  # not on PATH, and this workflow needs it
    assert status(report, "cache manifest") == "error"


def test_too_old_jax_is_an_error(tmp_path):
    site = tmp_path / "site"
    fake_dist(site, "jax", "0.4.30")
    code, report = run_doctor(tmp_path, "--workflow", "auto", site=[site])
    assert code == 1 and status(report, "jax") == "error"


def test_a_backend_that_fails_to_start_is_an_error_not_a_crash(tmp_path):
    code, report = run_doctor(tmp_path, JAX_PLATFORMS="cuda")
    backend = rows(report, "backend")[0]
    assert code == 1 and backend["status"] == "error"
    assert "cuda" in backend["found"].lower()


def test_probe_asks_jaxlib(tmp_path):
    code, report = run_doctor(tmp_path, "--probe",
                              XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true "
                                        "--xla_gpu_not_a_flag=3")
    probe = rows(report, "probe")
    assert code == 1 and [p["status"] for p in probe] == ["error"]
    assert "--xla_gpu_not_a_flag=3" in probe[0]["found"] and JAXLIB in probe[0]["found"]
    code, report = run_doctor(tmp_path, "--probe",
                              XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true")
    assert rows(report, "probe")[0]["status"] == "ok"


def test_probe_traces_the_gpu_or_says_why_it_does_not_apply(tmp_path):
    """`doctor --probe`'s CUPTI preflight (issue 23, case 5): on CPU the row says why there is
    nothing to trace; without --probe there is no row."""
    code, report = run_doctor(tmp_path, "--probe")
    (row,) = rows(report, "cupti trace")
    assert row["status"] == "ok", row
    assert row["found"].startswith("not applicable: backend cpu")
    assert "CUPTI traces NVIDIA GPUs only" in row["found"]
    _, plain = run_doctor(tmp_path)
    assert rows(plain, "cupti trace") == []


def test_the_trace_probe_child_reports_its_backend(tmp_path):
    """The child `doctor --probe` traces in: a real jax process; on CPU it traces nothing."""
    from pgle.launch.probe import cupti_trace

    result = cupti_trace(env_for(tmp_path))
    assert result["platform"] == "cpu" and "error" not in result, result
    assert "profile_bytes" not in result


def test_cupti_trace_rows_for_a_gpu_trace_with_and_without_device_events():
    """What the row says for the child's findings on a GPU (shapes of real results: a trace
    whose PGLE profile is non-empty, one held by another CUPTI client, a failed trace)."""
    gpu = {"platform": "gpu"}
    ok = doctor.cupti_trace_check(gpu, {"platform": "gpu", "executions": 812,
                                        "profile_bytes": 96, "cupti_lines": []})
    assert ok.status == "ok" and "812 matmuls held device events" in ok.found
    held = doctor.cupti_trace_check(gpu, {
        "platform": "gpu", "executions": 790, "profile_bytes": 0,
        "cupti_lines": ["E1125 cupti_tracer.cc:1204] function cupti_interface_->Subscribe( "
                        "&subscriber_, ...)failed with error "
                        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"]})
    assert held.status == "error" and "no device events" in held.found
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in held.found
    assert "DCGM" in held.found and "dcgmi profile --pause" in held.todo
    failed = doctor.cupti_trace_check(gpu, {"error": "RuntimeError: boom", "cupti_lines": []})
    assert failed.status == "error" and "boom" in failed.found


def test_size_cap_with_and_without_filelock(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    site = tmp_path / "site"
    (site / "filelock").mkdir(parents=True)
    (site / "filelock" / "__init__.py").write_text("")
    code, report = run_doctor(tmp_path, "--workflow", "prewarm", "--cache-dir", str(cache),
                              site=[site], JAX_COMPILATION_CACHE_MAX_SIZE="1000000")
    cap = rows(report, "cache size cap")[0]
    assert code == 0 and cap["status"] == "warn" and "LRU" in cap["found"]
    # The same interpreter with filelock truly absent (its site-packages mirrored without it).
    proc = subprocess.run(
        [*python_without(tmp_path, "filelock"), "doctor", "--json", "--workflow", "prewarm",
         "--cache-dir", str(cache)], cwd=tmp_path, capture_output=True, timeout=120,
        env=env_for(tmp_path, JAX_COMPILATION_CACHE_MAX_SIZE="1000000"))
    cap = rows(report_of(proc), "cache size cap")[0]
    assert proc.returncode == 1 and cap["status"] == "error", proc.stderr.decode()[-2000:]
    assert "without the filelock package" in cap["found"]


def test_unknown_workflow_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="unknown workflow 'fast': use one of") as e:
        doctor.Context.detect("fast")
    assert e.value.exit_code == EXIT_USAGE


# --- in-process: checks that read only the environment -------------------------------

def test_nsys_on_path(tmp_path):
    c = ctx(tmp_path)
    assert doctor.nsys_check(c, doctor.nsys_info(c.environ)).status == "ok"  # absent, not needed
    script(tmp_path / "bin", "nsys",
           "echo 'NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0'")
    info = doctor.nsys_info(c.environ)
    assert info["version"] == "2024.5.1.113"
    assert doctor.nsys_check(ctx(tmp_path, "nsys"), info).status == "ok"
    script(tmp_path / "bin", "nsys", "echo 'broken' >&2; exit 3")
    assert doctor.nsys_check(c, doctor.nsys_info(c.environ)).status == "warn"
    assert doctor.nsys_check(ctx(tmp_path, "nsys"), doctor.nsys_info(c.environ)).status == "error"


def test_cupti_on_a_cpu_machine(tmp_path):
    script(tmp_path / "bin", "ldconfig", "true")
    c = ctx(tmp_path)
    if c.plugins or c.gpu_visible:
        pytest.skip("this machine has a CUDA plugin or a GPU")
    assert doctor.cupti_check(c).status == "warn"
    extras = tmp_path / "cuda" / "extras" / "CUPTI" / "lib64"
    extras.mkdir(parents=True)
    (extras / "libcupti.so.12").write_bytes(b"")
    check = doctor.cupti_check(ctx(tmp_path, CUDA_HOME=str(tmp_path / "cuda")))
    assert check.status == "warn" and "LD_LIBRARY_PATH" in check.todo
    check = doctor.cupti_check(ctx(tmp_path, LD_LIBRARY_PATH=str(extras)))
    assert check.status == "ok" and check.found == str(extras / "libcupti.so.12")


@pytest.mark.parametrize("workflow, value, expected", [
    ("manual", None, "ok"), ("manual", "true", "error"), ("manual", "t", "error"),
    ("manual", "Y", "error"), ("nsys", "1", "warn"),
    ("auto", "true", "ok"), ("prewarm", "yes", "ok"), ("manual", "0", "ok"),
    ("auto", "maybe", "error"), ("manual", "", "error"),  # jax fails at import on both
])
def test_jax_enable_pgle(tmp_path, workflow, value, expected):
    extra = {} if value is None else {"JAX_ENABLE_PGLE": value}
    assert status(doctor.hazard_checks(ctx(tmp_path, workflow, **extra)), "JAX_ENABLE_PGLE") \
        == expected


@pytest.mark.parametrize("value, expected", [(None, "ok"), ("0", "ok"), ("1", "warn"),
                                             ("3", "warn")])
def test_log_level(tmp_path, value, expected):
    extra = {} if value is None else {"TF_CPP_MIN_LOG_LEVEL": value}
    assert status(doctor.hazard_checks(ctx(tmp_path, **extra)), "log level") == expected


@pytest.mark.parametrize("workflow, flags, expected", [
    ("manual", "", "ok"),
    ("manual", "--xla_gpu_enable_command_buffer=''", "ok"),
    ("manual", "--xla_gpu_enable_command_buffer=FUSION", "ok"),
    ("manual", "--xla_enable_command_buffers_during_profiling=true", "warn"),
    ("auto", "--xla_enable_command_buffers_during_profiling", "warn"),
    ("manual", "--xla_enable_command_buffers_during_profiling=true "
               "--xla_gpu_enable_command_buffer=''", "ok"),
    ("nsys", "--xla_enable_command_buffers_during_profiling=true", "ok"),
])
def test_command_buffers_while_collecting(tmp_path, workflow, flags, expected):
    c = ctx(tmp_path, workflow, XLA_FLAGS=flags)
    assert status(doctor.hazard_checks(c), "command buffers") == expected


def test_expect_pgle_and_warning_filters(tmp_path):
    checks = doctor.hazard_checks(ctx(tmp_path, JAX_COMPILATION_CACHE_EXPECT_PGLE="true",
                                      PYTHONWARNINGS="default,ignore::RuntimeWarning"))
    assert status(checks, "EXPECT_PGLE") == "warn" and status(checks, "warnings") == "warn"
    checks = doctor.hazard_checks(ctx(tmp_path, "nsys", JAX_COMPILATION_CACHE_EXPECT_PGLE="1",
                                      PYTHONWARNINGS="default"))
    assert not rows(checks, "EXPECT_PGLE") and not rows(checks, "warnings")
    checks = doctor.hazard_checks(ctx(tmp_path, "nsys", JAX_COMPILATION_CACHE_EXPECT_PGLE="sure"))
    assert status(checks, "EXPECT_PGLE") == "error"


@pytest.mark.parametrize("xla_flags, expected", [
    (None, ["ok"]),
    ("--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/tmp/d", ["ok"]),
    ("--xla_gpu_enable_async_all_gather=true", ["error"]),
    ("--xla_gpu_pgle_profile_file_or_directory_path=/p/profile.txt", ["warn"]),
    ("--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR --a=1 --a=2", ["warn", "warn"]),
    # XLA aborts on a command-buffer type it does not know ("Illegal value"); pgle's table has
    # every release's types through jax 0.12.0.1 (a newer jax may know more: a warning).
    ("--xla_gpu_enable_command_buffer=NEW_KIND",
     ["error" if (versions.jax_version() or (99,)) <= flag_table.CHECKED_THROUGH else "warn"]),
    ("/nonexistent/xla-flags-file", ["error"]),
])
def test_xla_flags_lint(tmp_path, xla_flags, expected):
    extra = {} if xla_flags is None else {"XLA_FLAGS": xla_flags}
    checks = doctor.flag_checks(ctx(tmp_path, **extra))
    assert [c.status for c in checks] == expected


def test_xla_flags_from_a_file(tmp_path):
    f = tmp_path / "flags"
    f.write_text("--xla_gpu_enable_latency_hiding_scheduler=true --xla_custom=1\n")
    [check] = doctor.flag_checks(ctx(tmp_path, XLA_FLAGS=str(f)))
    assert check.status == "ok" and f"from file {f}" in check.found
    assert "1 not in pgle's table" in check.found and "--probe" in check.todo


def test_cache_dir_ok_relative_missing_and_not_a_dir(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"jit_step-{'a' * 64}-cache").write_bytes(b"x" * 2048)
    checks = doctor.cache_checks(ctx(tmp_path, "prewarm", str(cache)))
    assert [c.status for c in checks] == ["ok", "ok"]
    assert "1 entry," in checks[1].found and "writable" in checks[1].found
    checks = doctor.cache_checks(ctx(tmp_path, "prewarm", "relative/cache"))
    assert [c.status for c in checks] == ["ok", "warn", "ok"]  # will be created
    assert "will be created" in checks[2].found
    checks = doctor.cache_checks(ctx(tmp_path, "nsys", str(tmp_path / "missing")))
    assert [c.status for c in checks] == ["ok", "error"]
    (tmp_path / "file").write_text("")
    assert doctor.cache_checks(ctx(tmp_path, "prewarm", str(tmp_path / "file")))[1].status == \
        "error"
    # The cache directory may come from the environment instead of --cache-dir.
    checks = doctor.cache_checks(ctx(tmp_path, "prewarm", JAX_COMPILATION_CACHE_DIR=str(cache)))
    assert checks[1].status == "ok"
    assert doctor.cache_checks(ctx(tmp_path, "prewarm"))[1].status == "error"  # none given
    assert len(doctor.cache_checks(ctx(tmp_path, "manual"))) == 1  # no cache: cap only


def _read_only_dir(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        return d
    # root writes through 0555; sysfs directories refuse even root.
    for d in (Path("/sys/kernel"), Path("/sys")):
        if d.is_dir() and not doctor._writable(d):
            return d
    pytest.skip("no read-only directory available to root here")


@pytest.mark.unprivileged
def test_read_only_cache_dir(tmp_path):
    ro = _read_only_dir(tmp_path)
    try:
        check = doctor.cache_checks(ctx(tmp_path, "prewarm", str(ro)))[1]
        assert check.status == "error" and "not writable" in check.found
        # The Nsight run only reads: a warning there (the manifest is checked after it).
        check = doctor.cache_checks(ctx(tmp_path, "nsys", str(ro)))[1]
        assert check.status == "warn"
    finally:
        if ro.is_relative_to(tmp_path):
            ro.chmod(0o755)


def manifest(environment, modules=None) -> str:
    """As pgle/cache/manifest.py writes it (format 1)."""
    return json.dumps({"format": 1, "environment": environment, "modules": modules or {},
                       "runs": []})


@pytest.mark.parametrize("content, expected", [
    (None, "error"),
    ("{not json", "error"),
    ("[1, 2]", "error"),
    (json.dumps({"format": 99, "modules": {}, "runs": []}), "error"),
    (manifest(None), "error"),  # no prewarm finished
    (manifest({"jax": "0.1.0", "jaxlib": JAXLIB}), "error"),
    (manifest({"jax": JAX, "jaxlib": "0.0.1"}), "error"),
    (manifest({"jax": JAX, "jaxlib": JAXLIB},
              {"jit_step": {"status": "optimized"}, "jit_eval": {"status": "not_optimized"}}),
     "ok"),
])
def test_nsys_cache_manifest(tmp_path, content, expected):
    cache = tmp_path / "cache"
    cache.mkdir()
    if content is not None:
        (cache / "pgle-manifest.json").write_text(content)
    checks = doctor.cache_checks(ctx(tmp_path, "nsys", str(cache)))
    found = rows(checks, "cache manifest")
    assert [m["status"] for m in found] == [expected]
    assert "\n" not in found[0]["found"]
    if content is None:
        assert "run `pgle prewarm" in found[0]["todo"]
    if expected == "ok":
        assert found[0]["found"] == f"jax {JAX}; 2 modules, 1 PGLE-optimized"


def test_explain_flag_versions_and_hazards():
    old = flag_table.explain_flag("xla_gpu_pgle_accuracy_checker", "PGLE_STRICTNESS_LEVEL_WARN",
                              "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN",
                              (0, 4, 35))
    assert old["status"] == "error" and "needs jax >= 0.4.36" in old["message"]
    row = flag_table.explain_flag("xla_gpu_enable_pipelined_collectives", "true",
                              "--xla_gpu_enable_pipelined_collectives=true", (0, 6, 0))
    assert row["status"] == "error" and "pipelined_all_reduce" in row["message"]
    assert flag_table.explain_flag("xla_gpu_enable_pipelined_collectives", "true",
                               "--xla_gpu_enable_pipelined_collectives=true",
                               (0, 5, 3))["status"] == "unknown"
    row = flag_table.explain_flag("xla_gpu_pgle_profile_file_or_directory_path", "/p/x.txt",
                              "--xla_gpu_pgle_profile_file_or_directory_path=/p/x.txt", (0, 5, 0))
    assert row["status"] == "warn" and "globally" in row["message"]  # not ignored before 0.5.1
