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


def _env() -> dict[str, str]:
    env = lane.venv_env(JAX_PLATFORMS="cpu")
    # the mutation run's site folder (if any) first: its pgle is the mutated copy
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    return env


@pytest.mark.parametrize("version", MATRIX)
def test_each_profiled_execution_names_its_module_on_every_jax(version, tmp_path):
    observed_pgle.check(observed_pgle.run(python_of(version), tmp_path, _env()))


@pytest.mark.parametrize("version", ["0.7.2", "0.8.3"])
def test_a_pjit_step_is_counted_as_jit_on_both_sides_of_its_deprecation(version, tmp_path):
    """`jax.experimental.pjit.pjit` is a plain attribute up to jax 0.7.2 and an entry of the
    module's deprecation table from 0.8 (checked in the lane's venvs): the harness counts
    its calls as jit either way, and jax's own warning stays where jax gives one."""
    import json
    import subprocess

    if version not in MATRIX:
        pytest.skip(f"jax {version} is not in this lane's matrix")
    script = REPO / "tests" / "workloads" / "pjit_counted_script.py"
    p = subprocess.run([python_of(version), str(script), str(tmp_path)], env=_env(),
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    warned = ["DeprecationWarning"] if lane.vtuple(version) >= (0, 8) else []
    assert out == {"warned": warned, "outs": [[2.0, 2.0, 2.0]] * 3,
                   "functions": [["jit(step)", 3]]}


DEVICELESS = """
import json, sys
import jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import NamedSharding, PartitionSpec as P
from pgle.launch import jax_internals
written = []
jax_internals.observe_modules(lambda kind, **f: written.append([kind, f]), sys.argv[1])
topo = topologies.get_topology_desc(platform="cuda", target_config=open(sys.argv[2]).read(),
                                    topology="1x1x1")
s = NamedSharding(topologies.make_mesh(topo, (1,), ("x",)), P())
step = jax.jit(lambda a: jnp.tanh(a @ a), in_shardings=s, out_shardings=s)
step.lower(jax.ShapeDtypeStruct((64, 64), jnp.float32, sharding=s)).compile()
print(json.dumps([[k, f] for k, f in written
                  if k in ("xla_compile", "module_compiled", "module_error")]))
"""


@pytest.mark.parametrize("version", ["0.10.2"])
def test_a_deviceless_xla_gpu_compile_is_recorded_without_its_cost(version, tmp_path):
    """The real XLA:GPU compiler, deviceless for an H100 (what `pgle estimate` and the cache
    prewarm compile): its executable has no cost analysis ("GetCostAnalysis is not
    supported"), so the module's record holds no FLOPs, and its memory, rather than none."""
    import json
    import subprocess

    from helpers.aot_deviceless import H100

    if version not in MATRIX:
        pytest.skip(f"jax {version} is not in this lane's matrix")
    (tmp_path / "h100.txt").write_text(H100)
    (tmp_path / "deviceless.py").write_text(DEVICELESS)
    p = subprocess.run([python_of(version), str(tmp_path / "deviceless.py"),
                        str(tmp_path / "hlo"), str(tmp_path / "h100.txt")],
                       env={**_env(), "XLA_FLAGS": "--xla_gpu_autotune_level=0"},
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    records = json.loads(p.stdout.strip().splitlines()[-1])
    assert [k for k, _ in records] == ["xla_compile", "module_compiled"], records
    assert records[0][1]["platform"] == "gpu"
    compiled = records[1][1]
    assert compiled["module"] == "jit__lambda" and compiled["flops"] is None
    assert compiled["memory"]["argument_size_in_bytes"] == 64 * 64 * 4
