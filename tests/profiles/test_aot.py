"""pgle.aot: per-function fdo_profile for ahead-of-time compiles.

The GPU path runs on the real XLA:GPU compiler (deviceless H100) in a Python named by
PGLE_XLA_GPU_PYTHON (jax + jax-cuda12-plugin/pjrt); it FAILS when PGLE_REQUIRE_XLA_GPU=1 and that
Python is missing, and skips otherwise. The CPU tests run real JAX on CPU in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.pgle_testing import REPO, TESTS, pgle_env


def _gpu_python() -> str:
    python = os.environ.get("PGLE_XLA_GPU_PYTHON")
    if python and os.path.exists(python):
        return python
    if os.environ.get("PGLE_REQUIRE_XLA_GPU") == "1":
        pytest.fail("PGLE_REQUIRE_XLA_GPU=1 but PGLE_XLA_GPU_PYTHON does not name a Python")
    pytest.skip("set PGLE_XLA_GPU_PYTHON to a Python with jax + jax-cuda12-plugin for the real XLA:GPU compiler")


def _deviceless(mode: str) -> dict:
    proc = subprocess.run([_gpu_python(), str(TESTS / "helpers" / "aot_deviceless.py"), mode],
                          env=pgle_env(PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="0"),
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


@pytest.mark.xla_gpu
@pytest.mark.parametrize("mode, fmt", [("fit", "text"), ("binary", "binary")])
def test_fdo_profile_used_by_real_xla_gpu(mode, fmt):
    v = _deviceless(mode)
    assert v["names"] > 5
    assert (v["used"], v["status"], v["format"]) == (True, "used", fmt)
    assert [m["module"] for m in v["modules"]] == ["jit_body"] and v["modules"][0]["found_profile"]
    assert v["modules"][0]["missing"] in (None, 0) and v["reasons"] == []


@pytest.mark.xla_gpu
def test_partial_profile_names_the_missing_instructions():
    v = _deviceless("partial")
    # The checker counts the instructions it costs (fusions, collectives), not parameters.
    assert v["used"] and 1 <= v["modules"][0]["missing"] < v["names"]
    assert "all-gather-start" in v["modules"][0]["missing_names"]
    assert "instructions are not in the profile" in v["reasons"][0]


@pytest.mark.xla_gpu
def test_garbage_profile_is_reported_unparsable():
    v = _deviceless("garbage")
    assert (v["used"], v["status"]) == (False, "unparsable")


CPU_SCRIPT = r"""
import json, jax, jax.numpy as jnp
from pgle import aot
from pgle.errors import ProfileError
f = jax.jit(lambda x: jnp.tanh(x @ x).sum())
x = jnp.ones((64, 64))
try:
    aot.collect_fdo_profile(f, x, runs=2)
    collected = "no error"
except ProfileError as e:
    collected = str(e)
compiled, verdict = aot.compile_with_profile(f, x, profile=b'costs { name: "dot" cost_us: 1.0 }')
print(json.dumps({"collected": collected, "status": verdict.status, "result": float(compiled(x))}))
"""


def test_cpu_collect_is_a_clear_error_and_compile_cannot_be_judged(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CPU_SCRIPT], cwd=tmp_path, capture_output=True,
                          env=pgle_env(TF_CPP_MIN_LOG_LEVEL="0"), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    out = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert "empty profile" in out["collected"] and "always so on CPU" in out["collected"]
    assert out["status"] == "unknown"  # XLA:CPU prints no PGLE line
    assert out["result"] > 0  # the executable compiled with the fdo_profile runs
