"""Every arm and run says whether its executables were compiled or loaded from jax's
persistent compilation cache (issue 33), on the real cache of the user's
JAX_COMPILATION_CACHE_DIR: a first `tune --compare` compiles every arm's executables (the o1
arm does not load default's: jax's cache key holds the optimization level), a second loads
them all, and says so."""

from __future__ import annotations

import json

from helpers.pgle_testing import WORKLOADS, pgle_env, report_of, run_pgle, write_profile

LOOPS = WORKLOADS / "real" / "loop_timing.py"


def _compare(tmp_path, folder, env):
    proc = run_pgle("tune", "--compare", "default,o1", "--repeat", "1", "--run-dir", folder,
                    "--json", str(LOOPS), "--", "--form", "matmul", "--steps", "8", "--size",
                    "64", "--oracle", "own.json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return report_of(proc)["compare"], proc.stderr.decode()


def test_a_warm_cache_compare_labels_its_arms_executables_as_cached(tmp_path):
    cache = tmp_path / "cache"
    # The user's cache, with every entry written (jax skips fast compiles by default).
    env = pgle_env(JAX_COMPILATION_CACHE_DIR=str(cache),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    cold, _ = _compare(tmp_path, "t1", env)
    arms = {a["arm"]: a for a in cold["arms"]}
    # Cold: each arm compiled its own step, o1 included (no executable of default's reused).
    for name in ("default", "o1"):
        assert arms[name]["step_executable"] == "compiled", arms[name]
        assert [r["executables"] for r in arms[name]["runs_executables"]] == ["compiled"]
        assert arms[name]["compile_by_kind"]["cached"]["count"] == 0
    # The two arms' step executables are two entries of the cache.
    steps = [p.name for p in cache.iterdir() if p.name.startswith("jit_step")]
    assert len(steps) >= 2, sorted(p.name for p in cache.iterdir())
    warm, err = _compare(tmp_path, "t2", env)
    for arm in warm["arms"]:
        assert arm["step_executable"] == "cached" and arm["executables"] == "cached", arm
        assert arm["compile_by_kind"]["compiled"]["count"] == 0
        assert arm["compile_by_kind"]["cached"]["count"] >= 1
    assert "(cached)" in err
    # Per module in the run folder's events: each load is jax's own cache hit.
    events = [json.loads(ln) for ln in (tmp_path / "t2" / "arm-o1" / "events.jsonl").open()]
    assert any(e.get("event") == "/jax/compilation_cache/cache_hits" for e in events)


def test_without_the_users_cache_every_executable_is_compiled(tmp_path):
    from pgle.evidence import compiles
    from pgle.evidence.events import read_events

    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(LOOPS), "--", "--form", "matmul",
                    "--steps", "4", "--size", "64", "--oracle", "own.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rows = compiles.executables(read_events(tmp_path / "r" / "events.jsonl"))
    # (a cache pgle or jax enables on its own misses: "miss", still compiled)
    assert rows and all(r["kind"] == "compiled" and r["cache"] in ("off", "miss") for r in rows)
    assert any(r["module"] == "jit_step" and r["seconds"] for r in rows)
