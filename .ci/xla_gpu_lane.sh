#!/usr/bin/env bash
# XLA:GPU deviceless-compile lane: one virtual environment per jax version of the matrix
# (tests/xla_gpu/versions.txt), each with jax, jaxlib, jax-cuda12-plugin and jax-cuda12-pjrt of
# that version (about 1 GB installed; the nvidia-* CUDA wheels are not needed to compile). jax >=
# 0.11 needs Python >= 3.12: those venvs are made from the CPython 3.13 that .ci/python313.sh
# builds once and caches. An environment that already holds the right versions is reused as it
# is. Wheels are kept in a wheelhouse between runs (pip's own HTTP cache is not enough: on the
# project's machines ~/.cache/pip stayed empty after these installs): `pip download` into it (a
# no-op for files already there), then `pip install --no-index --find-links` from it. Cost: see
# docs/gpu-validation.md ("Cost") and tests/data/xla_gpu/README.md.
#
#   PGLE_LANE_VENVS     root of the environments (default $HOME/.cache/pgle-lane/venvs);
#                       each version lives in $PGLE_LANE_VENVS/jax-<version>
#   PGLE_LANE_WHEELS    the wheelhouse (default $HOME/.cache/pgle-lane/wheels)
#   PGLE_LANE_VERSIONS  space-separated jax versions (default: the whole matrix). A list that
#                       leaves out a version of the matrix is refused (exit 2) unless
#                       PGLE_LANE_SUBSET_OK=1 names the opt-out (local development only; CI never
#                       sets it), so a CI run can never shrink the matrix silently.
#   PGLE_LANE_PYTHON    interpreter the jax < 0.11 environments are made from (default python3)
#   PGLE_LANE_PY313     where .ci/python313.sh keeps the CPython 3.13 (jax >= 0.11)
#
# Usage: .ci/xla_gpu_lane.sh [--capture DIR]
#   installs (or reuses) every version, prints which are ready, and with --capture DIR
#   also runs tests/xla_gpu/lane.py for each, writing DIR/<version>/ (logs + scenarios.json).
# Exits non-zero if any version could not be installed (or captured): it never skips one.
set -uo pipefail
cd "$(dirname "$0")/.."

VENVS="${PGLE_LANE_VENVS:-$HOME/.cache/pgle-lane/venvs}"
WHEELS="${PGLE_LANE_WHEELS:-$HOME/.cache/pgle-lane/wheels}"
MATRIX="$(grep -v '^#' tests/xla_gpu/versions.txt | xargs)"
VERSIONS="${PGLE_LANE_VERSIONS:-$MATRIX}"
left_out=()
for v in $MATRIX; do
    case " $VERSIONS " in *" $v "*) ;; *) left_out+=("$v") ;; esac
done
if [ ${#left_out[@]} -gt 0 ]; then
    if [ "${PGLE_LANE_SUBSET_OK:-}" = "1" ]; then
        echo "lane: WARNING: PGLE_LANE_VERSIONS leaves out jax ${left_out[*]} of the matrix" \
             "(PGLE_LANE_SUBSET_OK=1: a partial, local run; it proves nothing for those)" >&2
    else
        echo "lane: PGLE_LANE_VERSIONS leaves out jax ${left_out[*]} of the matrix" \
             "(tests/xla_gpu/versions.txt); refusing a partial lane. For a local run of a" \
             "subset, also set PGLE_LANE_SUBSET_OK=1." >&2
        exit 2
    fi
fi
PY="${PGLE_LANE_PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
CAPTURE=""
if [ "${1:-}" = "--capture" ]; then CAPTURE="${2:?--capture needs a directory}"; fi

needs_py313() {  # jax >= 0.11 has wheels for Python >= 3.12 only
    python3 -c "import sys; v=tuple(int(x) for x in '$1'.split('.')[:2]); sys.exit(0 if v >= (0, 11) else 1)"
}

mkdir -p "$VENVS" "$WHEELS"
ready=() failed=()
t_all=$(date +%s)
PY313=""
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
        base="$PY"
        if needs_py313 "$v"; then
            if [ -z "$PY313" ] && ! PY313="$(bash .ci/python313.sh)"; then
                echo "lane: jax $v: no Python 3.13 (.ci/python313.sh failed)" >&2
                failed+=("$v"); PY313=""; continue
            fi
            base="$PY313"
        fi
        echo "lane: jax $v: installing into $venv (from $base)"
        rm -rf "$venv"
        pkgs=("jax==$v" "jaxlib==$v" "jax-cuda12-plugin==$v" "jax-cuda12-pjrt==$v")
        if ! "$base" -m venv "$venv" ||
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
