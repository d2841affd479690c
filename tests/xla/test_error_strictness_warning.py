"""Issue 32: on jax >= 0.11 ERROR strictness fails every module with an async collective XLA
makes synchronous, whatever the profile (the real XLA:GPU compiler of 0.11.2 and 0.12.0.1:
tests/data/xla_gpu/<jax>/issue32/verifier-*.log). `flags explain`, `doctor` and the
pre-launch check say so, and what to use instead."""
from __future__ import annotations

from helpers.pgle_testing import pgle_env, run_pgle
from pgle.xla.flags import XlaFlags, lint

ERROR = "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR"


def test_the_pre_launch_check_warns_on_jax_0_11_and_later():
    flags = XlaFlags.parse(ERROR)
    for jax in ((0, 11, 2), (0, 12, 0, 1), None):
        (warning,) = [w for w in lint(flags, jax) if "PGLE_STRICTNESS_LEVEL_ERROR" in w]
        assert "on jax >= 0.11" in warning and "whatever the profile" in warning
        assert "use PGLE_STRICTNESS_LEVEL_WARN" in warning
    assert not [w for w in lint(flags, (0, 10, 2)) if "STRICTNESS" in w]
    assert not lint(XlaFlags.parse(ERROR.replace("ERROR", "WARN")), (0, 12, 0, 1))


def test_flags_explain_and_doctor_say_it(tmp_path):
    proc = run_pgle("flags", "explain", ERROR, cwd=tmp_path)
    out = proc.stdout.decode()
    assert "[warn]" in out and "on jax >= 0.11" in out and "hlo verifier" in out
    assert "use PGLE_STRICTNESS_LEVEL_WARN" in out
    env = {**pgle_env(), "XLA_FLAGS": ERROR}
    proc = run_pgle("doctor", cwd=tmp_path, env=env)
    line = next(ln for ln in proc.stdout.decode().splitlines() if ln.startswith("XLA_FLAGS"))
    assert "WARN" in line and "on jax >= 0.11" in line and "PGLE_STRICTNESS_LEVEL_WARN" in line
