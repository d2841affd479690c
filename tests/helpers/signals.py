"""Signals in the test process (Ctrl-C, SIGTERM, a Ctrl-C of a jax.distributed fetch)."""

from __future__ import annotations

import pytest

# The modules that signal their own test process share one xdist worker, one test at a time.
# Each starts from the foreground's SIGINT handler: tests/conftest.py restores it when pytest
# was started in the background (SIGINT ignored) and fails a test that leaves it changed.
IN_PROCESS = pytest.mark.xdist_group("signals_in_process")
