"""The compare table's communication cells (`tune --compare`, `exposed_ms_per_device`,
`hidden_ms_per_device`): milliseconds per device, whatever the number of GPUs, from a GPU-shaped
trace whose timeline is known (tests/helpers/gpu_trace.py). Issue 37's independent mutants: the
picoseconds divided as if they were nanoseconds, the devices summed."""

from __future__ import annotations

import pytest

from helpers.gpu_trace import GpuShape, write_gpu_trace
from pgle.commands.compare import _communication


@pytest.mark.parametrize("devices", [1, 4])
def test_communication_is_milliseconds_per_device(tmp_path, devices):
    # Each step, on each device: two 100 us fusions, one 300 us all-gather from 50 us on, so
    # 150 us of it behind the fusions and 150 us exposed after them; 20 steps.
    shape = GpuShape(steps=20, devices=devices, compute_ops=2, op_us=100,
                     collectives=("all-gather",), collective_us=300, host_copy=False)
    # Where jax.profiler puts a run's trace, as pgle keeps it: trace/plugins/profile/<stamp>/.
    write_gpu_trace(tmp_path / "trace" / "plugins" / "profile" / "2026_11_28_12_00_00", shape)
    comm, why = _communication(tmp_path, "gpu")
    assert why is None and comm is not None
    total_ms = 20 * 0.300
    whole = comm["exposed_ms_per_device"] + comm["hidden_ms_per_device"]
    assert whole == pytest.approx(total_ms, rel=0.02)
    assert comm["exposed_ms_per_device"] == pytest.approx(total_ms / 2, rel=0.05)
    assert comm["collectives"] == 20 * devices
