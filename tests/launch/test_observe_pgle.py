"""What the harness sees of JAX's auto PGLE (jax_internals.observe_pgle), on real jax (CPU) in
a process of its own (it patches jax for the process): each execution auto PGLE profiles is
one `pgle_profiled` record naming its module, which of the profiled runs it was and the
profile's size; a profiling session that cannot start (the script's own trace holds the
profiler) is one `pgle_session_error`; every execution jax dispatches through the profiler's
hook is counted."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from helpers import observed_pgle
from helpers.pgle_testing import REPO, pgle_env, pythonpath, script_json


def test_auto_pgles_profiled_executions_and_a_refused_session_are_recorded(
        tmp_path: Path) -> None:
    out = observed_pgle.run(sys.executable, tmp_path,
                            pgle_env(PYTHONPATH=pythonpath(str(REPO))))
    observed_pgle.check(out)


BUSY_NOT_PROFILING = textwrap.dedent("""
    import json, sys, threading
    import jax, jax.numpy as jnp
    from jax.experimental import io_callback
    jax.config.update("jax_enable_pgle", True)
    jax.config.update("jax_pgle_profiling_runs", 2)
    # Synchronous dispatch: the thread that calls `blocker` stays inside its execution (and
    # PGLEProfiler.trace) while the callback waits.
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    from pgle.launch import jax_internals
    written = []
    jax_internals.observe_pgle(lambda kind, **fields: written.append([kind, fields]))
    inside, release, hold = threading.Event(), threading.Event(), [False]

    def wait_here(a):
        if hold[0]:
            inside.set()
            release.wait(60)
        return a

    @jax.jit
    def blocker(a):
        return io_callback(wait_here, jax.ShapeDtypeStruct(a.shape, a.dtype), a * 1.0)

    @jax.jit
    def other(a):
        return a * 2.0

    x = jnp.ones((4,))
    for _ in range(4):  # profiled twice, then compiled with its profile: done profiling
        blocker(x).block_until_ready()
    hold[0] = True
    busy = threading.Thread(target=lambda: blocker(x).block_until_ready())
    busy.start()
    out = {"inside": inside.wait(60), "busy": busy.native_id}
    jax.profiler.start_trace(sys.argv[1])  # the script's own trace holds the profiler
    try:
        other(x).block_until_ready()
    except Exception as e:
        out["raised"] = str(e).splitlines()[0]
    jax.profiler.stop_trace()
    release.set()
    busy.join()
    out["errors"] = [w[1] for w in written if w[0] == "pgle_session_error"]
    print(json.dumps(out))
""")


def test_a_refused_session_names_no_holder_for_an_execution_that_profiles_nothing(
        tmp_path: Path) -> None:
    """Another thread runs a function whose profiling runs are over (its execution goes
    through PGLEProfiler.trace but starts no session) while the script's own trace refuses a
    session: the error names no holder, not that thread's module (the holder is the script's
    trace, which pgle cannot name)."""
    script = tmp_path / "busy.py"
    script.write_text(BUSY_NOT_PROFILING)
    out = observed_pgle.run(sys.executable, tmp_path,
                            pgle_env(PYTHONPATH=pythonpath(str(REPO))), script)
    assert out["inside"] and out["raised"].startswith("ALREADY_EXISTS"), out
    assert [(e["module"], e["holder_module"], e["holder_thread"]) for e in out["errors"]] == [
        ("jit_other", None, None)], out


WITHOUT_INTERNALS = textwrap.dedent("""
    import json, sys
    from jax._src import compiler, profiler
    if sys.argv[1] == "no-profiler":  # a jax before auto PGLE's profiler class
        del profiler.PGLEProfiler
    else:  # a jax whose profiler keeps its profiled runs elsewhere
        class Renamed(profiler.PGLEProfiler):
            def __init__(self, retries, percentile):
                super().__init__(retries, percentile)
                self.max_runs = self.__dict__.pop("retries")
        profiler.PGLEProfiler = Renamed
    def trace():
        return getattr(getattr(profiler, "PGLEProfiler", None), "trace", None)
    compile_before, trace_before = compiler.compile_or_get_cached, trace()
    from pgle.launch import jax_internals
    installed = jax_internals.observe_pgle(lambda kind, **fields: None)
    print(json.dumps([installed, compiler.compile_or_get_cached is compile_before,
                      trace() == trace_before]))
""")


@pytest.mark.parametrize("jax_form", ["no-profiler", "renamed-attribute"])
def test_a_jax_without_auto_pgles_internals_is_left_unpatched(jax_form, tmp_path: Path) -> None:
    """The observer patches only the jax it was checked against: where the profiler class or
    one of the attributes it reads is missing, it reports itself not installed (the harness's
    `observe_pgle` record says so) and jax's compile and trace are jax's own."""
    assert script_json(tmp_path, "old_jax.py", WITHOUT_INTERNALS, jax_form) == [False, True, True]


AOT_UNDER_AUTO_PGLE = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_pgle", True)
    jax.config.update("jax_pgle_profiling_runs", 2)
    from pgle.launch import jax_internals
    written = []
    jax_internals.observe_pgle(lambda kind, **fields: written.append([kind, fields["module"]]))
    x = jnp.ones(3)
    def double(x):
        return x * 2.0
    compiled = jax.jit(double).lower(x).compile()
    runs = [compiled(x).tolist() for _ in range(3)]
    print(json.dumps([runs, written]))
""")


def test_an_aot_compile_under_auto_pgle_compiles_and_profiles_nothing(tmp_path: Path) -> None:
    """`.lower().compile()` under auto PGLE: jax hands that compile no profiler (None, checked
    on jax 0.10.2), so its executions are never profiled; the compile and its executions are
    jax's own. (`jnp.ones`' own jitted functions are profiled: they went through jit.)"""
    runs, written = script_json(tmp_path, "aot.py", AOT_UNDER_AUTO_PGLE)
    assert runs == [[2.0, 2.0, 2.0]] * 3
    assert written and {kind for kind, _ in written} == {"pgle_profiled"}
    assert "jit_double" not in {module for _, module in written} and None not in written[0]
