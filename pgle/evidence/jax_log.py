"""What JAX itself says about auto PGLE and the persistent compilation cache.

Every string here was read in the jax 0.10.2 sources and seen on CPU with
jax/jaxlib 0.10.2 (tests/test_auto*.py, tests/test_nsys*.py replay them through
real runs). The harness captures records from the loggers below and Python
warnings into events.jsonl; `classify_log` / `classify_warning` turn one
captured message into a typed `JaxEvent`.

Sources (jax 0.10.2):
- jax/_src/compiler.py: `backend_compile_and_load` (FDO line),
  `log_persistent_cache_hit/miss`, `_resolve_compilation_strategy` (PGLE
  loaded / PGLE miss), `_cache_write` (not-written reasons), read/write errors;
- jax/_src/compilation_cache.py: `put_executable_and_time` (Writing ..., the
  EXPECT_PGLE write warning, size threshold);
- jax/_src/profiler.py: `PGLEProfiler.trace` (empty trace RuntimeWarning);
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from pgle.cache import key_rules
from pgle.evidence.event_kinds import Event, Log, PgleProfiled, PythonWarning

# -- loggers (logging.getLogger(__name__) in each module) -------------------
LOGGER_COMPILER = "jax._src.compiler"
LOGGER_CACHE = "jax._src.compilation_cache"
# The loggers a harness must capture, with the level JAX logs them at.
# DEBUG is needed for hits, misses, writes and the FDO line; INFO for
# "PGLE-optimized ... loaded" (since jax 0.6.2; on the root logger in 0.5.1-0.6.1).
CAPTURE_LOGGERS = (
    {"name": LOGGER_COMPILER, "level": "DEBUG"},
    {"name": LOGGER_CACHE, "level": "DEBUG"},
)
# Warnings JAX emits through `warnings.warn`; the default filter shows each
# only once per code location, so the harness must set them to "always".
WARNING_CATEGORIES = ("UserWarning", "RuntimeWarning")

# -- cache keys (cache_key.get(): "<module name>-<sha256 hex>"; module names may hold '-';
# the entry files themselves: pgle.cache.entries) ------------------------------------------
CACHE_KEY = re.compile(r"^(?P<module>.+)-(?P<hash>[0-9a-f]{64})$")

# -- what the cache key hashes (jax/_src/cache_key.py) ----------------------
# XLA_FLAGS (and LIBTPU_INIT_ARGS) split on whitespace, sorted, plus every sys.argv word
# starting with "--xla"; except the flags that never change the executable, which depend on
# the jax version (pgle.cache.key_rules).


def key_flag_words(
    xla_flags: str | None,
    argv: list[str] | tuple[str, ...] = (),
    version: tuple[int, ...] | None = None,
) -> list[str]:
    """The words of XLA_FLAGS and argv that enter the cache key of `version`, as JAX sorts
    them (None: the newest jax's rules)."""
    excluded = key_rules.key_excluded_flags(version)
    words = (xla_flags or "").split() + [a for a in argv if a.startswith("--xla")]
    return sorted(w for w in words if w.split("=")[0].lstrip("-") not in excluded)


# -- log messages (record.getMessage()) ------------------------------------
# DEBUG, compiler.backend_compile_and_load: auto PGLE recompiles with a non-empty profile.
FDO_COMPILE = re.compile(
    r"^Compiling module (?P<module>\S+) with FDO profile of length (?P<length>\d+)$"
)
# INFO, compiler._resolve_compilation_strategy, only with EXPECT_PGLE set.
PGLE_LOADED = re.compile(r"^PGLE-optimized (?P<module>\S+) loaded from compilation cache$")
# DEBUG (WARNING with JAX_LOG_COMPILES), compiler.log_persistent_cache_hit; key is %r.
CACHE_HIT = re.compile(
    r"^Persistent compilation cache hit for '(?P<module>[^']*)' with key '(?P<key>[^']+)'$"
)
# DEBUG (WARNING with JAX_EXPLAIN_CACHE_MISSES), compiler.log_persistent_cache_miss.
CACHE_MISS = re.compile(
    r"^PERSISTENT COMPILATION CACHE MISS for '(?P<module>[^']*)' with key '(?P<key>[^']+)'$"
)
# DEBUG (WARNING with JAX_EXPLAIN_CACHE_MISSES), compilation_cache.put_executable_and_time.
CACHE_WRITE = re.compile(
    r"^Writing (?P<module>\S+) to persistent compilation cache with key '(?P<key>[^']+)'$"
)
# Reasons an executable was not written (compiler._cache_write / put_executable_and_time).
NOT_WRITTEN_HOST_CALLBACKS = re.compile(
    r"^Not writing persistent cache entry for '(?P<module>[^']*)' because it uses host callbacks"
)
NOT_WRITTEN_COMPILE_TIME = re.compile(
    r"^Not writing persistent cache entry for '(?P<module>[^']*)' because it took < "
    r"(?P<min>[\d.]+) seconds to compile \((?P<took>[\d.]+)s\)$"
)
NOT_WRITTEN_SIZE = re.compile(
    r"^Not writing persistent cache entry with key '(?P<key>[^']+)' since its size "
    r"\((?P<size>\d+) bytes\) is less than threshold \((?P<min>\d+) bytes\)$"
)
NOT_WRITTEN_PROCESS = re.compile(r"^Not writing persistent cache entry since process_id != 0$")

# -- warnings (str(warning.message)) ----------------------------------------
# RuntimeWarning, profiler.PGLEProfiler.trace, once per profiled execution
# whose trace converted to b''. It names no module.
EMPTY_TRACE = re.compile(r"^PGLE collected an empty trace")
# UserWarning, compiler._resolve_compilation_strategy, EXPECT_PGLE set.
PGLE_MISS = re.compile(
    r"^PERSISTENT CACHE MISS for PGLE-optimized (?P<module>\S+) despite non-PGLE hit"
)
# UserWarning, compilation_cache.put_executable_and_time, EXPECT_PGLE set.
EXPECT_PGLE_WRITE = re.compile(
    r"^PERSISTENT CACHE WRITE with key (?P<key>(?P<module>.+)-[0-9a-f]{64}), this is unexpected "
    r"because JAX_COMPILATION_CACHE_EXPECT_PGLE is set"
)
# UserWarning, compiler._cache_read / _is_executable_in_cache / _cache_write.
CACHE_READ_ERROR = re.compile(
    r"^Error reading persistent compilation cache entry for '(?P<what>[^']*)': (?P<error>.*)$", re.S
)
CACHE_WRITE_ERROR = re.compile(
    r"^Error writing persistent compilation cache entry for '(?P<what>[^']*)': (?P<error>.*)$", re.S
)
# Inside CACHE_READ_ERROR when JAX_COMPILATION_CACHE_MAX_SIZE != -1 without
# `filelock`: JAX warns once (the first read), then silently uses no cache.
FILELOCK_MISSING = "Please install the `filelock` package"
# UserWarning, lru_cache.LRUCache.put: one entry larger than the size cap.
ENTRY_OVER_CAP = re.compile(
    r"^Cache value for key '(?P<key>[^']+)' of size (?P<size>\d+) bytes exceeds"
)


@dataclasses.dataclass(frozen=True)
class JaxEvent:
    kind: str  # one of the KIND_* names below
    module: str | None = None
    key: str | None = None
    value: int | None = None  # FDO profile length, entry size
    text: str = ""


KIND_FDO_COMPILE = "fdo_compile"
KIND_PGLE_LOADED = "pgle_loaded"
KIND_CACHE_HIT = "cache_hit"
KIND_CACHE_MISS = "cache_miss"
KIND_CACHE_WRITE = "cache_write"
KIND_NOT_WRITTEN = "not_written"
KIND_EMPTY_TRACE = "empty_trace"
KIND_PGLE_MISS = "pgle_miss"
KIND_EXPECT_PGLE_WRITE = "expect_pgle_write"
KIND_CACHE_ERROR = "cache_error"
KIND_FILELOCK_MISSING = "filelock_missing"
KIND_ENTRY_OVER_CAP = "entry_over_cap"


def classify_log(message: str) -> JaxEvent | None:
    """A captured JAX log message as a typed event; None for anything else."""
    if m := FDO_COMPILE.match(message):
        return JaxEvent(KIND_FDO_COMPILE, m["module"], value=int(m["length"]), text=message)
    if m := PGLE_LOADED.match(message):
        return JaxEvent(KIND_PGLE_LOADED, m["module"], text=message)
    if m := CACHE_HIT.match(message):
        return JaxEvent(KIND_CACHE_HIT, m["module"], m["key"], text=message)
    if m := CACHE_MISS.match(message):
        return JaxEvent(KIND_CACHE_MISS, m["module"], m["key"], text=message)
    if m := CACHE_WRITE.match(message):
        return JaxEvent(KIND_CACHE_WRITE, m["module"], m["key"], text=message)
    for pattern in (NOT_WRITTEN_HOST_CALLBACKS, NOT_WRITTEN_COMPILE_TIME):
        if m := pattern.match(message):
            return JaxEvent(KIND_NOT_WRITTEN, m["module"], text=message)
    if m := NOT_WRITTEN_SIZE.match(message):
        return JaxEvent(
            KIND_NOT_WRITTEN, module_of_key(m["key"]), m["key"], int(m["size"]), message
        )
    if NOT_WRITTEN_PROCESS.match(message):
        return JaxEvent(KIND_NOT_WRITTEN, text=message)
    return None


def classify_warning(message: str) -> JaxEvent | None:
    """A captured Python warning message as a typed event; None for anything else."""
    if EMPTY_TRACE.match(message):
        return JaxEvent(KIND_EMPTY_TRACE, text=message)
    if m := PGLE_MISS.match(message):
        return JaxEvent(KIND_PGLE_MISS, m["module"], text=message)
    if m := EXPECT_PGLE_WRITE.match(message):
        return JaxEvent(KIND_EXPECT_PGLE_WRITE, m["module"], m["key"], text=message)
    if FILELOCK_MISSING in message:
        return JaxEvent(KIND_FILELOCK_MISSING, text=message)
    for pattern in (CACHE_READ_ERROR, CACHE_WRITE_ERROR):
        if m := pattern.match(message):
            return JaxEvent(KIND_CACHE_ERROR, text=message)
    if m := ENTRY_OVER_CAP.match(message):
        return JaxEvent(
            KIND_ENTRY_OVER_CAP, module_of_key(m["key"]), m["key"], int(m["size"]), message
        )
    return None


def module_of_key(key: str) -> str | None:
    m = CACHE_KEY.match(key)
    return m["module"] if m else None


# -- per-module facts from a harness events file ------------------------------
@dataclasses.dataclass
class ModuleFacts:
    """Everything one run told about one module (by its HLO module name, e.g. `jit_step`)."""

    module: str
    profiled: int = 0  # executions auto PGLE profiled (needs the jax_internals observer)
    runs: int | None = None  # JAX_PGLE_PROFILING_RUNS the module was profiled with
    empty_profiles: int = 0  # profiled executions whose trace gave an empty profile
    fdo_lengths: list[int] = dataclasses.field(default_factory=list)  # recompiles with a profile
    hits: list[str] = dataclasses.field(default_factory=list)
    misses: list[str] = dataclasses.field(default_factory=list)
    writes: list[str] = dataclasses.field(default_factory=list)
    pgle_keys: list[str] = dataclasses.field(default_factory=list)  # keys of FDO recompiles
    not_written: list[str] = dataclasses.field(default_factory=list)  # JAX's reason, verbatim
    pgle_loaded: bool = False  # EXPECT_PGLE: loaded the PGLE-optimized entry
    pgle_miss: bool = False  # EXPECT_PGLE: fell back to the first-pass entry
    expect_writes: list[str] = dataclasses.field(default_factory=list)  # EXPECT_PGLE: compiled anew

    def keys(self) -> list[str]:
        """Every cache key this module used, first appearance first."""
        out: list[str] = []
        for k in self.misses + self.hits + self.writes:
            if k not in out:
                out.append(k)
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class RunFacts:
    modules: dict[str, ModuleFacts]
    empty_traces: int = 0  # RuntimeWarnings (module unknown without the observer)
    observed: bool = False  # the observer's per-execution events are present
    filelock_missing: bool = False
    cache_errors: list[str] = dataclasses.field(default_factory=list)
    over_cap: list[str] = dataclasses.field(default_factory=list)


def summarize(records: Sequence[Event]) -> RunFacts:
    """Fold harness records (`log`, `warning`, `pgle_profiled`) into per-module facts.

    A key is PGLE-optimized when the module's "Compiling module ... with FDO
    profile" line follows the cache MISS for that key (compile_or_get_cached
    logs the miss, then backend_compile_and_load logs the FDO line, then the
    write), which holds per thread: the lines of one module name compiling in
    several threads at once are paired within their thread (each log record
    names it, #33); records of pgle before that, in time order.
    """
    facts = RunFacts({})
    last_miss: dict[tuple[str, str | None], str] = {}  # (module, thread) -> its last miss

    def mod(name: str | None) -> ModuleFacts | None:
        if not name:
            return None
        return facts.modules.setdefault(name, ModuleFacts(name))

    for r in records:
        if isinstance(r, PgleProfiled):
            facts.observed = True
            m = mod(r.module)
            if m is None:
                continue
            m.profiled = max(m.profiled + 1, r.index or 0)
            m.runs = r.runs if "runs" in r.raw else m.runs
            if r.profile_bytes == 0:
                m.empty_profiles += 1
            continue
        thread = None
        if isinstance(r, Log):
            ev = classify_log(r.message)
            thread = str(r.thread) if r.thread is not None else None
        elif isinstance(r, PythonWarning):
            ev = classify_warning(r.message)
        else:
            continue
        if ev is None:
            continue
        m = mod(ev.module)
        if ev.kind == KIND_FDO_COMPILE and m:
            m.fdo_lengths.append(ev.value or 0)
            key = last_miss.get((m.module, thread))
            if key and key not in m.pgle_keys:
                m.pgle_keys.append(key)
        # The cache events' lines always name a key (their patterns require one).
        elif ev.kind == KIND_CACHE_MISS and m and ev.key is not None:
            m.misses.append(ev.key)
            last_miss[m.module, thread] = ev.key
        elif ev.kind == KIND_CACHE_HIT and m and ev.key is not None:
            m.hits.append(ev.key)
        elif ev.kind == KIND_CACHE_WRITE and m and ev.key is not None:
            m.writes.append(ev.key)
        elif ev.kind == KIND_NOT_WRITTEN and m:
            m.not_written.append(ev.text)
        elif ev.kind == KIND_PGLE_LOADED and m:
            m.pgle_loaded = True
        elif ev.kind == KIND_PGLE_MISS and m:
            m.pgle_miss = True
        elif ev.kind == KIND_EXPECT_PGLE_WRITE and m and ev.key is not None:
            m.expect_writes.append(ev.key)
        elif ev.kind == KIND_EMPTY_TRACE:
            facts.empty_traces += 1
        elif ev.kind == KIND_FILELOCK_MISSING:
            facts.filelock_missing = True
        elif ev.kind == KIND_CACHE_ERROR:
            facts.cache_errors.append(ev.text)
        elif ev.kind == KIND_ENTRY_OVER_CAP:
            facts.over_cap.append(ev.key or "")
    return facts
