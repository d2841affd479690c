"""Issue 31: a warm compilation cache gave a false `not_applied`. A run whose executables jax
loaded from its persistent cache compiles nothing, so XLA logs no PGLE line; the verdict must
say so instead of judging the modules not_applied.

Two real `pgle run`s of a real JAX workload on CPU sharing a persistent cache: the second one
loads every executable (jax's own cache-hit events, pgle.evidence.compiles). Its real log and
events are then judged as a GPU run's would be (on CPU the verdict is not_applicable before
it gets there; the cache rule is the same on every backend).
"""

from __future__ import annotations

from helpers.pgle_testing import WORKLOADS, pgle_env, run_pgle, write_profile
from pgle.evidence import compiles
from pgle.evidence.events import read_events
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import judge
from pgle.verdicts.statuses import Applied

LOOPS = WORKLOADS / "real" / "loop_timing.py"


def _run(tmp_path, folder, env):
    proc = run_pgle("run", "--profile", "p.pb", "--run-dir", folder, str(LOOPS), "--",
                    "--form", "matmul", "--steps", "4", "--size", "64", "--oracle", "own.json",
                    cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    run = tmp_path / folder
    return LogScanner().scan_file(run / "workload.log"), compiles.executables(
        read_events(run / "events.jsonl"))


def _judge(evidence, rows):
    return judge(evidence, platform="cuda",
                 loaded_from_cache=[r["module"] for r in rows if r["kind"] == "cached"],
                 compiled_anew=sum(1 for r in rows if r["kind"] == "compiled"))


def test_a_run_that_loaded_every_executable_from_the_cache_is_not_not_applied(tmp_path):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    env = pgle_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    cold_evidence, cold = _run(tmp_path, "cold", env)
    warm_evidence, warm = _run(tmp_path, "warm", env)
    assert cold and all(r["kind"] == "compiled" for r in cold), cold
    assert warm and all(r["kind"] == "cached" for r in warm), warm
    verdict = _judge(warm_evidence, warm)
    assert verdict.status == Applied.ERROR, verdict.reasons
    assert "loaded from jax's persistent compilation cache" in verdict.reasons[0]
    assert " modules: jit_" in verdict.reasons[0]  # named
    # The cold run, where XLA compiled and (on CPU) logged no PGLE line: still not_applied.
    assert _judge(cold_evidence, cold).status == Applied.NOT_APPLIED
