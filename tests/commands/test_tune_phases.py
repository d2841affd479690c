"""tune reads phase 1 as a typed result (pgle.commands.tune.CollectPhase); its --json report
keeps the keys it had when phase 1 was a dict, on the way through and on the way out at a
failed collect. Real tune runs of real JAX workloads on CPU (the first is also the CPU tune's
verdict: not_applicable, step times without a ratio)."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.cheap_train import write_cheap_train
from helpers.pgle_testing import pgle_lines, report_of, run_pgle


# The tune report's keys (pgle 0.x as of issue 24): scripts read them.
TUNE_KEYS = {"collect_changed", "command", "exit_code", "exit_code_from", "log_path", "modules",
             "phases", "profile", "reasons", "run_dir", "status", "step_times", "summary",
             "trace_dir", "warnings", "workload_exit_code"}
COLLECT_KEYS = {"backend", "command", "conversion", "exit_code", "exit_code_from", "log_path",
                "modules", "profile", "reasons", "run_dir", "status", "summary", "trace_dir",
                "warnings", "window", "workload_exit_code"}
RUN_KEYS = {"backend", "command", "exit_code", "exit_code_from", "log_path", "modules",
            "profile", "reasons", "run_dir", "status", "step_times", "steps", "summary",
            "trace_dir", "warnings", "workload_exit_code"}

FAILS_AFTER_A_COMPILE = """
import jax, jax.numpy as jnp
jax.jit(lambda a: a * 2)(jnp.ones(3)).block_until_ready()
raise SystemExit(3)
"""


def test_tune_json_keeps_its_keys(tmp_path: Path) -> None:
    train = str(write_cheap_train(tmp_path, small=True))  # tests/helpers/cheap_train.py
    proc = run_pgle("tune", train, "--steps", "1:2", "--json", "--", "--steps", "7",
                    cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    assert set(report) == TUNE_KEYS
    assert set(report["phases"]) == {"collect", "run"}
    collect = report["phases"]["collect"]
    assert set(collect) == COLLECT_KEYS and set(report["phases"]["run"]) == RUN_KEYS
    # phase 1's report as collect wrote it, and the tune report's fields taken from it
    assert collect["command"] == "collect" and collect["status"] == "empty"
    assert collect["backend"]["platform"] == "cpu"
    assert report["profile"] == collect["profile"]
    assert all(w in report["warnings"] for w in collect["warnings"])
    assert any(r.startswith("phase 1 could not produce a profile: ") for r in report["reasons"])
    # The same run is the CPU tune's verdict (one run for both: each costs two workload runs).
    assert report["status"] == "not_applicable"
    assert any("backend cpu" in r for r in report["reasons"])
    times = report["step_times"]
    # 7 steps, 6 intervals: step 0 (compile) and the window 1..2 are left out of both phases:
    # the run keeps a trace of the same window too (issue 22: the after-picture).
    assert times["collect"]["count"] == 3 and times["run"]["count"] == 3
    assert report["phases"]["run"]["trace_dir"] and times["steps"]["source"] == "markers"
    # No profile was applied on CPU: a ratio would only measure the profiler and noise.
    assert times["ratio"] is None and "backend cpu applies no profile" in times["caveat"]
    assert not any(re.search(r"ratio \d", l) for l in pgle_lines(proc))
    assert any("phase 2/2: run without a profile" in l for l in pgle_lines(proc))


def test_tune_json_at_a_failed_collect_keeps_its_keys(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text(FAILS_AFTER_A_COMPILE)
    proc = run_pgle("tune", str(script), "--json", cwd=tmp_path, timeout=600)
    assert proc.returncode == 3, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    assert set(report) == TUNE_KEYS - {"collect_changed", "step_times"}
    assert set(report["phases"]) == {"collect"}
    collect = report["phases"]["collect"]
    assert set(collect) == COLLECT_KEYS - {"conversion"}
    assert (report["status"], report["exit_code"], report["workload_exit_code"]) == \
        ("error", 3, 3)
    assert report["reasons"] == collect["reasons"] and report["reasons"]
    assert report["log_path"] == collect["log_path"] and Path(report["log_path"]).is_file()
    assert report["summary"][:len(collect["summary"])] == collect["summary"]


def _collect(status, mode=None, platform="cuda", workload_exit_code=0):
    from pgle.commands.tune import CollectPhase

    return CollectPhase.from_job({"status": status, "mode": mode, "backend": {"platform": platform},
                                  "workload_exit_code": workload_exit_code})


def test_which_collect_gives_the_later_phases_a_profile():
    """A job's merged profile is usable where only some ranks' profiles went in (`partial`);
    per-rank profiles (`-o ...%r`) are not: a rank without its own has nothing to run with."""
    assert _collect("collected").made_profile and _collect("collected", "per_rank").made_profile
    assert _collect("partial", "merge").made_profile and not _collect("partial", "merge").failed
    for mode in ("per_rank", None):
        assert not _collect("partial", mode).made_profile and _collect("partial", mode).failed


def test_which_collect_stops_tune():
    """tune stops after phase 1 when the workload failed, or when no profile came of it, except
    off a GPU where an empty profile is expected (the later phases still time the steps)."""
    assert not _collect("empty", platform="cpu").failed
    assert _collect("empty", platform="cuda").failed
    for status in ("error", "not_applied"):
        assert _collect(status, platform="cpu").failed, status
    assert _collect("collected", workload_exit_code=1).failed
