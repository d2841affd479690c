"""Fixtures and hooks for every test folder; importable helpers live in
tests/helpers/pgle_testing.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder to run pgle in (its .pgle/ run folders land here)."""
    d = tmp_path / "proj ü"  # spaces and unicode in every path
    d.mkdir()
    return d


from helpers.slurm_fixture import *  # noqa: E402,F401,F403  the one-node SLURM cluster's fixtures


def pytest_terminal_summary(terminalreporter, config):
    """The live XLA:GPU lane (tests/xla_gpu/test_live.py) states which jax versions ran."""
    line = getattr(config, "xla_gpu_lane_summary", None)
    if line:
        terminalreporter.write_sep("-", line)
