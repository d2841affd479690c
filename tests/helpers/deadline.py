"""A call that must return: an endless loop fails its test instead of hanging it."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def returns_within(seconds: float = 2.0) -> Iterator[None]:
    """Raise TimeoutError in the main thread if the block still runs after `seconds` (wall
    clock, SIGALRM). For calls that take microseconds: the margin is generous, and a loop
    that never ends fails here, with its traceback, instead of at mutmut's CPU-time limit
    (where it reads as a timeout, not a failure) or never."""

    def stop(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: an endless loop?")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
