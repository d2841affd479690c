"""`pgle estimate` on the real XLA:GPU compiler (deviceless, 8 x H100, no GPU), issue 34's
acceptance on every lane jax from 0.8.3: a data/tensor-parallel step (an all-gather and a psum,
tests/estimate/tp_step.py) captured on 8 emulated CPU devices, compiled per arm; XLA's
statistics appear per arm; the replay of the pgle arm's schedule is within 5% of XLA's own
total; with costly collectives PGLE is predicted no slower than the default; with near-free
collectives the estimate says PGLE cannot help. Marker `xla_gpu`; lane venvs from
.ci/xla_gpu_lane.sh.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from test_live import BOOT, MATRIX, _dep_paths, python_of  # noqa: E402

pytestmark = pytest.mark.xla_gpu
SCRIPT = REPO / "tests" / "estimate" / "tp_step.py"
VERSIONS = [v for v in MATRIX if tuple(int(x) for x in v.split(".")[:3]) >= (0, 8, 3)]


def _estimate(python: str, tmp: Path, *args: str) -> dict:
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "TF_CPP_", "JAX_", "PGLE_")) and k != "PYTHONPATH"}
    p = subprocess.run([python, "-c", BOOT, str(REPO), _dep_paths(), "estimate", "--json",
                        *args, str(SCRIPT)], cwd=tmp, env=env, capture_output=True, text=True,
                       timeout=1200)  # fmt: skip
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)


@pytest.mark.parametrize("version", VERSIONS)
def test_estimate_acceptance(version, tmp_path):
    python = python_of(version)
    costly = _estimate(python, tmp_path, "--what-if", "collective=x100", "--target", "h100")
    assert costly["command"] == "estimate" and costly["step_module"] == "jit_train_step"
    arms = {a["arm"]: a["modules"][0] for a in costly["arms"]}
    assert set(arms) == {"default", "pgle"}
    for m in arms.values():
        assert m["xla"]["total_cycles_before"] is not None
        assert m["xla"]["total_cycles_after"] is not None
        assert {s["kind"] for s in m["schedule"]} >= {"collective", "compute"}
    pg = arms["pgle"]
    assert pg["replayed_us"] == pytest.approx(pg["xla"]["total_cycles_after"], rel=0.05)
    assert costly["prediction"]["ratio_to_default"] <= 1.0 + 1e-9
    free = _estimate(python, tmp_path, "--what-if", "collective=x0.001")
    assert free["prediction"]["cannot_help"] is True
    assert "PGLE cannot help this module" in free["prediction"]["why"]
