"""Auto PGLE as pgle's observer sees it, on every jax of the lane's matrix (CPU: the private
arguments jax_internals.observe_pgle reads are the same on every backend). jax 0.4.35-0.5.3
pass the PGLEProfiler to `compile_or_get_cached` one place earlier than 0.6.2-0.12 (no
executable_devices before it): read at a fixed index, every profiled execution there was
recorded with no module, and `pgle auto` lost its per-module profiled runs and empty profiles.

Marker `xla_gpu` (the lane's venvs, .ci/xla_gpu_lane.sh; a missing one fails under
PGLE_REQUIRE_XLA_GPU=1). pgle comes from the tree (PYTHONPATH; the script imports only
pgle.launch.jax_internals)."""
from __future__ import annotations

import os

import lane
import pytest
from helpers import observed_pgle
from test_live import MATRIX, REPO, python_of

pytestmark = pytest.mark.xla_gpu


@pytest.mark.parametrize("version", MATRIX)
def test_each_profiled_execution_names_its_module_on_every_jax(version, tmp_path):
    env = lane.venv_env(JAX_PLATFORMS="cpu")
    # the mutation run's site folder (if any) first: its pgle is the mutated copy
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    observed_pgle.check(observed_pgle.run(python_of(version), tmp_path, env))
