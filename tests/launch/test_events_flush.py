"""The harness's events file is buffered (a marked step costs no system call, issue 25) but
loses nothing that matters: lines reach the disk within FLUSH_EVERY_S while the workload runs
(so a kill -9 loses at most the last second), window edges and the exit at once, and a fork
neither loses nor duplicates lines. Real workloads under `pgle run`/`pgle collect`, a real
kill -9."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

from helpers import step_records
from helpers.pgle_testing import pgle_env, write_profile
from helpers.processes import gone, kill_all, start_pgle, wait_until

STEPS_THEN_WAIT = """
import os, sys, time
import jax
marker = sys.argv[1]
for i in range(1000):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        pass
with open(marker, "w") as f:
    f.write(str(os.getpid()))
time.sleep(300)
"""


def step_lines(events: Path, *, final: bool = False) -> list[dict]:
    """The step lines on disk. While the workload runs, a flush may be writing as this reads
    (the file grows page by page under one write): the text after the last newline is left
    for the next read. `final`: the file is complete and must end with its last line whole."""
    if not events.exists():
        return []
    text = events.read_text()
    if final:
        assert text.endswith("\n"), f"half a line at the end: {text[-200:]!r}"
    for line in text[: text.rfind("\n") + 1].splitlines():
        json.loads(line)  # every line whole: a flush never writes half a line
    if not events.with_name("steps.bin").exists():
        return []
    # the step records, as step lines (tests/helpers/step_records.py: a record not whole yet
    # is left for the next read)
    return [r for r in step_records.old_lines(events) if r["kind"] in ("step_enter", "step_exit")]


def test_steps_reach_the_disk_while_the_workload_runs_and_survive_kill_9(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "steps.py"
    script.write_text(STEPS_THEN_WAIT)
    marker = project / "marker"
    events = project / "run" / "events.jsonl"
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), "--",
                      str(marker), cwd=project, env=pgle_env())
    workload = None
    try:
        wait_until(marker.exists, "the workload's 1000 steps", proc=proc)
        workload = int(marker.read_text())
        # The workload now sleeps: only the harness's once-a-second flush can write them.
        wait_until(lambda: len(step_lines(events)) == 2000, "the steps on disk", timeout=30)
        assert not gone(workload), "the workload ended: the lines came from its exit"
        os.kill(workload, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if workload is not None:
            kill_all([workload])
    assert proc.returncode == 128 + signal.SIGKILL, err.decode()
    lines = step_lines(events, final=True)
    assert [r["index"] for r in lines if r["kind"] == "step_enter"] == list(range(1000))
    assert [r["step_num"] for r in lines if r["kind"] == "step_enter"] == list(range(1000))
    assert all(r["name"] == "train" for r in lines if r["kind"] == "step_enter")


def test_the_window_edges_are_on_disk_at_once(project):
    """`trace_stop` is written before the step after the window begins: a kill right after
    the window loses nothing of it."""
    marker = project / "marker"
    script = project / "window.py"
    script.write_text(textwrap.dedent(f"""
        import time
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x + 1)
        x = jnp.ones(4)
        for i in range(8):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = f(x).block_until_ready()
            if i == 6:  # the window was steps 2..6: it has just closed
                open({str(marker)!r}, "w").close()
                time.sleep(300)
    """))
    events = project / "run" / "events.jsonl"
    proc = start_pgle("collect", "--steps", "2:5", "--allow-empty", "-o", "p.pb", "--run-dir",
                      "run", str(script), cwd=project, env=pgle_env())
    try:
        wait_until(marker.exists, "the window's end", proc=proc, timeout=240)
        kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
        assert "trace_start" in kinds and "trace_stop" in kinds, kinds
    finally:
        if proc.poll() is None:
            proc.kill()  # pgle gone: its harness watch kills the workload
            proc.communicate()


FORKS = """
import os, sys
import jax
for i in range(10):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        pass
pid = os.fork()
if pid == 0:
    os._exit(0)  # a child that exits at once: what it inherited must not be written twice
os.waitpid(pid, 0)
for i in range(10, 20):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        pass
os._exit(0)  # and the parent skips every cleanup: the buffered steps are written first
"""


def test_a_fork_and_os_exit_neither_lose_nor_duplicate_steps(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "forks.py"
    script.write_text(FORKS)
    proc = start_pgle("run", "--profile", "p.pb", "--run-dir", "run", str(script), cwd=project,
                      env=pgle_env())
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    lines = step_lines(project / "run" / "events.jsonl", final=True)
    assert [r["step_num"] for r in lines if r["kind"] == "step_enter"] == list(range(20))
    assert [r["index"] for r in lines if r["kind"] == "step_exit"] == list(range(20))
