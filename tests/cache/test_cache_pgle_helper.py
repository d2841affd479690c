"""JAX's own cache + auto PGLE logic on CPU, with no pgle in the loop.

Proves the test-only helper (tests/helpers/pgle_cpu_profile) and the strings in
pgle/evidence/jax_log.py against the installed jax: the three scenarios of JAX's
`testPersistentCachePopulatedWithAutoPgle`, in two real processes sharing a
real cache directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pythonpath
from pgle.evidence import jax_log as je

HELPER = TESTS / "helpers" / "pgle_cpu_profile"

# Runs the workload with every JAX compiler/cache record and every warning on
# stderr, one per line, exactly as the harness would capture them.
_DRIVER = r"""
import logging, runpy, sys, warnings
class H(logging.Handler):
    def emit(self, r):
        sys.stderr.write("LOG|" + r.getMessage().replace("\n", " ") + "\n")
for name in ("jax._src.compiler", "jax._src.compilation_cache"):
    lg = logging.getLogger(name); lg.setLevel(logging.DEBUG); lg.addHandler(H()); lg.propagate = False
warnings.simplefilter("always")
warnings.showwarning = lambda m, c, *a, **k: sys.stderr.write("WARN|" + str(m).replace("\n", " ") + "\n")
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run(cache_dir: Path, args: list[str], *, helper: bool, **env: str) -> list[je.JaxEvent]:
    e = pgle_env(JAX_COMPILATION_CACHE_DIR=str(cache_dir),
                 JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1", **env)
    if helper:
        e["PYTHONPATH"] = pythonpath(str(HELPER))
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(WORKLOADS / "auto_fgh.py"), *args],
                          env=e, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    events = []
    for line in proc.stderr.decode().splitlines():
        if line.startswith("LOG|"):
            ev = je.classify_log(line[4:])
        elif line.startswith("WARN|"):
            ev = je.classify_warning(line[5:])
        else:
            continue
        if ev:
            events.append(ev)
    return events


def of(events, kind, module=None):
    return [e for e in events if e.kind == kind and (module is None or e.module == module)]


def test_three_scenarios_of_jax_test_on_cpu(tmp_path: Path):
    cache_dir = tmp_path / "cache"
    runs = "2"
    # 1. prewarm: f runs runs+1 times (profiled, then recompiled), g once, h never.
    pre = run(cache_dir, ["--f", "3", "--g", "1", "--h", "0"], helper=True,
              JAX_ENABLE_PGLE="true", JAX_PGLE_PROFILING_RUNS=runs)
    fdo = of(pre, je.KIND_FDO_COMPILE, "jit_f")
    assert len(fdo) == 1 and fdo[0].value > 0
    assert not of(pre, je.KIND_FDO_COMPILE, "jit_g")
    writes = {e.key for e in of(pre, je.KIND_CACHE_WRITE, "jit_f")}
    assert len(writes) == 2  # first-pass key and PGLE-optimized key
    files = {n[:-len("-cache")] for n in os.listdir(cache_dir) if n.endswith("-cache")}
    assert writes <= files
    assert not of(pre, je.KIND_EMPTY_TRACE)  # the helper's profile is non-empty

    # 2. the Nsight-style run: EXPECT_PGLE on, auto PGLE off.
    post = run(cache_dir, ["--f", "1", "--g", "1", "--h", "1"], helper=False,
               JAX_COMPILATION_CACHE_EXPECT_PGLE="true")
    assert [e.module for e in of(post, je.KIND_PGLE_LOADED)] == ["jit_f"]
    assert "jit_g" in {e.module for e in of(post, je.KIND_PGLE_MISS)}
    assert [e.module for e in of(post, je.KIND_EXPECT_PGLE_WRITE)] == ["jit_h"]
    # The PGLE-optimized key loaded is the one prewarm wrote after the FDO compile.
    hits = {e.key for e in of(post, je.KIND_CACHE_HIT, "jit_f")}
    assert len(hits) == 1 and hits <= writes


def test_without_helper_cpu_profile_is_empty(tmp_path: Path):
    events = run(tmp_path / "cache", ["--f", "3", "--g", "0", "--h", "0"], helper=False,
                 JAX_ENABLE_PGLE="true", JAX_PGLE_PROFILING_RUNS="2")
    assert not of(events, je.KIND_FDO_COMPILE)
    assert len(of(events, je.KIND_EMPTY_TRACE)) >= 2  # one per profiled execution
    # The recompile with the empty profile reuses the first-pass entry.
    assert of(events, je.KIND_CACHE_HIT, "jit_f")
