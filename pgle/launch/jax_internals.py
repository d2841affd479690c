"""The only place pgle touches `jax._src` and jax's private arguments: per-module auto PGLE
bookkeeping, and the marker's direct TraceMe call (step_trace_init).

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
  pgle_profiler)` through the module attribute, once per compilation (all positional;
  jax 0.4.35-0.5.3 pass no executable_devices, so the profiler is one place earlier:
  checked in the lane's venvs of 0.4.35, 0.4.38, 0.5.0-0.5.3, 0.6.2-0.12.0.1);
- `pxla.ExecuteReplicated.__call__` wraps each execution in
  `profiler.PGLEProfiler.trace(self.pgle_profiler)`; a profiled execution
  increments `called_times` and appends its FDO profile to `fdo_profiles`.
Anything missing or renamed makes `observe_pgle` return False and change
nothing: the verdict then rests on JAX's log lines alone.

JAX profiles one execution at a time per process: `PGLEProfiler.trace` starts a
`_profiler.ProfilerSession` with `raise_error_on_start_failure=True`, so a second session
(another thread's profiled execution, or the workload's own `jax.profiler.start_trace`)
raises `ALREADY_EXISTS: Another profiling session active` out of the jitted call (jax
0.10.2). The observer records which session held it (`pgle_session_error`), so the verdict
can tell threads from the script's own profiler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from pgle.evidence import schema

EVENT_PROFILED = schema.PGLE_PROFILED

_installed = False


def observe_pgle(
    write: Callable[..., None], on_execution: Callable[[], None] | None = None
) -> bool:
    """Emit `write("pgle_profiled", module=..., index=..., runs=..., profile_bytes=...)`
    for every execution auto PGLE profiles, and `pgle_session_error` when one could not start
    its profiler session; `on_execution()` is called for every execution JAX dispatches
    (`ExecuteReplicated.__call__` goes through `PGLEProfiler.trace` each time, profiled or
    not). Idempotent; True when installed."""
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

    names: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
    runs: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
    # thread native id -> the module whose profiled execution it runs now
    profiling: dict[int, str | None] = {}
    # thread native id -> (module, monotonic end) of its last profiled execution: the holder
    # may finish between the failed start and this thread's handler seeing the error
    finished: dict[int, tuple[str | None, float]] = {}

    def compile_or_get_cached(backend: Any, computation: Any, *args: Any, **kwargs: Any) -> Any:
        runner = kwargs.get("pgle_profiler")
        if runner is None:  # positional, and not at one index in every jax (docstring)
            runner = next((a for a in args if isinstance(a, PGLEProfiler)), None)
        if runner is not None and runner not in names:
            try:
                names[runner] = ir.StringAttr(computation.operation.attributes["sym_name"]).value
                runs[runner] = runner.retries
            except Exception:
                pass
        return original_compile(backend, computation, *args, **kwargs)

    def will_profile(runner: Any) -> bool:
        # PGLEProfiler.trace's own test (jax 0.10.2): this execution starts a session.
        try:
            return (
                runner is not None
                and not runner.is_running()
                and runner.is_enabled()
                and not runner.is_fdo_consumed()
            )
        except Exception:
            return False

    @contextlib.contextmanager
    def trace(runner: Any) -> Iterator[None]:
        if on_execution is not None:
            on_execution()
        before = getattr(runner, "called_times", None)
        me = threading.get_native_id()
        profiled = will_profile(runner)
        began = time.monotonic()
        if profiled:
            profiling[me] = names.get(runner)
        try:
            with original_trace(runner):
                yield
        except Exception as e:
            if profiled and "ALREADY_EXISTS" in str(e):
                holders = [(t, m) for t, m in list(profiling.items()) if t != me] or [
                    (t, m) for t, (m, end) in list(finished.items()) if t != me and end >= began
                ]
                write(
                    schema.PGLE_SESSION_ERROR,
                    module=names.get(runner),
                    thread=me,
                    error=str(e).splitlines()[0][:200],
                    holder_module=holders[0][1] if holders else None,
                    holder_thread=holders[0][0] if holders else None,
                )
            raise
        finally:
            if profiled:
                finished[me] = (profiling.pop(me, None), time.monotonic())
        if runner is not None and before is not None and runner.called_times > before:
            try:
                size = len(runner.fdo_profiles[-1])
            except Exception:
                size = None
            write(
                EVENT_PROFILED,
                module=names.get(runner),
                index=runner.called_times,
                runs=runs.get(runner, runner.retries),
                profile_bytes=size,
                thread=me,
            )

    compiler.compile_or_get_cached = compile_or_get_cached
    # Patching jax's method is this module's purpose (see the docstring).
    PGLEProfiler.trace = staticmethod(trace)  # type: ignore[method-assign]
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
_MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "generated_code_size_in_bytes",
    "peak_memory_in_bytes",
)
_modules_installed = False


# Synchronous collectives (HloOpcode names): a module whose async collectives XLA made
# synchronous after scheduling (jax >= 0.11.1 gives them new names: all-reduce.6) has no
# `-start`/`-done` left, and the verdict needs its executed HLO to tell that a profile cannot
# hold them (pgle.verdicts.sync_converted).
_SYNC_COLLECTIVE_OPCODES = frozenset(
    {
        "kAllReduce",
        "kAllGather",
        "kReduceScatter",
        "kAllToAll",
        "kRaggedAllToAll",
        "kCollectivePermute",
        "kCollectiveBroadcast",
        "kSend",
        "kRecv",
    }
)
_SYNC_COLLECTIVE_TEXT = re.compile(
    r"\s(?:all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute"
    r"|collective-broadcast|send|recv)\("
)
# Reading an instruction's opcode costs several times its name (a pybind enum per call;
# benchmarks/bench_observe.py's `async_check_s` is this whole walk): instructions named like
# compute (most of them: fusions and their bodies' elementwise ops, named after the HLO opcode
# or JAX's primitive, parameters, bitcasts) are not asked. A collective is named after its
# opcode (all-reduce.6) or JAX's primitive (psum.3, ppermute.6.2, reduce_scatter.2), never
# so; a name missing here only costs its opcode read.
_COMPUTE_NAME_PREFIXES = (
    "param",
    "bitcast",
    "get-tuple-element",
    "tuple",
    "constant",
    "fusion",
    "loop_",
    "input_",
    "wrapped_",
    "gemm_",
    "fused_",
    "ynn_",
    "cublas",
    "triton",
    "custom-call",
    "copy",
    "convert",
    "broadcast",
    "reshape",
    "transpose",
    "dot",
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_precision",
    "reduce.",
    "dynamic",
    "slice",
    "concatenate",
    "select",
    "compare",
    "integer_pow",
    "exp",
    "log",
    "tanh",
    "sqrt",
    "rsqrt",
)
_COMPUTE_NAMES = frozenset(
    {
        "add",
        "mul",
        "multiply",
        "sub",
        "subtract",
        "div",
        "divide",
        "neg",
        "negate",
        "max",
        "maximum",
        "min",
        "minimum",
        "abs",
        "pow",
        "power",
        "clamp",
        "and",
        "or",
        "not",
        "xor",
        "iota",
        "pad",
        "gather",
        "scatter",
        "sort",
        "erf",
        "logistic",
        "sign",
        "square",
        "sin",
        "cos",
        "floor",
        "ceil",
        "round",
        "rem",
        "remainder",
        "squeeze",
        "expand_dims",
        "cumsum",
        "add_any",
        "argmax",
        "argmin",
        "while",
        "conditional",
        "call",
        "cond",
        "x",
        "y",
    }
)


def _module_name(computation: Any) -> str | None:
    """The module's name (`sym_name` of the MLIR module jax hands to compile_or_get_cached)."""
    try:
        from jax._src.lib.mlir import ir

        return ir.StringAttr(computation.operation.attributes["sym_name"]).value
    except Exception:
        return None


# --- a module's identity across the ranks of a job (issue 36) ----------------------------------
#
# Two ranks that compile different programs for one jitted function hang in their first
# collective (or in XLA:GPU's compile) with nothing said. The fingerprint is the sha256 of the
# module as jax's compilation cache keys it (jax 0.4.31-0.12: `cache_key._canonicalize_ir`,
# the MLIR bytecode without debug info and with host-callback pointers, which differ between
# processes, removed), so two ranks agree exactly when jax would share a cache entry.
IDENTITY_TEXT_MAX_BYTES = 1 << 20  # a bigger module's text is not kept (its hash still is)


def _distributed() -> bool:
    try:
        import jax

        return int(jax.process_count()) > 1
    except Exception:
        return False


def module_identity(computation: Any, text_dir: str) -> dict[str, Any] | None:
    """{"fingerprint", "bytes", "text_file"} of the module jax is about to compile, in a
    process of a jax.distributed job (None elsewhere: nothing to compare with, and the hash
    costs a copy of the module). The text (MLIR, without locations) is kept under `text_dir`
    for modules up to IDENTITY_TEXT_MAX_BYTES: the job names the first line two ranks'
    modules differ in."""
    if computation is None or not _distributed():
        return None
    import hashlib

    try:
        from jax._src import cache_key

        data = cache_key._canonicalize_ir(computation, cache_key.IgnoreCallbacks.ALL)
    except Exception:
        try:
            data = computation.operation.get_asm(enable_debug_info=False).encode()
        except Exception:
            return None
    fingerprint = hashlib.sha256(data).hexdigest()[:32]
    text_file = None
    if len(data) <= IDENTITY_TEXT_MAX_BYTES:
        try:
            text = computation.operation.get_asm(enable_debug_info=False)
            os.makedirs(text_dir, exist_ok=True)
            text_file = os.path.join(text_dir, f"module-{fingerprint}.mlir")
            if not os.path.exists(text_file):
                with open(text_file, "w", encoding="utf-8") as f:
                    f.write(text)
        except Exception:
            text_file = None
    return {"fingerprint": fingerprint, "bytes": len(data), "text_file": text_file}


def _has_fdo_profile(compile_options: Any) -> bool:
    """Whether XLA is handed a profile (auto PGLE's recompile, jax 0.4.31-0.12: pjit puts the
    aggregated profile in `executable_build_options.fdo_profile`)."""
    try:
        return bool(len(compile_options.executable_build_options.fdo_profile or b""))
    except Exception:
        return False


def _has_async_ops(module: Any) -> bool:
    """Whether an instruction is an async start/done or a (synchronous) collective: the
    modules whose scheduled HLO is kept. From the names and opcodes: walking them is several
    times cheaper than `to_string()` on a realistic module (benchmarks/bench_observe.py), and
    most modules have none. jaxlib without `computations()`: the text decides."""
    try:
        computations = module.computations()
    except AttributeError:
        text = module.to_string()
        return "-start" in text or "-done" in text or bool(_SYNC_COLLECTIVE_TEXT.search(text))
    for computation in computations:
        for instruction in computation.instructions():
            name = instruction.name
            if "-start" in name or "-done" in name:
                return True
            if (
                name.startswith(_COMPUTE_NAME_PREFIXES)
                or "fusion" in name
                or name.split(".", 1)[0] in _COMPUTE_NAMES
            ):
                continue
            try:
                if instruction.opcode.name in _SYNC_COLLECTIVE_OPCODES:
                    return True
            except AttributeError:  # a jaxlib whose instructions have no opcode
                pass
    return False


def observe_modules(write: Callable[..., None], hlo_dir: str) -> bool:
    """Emit `write("module_compiled", module=..., flops=..., memory={...}, hlo_file=...)` per
    compiled module. The scheduled HLO text is kept (under `hlo_dir`) only for modules with
    async ops or collectives: the schedule comparison and the verdict's collectives need no
    other. Idempotent; True when installed."""
    global _modules_installed
    if _modules_installed:
        return True
    try:
        from jax._src import compiler

        original_compile = compiler.compile_or_get_cached
    except Exception:
        return False
    counter = [0]
    seen: set[tuple[str | None, str]] = set()

    def compile_or_get_cached(*args: Any, **kwargs: Any) -> Any:
        # Before the compile (it may fail): which platform XLA compiles for, from which
        # thread. A deviceless compile for a GPU topology is `gpu` too (jax 0.4.35-0.12).
        module = None
        # Every record of this compile names its thread (issue 33): jax compiles in several
        # threads at once (a pool warming jitted functions, AOT compiles), and a reader pairs
        # a compile's begin, jax's cache events and its end within one thread.
        thread = str(threading.get_native_id())
        try:
            where = (getattr(args[0], "platform", None), thread)
            if where not in seen:
                seen.add(where)
                write(schema.XLA_COMPILE, platform=where[0], thread=where[1], pid=os.getpid())
            computation = args[1] if len(args) > 1 else kwargs.get("computation")
            module = _module_name(computation)
            # issue 36: the module's identity, before XLA sees it (a divergence across the
            # ranks of a job is named before the compile or its collectives hang).
            identity = module_identity(computation, hlo_dir)
            if identity is not None:
                write(schema.MODULE_IDENTITY, module=module, **identity)
            write(
                schema.COMPILE_BEGIN,
                module=module,
                thread=where[1],
                fdo=_has_fdo_profile(args[3] if len(args) > 3 else kwargs.get("compile_options")),
            )
        except Exception:  # an observation must never break the user's compile
            pass
        try:
            executable = original_compile(*args, **kwargs)
        except BaseException:
            write(schema.COMPILE_END, module=module, ok=False, thread=thread)
            raise
        write(schema.COMPILE_END, module=module, ok=True, thread=thread)
        try:
            _describe(executable, write, hlo_dir, counter)
        except Exception as e:  # an observation must never break the user's compile
            write(schema.MODULE_ERROR, error=f"{type(e).__name__}: {e}")
        return executable

    def _describe(
        executable: Any, write: Callable[..., None], hlo_dir: str, counter: list[int]
    ) -> None:
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
        write(
            EVENT_MODULE,
            module=module.name,
            flops=cost.get("flops"),
            transcendentals=cost.get("transcendentals"),
            bytes_accessed=cost.get("bytes accessed"),
            memory=memory,
            hlo_file=hlo_file,
        )

    compiler.compile_or_get_cached = compile_or_get_cached
    _modules_installed = True
    return True


# --- the job's key-value store, for pgle.launch.handoff ---------------------------------------
#
# `jax.distributed.initialize()` starts a coordination service (process 0) and one client per
# process; the client is `jax._src.distributed.global_state.client`, a
# `jaxlib._jax.DistributedRuntimeClient` with `key_value_set_bytes(key, value)` and
# `blocking_key_value_get_bytes(key, timeout_ms)` (jax 0.4.35-0.12; jax's own
# `_share_fdo_profiles` uses exactly these to hand auto PGLE's profile between processes).
# `jax.distributed.shutdown()` and jax's atexit `clean_up` call `global_state.shutdown()`.


def kv_client() -> tuple[Any, int, int] | None:
    """(client, process_id, num_processes) when this process called
    `jax.distributed.initialize()`; None otherwise or when jax's internals differ."""
    try:
        from jax._src import distributed

        state = distributed.global_state
        client = state.client
        if (
            client is None
            or not callable(getattr(client, "key_value_set_bytes", None))
            or not callable(getattr(client, "blocking_key_value_get_bytes", None))
        ):
            return None
        return client, int(state.process_id), int(state.num_processes)
    except Exception:
        return None


@dataclasses.dataclass
class _DeferredShutdown:
    real: Callable[[], None]  # jax's own global_state.shutdown
    released: bool = False
    asked: bool = False


_shutdown: _DeferredShutdown | None = None


def defer_distributed_shutdown() -> bool:
    """Until `release_distributed_shutdown()`, `jax.distributed.shutdown()` (the workload's own,
    or jax's atexit) only records that it was asked: the key-value store must outlive the
    workload's last line for pgle's exchange. True when deferred."""
    global _shutdown
    try:
        from jax._src import distributed

        state = distributed.global_state
        real: Callable[[], None] = state.shutdown
    except Exception:
        return False
    if _shutdown is not None:
        return True
    deferred = _shutdown = _DeferredShutdown(real)

    def shutdown() -> None:
        if deferred.released:
            deferred.real()
        else:
            deferred.asked = True

    # The instance's: jax calls global_state.shutdown().
    state.shutdown = shutdown  # type: ignore[method-assign]
    return True


def release_distributed_shutdown() -> None:
    """Let shutdown through again, and do the one the workload asked for meanwhile."""
    if _shutdown is None or _shutdown.released:
        return
    _shutdown.released = True
    if _shutdown.asked:
        _shutdown.real()


def exclude_from_jax_tracebacks(paths: list[str]) -> None:
    """jax removes its own frames from the tracebacks of errors raised through its API
    (`jax._src.traceback_util.register_exclusion`, jax 0.4.x-0.12); pgle's wrappers around
    jax's functions are dropped the same way."""
    try:
        from jax._src import traceback_util

        for path in paths:
            traceback_util.register_exclusion(path)
    except Exception:
        pass


class _JaxStepInit:
    """jax's StepTraceAnnotation.__init__, as jax 0.4.35 .. 0.12.0.1 write it (step_trace_init).
    Never called: its bytecode is the reference, so a mutant of it is no behaviour to test."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, _r=1, **kwargs)  # type: ignore[call-arg]  # pragma: no mutate


def step_trace_init(base: Any) -> tuple[Callable[..., None], dict[str, Any]]:
    """What constructs a `base` (jax's StepTraceAnnotation) and the keywords it takes besides
    the caller's, for the harness's marker (pgle.launch.harness.Harness.step_class). jax's
    own `__init__` only passes the private `_r=1` on to jaxlib's TraceMe (jax 0.4.35 ..
    0.12.0.1: the same bytecode as _JaxStepInit's), so the marker calls TraceMe's directly: a
    frame, a zero-argument super() and a dict fewer a marked step (issue 33). A jax whose
    `__init__` does anything else keeps it."""
    own = base.__dict__.get("__init__")
    code, ref = getattr(own, "__code__", None), _JaxStepInit.__init__.__code__
    if code is None or (code.co_code, code.co_names, code.co_consts) != (
        ref.co_code,
        ref.co_names,
        ref.co_consts,
    ):
        return base.__init__, {}
    return base.__mro__[1].__init__, {"_r": 1}
