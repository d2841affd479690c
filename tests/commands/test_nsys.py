"""`pgle nsys`: prewarm, then the EXPECT_PGLE run under a stand-in `nsys` (real JAX on CPU).

The scenario of JAX's own testPersistentCachePopulatedWithAutoPgle, through pgle:
jit_f executed runs+1 times during prewarm loads PGLE-optimized; jit_g executed
once falls back; jit_h never executed during prewarm is compiled anew.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle

FGH = str(WORKLOADS / "auto_fgh.py")
HELPER = str(TESTS / "helpers" / "pgle_cpu_profile")
FAKE_NSYS_DIR = TESTS / "helpers" / "fake_nsys"
NSYS_RUN = ["--", FGH, "--f", "1", "--g", "1", "--h", "1"]


def fake_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = pgle_env(FAKE_NSYS_LOG=str(tmp / "nsys-calls.jsonl"), **extra)
    env["PATH"] = f"{FAKE_NSYS_DIR}{os.pathsep}{env.get('PATH', '')}"
    return env


def nsys_calls(tmp: Path) -> list[dict]:
    path = tmp / "nsys-calls.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def prewarm_into(project: Path, cache_dir: Path, *extra: str) -> None:
    proc = run_pgle("prewarm", "--cache-dir", str(cache_dir), "--runs", "2", "--percentile", "100",
                    *extra, FGH, "--", "--f", "3", "--g", "1", "--h", "0",
                    cwd=project, env=pgle_env(PYTHONPATH=HELPER))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]


@pytest.fixture(scope="module")
def prewarmed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(project, cache dir, a copy of the cache as prewarm left it): one prewarm run."""
    project = tmp_path_factory.mktemp("nsys") / "proj ü"
    project.mkdir()
    cache_dir = project / "jax cache"
    prewarm_into(project, cache_dir)
    pristine = project.parent / "pristine"
    shutil.copytree(cache_dir, pristine)
    return project, cache_dir, pristine


@pytest.fixture
def warm(prewarmed) -> tuple[Path, Path]:
    """(project, cache dir) as prewarm left it: the nsys runs of earlier tests add entries
    (jit_h) and a test may delete one; the cache is put back at the same path (a cache at
    another path is drift: test_moved_cache_is_drift), not prewarmed again."""
    project, cache_dir, pristine = prewarmed
    shutil.rmtree(cache_dir)
    shutil.copytree(pristine, cache_dir)
    return project, cache_dir


def test_three_scenarios_through_pgle(warm, tmp_path: Path):
    project, cache_dir = warm
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "-t", "cuda,nvtx", "--sample=none",
                    "--require", "jit_f", "--json", *NSYS_RUN, cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rep = report_of(proc)
    mods = {m["module"]: m for m in rep["modules"]}
    assert mods["jit_f"]["status"] == "loaded_optimized"
    assert mods["jit_g"]["status"] == "fell_back" and "1 time" in mods["jit_g"]["reason"]
    assert mods["jit_h"]["status"] == "compiled_anew"
    assert rep["status"] == "partial"

    (call,) = nsys_calls(tmp_path)
    # nsys options first, then the harness command; the environment replays the manifest.
    assert call["argv"][1] == "profile"
    assert call["options"][2:] == ["-t", "cuda,nvtx", "--sample=none"]
    assert call["command"][1].endswith("harness.py")
    env = call["env"]
    assert env["JAX_COMPILATION_CACHE_EXPECT_PGLE"] == "true" and env["JAX_ENABLE_PGLE"] == "false"
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(cache_dir)
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    nsys = rep["nsys"]
    assert nsys["exit_code"] == 0 and nsys["report_exists"]
    assert nsys["report"].startswith(rep["run_dir"]) and nsys["report"].endswith(".nsys-rep")
    assert nsys["version"].startswith("NVIDIA Nsight Systems version")

    # JAX cached jit_h in that run (without PGLE): a second run falls back to it, and says why.
    rep = report_of(run_pgle("nsys", "--cache-dir", str(cache_dir), "--json", *NSYS_RUN,
                             cwd=project, env=fake_env(tmp_path)))
    h = {m["module"]: m for m in rep["modules"]}["jit_h"]
    assert h["status"] == "fell_back" and "earlier EXPECT_PGLE run" in h["reason"]
    ls = report_of(run_pgle("cache", "ls", str(cache_dir), "--module", "jit_h", "--json", cwd=project))
    assert [e["role"] for e in ls["entries"]] == ["plain"]


def test_require_all_and_exit_codes(warm, tmp_path: Path):
    project, cache_dir = warm
    out = tmp_path / "my report"
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "-o", str(out), "--require-all",
                    *NSYS_RUN, cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 3, proc.stderr.decode()[-2000:]
    assert any(l.startswith("pgle: not verified:") and "jit_g is fell_back" in l
               for l in pgle_lines(proc))
    assert (tmp_path / "my report.nsys-rep").exists()  # the user's -o is kept
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--json", "--", FGH, "--f", "1", "--g", "0",
                    "--h", "0", "--exit", "5", cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 5
    rep = report_of(proc)
    assert rep["workload_exit_code"] == 5 and rep["nsys"]["exit_code"] == 5


def test_drift_is_refused_unless_forced(warm, tmp_path: Path):
    project, cache_dir = warm
    env = fake_env(tmp_path, XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), *NSYS_RUN, cwd=project, env=env)
    assert proc.returncode == 2 and not nsys_calls(tmp_path)  # refused before launching nsys
    (line,) = pgle_lines(proc)
    assert "XLA_FLAGS differ from the prewarm run" in line and "--force" in line
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), *NSYS_RUN, cwd=project,
                    env=fake_env(tmp_path, JAX_ENABLE_X64="1"))
    assert proc.returncode == 2 and "JAX_ENABLE_X64=1 is set now" in proc.stderr.decode()
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--force", "--json", *NSYS_RUN,
                    cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    rep = report_of(proc)
    assert rep["drift"] and any(w.startswith("drift (--force)") for w in rep["warnings"])
    # Other flags, other keys: nothing loads PGLE-optimized.
    assert all(m["status"] != "loaded_optimized" for m in rep["modules"])


def test_moved_cache_is_drift(warm, tmp_path: Path):
    project, cache_dir = warm
    moved = tmp_path / "moved"
    shutil.copytree(cache_dir, moved)
    proc = run_pgle("nsys", "--cache-dir", str(moved), *NSYS_RUN, cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 2 and "--relocatable" in proc.stderr.decode()


def test_missing_nsys_and_missing_manifest(warm, tmp_path: Path):
    project, cache_dir = warm
    env = pgle_env(PATH="/usr/bin:/bin")
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), *NSYS_RUN, cwd=project, env=env)
    assert proc.returncode == 1
    (line,) = pgle_lines(proc)
    assert "nsys (NVIDIA Nsight Systems) was not found on PATH" in line and "Install" in line
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--nsys", "/opt/none/nsys", *NSYS_RUN,
                    cwd=project, env=env)
    assert proc.returncode == 1 and "not found at /opt/none/nsys" in proc.stderr.decode()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_pgle("nsys", "--cache-dir", str(empty), *NSYS_RUN, cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 2 and "pgle prewarm --cache-dir" in proc.stderr.decode()
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), FGH, cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 2 and "no workload after `--`" in proc.stderr.decode()


def test_launcher_wrapper_gets_double_dash(warm, tmp_path: Path):
    project, cache_dir = warm
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--launcher",
                    str(FAKE_NSYS_DIR / "nsys"), "--nsys-jax-option=1", "--json", *NSYS_RUN,
                    cwd=project, env=fake_env(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    (call,) = nsys_calls(tmp_path)
    argv = call["argv"]
    assert argv[1:3] == ["--nsys-jax-option=1", "--"] and argv[4].endswith("harness.py")
    assert report_of(proc)["nsys"]["launcher"]


def test_evicted_entry_falls_back_with_reason(warm, tmp_path: Path):
    project, cache_dir = warm
    man = json.loads((cache_dir / "pgle-manifest.json").read_text())
    (key,) = man["modules"]["jit_f"]["pgle_optimized_keys"]
    os.unlink(cache_dir / f"{key}-cache")  # as JAX's LRU eviction would
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--json", *NSYS_RUN, cwd=project,
                    env=fake_env(tmp_path))
    rep = report_of(proc)
    f = {m["module"]: m for m in rep["modules"]}["jit_f"]
    assert f["status"] == "fell_back" and "gone (pruned or evicted)" in f["reason"]
    assert any("are gone" in w and "jit_f" in w for w in rep["warnings"])


@pytest.mark.skipif(shutil.which("nsys") is None, reason="real Nsight Systems not installed")
def test_real_nsys(warm, tmp_path: Path):
    project, cache_dir = warm
    proc = run_pgle("nsys", "--cache-dir", str(cache_dir), "--json", *NSYS_RUN, cwd=project,
                    env=pgle_env())
    rep = report_of(proc)
    assert rep["nsys"]["version"] and rep["nsys"]["report_exists"]
    assert {m["module"]: m["status"] for m in rep["modules"]}["jit_f"] == "loaded_optimized"


def test_empty_profiles_in_prewarm_are_the_reason(tmp_path: Path):
    """On CPU (no pgle_cpu_profile helper) every profile prewarm took is empty: nsys must name
    that cause, not ask for more executions (issue 13, case 6)."""
    project = tmp_path / "p"
    project.mkdir()
    cache_dir = project / "c"
    proc = run_pgle("prewarm", "--cache-dir", str(cache_dir), "--runs", "2", FGH, "--",
                    "--f", "3", "--g", "0", "--h", "0", cwd=project, env=pgle_env())
    assert proc.returncode in (0, 3), proc.stderr.decode()[-3000:]
    man = json.loads((cache_dir / "pgle-manifest.json").read_text())
    assert man["modules"]["jit_f"]["empty_profiles"] == man["modules"]["jit_f"]["profiled_executions"] == 2
    rep = report_of(run_pgle("nsys", "--cache-dir", str(cache_dir), "--json", "--", FGH,
                             "--f", "1", "--g", "0", "--h", "0", cwd=project, env=fake_env(tmp_path)))
    f = {m["module"]: m for m in rep["modules"]}["jit_f"]
    assert f["status"] == "fell_back", f
    assert "all 2 executions prewarm profiled gave an empty profile" in f["reason"]
    assert "backend is cpu" in f["reason"]
    assert f["fix"].startswith("prewarm on an NVIDIA GPU"), f  # not "run more steps"
