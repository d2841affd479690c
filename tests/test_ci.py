"""CI's own script: `.ci/run` stops on a failed step and never shrinks the jax matrix, and
`.ci/summary.py` fails a run that skipped a test for a reason not listed in .ci/allowed-skips.

.ci/run itself runs in a copy of the checkout whose PATH starts with stand-ins for python3,
chromium and the cluster script, which record their calls: what is tested is the real script's
control flow (a failed install must stop it before any test runs)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO


def ci_copy(tmp_path: Path, pip_rc: int, ruff_rc: int = 0, mypy_rc: int = 0,
            pytest_rc: int = 0) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy2(REPO / ".ci" / "run", repo / ".ci" / "run")
    (repo / ".ci" / "slurm.sh").write_text("export PGLE_REQUIRE_SLURM=1\n")
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        f'#!/bin/sh\necho "python3 $*" >> "{calls}"\n'
        f'case "$*" in *"pip install"*) exit {pip_rc};; "-m ruff "*) exit {ruff_rc};; '
        f'"-m mypy "*) exit {mypy_rc};; "-m pytest "*) exit {pytest_rc};; esac\nexit 0\n')
    (bin_dir / "chromium").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return repo, calls


def run_ci(repo: Path, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGLE_", "PYTEST_"))}
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    env.update(extra)
    return subprocess.run(["bash", str(repo / ".ci" / "run")], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_failed_install_stops_ci_before_any_test(tmp_path):
    repo, calls = ci_copy(tmp_path, pip_rc=1)
    proc = run_ci(repo, tmp_path)
    assert proc.returncode != 0
    assert "ci: FAILED: pip install -e '.[test]' for lint and types (exit 1)" in proc.stderr
    ran = calls.read_text().splitlines()
    assert ran == ["python3 -m pip install -e .[test]"], ran  # no lint, no pytest, no lane


# -- lint and types ----------------------------------------------------------------------------

LINT = ["python3 -m ruff check pgle cli", "python3 -m ruff format --check pgle cli",
        "python3 -m mypy pgle cli"]


def test_ci_runs_ruff_and_mypy_on_pgle_and_cli_before_the_tests(tmp_path):
    text = (REPO / ".ci" / "run").read_text()
    assert 'python3 -m ruff check pgle cli || fail "' in text
    assert 'python3 -m ruff format --check pgle cli || fail "' in text
    assert 'python3 -m mypy pgle cli || fail "' in text
    # The tests "fail": CI stops after them, before the steps that need a real machine.
    repo, calls = ci_copy(tmp_path, pip_rc=0, pytest_rc=1)
    proc = run_ci(repo, tmp_path)
    assert "ci: FAILED: the README's test command (exit 1)" in proc.stderr, proc.stderr
    ran = calls.read_text().splitlines()
    tests = ran.index("python3 -m pytest -q -n 2 --dist loadgroup")
    assert [ran.index(c) for c in LINT] == sorted(ran.index(c) for c in LINT)
    assert all(ran.index(c) < tests for c in LINT), ran


def test_a_lint_or_type_error_stops_ci_before_any_test(tmp_path):
    for tool, rc, message in (("ruff", {"ruff_rc": 1}, "ruff check pgle cli: lint findings"),
                              ("mypy", {"mypy_rc": 1}, "mypy pgle cli: type errors")):
        here = tmp_path / tool
        repo, calls = ci_copy(here, pip_rc=0, **rc)
        proc = run_ci(repo, here)
        assert proc.returncode == 1 and f"ci: FAILED: {message}" in proc.stderr, proc.stderr
        ran = calls.read_text().splitlines()
        assert "python3 -m pytest -q -n 2 --dist loadgroup" not in ran, ran


def _tool(module: str) -> list[str]:
    if importlib.util.find_spec(module) is None:
        # CI installs both with the test extra (pinned in pyproject.toml), so it never skips.
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return [sys.executable, "-m", module]


def test_the_configured_ruff_catches_a_lint_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x=[]):\n    return x\n"
                   f"\n\nLONG = {'1' * 120!r}\n")
    proc = subprocess.run([*_tool("ruff"), "check", "--config", str(REPO / "pyproject.toml"),
                           "--no-cache", "--output-format", "concise", str(bad)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for code in ("F401", "B006", "E501"):  # an unused import, a mutable default, a long line
        assert code in proc.stdout, proc.stdout


def test_the_configured_formatter_catches_an_unformatted_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = {'a':1}\n")
    proc = subprocess.run([*_tool("ruff"), "format", "--check", "--config",
                           str(REPO / "pyproject.toml"), "--no-cache", str(bad)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1 and "bad.py" in proc.stdout + proc.stderr, proc.stdout


def test_the_configured_mypy_catches_type_errors_and_is_strict_on_verdicts(tmp_path):
    # A copy of the package path, so that the module gets the name pyproject.toml's strict
    # override applies to (pgle.verdicts.*), and a plain module that gets the baseline.
    pkg = tmp_path / "pgle" / "verdicts"
    pkg.mkdir(parents=True)
    (tmp_path / "pgle" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "untyped.py").write_text("def status(row):\n    return row\n")
    (tmp_path / "wrong.py").write_text("def f() -> int:\n    return 'not an int'\n")
    proc = subprocess.run([*_tool("mypy"), "--config-file", str(REPO / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "cache"), "pgle/verdicts/untyped.py",
                           "wrong.py"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "wrong.py:2: error" in proc.stdout and "[return-value]" in proc.stdout, proc.stdout
    assert "untyped.py:1: error" in proc.stdout and "[no-untyped-def]" in proc.stdout, proc.stdout


def test_pgle_and_cli_have_no_lint_or_type_findings(tmp_path):
    ruff = subprocess.run([*_tool("ruff"), "check", "--no-cache", "pgle", "cli"],
                          capture_output=True, text=True, cwd=REPO)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    formatted = subprocess.run([*_tool("ruff"), "format", "--check", "--no-cache", "pgle", "cli"],
                               capture_output=True, text=True, cwd=REPO)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    # mypy's own cache in the checkout: .ci/run's mypy step has just filled it, so this check
    # is incremental there (~20 s of CPU a cold run costs the suite); mypy checks what changed.
    mypy = subprocess.run([*_tool("mypy"), "pgle", "cli"],
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def test_ci_refuses_a_shrunk_jax_matrix(tmp_path):
    repo, calls = ci_copy(tmp_path, pip_rc=0)
    proc = run_ci(repo, tmp_path, PGLE_LANE_VERSIONS="0.10.2")
    assert proc.returncode == 1 and "PGLE_LANE_VERSIONS/PGLE_LANE_SUBSET_OK is set" in proc.stderr
    assert not calls.exists()


def junit(tmp_path: Path, body: str) -> Path:
    test = tmp_path / "t" / "test_x.py"
    test.parent.mkdir(exist_ok=True)
    test.write_text("import pytest\n" + body)
    xml = tmp_path / "x.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={xml}", str(test)], cwd=test.parent, capture_output=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    return xml


def summary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / ".ci" / "summary.py"), *args],
                          capture_output=True, text=True)


def test_summary_fails_on_a_skip_ci_does_not_allow(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.write_text("# comment\n: documented reason$\n")
    ok = junit(tmp_path, "def test_a(): pass\n"
                         "def test_b(): pytest.skip('documented reason')\n")
    proc = summary(str(allowed), f"tests={ok}")
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 0 failed, 0 errors, 1 skipped" in proc.stdout
    bad = junit(tmp_path, "def test_a(): pass\ndef test_b(): pytest.skip('chromium is missing')\n")
    proc = summary(str(allowed), f"tests={bad}")
    assert proc.returncode == 1 and "skipped (NOT ALLOWED)" in proc.stdout


def test_summary_fails_on_a_missing_step_or_a_failure(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.write_text("")
    assert summary(str(allowed), f"lane={tmp_path / 'none.xml'}").returncode == 1
    failed = junit(tmp_path, "def test_a(): pass\ndef test_b(): assert False\n")
    proc = summary(str(allowed), f"tests={failed}")
    assert proc.returncode == 1 and "1 failed" in proc.stdout


def test_every_allowed_skip_is_explained_in_the_docs():
    lines = [ln for ln in (REPO / ".ci" / "allowed-skips").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    doc = (REPO / "docs" / "development.md").read_text().split("## What CI skips, and why")[1]
    table = doc.split("\n## ")[0]
    assert len(lines) == sum(1 for ln in table.splitlines() if ln.startswith("| ") and
                             not ln.startswith("| skipped in CI") and not ln.startswith("|---"))
