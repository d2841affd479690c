"""jax's backend-compile event names the compiled function from jax 0.6.2 on, and not in
0.4.35-0.5.3 (checked in the lane's venvs): the harness records the compile with `fun_name`
null there, never a made-up name, so `tune --compare` reads the step module's compile time
as unknown (pgle.commands.compare.run_facts), not 0 s. Both sides of the boundary, under
`pgle collect` on each venv's jax (CPU).

Marker `xla_gpu` (the lane's venvs, .ci/xla_gpu_lane.sh)."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_live import python_of
from test_profile_session import _collect

from helpers.reference_events import read_events

pytestmark = pytest.mark.xla_gpu


@pytest.mark.parametrize("version,named", [("0.5.3", False), ("0.6.2", True)])
def test_a_compile_is_named_where_jax_names_it(version, named, tmp_path):
    report, _ = _collect(python_of(version), tmp_path, "none", None)  # pgle's own window
    compiles = read_events(Path(report["run_dir"]) / "events.jsonl").compiles
    names = {c.get("fun_name") for c in compiles}
    assert compiles and (("jit(train_step)" in names) if named else names == {None}), names
