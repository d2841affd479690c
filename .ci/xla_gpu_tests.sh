#!/usr/bin/env bash
# CI step after the README's test command: the XLA:GPU deviceless lane. Installs (or reuses)
# one venv per jax version of the matrix (.ci/xla_gpu_lane.sh; wheels cached between runs in
# $PGLE_LANE_WHEELS), then runs every test marked `xla_gpu` (deselected from the default run):
# tests/xla_gpu/test_live.py (fresh real compiles judged by `pgle run` / `pgle verify`, per
# version) and the other tests that need the CUDA plugin (PGLE_XLA_GPU_PYTHON: the newest
# version's venv), then the `xla_gpu_inprocess` tests, which need the plugin in the test's own
# interpreter (.ci/plugin_venv.sh). PGLE_REQUIRE_XLA_GPU=1: a missing venv fails, never skips.
# The summary line names the jax versions that ran. Measured on the 2-core project machine: see
# docs/gpu-validation.md ("Cost").
set -euo pipefail
cd "$(dirname "$0")/.."
export PGLE_LANE_VENVS="${PGLE_LANE_VENVS:-$HOME/.cache/pgle-lane/venvs}"
t0=$(date +%s)
bash .ci/xla_gpu_lane.sh
# The other plugin tests (AOT fdo_profile, the schedule-change test of `pgle report`) run on
# jax 0.10.2 (Python 3.11, the interpreter this step runs pytest with).
newest="0.10.2"
PGLE_REQUIRE_XLA_GPU=1 PGLE_XLA_GPU_PYTHON="$PGLE_LANE_VENVS/jax-$newest/bin/python" \
    python3 -m pytest -q -m "xla_gpu and not xla_gpu_inprocess" -rs -p no:cacheprovider
# The tests that need the plugin in their own process (`xla_gpu_inprocess`: `tune --predict`
# in process, what the mutation run of `commands` judges with) run under a venv over this same
# Python that adds only the plugin (.ci/plugin_venv.sh; wheels from the lane's wheelhouse).
inprocess="$(bash .ci/plugin_venv.sh "$PGLE_LANE_VENVS/plugin-over-system")"
# Its own JUnit file beside the lane's (.ci/run's PYTEST_ADDOPTS names lane.xml: not overwritten).
opts="${PYTEST_ADDOPTS:-}"
PYTEST_ADDOPTS="${opts/.xml/-inprocess.xml}" PGLE_REQUIRE_XLA_GPU=1 "$inprocess" -m pytest -q \
    -m "xla_gpu and xla_gpu_inprocess" -rs -p no:cacheprovider
echo "lane: install + xla_gpu tests took $(( $(date +%s) - t0 )) s"
