"""Issue 33: jax compiles in several threads at once (a pool warming jitted functions, AOT
compiles from threads), and each executable's kind (compiled, or loaded from jax's persistent
cache) and seconds must be its own compile's, not those of whichever compile began last.

In process: events files whose compile records of two or three threads interleave, as the
harness writes them (every record names its thread), and files of pgle before the fix (only the
compile's begin names its thread), which keep their time-order pairing. Real: a script whose
threads compile distinct functions at once (a barrier before their first calls), run twice
under `pgle run` on one persistent cache, the second with one function changed; the report's
JSON names each module's kind and seconds, whether or not the compiles overlapped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.pgle_testing import pgle_env, report_of, run_pgle, write_profile

from pgle.evidence import compiles, jax_log
from pgle.evidence.events import read_events
from pgle.launch.step_rule import module_of

USE, HIT, WRITTEN = compiles.USE, compiles.HIT, compiles.WRITTEN


def _file(tmp_path: Path, records: list[dict[str, Any]], threaded: bool = True) -> Path:
    """An events file of `records` ({kind, t, thread, ...}); without `threaded`, as pgle before
    the fix wrote it: only compile_begin names its thread. Written out of time order, as the
    harness's buffered kinds may be (the reader sorts by t)."""
    lines = []
    for r in records:
        r = dict(r)
        if not threaded and r["kind"] != "compile_begin":
            r.pop("thread", None)
        lines.append(json.dumps(r))
    path = tmp_path / ("events.jsonl" if threaded else "old-events.jsonl")
    path.write_text("\n".join(reversed(lines)) + "\n")
    return path


def _begin(t: float, thread: str, module: str) -> dict[str, Any]:
    return {"kind": "compile_begin", "t": t, "module": module, "fdo": False, "thread": thread}


def _end(t: float, thread: str, module: str) -> dict[str, Any]:
    return {"kind": "compile_end", "t": t, "module": module, "ok": True, "thread": thread}


def _event(t: float, thread: str, event: str) -> dict[str, Any]:
    return {"kind": "jax_event", "t": t, "event": event, "thread": thread}


def _seconds(t: float, thread: str, fun: str, seconds: float) -> dict[str, Any]:
    return {"kind": "compile", "t": t, "fun_name": fun, "seconds": seconds, "thread": thread}


# Thread 101 loads jit_a from the cache; 202 compiles jit_b and writes it; 303 compiles jit_c
# with the cache off (no cache event). The last compile to begin (jit_c) sees the other
# threads' hit and their seconds first.
THREE = [
    _begin(1.0, "101", "jit_a"),
    _begin(2.0, "202", "jit_b"),
    _event(3.0, "101", USE),
    _event(4.0, "202", USE),
    _begin(5.0, "303", "jit_c"),
    _event(6.0, "101", HIT),
    _end(7.0, "101", "jit_a"),
    _event(8.0, "202", WRITTEN),
    _seconds(9.0, "101", "jit(a)", 0.05),
    _end(10.0, "303", "jit_c"),
    _end(11.0, "202", "jit_b"),
    _seconds(12.0, "303", "jit(c)", 0.7),
    _seconds(13.0, "202", "jit(b)", 1.5),
]


def test_each_thread_s_compile_gets_its_own_cache_events_and_seconds(tmp_path):
    rows = compiles.executables(read_events(_file(tmp_path, THREE)))
    assert rows == [
        {"module": "jit_a", "kind": "cached", "cache": "hit", "seconds": 0.05},
        {"module": "jit_b", "kind": "compiled", "cache": "written", "seconds": 1.5},
        {"module": "jit_c", "kind": "compiled", "cache": "off", "seconds": 0.7},
    ]
    assert compiles.by_kind(rows) == {
        "compiled": {"count": 2, "seconds": 2.2},
        "cached": {"count": 1, "seconds": 0.05},
    }
    assert compiles.label(rows, "jit_a") == "cached" and compiles.label(rows, "jit_c") == "compiled"


def test_two_threads_compiling_one_module_name_and_a_thread_that_compiles_twice(tmp_path):
    # jit_f for two shapes at once: 7 misses and writes, 8 hits; 7 then compiles jit_g (a
    # hit) while 8's seconds are still to come.
    records = [
        _begin(1.0, "7", "jit_f"),
        _begin(1.5, "8", "jit_f"),
        _event(2.0, "8", USE),
        _event(2.5, "7", USE),
        _event(3.0, "8", HIT),
        _event(3.5, "7", WRITTEN),
        _end(4.0, "7", "jit_f"),
        _seconds(4.5, "7", "jit(f)", 2.0),
        _begin(5.0, "7", "jit_g"),
        _event(5.5, "7", USE),
        _end(6.0, "8", "jit_f"),
        _event(6.5, "7", HIT),
        _seconds(7.0, "8", "jit(f)", 0.25),
        _end(7.5, "7", "jit_g"),
        _seconds(8.0, "7", "jit(g)", 0.125),
    ]
    rows = compiles.executables(read_events(_file(tmp_path, records)))
    assert rows == [
        {"module": "jit_f", "kind": "compiled", "cache": "written", "seconds": 2.0},
        {"module": "jit_f", "kind": "cached", "cache": "hit", "seconds": 0.25},
        {"module": "jit_g", "kind": "cached", "cache": "hit", "seconds": 0.125},
    ]
    assert compiles.label(rows, "jit_f") == "mixed"


def test_a_run_folder_of_pgle_before_the_fix_keeps_its_time_order_pairing(tmp_path):
    # One compile at a time (the only case the old pairing got right): the same answer.
    sequential = [
        _begin(1.0, "101", "jit_a"),
        _event(2.0, "101", USE),
        _event(3.0, "101", HIT),
        _end(4.0, "101", "jit_a"),
        _seconds(5.0, "101", "jit(a)", 0.05),
        _begin(6.0, "202", "jit_b"),
        _event(7.0, "202", USE),
        _event(8.0, "202", WRITTEN),
        _end(9.0, "202", "jit_b"),
        _seconds(10.0, "202", "jit(b)", 1.5),
    ]
    want = [
        {"module": "jit_a", "kind": "cached", "cache": "hit", "seconds": 0.05},
        {"module": "jit_b", "kind": "compiled", "cache": "written", "seconds": 1.5},
    ]
    assert compiles.executables(read_events(_file(tmp_path, sequential, threaded=False))) == want
    assert compiles.executables(read_events(_file(tmp_path, sequential))) == want
    # Interleaved, with no thread to tell them apart: the cache events and ends go to the last
    # compile begun, as before (the records cannot say better).
    assert compiles.executables(read_events(_file(tmp_path, THREE, threaded=False))) == [
        {"module": "jit_a", "kind": "compiled", "cache": "off", "seconds": None},
        {"module": "jit_b", "kind": "compiled", "cache": "miss", "seconds": None},
        {"module": "jit_c", "kind": "cached", "cache": "hit", "seconds": 0.05},
    ]


THREADS = """
import sys
import threading

import numpy as np
import jax
import jax.numpy as jnp

N = 3
FRESH = int(sys.argv[1])  # this thread's function takes a shape no earlier run compiled
barrier = threading.Barrier(N)
out = [None] * N


def work(i):
    def body(x):
        for _ in range(i + 1):
            x = jnp.tanh(x @ x.T) + i
        return x.sum()

    body.__name__ = f"thread_fn_{i}"  # its own module: jit_thread_fn_<i>
    f = jax.jit(body)
    n = 32 + 8 * i + (4 if i == FRESH else 0)
    x = np.ones((n, n), np.float32)  # numpy: no jax compile before f's
    barrier.wait()  # the threads compile at once (likely, not certain)
    out[i] = float(f(x))


threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(out)
"""


def _executables(tmp_path: Path, folder: str, fresh: int, env: dict[str, str]) -> list[dict]:
    proc = run_pgle("run", "--profile", "p.pb", "--run-dir", folder, "threads.py", "--",
                    str(fresh), cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    proc = run_pgle("report", "--json", folder, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    made = report_of(proc)["analysis"]["compile"]["after"]["executables"]
    # Each row's seconds are its own module's: jax's backend-compile event of that function.
    seconds = {}
    for c in read_events(tmp_path / folder / "events.jsonl").compiles:
        assert c.thread is not None  # the harness names the compiling thread
        seconds[module_of(c.fun_name or "")] = c.seconds
    assert len(made) == len(seconds) == 3, made  # one compile of each function, no other
    for row in made:
        assert row["seconds"] == seconds[row["module"]], (row, seconds)
    return made


def test_threads_compiling_at_once_each_get_their_own_kind_on_a_real_cache(tmp_path):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    (tmp_path / "threads.py").write_text(THREADS)
    env = pgle_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    cold = _executables(tmp_path, "cold", -1, env)
    assert {r["module"]: (r["kind"], r["cache"]) for r in cold} == {
        f"jit_thread_fn_{i}": ("compiled", "written") for i in range(3)
    }
    # Thread 1's function takes a new shape: compiled (and written) while the others load.
    warm = _executables(tmp_path, "warm", 1, env)
    assert {r["module"]: (r["kind"], r["cache"]) for r in warm} == {
        "jit_thread_fn_0": ("cached", "hit"),
        "jit_thread_fn_1": ("compiled", "written"),
        "jit_thread_fn_2": ("cached", "hit"),
    }


def _log(t: float, thread: str, message: str) -> dict[str, Any]:
    return {"kind": "log", "t": t, "logger": "jax._src.compiler", "level": "DEBUG",
            "message": message, "thread": thread}


def test_the_pgle_optimized_key_is_its_own_thread_s_miss(tmp_path):
    """auto PGLE's FDO recompile of jit_m in thread 1 while thread 2 compiles jit_m for another
    shape: the key PGLE optimized is thread 1's miss, not the last miss of that module name."""
    miss = "PERSISTENT COMPILATION CACHE MISS for 'jit_m' with key '{}'"
    records = [
        _log(1.0, "1", miss.format("jit_m-aaaa")),
        _log(2.0, "2", miss.format("jit_m-bbbb")),
        _log(3.0, "1", "Compiling module jit_m with FDO profile of length 12"),
    ]
    # summarize reads the file in its order (_file reverses it): written here in time order
    facts = jax_log.summarize(read_events(_file(tmp_path, records[::-1])).records)
    assert facts.modules["jit_m"].pgle_keys == ["jit_m-aaaa"]
    assert facts.modules["jit_m"].misses == ["jit_m-aaaa", "jit_m-bbbb"]
    # Records without a thread (pgle before the fix): the module's last miss, as before.
    old = jax_log.summarize(read_events(_file(tmp_path, records[::-1], threaded=False)).records)
    assert old.modules["jit_m"].pgle_keys == ["jit_m-bbbb"]
