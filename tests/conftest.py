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


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's `-n 2 --dist loadgroup`): every test that uses the
    one-node SLURM cluster runs on one worker, one job at a time (the node's CPUs are few, and a
    second worker's job would wait in the queue past the test's deadline); the tests of a module
    with a module-scoped fixture (the doc recipes' workload runs, a served trace) stay on one
    worker, so that fixture runs once, not once per worker."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "slurm_cluster" in names:
            item.add_marker(pytest.mark.xdist_group("slurm"))
            continue
        defs = getattr(item, "_fixtureinfo", None)
        defs = defs.name2fixturedefs if defs is not None else {}
        if any(d.scope == "module" for n in names for d in defs.get(n, ())):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_terminal_summary(terminalreporter, config):
    """The live XLA:GPU lane (tests/xla_gpu/test_live.py) states which jax versions ran."""
    line = getattr(config, "xla_gpu_lane_summary", None)
    if line:
        terminalreporter.write_sep("-", line)
