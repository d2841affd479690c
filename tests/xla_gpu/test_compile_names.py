"""jax's backend-compile event names the compiled function from jax 0.6.2 on, and not in
0.4.35-0.5.3 (checked in the lane's venvs): the harness records the compile with `fun_name`
null there, never a made-up name, so `tune --compare` reads the step module's compile time
as unknown (pgle.commands.compare.run_facts), not 0 s. Both sides of the boundary, under
`pgle collect` on each venv's jax (CPU).

Marker `xla_gpu` (the lane's venvs, .ci/xla_gpu_lane.sh)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import lane
import pytest
from test_live import BOOT, REPO, _dep_paths, python_of

from helpers.reference_events import read_events

pytestmark = pytest.mark.xla_gpu

SCRIPT = REPO / "tests" / "workloads" / "real" / "profile_session_script.py"


@pytest.mark.parametrize("version,named", [("0.5.3", False), ("0.6.2", True)])
def test_a_compile_is_named_where_jax_names_it(version, named, tmp_path):
    p = subprocess.run([python_of(version), "-c", BOOT, str(REPO), _dep_paths(), "collect",
                        "-o", "p.pb", "--allow-empty", "--run-dir", "c", str(SCRIPT), "--",
                        "--mode", "none"], cwd=tmp_path, env=lane.venv_env(JAX_PLATFORMS="cpu"),
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    compiles = read_events(Path(tmp_path / "c" / "events.jsonl")).compiles
    names = {c.get("fun_name") for c in compiles}
    assert compiles and (("jit(train_step)" in names) if named else names == {None}), names
