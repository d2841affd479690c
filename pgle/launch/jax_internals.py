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

from pgle.evidence import schema

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


# --- per-module cost, memory and schedule, for `pgle report` --------------------------------
#
# XLA's own numbers for every compiled module, as the executable JAX just built (or loaded
# from the cache) reports them; checked against jax/jaxlib 0.10.2:
# - `compiler.compile_or_get_cached(...)` returns a `jaxlib._jax.LoadedExecutable`;
# - `.cost_analysis()` -> dict with "flops", "transcendentals", "bytes accessed" (per device:
#   the SPMD-partitioned module);
# - `.get_compiled_memory_stats()` -> argument/output/alias/temp/generated-code sizes and
#   (GPU) `peak_memory_in_bytes`;
# - `.hlo_modules()[0].to_string()` -> the optimized, scheduled HLO text (what
#   `compiled.as_text()` shows): the order the latency-hiding scheduler chose.
EVENT_MODULE = schema.MODULE_COMPILED
_MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                  "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")
_modules_installed = False


def _has_async_ops(module) -> bool:
    """Whether an instruction is an async start/done, from the names: walking them is several
    times cheaper than `to_string()` on a realistic module (benchmarks/bench_observe.py), and
    most modules have none. jaxlib without `computations()`: the text decides."""
    try:
        computations = module.computations()
    except AttributeError:
        text = module.to_string()
        return "-start" in text or "-done" in text
    for computation in computations:
        for instruction in computation.instructions():
            name = instruction.name
            if "-start" in name or "-done" in name:
                return True
    return False


def observe_modules(write: Callable[..., None], hlo_dir: str) -> bool:
    """Emit `write("module_compiled", module=..., flops=..., memory={...}, hlo_file=...)` per
    compiled module. The scheduled HLO text is kept (under `hlo_dir`) only for modules with
    async ops: the schedule comparison needs no other. Idempotent; True when installed."""
    global _modules_installed
    if _modules_installed:
        return True
    try:
        from jax._src import compiler
        original_compile = compiler.compile_or_get_cached
    except Exception:
        return False
    import os
    import threading

    counter = [0]
    seen: set[tuple] = set()

    def compile_or_get_cached(*args, **kwargs):
        # Before the compile (it may fail): which platform XLA compiles for, from which
        # thread. A deviceless compile for a GPU topology is `gpu` too (jax 0.4.35-0.12).
        try:
            where = (getattr(args[0], "platform", None), str(threading.get_native_id()))
            if where not in seen:
                seen.add(where)
                write(schema.XLA_COMPILE, platform=where[0], thread=where[1], pid=os.getpid())
        except Exception:  # an observation must never break the user's compile
            pass
        executable = original_compile(*args, **kwargs)
        try:
            _describe(executable, write, hlo_dir, counter)
        except Exception as e:  # an observation must never break the user's compile
            write(schema.MODULE_ERROR, error=f"{type(e).__name__}: {e}")
        return executable

    def _describe(executable, write, hlo_dir, counter):
        module = executable.hlo_modules()[0]
        try:
            cost = executable.cost_analysis() or {}
        except Exception:  # a deviceless XLA:GPU compile: "GetCostAnalysis is not supported"
            cost = {}
        if isinstance(cost, list):  # older jaxlibs: one dict per partition
            cost = cost[0] if cost else {}
        try:
            mem = executable.get_compiled_memory_stats()
            memory = {f: getattr(mem, f) for f in _MEMORY_FIELDS if hasattr(mem, f)}
        except Exception:  # the schedule is still worth keeping
            memory = {}
        hlo_file = None
        if _has_async_ops(module):
            text = module.to_string()
            counter[0] += 1
            os.makedirs(hlo_dir, exist_ok=True)
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in module.name)
            hlo_file = os.path.join(hlo_dir, f"{counter[0]:03d}-{safe}.txt")
            with open(hlo_file, "w", encoding="utf-8") as f:
                f.write(text)
        write(EVENT_MODULE, module=module.name,
              flops=cost.get("flops"), transcendentals=cost.get("transcendentals"),
              bytes_accessed=cost.get("bytes accessed"), memory=memory, hlo_file=hlo_file)

    compiler.compile_or_get_cached = compile_or_get_cached
    _modules_installed = True
    return True
