"""Run NVIDIA nsys-jax's own `pgle_costs` analysis on an extracted archive (the test's reference).

Usage (in a Python >= 3.12 environment with nsys-jax, pandas, pyarrow and a `protoc` on PATH):
    python nsys_jax_reference.py ARCHIVE_DIR OUT_DIR

This is nsys-jax's unmodified pipeline (`load_profiler_data`, `apply_warmup_heuristics`,
`pgle_costs.min_compute_max_comm`, `pgle_costs.write_pbtxt`, through `pgle_costs.main`) with ONE
substitution: `get_scheduling_name` falls back to the instruction's own name when the archive's HLO
schema has no `OpMetadata.scheduling_name` (XLA added that field after the public test archives were
made; nsys-jax's own function then raises AttributeError, so the analysis cannot run on them at all).
The fallback is the same rule pgle applies; when the field exists it is used unchanged.
"""

import os
import sys

from nsys_jax.analyses import pgle_costs

_original = pgle_costs.get_scheduling_name


def get_scheduling_name(module, name):
    _, inst = module.find_instruction(name)
    metadata = inst.proto().metadata
    if "scheduling_name" not in metadata.DESCRIPTOR.fields_by_name:
        return inst.proto().name
    return _original(module, name) or inst.proto().name


if __name__ == "__main__":
    archive_dir, out_dir = sys.argv[1], sys.argv[2]
    pgle_costs.get_scheduling_name = get_scheduling_name
    os.makedirs(out_dir, exist_ok=True)
    os.chdir(out_dir)  # pgle_costs writes ./maxcomm_mincompute/<fingerprint>.pbtxt
    sys.argv = ["pgle_costs", os.path.abspath(archive_dir)]
    pgle_costs.main()
