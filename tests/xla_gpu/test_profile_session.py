"""jax >= 0.12's public `jax.profiler.ProfileSession` under pgle's harness, on the real jax of the
lane's venvs (CPU: no compiler needed, the profiler API is what is tested).

A script may profile itself with `start_trace`/`stop_trace`, with `with jax.profiler.trace(d)
as s:` (jax 0.12 yields the session), or by starting a `ProfileSession` directly, with or
without a log_dir. pgle's window gives way to each of them the same way
(docs/guide/real-scripts.md, "The script's own profiler"): no pgle trace of its own, the
script's trace converted, the call site named, and the script's session object untouched.

Marker `xla_gpu` (its venvs come from .ci/xla_gpu_lane.sh; a missing one fails under
PGLE_REQUIRE_XLA_GPU=1, as in test_live.py). pgle runs under the venv's own Python from the
source tree (test_live.BOOT), so its harness hooks that jax.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import lane
import pytest
from helpers.reference_events import read_events
from test_live import BOOT, MATRIX, REPO, _dep_paths, python_of

pytestmark = pytest.mark.xla_gpu

SCRIPT = REPO / "tests" / "workloads" / "real" / "profile_session_script.py"
WITH_SESSION = [v for v in MATRIX if lane.vtuple(v) >= (0, 12)]  # jax 0.12 added it


def _collect(python: str, cwd: Path, mode: str, trace_dir: Path | None) -> tuple[dict, str]:
    args = ["--mode", mode] + (["--profile-dir", str(trace_dir)] if trace_dir else [])
    env = lane.venv_env(JAX_PLATFORMS="cpu")
    p = subprocess.run([python, "-c", BOOT, str(REPO), _dep_paths(), "collect", "-o", "p.pb",
                        "--allow-empty", "--json", str(SCRIPT), "--", *args],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout), p.stderr


def _plain(python: str, cwd: Path, mode: str, trace_dir: Path) -> str:
    p = subprocess.run([python, str(SCRIPT), "--mode", mode, "--profile-dir", str(trace_dir)],
                       cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
                       env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.parametrize("version", WITH_SESSION)
@pytest.mark.parametrize("mode", ["start-trace", "trace", "session", "session-thread"])
def test_the_scripts_own_session_is_handled_like_start_trace(version, mode, tmp_path):
    python = python_of(version)
    own = tmp_path / "own-trace"
    report, err = _collect(python, tmp_path, mode, own)
    script = report["window"]["script_trace"]
    # The run's events name the script's own start and stop lines (not jax's start_trace/trace
    # calling ProfileSession.start, nor contextlib's; the `with` line for trace).
    calls = read_events(Path(report["run_dir"]) / "events.jsonl").script_traces
    assert [c["call"] for c in calls] == ["start", "stop"], calls
    assert calls[0]["site"] == script["site"], (calls, script)
    wants = {"start-trace": ("start_trace(", "stop_trace("),
             "trace": ("jax.profiler.trace(", "jax.profiler.trace("),
             "session": (".start()", ".stop()"), "session-thread": (".start()", ".stop()")}
    for call, want in zip(calls, wants[mode], strict=True):
        assert re.search(r"profile_session_script\.py:\d+$", call["site"]), call
        assert call["site"].startswith(str(SCRIPT)), call
        line = int(call["site"].rsplit(":", 1)[1])
        assert want in SCRIPT.read_text().splitlines()[line - 1], call
    assert script["dir"] == str(own)
    assert report["trace_dir"] and list(own.rglob("*.xplane.pb"))
    assert "pgle: the workload starts its own profiler at" in err
    assert "step 7 loss" in err  # the script ran to its end (--json: its stdout on stderr)
    if mode == "trace":
        assert "trace yielded: ProfileSession (a ProfileSession: True)" in err


@pytest.mark.parametrize("version", WITH_SESSION)
def test_a_session_kept_in_memory_is_exported_for_collect(version, tmp_path):
    """ProfileSession(log_dir=None): the trace stays in memory; once the script stops it,
    pgle exports it where its own window would have written, and collect converts that."""
    python = python_of(version)
    report, err = _collect(python, tmp_path, "session-memory", None)
    script = report["window"]["script_trace"]
    assert script["dir"] and list(Path(script["dir"]).rglob("*.xplane.pb")), script
    assert report["trace_dir"]
    m = re.search(r"in-memory profile planes: (\d+)", err)
    assert m and int(m.group(1)) > 0  # the script still has its own data


@pytest.mark.parametrize("version", WITH_SESSION)
def test_trace_yields_what_it_yields_without_pgle(version, tmp_path):
    python = python_of(version)
    plain = re.search(r"trace yielded: .*", _plain(python, tmp_path, "trace", tmp_path / "a"))
    _, err = _collect(python, tmp_path, "trace", tmp_path / "b")
    under = re.search(r"trace yielded: .*", err)
    assert plain and under and plain.group(0) == under.group(0) == \
        "trace yielded: ProfileSession (a ProfileSession: True)"


@pytest.mark.parametrize("version", WITH_SESSION)
def test_pgles_own_session_is_not_taken_for_the_scripts(version, tmp_path):
    """A script without a profiler of its own: pgle's window starts and stops jax 0.12's
    ProfileSession itself, and its hook lets pgle's own session through unseen (no script
    trace, pgle's options, its trace in the run folder)."""
    report, err = _collect(python_of(version), tmp_path, "none", None)
    window = report["window"]
    assert "script_trace" not in window and window["trace"]["detail"] == "pgle", window
    assert Path(report["trace_dir"]).is_relative_to(tmp_path / ".pgle" / "runs")
    assert list(Path(report["trace_dir"]).rglob("*.xplane.pb"))
    assert "starts its own profiler" not in err and "step 7 loss" in err
