"""What `summarize` makes of a run's JAX log lines, warnings and auto PGLE observer records
(issue 37): per module, the cache keys it missed, hit and wrote, which keys were compiled with
a PGLE profile, the profiles taken (empty ones counted), why an entry was not written; for the
run, the empty traces, cache errors, a missing filelock and entries over the cache's cap. The
records are events.jsonl lines as the harness writes them (pgle.launch.harness: `log`,
`warning`, `pgle_profiled`); the messages are jax 0.10.2's (pgle.evidence.jax_log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgle.evidence.events import read_events
from pgle.evidence.jax_log import ModuleFacts, RunFacts, summarize

T0 = 1_764_000_000.0
STEP, EVAL = "jit_train_step", "jit_eval_step"
K1, K2, K3 = (f"{STEP}-{c * 64}" for c in "abc")
KE = f"{EVAL}-{'d' * 64}"
KX = f"jit_small-{'e' * 64}"
KBIG = f"jit_big-{'f' * 64}"


def log(message: str, thread: str | None = "11", level: str = "DEBUG") -> dict[str, Any]:
    r = {"kind": "log", "logger": "jax._src.compiler", "level": level, "message": message}
    return r if thread is None else {**r, "thread": thread}


def warning(message: str, category: str = "UserWarning") -> dict[str, Any]:
    return {"kind": "warning", "category": category, "message": message,
            "filename": "/site-packages/jax/_src/compiler.py", "lineno": 700}


def profiled(module: str | None, **fields: Any) -> dict[str, Any]:
    return {"kind": "pgle_profiled", "module": module, "thread": "11", **fields}


def facts_of(tmp_path: Path, records: list[dict[str, Any]]) -> RunFacts:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({**r, "t": T0 + i, "edges": 0}) + "\n"
                            for i, r in enumerate(records)))
    return summarize(read_events(path).records)


def miss(key: str, module: str = STEP, thread: str | None = "11") -> dict[str, Any]:
    return log(f"PERSISTENT COMPILATION CACHE MISS for '{module}' with key '{key}'", thread)


def fdo(length: int, thread: str | None = "11") -> dict[str, Any]:
    return log(f"Compiling module {STEP} with FDO profile of length {length}", thread)


def write(key: str, module: str = STEP, thread: str | None = "11") -> dict[str, Any]:
    return log(f"Writing {module} to persistent compilation cache with key '{key}'", thread)


def test_a_pgle_run_s_log_folds_into_what_each_module_did(tmp_path: Path):
    read_error = (f"Error reading persistent compilation cache entry for '{KE}': "
                  "OSError: [Errno 13] Permission denied")
    filelock = ("Error reading persistent compilation cache entry for 'jit_x': RuntimeError: "
                "Please install the `filelock` package to set `jax_compilation_cache_max_size`")
    not_fast = (f"Not writing persistent cache entry for '{EVAL}' because it took < 1.0 "
                "seconds to compile (0.05s)")
    not_big = (f"Not writing persistent cache entry with key '{KX}' since its size (10 bytes) "
               "is less than threshold (100 bytes)")
    facts = facts_of(tmp_path, [
        log("an unrelated line"), warning("an unrelated warning"),
        {"kind": "compile", "fun_name": "train_step", "seconds": 1.5},  # neither: skipped
        miss(K1), write(K1),
        profiled(STEP, index=1, runs=2, profile_bytes=1200),
        profiled(None, index=1, runs=2, profile_bytes=5),  # no module: counted nowhere
        profiled(STEP, index=2, runs=2, profile_bytes=0),  # an empty profile
        profiled(STEP, index=5, profile_bytes=800),  # runs not said: the last said stays
        profiled(STEP, profile_bytes=700),  # no index: one more
        warning("PGLE collected an empty trace, may be due to ...", "RuntimeWarning"),
        # The PGLE recompile of thread 11 pairs with its own miss (K2), not thread 12's (K3),
        # once however often its FDO line is logged; an FDO line with no miss before it in its
        # thread names no key
        miss(K2), miss(K3, thread="12"), fdo(4096), fdo(4096), fdo(2048, thread="13"),
        write(K2),
        log(f"Persistent compilation cache hit for '{EVAL}' with key '{KE}'"),
        log(not_fast), log(not_big),
        log("Not writing persistent cache entry since process_id != 0"),  # no module
        log(f"PGLE-optimized {STEP} loaded from compilation cache", level="INFO"),
        warning(f"PERSISTENT CACHE MISS for PGLE-optimized {EVAL} despite non-PGLE hit"),
        warning(f"PERSISTENT CACHE WRITE with key {KE}, this is unexpected because "
                "JAX_COMPILATION_CACHE_EXPECT_PGLE is set"),
        warning("PGLE collected an empty trace, may be due to ...", "RuntimeWarning"),
        warning(filelock), warning(read_error),
        warning(f"Cache value for key '{KBIG}' of size 5000 bytes exceeds the maximum cache "
                "size of 4000 bytes"),
        profiled(STEP, profile_bytes=0),  # a second empty one
    ])
    assert facts == RunFacts(
        modules={
            STEP: ModuleFacts(STEP, profiled=7, runs=2, empty_profiles=2,
                              fdo_lengths=[4096, 4096, 2048], misses=[K1, K2, K3],
                              writes=[K1, K2], pgle_keys=[K2], pgle_loaded=True),
            EVAL: ModuleFacts(EVAL, hits=[KE], not_written=[not_fast], pgle_miss=True,
                              expect_writes=[KE]),
            "jit_small": ModuleFacts("jit_small", not_written=[not_big]),
            "jit_big": ModuleFacts("jit_big"),  # its entry over the cap names it
        },
        empty_traces=2, observed=True, filelock_missing=True, cache_errors=[read_error],
        over_cap=[KBIG],
    )
    assert facts.modules[STEP].keys() == [K1, K2, K3]
    assert facts.modules["jit_small"].to_dict() == {
        "module": "jit_small", "profiled": 0, "runs": None, "empty_profiles": 0,
        "fdo_lengths": [], "hits": [], "misses": [], "writes": [], "pgle_keys": [],
        "not_written": [not_big], "pgle_loaded": False, "pgle_miss": False,
        "expect_writes": []}


def test_a_log_without_threads_pairs_the_fdo_line_with_the_last_miss(tmp_path: Path):
    # pgle before #33 wrote no thread: the lines pair in time order
    facts = facts_of(tmp_path, [miss(K1, thread=None), miss(K2, thread=None),
                                fdo(100, thread=None), miss(K3, thread=None)])
    assert facts == RunFacts(modules={STEP: ModuleFacts(
        STEP, fdo_lengths=[100], misses=[K1, K2, K3], pgle_keys=[K2])})
    assert not facts.observed


def test_an_observer_record_alone_says_the_observer_ran(tmp_path: Path):
    facts = facts_of(tmp_path, [profiled(None)])
    assert facts == RunFacts(modules={}, observed=True)
