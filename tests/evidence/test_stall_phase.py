"""What the stall watchdog says a stalled process was doing (issue 37), in process: a
faulthandler dump (`faulthandler.dump_traceback(all_threads=True)`, CPython 3.8-3.13's format)
read into threads, and the phase named from them and the compile in flight; each phrase pinned
whole (it is the watchdog's message). The user's files are real files, so the phrase quotes
their line; jax's frames name the files of jax 0.10.2 where the stacks of
tests/launch/test_stall.py show them."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest

from pgle.evidence import stacks
from pgle.evidence.event_kinds import CompileBegin
from pgle.evidence.stacks import Frame, Phase, Thread, parse, phase

SITE = sysconfig.get_paths()["purelib"]
JAX = f"{SITE}/jax/_src"
STDLIB = sysconfig.get_paths()["stdlib"]
HARNESS = str(Path(stacks.__file__).resolve().parent.parent / "launch" / "harness.py")
THREADING = f"{STDLIB}/threading.py"
MAIN, OTHER = "0x00007f3ba4e6b740", "0x00007f3b9d1fe640"

TRAIN = """import jax

def step(x):
    return f(x).block_until_ready()

def loop(x):
    while True:
        x = step(x)

def callback(x):
    return slow(x)

def sync():
    jax.experimental.multihost_utils.sync_global_devices("epoch")

def join(client):
    client.wait_at_barrier("end", 60_000)
"""


@pytest.fixture
def train(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return str(path)


def dump(*threads: tuple[str, bool, list[tuple[str, int, str]]]) -> str:
    """faulthandler's text: each thread (ident, the current one, its frames most recent
    first)."""
    out = []
    for ident, current, frames in threads:
        out.append(f"{'Current thread' if current else 'Thread'} {ident} (most recent call "
                   "first):")
        out += [f'  File "{file}", line {line} in {fn}' for file, line, fn in frames]
        out.append("")
    return "\n".join(out)


def test_a_dump_reads_into_its_threads_and_frames(tmp_path: Path):
    # faulthandler escapes every non-ASCII character; a thread's name in brackets (3.13)
    real = tmp_path / "tr\u00fcin_\u4e2d.py"
    real.write_text("x = 1\ny = compute()\n")
    text = "\n".join([
        "Fatal Python error: stalled",  # not a thread nor a frame
        f'  File "{THREADING}", line 1 in orphan',  # a frame before any thread: not read
        "Thread 0x00007F3B9D1FE640 [pgle-watch] (most recent call first):",
        f'  File "{THREADING}", line 324 in wait',
        f'  File "{tmp_path}/tr\\xfcin_\\u4e2d.py", line 2 in f\\xfcr',
        "",
        f"Current thread {MAIN} (most recent call first):",
        f'  File "{tmp_path}/\\U0001f600.py", line 7 in <module>',
    ])
    threads = parse(text)
    assert threads == [
        Thread(OTHER, False, [Frame(THREADING, 324, "wait"), Frame(str(real), 2, "f\u00fcr")]),
        Thread(MAIN, True, [Frame(f"{tmp_path}/\U0001f600.py", 7, "<module>")]),
    ]
    frame = threads[0].frames[1]
    assert (frame.where(), frame.source()) == ("tr\u00fcin_\u4e2d.py:2", "y = compute()")
    assert parse("") == []


def test_a_process_waiting_for_the_shared_fdo_profile(train: str):
    threads = parse(dump(
        (MAIN, True, [(f"{JAX}/compiler.py", 501, "_share_fdo_profiles"),
                      (f"{JAX}/compiler.py", 420, "compile_or_get_cached"), (train, 8, "loop")])))
    # before the compile in flight: the profile is what it waits for
    assert phase(threads, MAIN, CompileBegin(t=1.0, module="jit_step", fdo=True)) == Phase(
        "fdo_profile_wait",
        "waiting for the shared FDO profile (auto PGLE: the process with the lowest id "
        "publishes each module's profile through jax.distributed's key-value store; it has not)")


def test_a_process_exporting_its_trace(train: str):
    threads = parse(dump(
        (OTHER, False, [(THREADING, 324, "wait")]),
        (MAIN, True, [(f"{JAX}/profiler.py", 210, "stop_trace"),
                      (f"{JAX}/profiler.py", 180, "stop_trace"), (train, 4, "step"),
                      (train, 8, "loop")])))
    assert phase(threads, MAIN) == Phase(
        "exporting_trace",
        "exporting the trace (jax.profiler.stop_trace: the profiler collects and writes what "
        "it recorded), called at train.py:4 (step): `return f(x).block_until_ready()`")
    # a Windows path of jax's
    jax_win = "C:\\venv\\Lib\\site-packages\\jax\\_src\\profiler.py"
    win = parse(dump((MAIN, True, [(jax_win, 210, "stop_trace"), (train, 8, "loop")])))
    assert phase(win, MAIN).name == "exporting_trace"
    # a function of the user's named stop_trace is no export
    mine = parse(dump((MAIN, True, [(train, 4, "stop_trace")])))
    assert phase(mine, MAIN).name == "collective"  # its line waits for the device


def test_a_compile_in_flight_names_the_phase(train: str):
    threads = parse(dump((MAIN, True, [(train, 8, "loop")])))
    assert phase(threads, MAIN, CompileBegin(t=1.0, module="jit_step", fdo=False)) == Phase(
        "compiling", "compiling jit_step")
    assert phase(threads, MAIN, CompileBegin(t=1.0)) == Phase("compiling", "compiling a module")
    assert phase(threads, MAIN, CompileBegin(t=1.0, module="jit_step", fdo=True)) == Phase(
        "fdo_recompile",
        "the FDO recompile of jit_step (auto PGLE's recompile with the collected profile)")


def test_a_host_callback_names_the_user_s_code(train: str):
    threads = parse(dump(
        (MAIN, True, [(f"{JAX}/dispatch.py", 90, "wait_for_tokens"), (train, 8, "loop")]),
        (OTHER, False, [(THREADING, 324, "wait"), (train, 11, "callback"),
                        (f"{JAX}/callback.py", 60, "pure_callback_impl")])))
    assert phase(threads, MAIN) == Phase(
        "host_callback",
        "in a host callback (jax.pure_callback/io_callback), the user's code at train.py:11 "
        "(callback): `return slow(x)`")
    # a Windows path names the same file
    windows = parse(dump((MAIN, True, [("C:\\venv\\Lib\\site-packages\\jax\\_src\\callback.py",
                                        60, "pure_callback_impl")])))
    assert phase(windows, MAIN) == Phase(
        "host_callback",
        "in a host callback (jax.pure_callback/io_callback), the user's code at in library "
        "code")


def test_a_barrier_a_peer_has_not_reached(train: str):
    threads = parse(dump(
        (MAIN, True, [(f"{SITE}/jax/experimental/multihost_utils.py", 80, "_sync"),
                      (f"{SITE}/jax/experimental/multihost_utils.py", 120,
                       "sync_global_devices"), (train, 14, "sync"), (train, 8, "loop")])))
    assert phase(threads, MAIN) == Phase(
        "barrier",
        "at a barrier a peer has not reached (sync_global_devices), called at train.py:14 "
        "(sync): `jax.experimental.multihost_utils.sync_global_devices(\"epoch\")`")
    # the user's own call of the distributed client's barrier: named by its line
    threads = parse(dump((OTHER, False, [(THREADING, 324, "wait")]),
                         (MAIN, True, [(train, 17, "join"), (train, 8, "loop")])))
    assert phase(threads, MAIN) == Phase(
        "barrier",
        "at a barrier a peer has not reached (join), called at train.py:17 (join): "
        "`client.wait_at_barrier(\"end\", 60_000)`")


def test_the_main_thread_in_jax_s_compile(train: str):
    threads = parse(dump(
        (OTHER, False, [(f"{JAX}/compiler.py", 300, "backend_compile")]),  # not the main one
        (MAIN, True, [(f"{JAX}/interpreters/pxla.py", 50, "from_hlo"),
                      (f"{JAX}/interpreters/pxla.py", 40, "_cached_compilation"),
                      (f"{JAX}/compiler.py", 30, "compile_or_get_cached"),
                      (train, 4, "step")])))
    assert phase(threads, MAIN) == Phase(
        "compiling",
        "compiling (in jax's compile at train.py:4 (step): `return f(x).block_until_ready()`)")
    # the compile's frame below the third: not the phase (the main thread is in jax: waiting)
    deeper = parse(dump((MAIN, True, [(f"{JAX}/a.py", 1, "a"), (f"{JAX}/a.py", 2, "b"),
                                      (f"{JAX}/a.py", 3, "c"), (f"{JAX}/compiler.py", 4,
                                                                "backend_compile")])))
    assert phase(deeper, MAIN).name == "collective"


def test_the_main_thread_waiting_for_the_device(train: str, tmp_path: Path):
    waiting = ("waiting for the device / a collective (or a kernel that does not end), the "
               "main thread at ")
    in_jax = parse(dump((MAIN, True, [(f"{JAX}/array.py", 640, "_value"), (train, 4, "step"),
                                      (train, 8, "loop")])))
    assert phase(in_jax, MAIN) == Phase(
        "collective", waiting + "train.py:4 (step): `return f(x).block_until_ready()`")
    # jax's wait one frame below a library frame of its own (not in jax's folder)
    second = parse(dump((MAIN, True, [(f"{SITE}/jaxlib/xla_client.py", 10, "wait"),
                                      (f"{JAX}/api.py", 20, "device_get"),
                                      (train, 8, "loop")])))
    assert phase(second, MAIN) == Phase(
        "collective", waiting + "train.py:8 (loop): `x = step(x)`")
    # inside a jitted call: the harness's wrapper is the innermost frame
    jitted = parse(dump((MAIN, True, [(HARNESS, 1500, "_counted_call"), (train, 4, "step")])))
    assert phase(jitted, MAIN) == Phase(
        "collective", waiting + "train.py:4 (step): `return f(x).block_until_ready()`")
    # a frame of jaxlib's innermost
    in_jaxlib = parse(dump((MAIN, True, [(f"{SITE}/jaxlib/xla_client.py", 5, "wait"),
                                         (train, 8, "loop")])))
    assert phase(in_jaxlib, MAIN) == Phase(
        "collective", waiting + "train.py:8 (loop): `x = step(x)`")
    # the user's line that waits in C++ (no Python frame of jax's)
    native = parse(dump((MAIN, True, [(train, 4, "step"), (train, 8, "loop")])))
    assert phase(native, MAIN) == Phase(
        "collective", waiting + "train.py:4 (step): `return f(x).block_until_ready()`")


def test_the_main_thread_in_the_user_s_code(train: str):
    threads = parse(dump((OTHER, True, [(f"{JAX}/array.py", 640, "_value")]),
                         (MAIN, False, [(train, 8, "loop")])))
    # the main thread named (in any case) is the one read, not the current one
    assert phase(threads, MAIN.upper()) == Phase(
        "user_code", "in the user's code at train.py:8 (loop): `x = step(x)`")
    # a library frame innermost: the user's frame below it
    lib = parse(dump((MAIN, True, [(THREADING, 324, "wait"), (train, 11, "callback")])))
    assert phase(lib, None) == Phase(
        "user_code", "in the user's code at train.py:11 (callback): `return slow(x)`")
    loop = "in the user's code at train.py:8 (loop): `x = step(x)`"
    # none of these waits for the device: pgle's own frame that is not its jitted-call
    # wrapper, jax's frame of no wait (second), a wait of jax's below the second frame, a
    # user's function with the name of one of jax's waits
    for frames in ([(HARNESS, 900, "_window_step"), (train, 8, "loop")],
                   [(THREADING, 324, "wait"), (f"{JAX}/pjit.py", 10, "_infer_params"),
                    (train, 8, "loop")],
                   [(THREADING, 324, "wait"), (train, 8, "loop"),
                    (f"{JAX}/array.py", 640, "_value")]):
        assert phase(parse(dump((MAIN, True, frames))), MAIN) == Phase("user_code", loop)
    assert phase(parse(dump((MAIN, True, [(train, 8, "__call__")]))), MAIN) == Phase(
        "user_code", "in the user's code at train.py:8 (__call__): `x = step(x)`")
    # only library frames: the innermost one, its line unread
    only = parse(dump((MAIN, True, [(f"{STDLIB}/missing_module.py", 3, "sleep")])))
    assert phase(only, None) == Phase(
        "user_code", "in the user's code at missing_module.py:3 (sleep)")


def test_which_thread_is_the_main_one(train: str):
    first = (OTHER, False, [(train, 8, "loop")])
    second = ("0x1", False, [(train, 11, "callback")])
    user = "in the user's code at "
    # named: that one; else the current one; else the first
    assert phase(parse(dump(first, second)), "0x1").text == user + (
        "train.py:11 (callback): `return slow(x)`")
    loop = user + "train.py:8 (loop): `x = step(x)`"
    assert phase(parse(dump(first, second)), "0x9").text == loop
    assert phase(parse(dump(first, second, (MAIN, True, [(train, 11, "callback")]))), None).text \
        == user + "train.py:11 (callback): `return slow(x)`"
    assert phase(parse(dump(first, second)), None).text == loop
    # A real dump pads the ident to 16 hex digits; the harness records hex(ident): one thread.
    padded = ("0x00007f956644eb80", False, [(train, 11, "callback")])
    assert phase(parse(dump(first, padded)), "0x7f956644eb80").text == user + (
        "train.py:11 (callback): `return slow(x)`")
    assert phase(parse(dump(first, second)), "not hex").text == loop


def test_no_frames_is_a_phase_pgle_cannot_see():
    unknown = Phase("unknown", "doing something pgle cannot see (no Python frame was dumped)")
    assert phase([], None) == unknown
    assert phase(parse(dump((MAIN, True, []))), MAIN) == unknown


def test_which_frames_are_library_code(train: str):
    assert stacks.is_library(THREADING) and stacks.is_library(f"{JAX}/api.py")
    assert stacks.is_library("<frozen importlib._bootstrap>") and stacks.is_library(HARNESS)
    assert stacks.is_library("/opt/venv/lib/python3.11/dist-packages/flax/core.py")
    assert stacks.is_library("C:\\venv\\Lib\\site-packages\\optax\\x.py")
    assert not stacks.is_library(train) and not stacks.is_pgle(train)
    pgle_dir = os.path.dirname(os.path.dirname(HARNESS))
    assert stacks.is_pgle(HARNESS) and not stacks.is_pgle(pgle_dir + "-mine/x.py")
    # a folder named like the standard library's, beside it: not the library
    assert not stacks.is_library(STDLIB + "-mine/train.py")
