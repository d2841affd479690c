"""Fixtures and hooks for every test folder; importable helpers live in
tests/helpers/pgle_testing.py."""

from __future__ import annotations

import os
import signal
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


# A suite started in the background by a shell without job control (`cmd &`, as in a script or
# `setsid nohup cmd &`) starts with SIGINT and SIGQUIT ignored (POSIX), and Python then leaves
# SIGINT ignored: pgle's launcher keeps an ignored SIGINT ignored (as under nohup) and every
# child inherits it, so each Ctrl-C test lost its Ctrl-C (the two failures of 2026-11-29's
# background full runs; CI's foreground run had the default). The tests start from the
# foreground's handlers, whoever started pytest.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

# The signals pgle's launcher handles in process. A test that leaves one changed (ignored, or a
# handler of a finished launcher) changes every later test on its xdist worker. The test that
# leaves it fails here, by name, and the handler is put back for the tests after it.
_GUARDED = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGTSTP, signal.SIGCONT, signal.SIGWINCH]


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    before = {sig: signal.getsignal(sig) for sig in _GUARDED}
    yield
    changed = [sig for sig in _GUARDED if signal.getsignal(sig) != before[sig]]
    for sig in changed:
        if before[sig] is not None:  # None: set outside Python, cannot be put back from here
            signal.signal(sig, before[sig])  # type: ignore[arg-type]
    if changed:
        names = ", ".join(signal.Signals(sig).name for sig in changed)
        pytest.fail(f"the test left the handler of {names} changed (put back now)")


# A mutation run (tests/mutants/score.py sets PGLE_MUTATION_RUN for mutmut): a test still
# running after its deadline is taken to be in an endless loop a mutant made, and faulthandler
# ends the test process with exit 1 (mutmut: killed) and the stuck traceback. Otherwise mutmut
# waits (its tests' time + 5) x 15 for it and counts a timeout, a survivor. The deadline is
# MUTANT_TEST_FACTOR times the test's own time in mutmut's stats pass (unmutated) plus
# MUTANT_TEST_SLACK_S, at most MUTANT_TEST_S: a watcher-thread mutant of the harness that hangs
# a 0.1 s test costs 6 s, not 60 (each of hundreds did). Without a stats entry (the stats pass
# itself): MUTANT_TEST_S.
MUTANT_TEST_S = 60.0
MUTANT_TEST_FACTOR = 10.0
MUTANT_TEST_SLACK_S = 5.0


def _mutant_test_deadline(nodeid: str) -> float:
    import json

    stats = os.path.join(os.environ["PGLE_MUTATION_RUN"], "mutmut-stats.json")
    try:
        with open(stats) as f:
            took = json.load(f)["duration_by_test"].get(nodeid)
    except (OSError, ValueError, KeyError):
        took = None
    if took is None or os.environ.get("MUTANT_UNDER_TEST") == "stats":
        return MUTANT_TEST_S
    return min(MUTANT_TEST_S, MUTANT_TEST_FACTOR * took + MUTANT_TEST_SLACK_S)


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (from /proc: Linux), children first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_descendants() -> None:
    """At a test's deadline, before faulthandler ends its process: the processes the test
    started go too. Left running, a mutant's endless hold (a `held.py` rank) outlived its test
    by half an hour and took a share of the run's two cores."""
    import signal

    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture(autouse=bool(os.environ.get("PGLE_MUTATION_RUN")))
def _mutant_deadline(request):
    import faulthandler
    import threading

    deadline = _mutant_test_deadline(request.node.nodeid)
    # the children first (a Python timer), then faulthandler's exit a moment later (its own
    # thread: it fires even while this thread holds the GIL in C code)
    reaper = threading.Timer(deadline, _kill_descendants)
    reaper.daemon = True
    reaper.start()
    faulthandler.dump_traceback_later(deadline + 1.0, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
    reaper.cancel()


# The mutation run's stats pass (MUTANT_UNDER_TEST=stats): the functions a test reached in its
# subprocesses count as its hits too (tests/mutants/site/subprocess_hits.py). Asked at each test:
# mutmut runs pytest several times in one process, and this module is imported once.
def _stats_hits() -> str | None:
    if os.environ.get("PGLE_MUTATION_RUN") and os.environ.get("MUTANT_UNDER_TEST") == "stats":
        copy = os.path.dirname(os.path.abspath(os.environ["PGLE_MUTATION_RUN"]))
        return os.path.join(copy, f"subprocess-hits.{os.getpid()}")
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    if hits := _stats_hits():
        os.environ["PGLE_MUTATION_HITS"] = hits
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    # A wrapper runs before mutmut's own teardown hook, which maps the test to the hits so far.
    if hits := _stats_hits():
        import subprocess_hits  # tests/mutants/site, on PYTHONPATH in the mutation run
        from mutmut.state import state

        state()._stats.update(subprocess_hits.drain(hits))
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
