#!/usr/bin/env bash
# XLA:GPU deviceless-compile lane: one virtual environment per jax version of the matrix,
# each with jax, jaxlib, jax-cuda12-plugin and jax-cuda12-pjrt of that version (about 1 GB
# installed; the nvidia-* CUDA wheels are not needed to compile). An environment that already
# holds the right versions is reused as it is. Wheels are kept in a wheelhouse between runs
# (pip's own HTTP cache is not enough: on the project's machines ~/.cache/pip stayed empty
# after these installs): `pip download` into it (a no-op for files already there), then
# `pip install --no-index --find-links` from it. Measured on 2 cores: 20-25 s per version for
# a plain install, 91 s cold through the wheelhouse (download + install, under load), 34 s from
# a filled wheelhouse, 0.2 s to reuse a ready venv; see tests/data/xla_gpu/README.md.
#
#   PGLE_LANE_VENVS     root of the environments (default $HOME/.cache/pgle-lane/venvs);
#                       each version lives in $PGLE_LANE_VENVS/jax-<version>
#   PGLE_LANE_WHEELS    the wheelhouse (default $HOME/.cache/pgle-lane/wheels)
#   PGLE_LANE_VERSIONS  space-separated jax versions (default: the matrix below)
#   PGLE_LANE_PYTHON    interpreter the environments are made from (default python3)
#
# Usage: .ci/xla_gpu_lane.sh [--capture DIR]
#   installs (or reuses) every version, prints which are ready, and with --capture DIR
#   also runs tests/xla_gpu/lane.py for each, writing DIR/<version>/ (logs + scenarios.json).
# Exits non-zero if any version could not be installed (or captured): it never skips one.
set -uo pipefail
cd "$(dirname "$0")/.."

VENVS="${PGLE_LANE_VENVS:-$HOME/.cache/pgle-lane/venvs}"
WHEELS="${PGLE_LANE_WHEELS:-$HOME/.cache/pgle-lane/wheels}"
# 0.10.2: newest jax for Python 3.11; 0.8.3/0.7.2: the <module>-clone schedules; 0.5.3: first
# with EXPECT_PGLE; 0.4.34: the oldest whose CUDA plugin builds a topology without a GPU
# (0.4.31 and 0.4.33 fail: "FAILED_PRECONDITION: No visible GPU devices.").
VERSIONS="${PGLE_LANE_VERSIONS:-0.10.2 0.8.3 0.7.2 0.6.2 0.5.3 0.4.34}"
PY="${PGLE_LANE_PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
CAPTURE=""
if [ "${1:-}" = "--capture" ]; then CAPTURE="${2:?--capture needs a directory}"; fi

mkdir -p "$VENVS" "$WHEELS"
ready=() failed=()
t_all=$(date +%s)
for v in $VERSIONS; do
    venv="$VENVS/jax-$v"
    check="import importlib.metadata as m, sys; want='$v'
names=('jax','jaxlib','jax-cuda12-plugin','jax-cuda12-pjrt')
got=[m.version(n) for n in names]
sys.exit(0 if all(g==want for g in got) else 1)"
    t0=$(date +%s)
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
        echo "lane: jax $v: reusing $venv"
    else
        echo "lane: jax $v: installing into $venv"
        rm -rf "$venv"
        pkgs=("jax==$v" "jaxlib==$v" "jax-cuda12-plugin==$v" "jax-cuda12-pjrt==$v")
        if ! "$PY" -m venv "$venv" ||
           ! "$venv/bin/python" -m pip download -q -d "$WHEELS" "${pkgs[@]}" ||
           ! "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELS" "${pkgs[@]}" ||
           ! "$venv/bin/python" -c "$check"; then
            echo "lane: jax $v: INSTALL FAILED" >&2
            failed+=("$v")
            continue
        fi
    fi
    echo "lane: jax $v: ready in $(( $(date +%s) - t0 )) s"
    ready+=("$v")
done
echo "lane: install/reuse of all versions took $(( $(date +%s) - t_all )) s"
echo "lane: ready: ${ready[*]:-none}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "lane: NOT ready (failed to install): ${failed[*]}" >&2
    exit 1
fi

if [ -n "$CAPTURE" ]; then
    for v in "${ready[@]}"; do
        if ! python3 tests/xla_gpu/lane.py --python "$VENVS/jax-$v/bin/python" \
                --out "$CAPTURE/$v"; then
            echo "lane: jax $v: capture FAILED" >&2
            failed+=("$v")
        fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
        echo "lane: capture failed for: ${failed[*]}" >&2
        exit 1
    fi
    echo "lane: captured: ${ready[*]}"
fi
