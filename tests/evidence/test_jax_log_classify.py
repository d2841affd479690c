"""`classify_log` / `classify_warning` (issue 37): each message JAX logs or warns about auto PGLE
and the persistent cache (jax 0.10.2's wording, pgle.evidence.jax_log) as its whole typed
event: kind, module, key, the number it carries and the message itself (a report quotes the
not-written reasons and cache errors verbatim)."""

from __future__ import annotations

import pytest

from pgle.evidence import jax_log
from pgle.evidence.jax_log import JaxEvent, classify_log, classify_warning

M = "jit_train-step.1"  # '-' and '.' as XLA's clones and renames give them
KEY = f"{M}-{'0123456789abcdef' * 4}"

LOGS = [
    (f"Compiling module {M} with FDO profile of length 4096",
     JaxEvent(jax_log.KIND_FDO_COMPILE, M, value=4096)),
    (f"PGLE-optimized {M} loaded from compilation cache", JaxEvent(jax_log.KIND_PGLE_LOADED, M)),
    (f"Persistent compilation cache hit for '{M}' with key '{KEY}'",
     JaxEvent(jax_log.KIND_CACHE_HIT, M, KEY)),
    (f"PERSISTENT COMPILATION CACHE MISS for '{M}' with key '{KEY}'",
     JaxEvent(jax_log.KIND_CACHE_MISS, M, KEY)),
    (f"Writing {M} to persistent compilation cache with key '{KEY}'",
     JaxEvent(jax_log.KIND_CACHE_WRITE, M, KEY)),
    ((f"Not writing persistent cache entry for '{M}' because it uses host callbacks (e.g. from "
      "jax.debug.print or breakpoint)"),
     JaxEvent(jax_log.KIND_NOT_WRITTEN, M)),
    ((f"Not writing persistent cache entry for '{M}' because it took < 1.0 seconds to compile "
      "(0.25s)"),
     JaxEvent(jax_log.KIND_NOT_WRITTEN, M)),
    ((f"Not writing persistent cache entry with key '{KEY}' since its size (512 bytes) is less "
      "than threshold (1024 bytes)"),
     JaxEvent(jax_log.KIND_NOT_WRITTEN, M, KEY, 512)),
    ("Not writing persistent cache entry since process_id != 0",
     JaxEvent(jax_log.KIND_NOT_WRITTEN)),
]

WARNINGS = [
    (("PGLE collected an empty trace, may be due to contention with another tool that "
      "subscribes to CUPTI, such as Nsight Systems"),
     JaxEvent(jax_log.KIND_EMPTY_TRACE)),
    ((f"PERSISTENT CACHE MISS for PGLE-optimized {M} despite non-PGLE hit; it may not have been "
      "executed sufficiently many times"),
     JaxEvent(jax_log.KIND_PGLE_MISS, M)),
    ((f"PERSISTENT CACHE WRITE with key {KEY}, this is unexpected because "
      "JAX_COMPILATION_CACHE_EXPECT_PGLE is set. The execution that populated the cache may "
      "lack coverage"),
     JaxEvent(jax_log.KIND_EXPECT_PGLE_WRITE, M, KEY)),
    ((f"Error reading persistent compilation cache entry for '{M}': RuntimeError: Please "
      "install the `filelock` package to set `jax_compilation_cache_max_size`"),
     JaxEvent(jax_log.KIND_FILELOCK_MISSING)),
    ((f"Error reading persistent compilation cache entry for '{M}': OSError: [Errno 5]\nI/O "
      "error"),
     JaxEvent(jax_log.KIND_CACHE_ERROR)),
    ((f"Error writing persistent compilation cache entry for '{M}': OSError: [Errno 28] No "
      "space left on device"),
     JaxEvent(jax_log.KIND_CACHE_ERROR)),
    ((f"Cache value for key '{KEY}' of size 2048 bytes exceeds the maximum cache size of 1024 "
      "bytes"),
     JaxEvent(jax_log.KIND_ENTRY_OVER_CAP, M, KEY, 2048)),
]


@pytest.mark.parametrize(("message", "event"), LOGS, ids=[e.kind for _, e in LOGS])
def test_each_jax_log_line_is_its_whole_event(message: str, event: JaxEvent):
    assert classify_log(message) == JaxEvent(event.kind, event.module, event.key, event.value,
                                             message)
    assert classify_warning(message) is None


@pytest.mark.parametrize(("message", "event"), WARNINGS, ids=[e.kind for _, e in WARNINGS])
def test_each_jax_warning_is_its_whole_event(message: str, event: JaxEvent):
    assert classify_warning(message) == JaxEvent(event.kind, event.module, event.key,
                                                 event.value, message)
    assert classify_log(message) is None


def test_other_messages_are_no_event():
    for message in ("Compiling jit_f with global shapes", "", "PGLE collected a trace"):
        assert classify_log(message) is None and classify_warning(message) is None
    assert jax_log.module_of_key(KEY) == M and jax_log.module_of_key("jit_f-0abc") is None
