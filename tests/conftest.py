"""Fixtures and hooks for every test folder; importable helpers live in
tests/helpers/pgle_testing.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# `import jax` runs os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1") (jax 0.4-0.12), so once
# any test imports jax in this process every later child would inherit a level the user never
# set (and pgle would rightly refuse to call the hidden INFO log evidence). Each test starts
# from the environment pytest started with.
_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")


@pytest.fixture(autouse=True)
def _no_inherited_jax_log_level():
    if _LOG_LEVEL is None:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = _LOG_LEVEL
    yield


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder to run pgle in (its .pgle/ run folders land here)."""
    d = tmp_path / "proj ü"  # spaces and unicode in every path
    d.mkdir()
    return d


from helpers.slurm_fixture import *  # noqa: E402,F401,F403  the one-node SLURM cluster's fixtures

pytest_plugins = ["helpers.xdist_groups"]  # which tests share a worker under -n 2


def pytest_terminal_summary(terminalreporter, config):
    """The live XLA:GPU lane (tests/xla_gpu/test_live.py) states which jax versions ran."""
    line = getattr(config, "xla_gpu_lane_summary", None)
    if line:
        terminalreporter.write_sep("-", line)
