#!/usr/bin/env bash
# A venv over the system Python (its site-packages: jax, pytest, pgle's deps) that adds only the
# CUDA compiler plugin of that Python's jax (jax-cuda12-plugin, jax-cuda12-pjrt: XLA:GPU's
# compiler, no GPU needed) and a `mutmut` launcher beside its python. For the tests that need the
# plugin in their own process (marker `xla_gpu_inprocess`: .ci/xla_gpu_tests.sh runs them with
# it) and for the mutation run of `commands` (tests/mutants/score.py looks for mutmut beside
# sys.executable). The system Python itself never gets the plugin: every other test run
# would then see XLA:GPU's compiler. Reused when it already holds the right version.
#
#   .ci/plugin_venv.sh DIR      prints DIR/bin/python when ready; exit 1 if it cannot be made
#   PGLE_LANE_WHEELS            wheelhouse of .ci/xla_gpu_lane.sh (default
#                               $HOME/.cache/pgle-lane/wheels): installed from it when it holds
#                               the wheels, else from the package index into it
set -euo pipefail
venv="${1:?usage: .ci/plugin_venv.sh DIR}"
base="${PGLE_PLUGIN_BASE_PYTHON:-python3}"
WHEELS="${PGLE_LANE_WHEELS:-$HOME/.cache/pgle-lane/wheels}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
v="$("$base" -c 'import jax; print(jax.__version__)')"
check="import importlib.metadata as m, importlib.util as u, sys
ok = all(m.version(n) == '$v' for n in ('jax-cuda12-plugin', 'jax-cuda12-pjrt'))
sys.exit(0 if ok and u.find_spec('jax_plugins.xla_cuda12') else 1)"
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; }; then
    rm -rf "$venv"
    "$base" -m venv --system-site-packages "$venv" >&2
    pkgs=("jax-cuda12-plugin==$v" "jax-cuda12-pjrt==$v")
    mkdir -p "$WHEELS"
    # --no-deps: jax and jaxlib are the system Python's own (same version); the nvidia-* wheels
    # are not needed to compile.
    "$venv/bin/python" -m pip download -q --no-deps -d "$WHEELS" "${pkgs[@]}" >&2 ||
        echo "plugin_venv: pip download failed; trying the wheelhouse as it is" >&2
    "$venv/bin/python" -m pip install -q --no-deps --no-index --find-links "$WHEELS" \
        "${pkgs[@]}" >&2
    "$venv/bin/python" -c "$check"
fi
# mutmut's own launcher, run by this venv's python (mutmut is the system Python's, if installed).
cat > "$venv/bin/mutmut" <<EOF
#!$venv/bin/python
import sys
from mutmut.__main__ import cli
sys.exit(cli())
EOF
chmod +x "$venv/bin/mutmut"
echo "$venv/bin/python"
