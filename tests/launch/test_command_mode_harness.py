"""The harness's command mode (`pgle run ... -- python script.py`): pgle's boot sitecustomize
calls `activate(spec)` in every Python process of the command; the first process to import jax
writes beside the spec (the run folder), every other one in procs/<pid>/, and each process's
exit code is what Python shows of it (sys.exit, an uncaught exception, Ctrl-C).

The end-to-end form (the boot sitecustomize travelling by PYTHONPATH) is in
tests/launch/test_any_launcher.py. Here the processes call `activate` themselves, as the boot
file does: each case is one small process, not a whole `pgle run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from helpers import step_records
from helpers.pgle_testing import pgle_env
from pgle.evidence import schema
from pgle.launch import harness


def _spec(run: Path) -> schema.HarnessSpec:
    return schema.HarnessSpec(events=str(run / "events.jsonl"),
                              workload=schema.WorkloadSpec(None, None, command=("python",)))


def test_the_first_process_claims_the_run_folder_and_the_others_their_own(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    spec = _spec(run)
    umask = os.umask(0o022)
    try:
        assert harness._claim_home(spec) == str(run)
        own = run / schema.PROCS_DIR / str(os.getpid())
        assert harness._claim_home(spec) == str(own) and own.is_dir()
        assert harness._claim_home(spec) == str(own)  # the same process again: still its own
    finally:
        os.umask(umask)
    claim = run / schema.PRIMARY_CLAIM
    assert claim.is_file() and claim.stat().st_mode & 0o777 == 0o644  # 0o666 less the umask
    assert sorted(p.name for p in run.iterdir()) == sorted([schema.PRIMARY_CLAIM,
                                                            schema.PROCS_DIR])


def test_a_link_at_the_claims_name_is_not_followed(tmp_path: Path) -> None:
    """A link planted at the claim's name (to a file that does not exist) claims nothing: the
    process writes in procs/<pid>/, and nothing is created where the link points."""
    run = tmp_path / "run"
    run.mkdir()
    (run / schema.PRIMARY_CLAIM).symlink_to(tmp_path / "elsewhere")
    assert harness._claim_home(_spec(run)) == str(run / schema.PROCS_DIR / str(os.getpid()))
    assert not (tmp_path / "elsewhere").exists()


def test_the_exit_code_is_seen_through_sys_exit_and_the_excepthook() -> None:
    seen: list[tuple[Any, ...]] = []

    def previous(kind: type[BaseException], value: BaseException,
                 tb: TracebackType | None) -> None:
        seen.append((kind, value, tb))

    real_exit, real_hook, code = sys.exit, sys.excepthook, list(harness._EXIT_CODE)
    sys.excepthook = previous
    try:
        harness._watch_exit_code()
        assert sys.exit is not real_exit and sys.exit.__doc__ == real_exit.__doc__
        for given, recorded in ((3, 3), ("a message", 1), (None, 0), (0, 0), (2, 2)):
            with pytest.raises(SystemExit) as raised:
                sys.exit(given)
            assert raised.value.code == given
            assert harness._EXIT_CODE == [recorded], given
        for error, recorded in ((KeyboardInterrupt(), 130), (ValueError("x"), 1)):
            try:
                raise error
            except BaseException as e:
                tb = e.__traceback__
            sys.excepthook(type(error), error, tb)
            assert harness._EXIT_CODE == [recorded]
            assert seen[-1] == (type(error), error, tb)
        assert len(seen) == 2
    finally:
        sys.exit, sys.excepthook = real_exit, real_hook
        harness._EXIT_CODE[:] = code


WORKER = """
import os, sys
{before}
from pgle.launch import harness
harness.activate(sys.argv[1])  # as pgle's boot sitecustomize does, at the process's start
print("parent fd:", os.environ.get("PGLE_PARENT_FD"), flush=True)
import jax, jax.numpy as jnp
f = jax.jit(lambda x: x + 1)
x = jnp.ones(4)
for i in range(3):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x).block_until_ready()
sys.exit(3)
"""


# An import hook ahead of the harness's on sys.meta_path that finds every module (as one that
# instruments every package does): the harness's own is put before it, or it never sees jax.
FINDER_AHEAD = """
import importlib.abc, importlib.machinery
class Every(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        return importlib.machinery.PathFinder.find_spec(name, path)
sys.meta_path.insert(0, Every())
"""


def _worker(tmp_path: Path, spec_path: Path, before: str) -> str:
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(before=before))
    # The watch of pgle keeps PGLE_PARENT_FD for the command's Python processes below this
    # one; "999" is no open descriptor, so no watch starts. Its own session: a watch that
    # did start could only kill this process's group.
    env = pgle_env(PGLE_PARENT_FD="999")
    proc = subprocess.run([sys.executable, str(script), str(spec_path)], cwd=tmp_path, env=env,
                          capture_output=True, timeout=120, start_new_session=True)
    assert proc.returncode == 3, proc.stderr.decode()[-3000:]
    return proc.stdout.decode()


def _kinds(events: Path) -> list[tuple[str, Any]]:
    return [(e["kind"], e.get("code", e.get("index")))
            for e in step_records.old_lines(events)
            if e["kind"] in (schema.START, "step_enter", schema.EXIT)]


def test_activate_harnesses_each_process_once_it_imports_jax(tmp_path: Path) -> None:
    """The first process imports jax after `activate` (the harness waits for it, ahead of
    another import hook), the second had imported it before (a .pth file's import: the
    harness attaches at once). Each records
    its steps and its exit code, the first in the run folder, the second in procs/<pid>/."""
    run = tmp_path / "run"
    run.mkdir()
    spec_path = run / "spec.json"
    spec_path.write_text(_spec(run).to_json())
    assert "parent fd: 999" in _worker(tmp_path, spec_path, before=FINDER_AHEAD)
    first = _kinds(run / "events.jsonl")
    assert first == [(schema.START, None), ("step_enter", 0), ("step_enter", 1),
                     ("step_enter", 2), (schema.EXIT, 3)], first
    assert "parent fd: 999" in _worker(tmp_path, spec_path, before="import jax")
    (proc,) = (run / schema.PROCS_DIR).iterdir()
    assert _kinds(proc / "events.jsonl") == first
    assert _kinds(run / "events.jsonl") == first  # the first process's, untouched


def test_a_process_whose_spec_is_gone_runs_unobserved(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _worker(tmp_path, run / "spec.json", before="")  # no such spec: the run folder was removed
    assert list(run.iterdir()) == []
