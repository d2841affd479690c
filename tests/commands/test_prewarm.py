"""`pgle prewarm`: real JAX on CPU, a real cache directory, the test-only CPU profile helper."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle
from pgle.cache import manifest as cache_manifest
from pgle.commands import auto_env

FGH = str(WORKLOADS / "auto_fgh.py")
HELPER = str(TESTS / "helpers" / "pgle_cpu_profile")


def helper_env(**extra: str) -> dict[str, str]:
    return pgle_env(PYTHONPATH=HELPER, **extra)


def test_prewarm_writes_entries_and_manifest(project: Path):
    # A relative cache dir: JAX's key depends on the string, so pgle must hand it the absolute path.
    proc = run_pgle("prewarm", "--cache-dir", "jax cache", "--runs", "2", "--percentile", "100",
                    "--json", FGH, "--", "--f", "3", "--g", "1", "--h", "0",
                    cwd=project, env=helper_env(XLA_FLAGS="--xla_cpu_enable_fast_math=false"))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rep = report_of(proc)
    cache_dir = project / "jax cache"
    assert rep["cache_dir"] == str(cache_dir) and rep["status"] == "optimized"
    mods = {m["module"]: m for m in rep["modules"]}
    f, g = mods["jit_f"], mods["jit_g"]
    assert f["status"] == "optimized" and f["executions_seen"] == 3
    assert len(f["pgle_optimized_keys"]) == 1 and len(f["first_pass_keys"]) == 1
    assert g["status"] == "not_optimized" and "lower --runs" in g["fix"]
    for key in f["pgle_optimized_keys"] + f["first_pass_keys"]:
        assert (cache_dir / f"{key}-cache").is_file()

    man = json.loads((cache_dir / cache_manifest.MANIFEST_NAME).read_text())
    env = man["environment"]
    assert env["cache_path"] == str(cache_dir) and env["jax"] and env["jaxlib"]
    assert env["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false"
    assert env["device_kind"] == "cpu" and env["device_count"] == 1
    assert env["jax_variables"]["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert "JAX_ENABLE_PGLE" not in env["jax_variables"]  # nsys sets its own
    assert man["modules"]["jit_f"]["pgle_optimized_keys"] == f["pgle_optimized_keys"]
    assert [r["state"] for r in man["runs"]] == ["finished"]

    # `pgle cache ls` shows each entry's role from the manifest.
    ls = report_of(run_pgle("cache", "ls", str(cache_dir), "--json", cwd=project))
    roles = {e["key"]: e["role"] for e in ls["entries"]}
    assert roles[f["pgle_optimized_keys"][0]] == "pgle_optimized"
    assert roles[f["first_pass_keys"][0]] == "first_pass"


def test_unwritable_cache_dir_and_corrupt_manifest_fail_before_launch(project: Path):
    proc = run_pgle("prewarm", "--cache-dir", "/proc/pgle-cache", FGH, cwd=project)
    assert proc.returncode == 2
    assert pgle_lines(proc)[0].startswith("pgle: error: cannot write to cache dir /proc/pgle-cache")
    cache_dir = project / "c"
    cache_dir.mkdir()
    (cache_dir / cache_manifest.MANIFEST_NAME).write_text("not json")
    proc = run_pgle("prewarm", "--cache-dir", str(cache_dir), FGH, cwd=project)
    assert proc.returncode == 2 and "is corrupt" in proc.stderr.decode()
    assert not (project / ".pgle").exists()  # nothing was launched


def test_size_cap_warnings():
    assert auto_env.size_cap_warnings({}) == []
    assert auto_env.size_cap_warnings({"JAX_COMPILATION_CACHE_MAX_SIZE": "-1"}) == []
    warnings = auto_env.size_cap_warnings({"JAX_COMPILATION_CACHE_MAX_SIZE": "1000000"})
    assert "evicts" in warnings[0]
    has_filelock = importlib.util.find_spec("filelock") is not None
    assert any("filelock" in w for w in warnings) != has_filelock


def test_concurrent_prewarms_share_one_manifest(project: Path):
    cache_dir = project / "shared"
    cmd = [sys.executable, "-m", "pgle", "prewarm", "--cache-dir", str(cache_dir), "--runs", "1",
           "--json", FGH, "--"]
    runs = [subprocess.Popen(cmd + args, cwd=project, env=helper_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
            for args in (["--f", "2", "--g", "0", "--h", "0"], ["--f", "0", "--g", "2", "--h", "2"])]
    outs = [p.communicate(timeout=180) for p in runs]
    assert [p.returncode for p in runs] == [0, 0], [o[1].decode()[-2000:] for o in outs]
    man = cache_manifest.load(str(cache_dir))
    assert sorted(r["state"] for r in man["runs"]) == ["finished", "finished"]
    for name in ("jit_f", "jit_g", "jit_h"):
        entry = man["modules"][name]
        assert entry["status"] == "optimized" and entry["pgle_optimized_keys"], name
    assert not cache_manifest.runs_in_progress(man)
    assert not [n for n in os.listdir(cache_dir) if n.endswith(".tmp")]


def test_host_callback_module_is_never_cached(project: Path):
    proc = run_pgle("prewarm", "--cache-dir", "c", "--runs", "1", "--json", FGH, "--", "--f", "0",
                    "--g", "0", "--h", "0", "--cb", "3", cwd=project, env=helper_env())
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    cb = {m["module"]: m for m in report_of(proc)["modules"]}["jit_with_callback"]
    assert cb["status"] == "not_optimized" and "uses host callbacks" in cb["reason"]
    assert "host callbacks" in cb["fix"]


def test_the_manifest_keeps_the_latest_finished_runs(tmp_path: Path):
    # It remembers KEEP_RUNS finished runs: the run that just finished is among them and the
    # oldest go; a run still in progress (another prewarm) stays whatever its age.
    from pgle.commands import prewarm

    cache_dir = str(tmp_path / "cache")
    os.mkdir(cache_dir)

    def record(run_id: str, state: str, started: float) -> dict:
        return {**cache_manifest.new_run("w.py", None), "id": run_id, "state": state,
                "started": started}

    old = [record(f"old-{i:02d}", "finished", 1000.0 + i) for i in range(prewarm.KEEP_RUNS + 2)]
    runs = [record("other", "in_progress", 999.0), *old, record("mine", "in_progress", 2000.0)]
    cache_manifest.update(cache_dir, lambda data: data["runs"].extend(runs))
    prewarm._close_run(cache_dir, "mine", "finished", None, [])
    ids = [r["id"] for r in cache_manifest.load(cache_dir)["runs"]]
    assert ids == ["other", *(r["id"] for r in old[3:]), "mine"], ids
