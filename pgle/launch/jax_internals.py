"""The only place pgle touches `jax._src`: per-module auto PGLE bookkeeping.

JAX logs when auto PGLE recompiles a module with a profile, but not how many
executions it profiled, nor which module an empty trace belongs to (the
RuntimeWarning names none). Those answers live in
`jax._src.profiler.PGLEProfiler` objects. `observe_pgle` (called by the harness
inside the workload process, after the workload imported jax) wraps two
functions so that every profiled execution becomes one event:

    {"kind": "pgle_profiled", "module": "jit_step", "index": 2, "runs": 3,
     "profile_bytes": 0}

Checked against jax/jaxlib 0.10.2:
- `jax._src.interpreters.pxla` calls `compiler.compile_or_get_cached(backend,
  computation, devices, compile_options, host_callbacks, executable_devices,
  pgle_profiler)` through the module attribute, once per compilation;
- `pxla.ExecuteReplicated.__call__` wraps each execution in
  `profiler.PGLEProfiler.trace(self.pgle_profiler)`; a profiled execution
  increments `called_times` and appends its FDO profile to `fdo_profiles`.
Anything missing or renamed makes `observe_pgle` return False and change
nothing: the verdict then rests on JAX's log lines alone.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Callable

from pgle.launch import schema

CHECKED_WITH_JAX = "0.10.2"
EVENT_PROFILED = schema.PGLE_PROFILED

_installed = False


def observe_pgle(write: Callable[..., None]) -> bool:
    """Emit `write("pgle_profiled", module=..., index=..., runs=..., profile_bytes=...)`
    for every execution auto PGLE profiles. Idempotent; True when installed."""
    global _installed
    if _installed:
        return True
    try:
        from jax._src import compiler, profiler
        from jax._src.lib.mlir import ir

        PGLEProfiler = profiler.PGLEProfiler
        original_compile = compiler.compile_or_get_cached
        original_trace = PGLEProfiler.trace
        for attr in ("called_times", "fdo_profiles", "retries"):
            if attr not in PGLEProfiler(1, 90).__dict__:
                return False
    except Exception:  # any jax without these internals: observe nothing
        return False

    names: "weakref.WeakKeyDictionary[object, str]" = weakref.WeakKeyDictionary()
    runs: "weakref.WeakKeyDictionary[object, int]" = weakref.WeakKeyDictionary()

    def compile_or_get_cached(backend, computation, *args, **kwargs):
        runner = kwargs.get("pgle_profiler", args[4] if len(args) > 4 else None)
        if runner is not None and runner not in names:
            try:
                names[runner] = ir.StringAttr(computation.operation.attributes["sym_name"]).value
                runs[runner] = runner.retries
            except Exception:
                pass
        return original_compile(backend, computation, *args, **kwargs)

    @contextlib.contextmanager
    def trace(runner):
        before = getattr(runner, "called_times", None)
        with original_trace(runner):
            yield
        if runner is not None and before is not None and runner.called_times > before:
            try:
                size = len(runner.fdo_profiles[-1])
            except Exception:
                size = None
            write(EVENT_PROFILED, module=names.get(runner), index=runner.called_times,
                  runs=runs.get(runner, runner.retries), profile_bytes=size)

    compiler.compile_or_get_cached = compile_or_get_cached
    PGLEProfiler.trace = staticmethod(trace)
    _installed = True
    return True
