"""What a stalled process was doing: its Python stacks (faulthandler's dump) and its last
events, read into one phrase.

`faulthandler.dump_traceback(all_threads=True)` writes, per thread, most recent call first:

    Thread 0x00007f3b9d1fe640 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 324 in wait
      File "/work/train.py", line 12 in slow_callback
      ...

    Current thread 0x00007f3ba4e6b740 (most recent call first):
      File ...

(the format of CPython 3.8-3.13). The phase is named from the stacks first (where every
thread is now), and from the harness's events where a stack cannot tell (a compile in XLA's
C++ code shows only the Python frame that called it):

- auto PGLE's `_share_fdo_profiles` (jax/_src/compiler.py, jax 0.4.31-0.12): waiting for the
  FDO profile another process publishes through jax.distributed's key-value store;
- a compile the events show started and never ended: compiling, or the FDO recompile (XLA was
  handed auto PGLE's profile);
- a thread inside jax's host-callback machinery (jax/_src/callback.py): the user's callback;
- `sync_global_devices`/`process_allgather` (jax.experimental.multihost_utils) or a
  `wait_at_barrier` call: a barrier a peer has not reached;
- a thread in `jax.profiler.stop_trace`: exporting the trace;
- the main thread inside jax's dispatch or a transfer (`block_until_ready`, `__array__`, ...),
  inside a jitted call (the harness's wrapper is its innermost frame), or on a user's line that
  waits for an array in C++: waiting for the device / a collective (or a kernel that does not
  end);
- otherwise: the user's own code, at the innermost frame of the main thread.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import re
import sysconfig

from pgle.evidence.event_kinds import CompileBegin

_THREAD = re.compile(
    r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])? \(most recent call first\):"
)
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')

# jax functions in which the main thread waits for the device (jax 0.4.35-0.12).
_DEVICE_WAITS = frozenset(
    {
        "block_until_ready",
        "_block_until_ready",
        "__array__",
        "_value",
        "device_get",
        "_single_device_array_to_np_array",
        "effects_barrier",
        "wait_for_tokens",
        "_execute",
        "__call__",
        "call_impl_cache_miss",
        "_pjit_call_impl",
        "cache_miss",
        "_python_pjit_helper",
        "__float__",
        "__int__",
        "item",
        "tolist",
        "_copy_single_device_array_to_host_async",
    }
)
_COMPILES = frozenset(
    {
        "backend_compile",
        "backend_compile_and_load",
        "compile_or_get_cached",
        "_cached_compilation",
        "from_hlo",
        "compile",
    }
)
_BARRIERS = frozenset(
    {
        "sync_global_devices",
        "process_allgather",
        "broadcast_one_to_all",
        "assert_equal",
        "wait_at_barrier",
    }
)


@dataclasses.dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def source(self) -> str:
        return linecache.getline(self.file, self.line).strip()


@dataclasses.dataclass
class Thread:
    ident: str  # 0x..., as threading.get_ident() in hex
    current: bool  # the thread that took the signal
    frames: list[Frame]  # most recent first


_ESCAPE = re.compile(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})")


def _unescape(text: str) -> str:
    """faulthandler writes every non-ASCII character escaped (\\xfc for ü); a file name must
    be the real one to be read."""
    return _ESCAPE.sub(lambda m: chr(int(next(g for g in m.groups() if g), 16)), text)


def parse(text: str) -> list[Thread]:
    """The threads of one faulthandler dump (pgle reads only what the dump it asked for
    appended to the file)."""
    threads: list[Thread] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            threads.append(Thread(head.group(2).lower(), head.group(1) == "Current thread", []))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1].frames.append(
                Frame(_unescape(frame.group(1)), int(frame.group(2)), _unescape(frame.group(3)))
            )
    return threads


_LIBRARY_DIRS = tuple(
    os.path.abspath(p)
    for p in {
        sysconfig.get_paths().get("stdlib") or "",
        sysconfig.get_paths().get("platstdlib") or "",
    }
    if p
)


# pgle's own frames in the workload (the harness's wrappers around jax.jit, its profiler
# window): never the user's code, wherever pgle is installed (an editable install included).
_PGLE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_pgle(path: str) -> bool:
    return os.path.abspath(path).startswith(_PGLE_DIR + os.sep)


def is_library(path: str) -> bool:
    """A frame of Python's standard library, an installed package or pgle's own harness (not
    the user's code)."""
    if path.startswith("<") or is_pgle(path):
        return True
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    full = os.path.abspath(path)
    return any(full.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def _in_jax(frame: Frame) -> bool:
    parts = frame.file.replace("\\", "/").split("/")
    return "jax" in parts or "jaxlib" in parts


def _user_frame(frames: list[Frame]) -> Frame | None:
    return next((f for f in frames if not is_library(f.file)), None)


def _describe_user(frame: Frame | None) -> str:
    if frame is None:
        return "in library code"
    text = frame.source()
    return f"{frame.where()} ({frame.function})" + (f": `{text}`" if text else "")


# The harness's wrapper of every jitted function (pgle/launch/harness.py): a main thread
# whose innermost frame is this one is inside the jitted call itself, in jaxlib's C++ dispatch
# (jax 0.4.35-0.12 dispatch a jitted call without a Python frame): a CPU collective runs there,
# and a GPU dispatch waits there for a full queue.
_JIT_WRAPPERS = frozenset({"_counted_call"})
# Calls written in the user's own line that wait for the device, in C++ without a Python frame
# of jax's (jax.Array methods of jaxlib 0.4.35-0.12).
_NATIVE_WAIT_TEXT = re.compile(r"\.(?:block_until_ready|item|tolist)\(|\bdevice_get\(")


def _waits_in_native_call(frames: list[Frame]) -> bool:
    """The innermost frame is the harness's wrapper of a jitted call, or the user's line that
    waits for an array in C++."""
    if not frames:
        return False
    top = frames[0]
    if is_pgle(top.file) and top.function in _JIT_WRAPPERS:
        return True
    return not is_library(top.file) and bool(_NATIVE_WAIT_TEXT.search(top.source()))


@dataclasses.dataclass
class Phase:
    name: str  # compiling | fdo_recompile | fdo_profile_wait | exporting_trace |
    #            host_callback | barrier | collective | user_code | unknown
    text: str  # the phrase for the message


def _thread_number(ident: str | None) -> int | None:
    """A thread's ident as a number: faulthandler pads it to 16 hex digits (0x00007f...), the
    harness records hex(ident) (0x7f...): the same thread."""
    try:
        return int(ident, 16) if ident else None
    except ValueError:
        return None


def phase(
    threads: list[Thread], main: str | None = None, compiling: CompileBegin | None = None
) -> Phase:
    """Name what one process was doing. `main`: the main thread's ident (hex); `compiling`:
    the compile the events show in flight, if any."""
    for t in threads:
        if any(f.function == "_share_fdo_profiles" for f in t.frames):
            return Phase(
                "fdo_profile_wait",
                "waiting for the shared FDO profile (auto PGLE: "
                "the process with the lowest id publishes each module's profile "
                "through jax.distributed's key-value store; it has not)",
            )
    for t in threads:
        # jax.profiler.stop_trace (jax 0.4.x-0.12) runs while the profiler collects and writes
        # its trace: minutes on a big job with every tracer on (marin #5528).
        if any(f.function == "stop_trace" and _in_jax(f) for f in t.frames):
            return Phase(
                "exporting_trace",
                "exporting the trace (jax.profiler.stop_trace: the profiler collects and "
                "writes what it recorded), called at "
                + _describe_user(_user_frame([f for f in t.frames if not _in_jax(f)])),
            )
    if compiling:
        module = compiling.module or "a module"
        if compiling.fdo:
            return Phase(
                "fdo_recompile",
                f"the FDO recompile of {module} (auto PGLE's recompile with the collected profile)",
            )
        return Phase("compiling", f"compiling {module}")
    wanted = _thread_number(main)
    main_thread = (
        next((t for t in threads if wanted is not None and _thread_number(t.ident) == wanted), None)
        or next((t for t in threads if t.current), None)
        or (threads[0] if threads else None)
    )
    for t in threads:
        files = {f.file.replace("\\", "/") for f in t.frames}
        if any(p.endswith("jax/_src/callback.py") for p in files):
            return Phase(
                "host_callback",
                "in a host callback (jax.pure_callback/io_callback), "
                "the user's code at " + _describe_user(_user_frame(t.frames)),
            )
    for t in threads:
        for i, f in enumerate(t.frames):
            if f.function in _BARRIERS or "wait_at_barrier" in f.source():
                user = _user_frame(t.frames[i:])
                return Phase(
                    "barrier",
                    "at a barrier a peer has not reached "
                    f"({f.function}), called at {_describe_user(user)}",
                )
    if main_thread is not None and main_thread.frames:
        top = main_thread.frames[0]
        if any(_in_jax(f) and f.function in _COMPILES for f in main_thread.frames[:3]):
            return Phase(
                "compiling",
                "compiling (in jax's compile at "
                + _describe_user(_user_frame(main_thread.frames))
                + ")",
            )
        if (
            _in_jax(top)
            or any(_in_jax(f) and f.function in _DEVICE_WAITS for f in main_thread.frames[:2])
            or _waits_in_native_call(main_thread.frames)
        ):
            return Phase(
                "collective",
                "waiting for the device / a collective (or a kernel "
                "that does not end), the main thread at "
                + _describe_user(_user_frame(main_thread.frames)),
            )
        return Phase(
            "user_code",
            "in the user's code at " + _describe_user(_user_frame(main_thread.frames) or top),
        )
    return Phase("unknown", "doing something pgle cannot see (no Python frame was dumped)")
