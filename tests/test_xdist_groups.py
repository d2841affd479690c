"""The README's `-n 2 --dist loadgroup` keeps a module-scoped fixture to one worker.

A generated test module with a module fixture that records each time it runs, and a test of
the SLURM cluster's name; pytest runs it with two xdist workers and the project's grouping
plugin (tests/helpers/xdist_groups.py). Without the grouping (or with it running after xdist's
own hook, as it once did) both workers set the fixture up.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HELPERS = Path(__file__).resolve().parent / "helpers"

MODULE = '''
import os
import pytest

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(12))
def test_uses_it(shared, i):
    pass

@pytest.mark.parametrize("i", range(12))
def test_plain(i):
    pass
'''


def test_a_module_fixture_runs_on_one_worker_only(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["xdist_groups"]\n')
    (tmp_path / "test_generated.py").write_text(MODULE)
    setups = tmp_path / "setups.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HELPERS), "SETUPS": str(setups),
             "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "24 passed" in proc.stdout, proc.stdout[-2000:]
    # Both workers ran tests (the plain ones spread), and the fixture was set up once.
    workers = {line.split()[0] for line in proc.stdout.splitlines() if " PASSED " in line}
    assert workers == {"[gw0]", "[gw1]"}, proc.stdout[-2000:]
    assert len(setups.read_text().split()) == 1, setups.read_text()
    assert "test_uses_it[0]@test_generated" in proc.stdout
