"""Inside the workload: tracebacks show the workload's frames, never pgle's.

The harness runs the script through runpy and wraps jax's functions (pgle.launch.harness,
pgle.launch.jax_internals), so an exception's traceback would pass through pgle's own frames:
at its start (the harness, runpy), and in the middle (a counted `jax.jit` call, auto PGLE's
observed session). Python prints a traceback through `sys.excepthook` (the main thread, an
uncaught KeyboardInterrupt included) and `threading.excepthook` (other threads); both get the
traceback without those frames, as plain `python script.py` would have printed it. Python's
own handling stays: an uncaught Ctrl-C still ends the process by SIGINT (exit 130).

Standard library only: this runs before the user's code.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

_PGLE_LAUNCH = os.path.dirname(os.path.abspath(__file__))
# runpy's frames (the harness runs the script through it) and Python's frozen copy of it.
_RUNPY = {os.path.abspath(runpy.__file__), "<frozen runpy>"}


def pgle_frame(filename: str) -> bool:
    """A frame of pgle's launch code (the harness and its hooks) or of runpy."""
    if filename in _RUNPY:
        return True
    path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    return (
        os.path.dirname(path) in (_PGLE_LAUNCH, os.path.join(_PGLE_LAUNCH, "boot"))
        or path in _RUNPY
    )


def without_pgle(tb: types.TracebackType | None) -> types.TracebackType | None:
    """`tb` rebuilt without pgle's frames (the order of the others kept)."""
    kept = []
    while tb is not None:
        if not pgle_frame(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _clean(exc: BaseException | None, seen: set[int] | None = None) -> None:
    """Drop pgle's frames from `exc` and the exceptions chained to it (`raise ... from`)."""
    seen = set() if seen is None else seen
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if exc.__traceback__ is not None:
            exc.__traceback__ = without_pgle(exc.__traceback__)
        if exc.__context__ is not None and exc.__context__ is not exc.__cause__:
            _clean(exc.__context__, seen)
        exc = exc.__cause__


_installed: list[Any] = []


def install() -> None:
    """Filter every traceback Python prints for an uncaught exception. Idempotent."""
    if _installed:
        return
    previous_sys: Callable[..., Any] = sys.excepthook
    previous_thread: Callable[..., Any] = threading.excepthook

    def excepthook(
        kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
    ) -> None:
        try:
            _clean(value)
            tb = without_pgle(tb)
        except Exception:
            pass  # never lose the user's traceback for a cosmetic filter
        previous_sys(kind, value, tb)

    def thread_excepthook(args: Any) -> None:
        try:
            _clean(args.exc_value)
            if args.exc_value is not None:
                args = threading.ExceptHookArgs(
                    (args.exc_type, args.exc_value, args.exc_value.__traceback__, args.thread)
                )
        except Exception:
            pass
        previous_thread(args)

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    _installed.append((previous_sys, previous_thread))
