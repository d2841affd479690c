"""Signals in the test process (Ctrl-C, SIGTERM, a Ctrl-C of a jax.distributed fetch)."""

from __future__ import annotations

import pytest

# The modules that signal their own test process share one xdist worker, one test at a time.
# Each starts from the foreground's SIGINT handler: tests/conftest.py restores it when pytest
# was started in the background (SIGINT ignored) and fails a test that leaves it changed.
IN_PROCESS = pytest.mark.xdist_group("signals_in_process")


def recorded_lines(path, n: int) -> list[str]:
    """The lines a signal recorder wrote to `path`, once there are `n` (or what is there after
    10 s: a signal arrives in milliseconds, and a lost one fails well within mutmut's limit)."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return lines
        time.sleep(0.01)
    return path.read_text().splitlines() if path.exists() else []
