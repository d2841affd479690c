"""The stall watchdog (issue 23, case 2): a workload that makes no progress for longer than
its bound has every Python process write its stacks into the run folder, the phase named,
and is stopped with exit 124. Real hangs on CPU: a host callback waiting on an Event, and a
rank that never joins a jax.distributed barrier (two real processes, a real coordinator)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle

from pgle.evidence import stacks
from pgle.errors import BadInput
from pgle.jobs.layout import parse_stall_timeout
from pgle.launch.stall import (
    EXPORT_STOP_S,
    REPORT_AFTER_S,
    RHYTHM_STEPS,
    STEP_FACTOR,
    STOP_FLOOR_S,
    StallPolicy,
    StallWatch,
)

DIST = WORKLOADS / "dist_steps.py"

CALLBACK = """
import threading
import jax, jax.numpy as jnp

gate = threading.Event()

def host_side(x):
    gate.wait()
    return x

@jax.jit
def step(x):
    return jax.pure_callback(host_side, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

print("calling the callback", flush=True)
print(step(jnp.ones(3)))
"""


def test_a_blocked_host_callback_is_stopped_with_its_stacks(project):
    script = project / "blocked.py"
    script.write_text(CALLBACK)
    proc = run_pgle("run", "--profile", str(_profile(project)), "--stall-timeout", "4s",
                    "--json", str(script), cwd=project, timeout=120)
    assert proc.returncode == 124, proc.stderr.decode()
    err = proc.stderr.decode()
    assert "Traceback" not in err
    error = report_of(proc)
    assert error["exit_code"] == 124 and error["exit_code_from"] == "pgle"
    (process,) = error["stall"]["processes"]
    assert process["phase"] == "host_callback"
    assert "blocked.py:8 (host_side)" in process["what"] and "gate.wait()" in process["what"]
    dump = Path(process["stacks"]).read_text()
    assert 'blocked.py", line 8 in host_side' in dump and "jax/_src/callback.py" in dump
    assert Path(process["stacks"]).parent == Path(error["run_dir"])
    (line,) = [x for x in pgle_lines(proc) if x.startswith("pgle: error:")]
    assert "no progress for" in line and "host callback" in line and "stacks.txt" in line


def test_a_run_that_only_executes_is_not_stopped(project):
    """No output, no step markers, no compile after the first: its executions are progress
    (7 s of them, past the 4 s bound by more than the watchdog's half-second polls)."""
    script = project / "quiet.py"
    script.write_text("import time, jax, jax.numpy as jnp\n"
                      "f = jax.jit(lambda x: x * 2.0)\nx = jnp.ones(3)\n"
                      "t = time.time()\n"
                      "while time.time() - t < 7:\n"
                      "    x = f(x) / 2.0\n    x.block_until_ready()\n    time.sleep(0.05)\n")
    proc = run_pgle("run", "--profile", str(_profile(project)), "--stall-timeout", "4s",
                    "--json", str(script), cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "no progress" not in proc.stderr.decode()


def test_stall_timeout_is_checked_before_the_launch(project):
    proc = run_pgle("run", "--profile", str(_profile(project)), "--stall-timeout", "soon",
                    "x.py", cwd=project)
    assert proc.returncode == 2 and b"--stall-timeout 'soon' is not a duration" in proc.stderr


def test_every_rank_writes_its_stacks_when_a_peer_never_joins_the_barrier(project):
    """Two ranks (pgle each, jax.distributed on localhost): rank 1 blocks in its own code, rank
    0 waits in sync_global_devices. Both are stopped, each rank's stacks are in its run folder,
    and each names its phase."""
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = pgle_env(PGLE_RANK=str(rank), PGLE_WORLD_SIZE="2", PGLE_JOB_ID="stall-test",
                       DIST_PORT=str(port))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pgle", "run", "--profile", str(_profile(project)),
             "--stall-timeout", "10s", "--json", str(DIST), "--", "--hang", "barrier", "1"],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=240) for p in procs]
    codes = [p.returncode for p in procs]
    assert all(c == 124 for c in codes), [o[1].decode()[-2000:] for o in outs]
    job = next((project / ".pgle" / "jobs").iterdir())
    phases = {}
    for rank in (0, 1):
        dump = (job / f"rank-{rank}" / "stacks.txt").read_text()
        assert "dist_steps.py" in dump, dump
        threads = stacks.parse(dump)
        phases[rank] = stacks.phase(threads).name
    assert phases[1] == "user_code"  # blocked in its own code, before the barrier
    assert phases[0] in ("barrier", "collective")
    errors = [json.loads(o[0]) for o in outs if o[0].strip()]
    assert any(e.get("stall") for e in errors), errors


def test_the_default_rule_reports_and_stops_only_a_stopped_step_rhythm(tmp_path):
    """The default policy on real event files, with the watchdog's clock moved by hand: before
    the steps (2 h quiet), while XLA compiles and while a trace is written it never stops the
    workload, it reports once per quiet spell; once 6 steps made a rhythm, a quiet spell of
    max(STOP_FLOOR_S, STEP_FACTOR x the median interval) stops it, and not a second earlier."""
    now = [1000.0]
    said: list[str] = []
    watch = StallWatch(tmp_path, None, said.append, clock=lambda: now[0])
    events = tmp_path / "events.jsonl"

    def write(*records: dict) -> None:
        with open(events, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")

    def wait(seconds: float) -> int | None:
        """`seconds` of no progress, polled closer than STOP_GAP_S (pgle was never stopped)."""
        code = None
        end = now[0] + seconds
        while code is None and now[0] < end:
            now[0] = min(end, now[0] + 1.9)
            code = watch.poll(0.0)
        return code

    events.touch()
    assert watch.stop_bound() is None
    assert wait(2 * STOP_FLOOR_S) is None  # quiet before the first step: reported, never stopped
    assert len(watch.notes) == 1 and "pgle lets it run" in watch.notes[0]
    assert [s for s in said if s.startswith("pgle: the workload made no progress for 10 min")]
    write(*({"kind": "step_enter", "t": 100.0 * i, "name": "train", "step_num": i, "index": i}
            for i in range(RHYTHM_STEPS)))  # one interval short of a rhythm
    assert wait(0.5) is None and watch.stop_bound() is None
    write({"kind": "step_enter", "t": 100.0 * RHYTHM_STEPS, "name": "train",
           "step_num": RHYTHM_STEPS, "index": RHYTHM_STEPS})
    assert wait(0.5) is None
    assert watch.stop_bound()[0] == STOP_FLOOR_S  # 20 x 100 s is under the floor
    # A compile in flight (auto PGLE's FDO recompile), then a trace being written: no stop.
    write({"kind": "compile_begin", "t": 700.0, "module": "jit_step", "fdo": True, "thread": "1"})
    assert wait(1.5 * STOP_FLOOR_S) is None
    write({"kind": "compile_end", "t": 9000.0, "module": "jit_step", "ok": True},
          {"kind": "trace_start", "t": 9001.0, "dir": "t", "purpose": "window"})
    assert wait(1.5 * STOP_FLOOR_S) is None
    write({"kind": "trace_stop", "t": 9002.0, "dir": "t", "purpose": "window"},
          {"kind": "script_trace", "t": 9003.0, "call": "start", "site": "x.py:1", "dir": None})
    assert wait(1.5 * STOP_FLOOR_S) is None and watch.busy()
    write({"kind": "script_trace", "t": 9004.0, "call": "stop", "site": "x.py:2", "dir": None})
    # The rhythm stopped: the floor, not a second less.
    assert wait(0.5) is None  # the poll that reads the trace's end: the spell starts here
    assert wait(STOP_FLOOR_S - 1) is None
    assert wait(1.0) == 124
    assert watch.report is not None and watch.report.bound_s == STOP_FLOOR_S
    assert "the steps stopped" in watch.report.bound_rule
    # Slow steps: STEP_FACTOR x their median.
    slow = StallWatch(tmp_path / "slow", None, lambda s: None, clock=lambda: now[0])
    (tmp_path / "slow").mkdir()
    with open(tmp_path / "slow" / "events.jsonl", "w") as f:
        for i in range(10):
            f.write(json.dumps({"kind": "step_enter", "t": 600.0 * i, "name": "s",
                                "step_num": i, "index": i}) + "\n")
    slow.poll(0.0)
    assert slow.stop_bound()[0] == STEP_FACTOR * 600.0


def test_an_explicit_bound_stops_in_any_phase_and_report_only_never_stops(tmp_path):
    now = [1000.0]
    (tmp_path / "events.jsonl").write_text(json.dumps(
        {"kind": "compile_begin", "t": 1.0, "module": "m", "fdo": False, "thread": "1"}) + "\n")
    explicit = StallWatch(tmp_path, 30.0, lambda s: None, clock=lambda: now[0])
    report_only = StallWatch(tmp_path, parse_stall_timeout("report:20s"), lambda s: None,
                             clock=lambda: now[0])
    codes = []
    for _ in range(400):
        now[0] += 0.5
        codes.append((explicit.poll(0.0), report_only.poll(0.0)))
    assert (124, None) in codes and all(r is None for _, r in codes)
    # 30 s after the first poll, which read the compile's start: while it compiles
    assert next(i for i, c in enumerate(codes) if c[0] == 124) == 60
    assert len(report_only.notes) == 1  # one report per quiet spell


def test_an_explicit_bound_gives_the_trace_export_its_own_larger_bound(tmp_path):
    """--stall-timeout 30s: an open window counts as any phase; once the harness says the
    trace is being written (trace_export), the bound is EXPORT_STOP_S, to the second; after
    the trace_stop it is 30 s again (issue 36)."""
    now = [1000.0]
    events = tmp_path / "events.jsonl"

    def write(*records: dict) -> None:
        with open(events, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")

    def quiet_until_stopped(watch: StallWatch, limit: float) -> float | None:
        start = now[0]
        while now[0] - start < limit:
            now[0] += 0.5
            if watch.poll(0.0) == 124:
                return now[0] - start
        return None

    write({"kind": "trace_start", "t": 1.0, "dir": "t", "purpose": "window"})
    opened = StallWatch(tmp_path, 30.0, lambda s: None, clock=lambda: now[0])
    assert quiet_until_stopped(opened, 100.0) == 30.5  # the poll that read the start, then 30 s
    write({"kind": "trace_export", "t": 2.0, "purpose": "window"})
    exporting = StallWatch(tmp_path, 30.0, lambda s: None, clock=lambda: now[0])
    took = quiet_until_stopped(exporting, EXPORT_STOP_S + 100.0)
    assert took == EXPORT_STOP_S + 0.5
    assert exporting.report is not None and exporting.report.bound_s == EXPORT_STOP_S
    assert "export" in exporting.report.bound_rule
    write({"kind": "trace_stop", "t": 3.0, "dir": "t", "purpose": "window"})
    written = StallWatch(tmp_path, 30.0, lambda s: None, clock=lambda: now[0])
    assert quiet_until_stopped(written, 100.0) == 30.5
    # A bound above EXPORT_STOP_S is the user's, export or not.
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "events.jsonl").write_text(
        json.dumps({"kind": "trace_export", "t": 2.0, "purpose": "window"}) + "\n")
    longer = StallWatch(tmp_path / "x", 2 * EXPORT_STOP_S, lambda s: None, clock=lambda: now[0])
    longer.poll(0.0)
    assert longer.stop_bound() == (2 * EXPORT_STOP_S, "--stall-timeout 60 min")
    # A bound of exactly EXPORT_STOP_S is the user's too (the export's is no larger).
    exact = StallWatch(tmp_path / "x", EXPORT_STOP_S, lambda s: None, clock=lambda: now[0])
    exact.poll(0.0)
    assert exact.stop_bound() == (EXPORT_STOP_S, "--stall-timeout 30 min")


def test_time_stopped_does_not_count(tmp_path):
    """A pause of the polls longer than STOP_GAP_S (pgle was stopped) and `restart` (SIGCONT,
    a stopped workload) restart the clock of no progress."""
    now = [1000.0]
    watch = StallWatch(tmp_path, 10.0, lambda s: None, clock=lambda: now[0])
    (tmp_path / "events.jsonl").touch()
    for _ in range(18):  # 9 s quiet
        now[0] += 0.5
        assert watch.poll(0.0) is None
    now[0] += 600  # stopped for 10 min
    assert watch.poll(0.0) is None
    for _ in range(18):
        now[0] += 0.5
        assert watch.poll(0.0) is None
    watch.restart()
    for _ in range(19):
        now[0] += 0.5
        assert watch.poll(0.0) is None
    now[0] += 0.5
    assert watch.poll(0.0) == 124


def test_stall_timeout_values(tmp_path):
    assert parse_stall_timeout("auto") is None and parse_stall_timeout("off") == 0.0
    assert parse_stall_timeout("90s") == 90.0
    assert parse_stall_timeout("report") == StallPolicy(None, REPORT_AFTER_S, rhythm_stop=False)
    assert parse_stall_timeout("report:2m") == StallPolicy(None, 120.0, rhythm_stop=False)
    for bad in ("report:soon", "report:0", "nan", "-5"):
        with pytest.raises(BadInput):
            parse_stall_timeout(bad)


def test_many_new_events_are_read_in_blocks_whole(tmp_path):
    """Tens of MB added between two polls (a million short steps) are read a line at a time:
    every complete line is seen once, a line of several MB is read whole, and a half-written
    last line waits for the next poll."""
    from pgle.launch.stall import STEP_WINDOW

    READ_BLOCK = 4 << 20  # sizes beyond the file object's own buffer

    watch = StallWatch(tmp_path, None, lambda s: None, clock=lambda: 1000.0)
    events = tmp_path / "events.jsonl"
    step = '{"kind": "step_enter", "t": %d.5, "name": "train", "step_num": %d, "index": %d}\n'
    count = 3 * READ_BLOCK // len(step % (0, 0, 0)) + 7  # lines across block edges
    long_line = json.dumps({"kind": "log", "t": 1.0, "message": "x" * (READ_BLOCK + 5)}) + "\n"
    begin = json.dumps({"kind": "compile_begin", "t": 2.0, "module": "jit_step", "fdo": False,
                        "thread": "7"})
    with open(events, "w") as f:
        f.writelines(step % (i, i, i) for i in range(count))
        f.write(long_line)
        f.write(begin[:20])  # being written
    assert watch.poll(0.0) is None
    proc = next(iter(watch.processes.values()))
    assert list(proc.events.step_times) == [i + 0.5 for i in range(count - STEP_WINDOW - 1, count)]
    assert proc.events.offset == events.stat().st_size - 20 and not proc.compiling
    with open(events, "a") as f:
        f.write(begin[20:] + "\n")
    watch.poll(0.0)
    assert [(k, c.module, c.fdo, c.t) for k, c in proc.compiling.items()] == [
        ("7", "jit_step", False, 2.0)]
    assert proc.events.offset == events.stat().st_size


def _profile(project: Path) -> Path:
    path = project / "p.pbtxt"
    path.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_compile_end_closes_its_own_thread_s_compile(tmp_path):
    """Issue 33: two threads compile modules of one name at once; the phase a stall names is
    the compile still in flight (its thread's), not the first compile of that module. A
    compile end of pgle before the fix names no thread: the first compile of its module."""
    now = [1000.0]
    watch = StallWatch(tmp_path, None, lambda s: None, clock=lambda: now[0])
    events = tmp_path / "events.jsonl"

    def write(*records: dict) -> None:
        with open(events, "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        now[0] += 1.0
        watch.poll(0.0)

    def compiling() -> dict:
        return {k: c.fdo for k, c in watch.processes[tmp_path].compiling.items()}

    write({"kind": "compile_begin", "t": 1.0, "module": "jit_step", "fdo": True, "thread": "1"},
          {"kind": "compile_begin", "t": 2.0, "module": "jit_step", "fdo": False, "thread": "2"})
    assert compiling() == {"1": True, "2": False}
    write({"kind": "compile_end", "t": 3.0, "module": "jit_step", "ok": True, "thread": "2"})
    assert compiling() == {"1": True}  # thread 1's FDO recompile is still running
    assert watch.busy() == "XLA compiles"
    write({"kind": "compile_end", "t": 4.0, "module": "jit_step", "ok": True, "thread": "1"})
    assert compiling() == {} and watch.busy() is None
    write({"kind": "compile_begin", "t": 5.0, "module": "jit_step", "fdo": True, "thread": "1"},
          {"kind": "compile_begin", "t": 6.0, "module": "jit_step", "fdo": False, "thread": "2"},
          {"kind": "compile_end", "t": 7.0, "module": "jit_step", "ok": True})
    assert compiling() == {"2": False}


def test_each_policy_in_words():
    """How the watchdog's rule is shown (the run's report and `--stall-timeout` errors)."""
    assert StallPolicy().describe() == (
        "report after 10 min without progress; stop a stopped step rhythm")
    assert StallPolicy(1800.0, None, False).describe() == "stop after 30 min without progress"
    assert StallPolicy(None, 45.0, False).describe() == "report after 45 s without progress; never stop"
    assert StallPolicy(None, None, True).describe() == "never report; stop a stopped step rhythm"
    assert StallPolicy(None, None, False).describe() == "never report; never stop"
    assert StallPolicy(7200.0, None, False).describe() == "stop after 2.0 h without progress"
    assert StallPolicy.of(None) == StallPolicy() and StallPolicy.of(0) is None
    given = StallPolicy(5.0, None, False)
    assert StallPolicy.of(given) is given and StallPolicy.of(30) == StallPolicy(30.0, None, False)


def test_the_findings_in_words_and_in_the_report():
    from pgle.launch.stall import StallReport

    none = StallReport(61.26, 2.74, "rule x", {}, {}, {}, "/run")
    assert none.message() == (
        "the workload made no progress for 61 s (rule x): no harnessed process answered; no "
        "stacks were written; pgle stopped it (exit 124; --stall-timeout sets the bound)")
    assert none.note() == (
        "the workload made no progress for 61 s: no harnessed process answered; no stacks were "
        "written; pgle lets it run (a compile, a trace export, a checkpoint or the set-up before "
        "the first step is no stall; --stall-timeout DURATION stops a workload after that long "
        "without progress)")
    assert none.to_dict() == {"seconds": 61.3, "bound_s": 2.7, "bound_rule": "rule x",
                              "processes": []}
    one = StallReport(4000.0, 3600.0, "rule", {7: "in a barrier"}, {7: "barrier"}, {}, "/run")
    assert "(rule): in a barrier; its Python stacks are in (no stacks were written);" in (
        one.message())
    two = StallReport(30.0, 10.0, "rule", {7: "in a barrier", 3: "compiling"},
                      {7: "barrier", 3: "compile"}, {7: "/run/procs/7/stacks.txt"}, "/run")
    assert two.message() == (
        "the workload made no progress for 30 s (rule): process 3: compiling; process 7: in a "
        "barrier; every process's Python stacks are in /run (stacks.txt, procs/*/); pgle "
        "stopped it (exit 124; --stall-timeout sets the bound)")
    assert two.to_dict()["processes"] == [
        {"pid": 3, "phase": "compile", "what": "compiling", "stacks": None},
        {"pid": 7, "phase": "barrier", "what": "in a barrier", "stacks": "/run/procs/7/stacks.txt"}]


# A harnessed process as the harness makes it: its stacks written on the dump signal.
DUMPABLE = """
import faulthandler, signal, sys, time
stacks = open(sys.argv[1], "a")
faulthandler.register(signal.SIGURG, file=stacks, all_threads=True)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(30)
"""


def test_the_stacks_of_a_process_that_exited_are_not_asked_for(tmp_path):
    """Only a process that has not exited gets the dump signal: its pid may be another
    process's by then. A stacks record without a file (faulthandler had none) is no file."""
    import os
    import time

    stacks_file = tmp_path / "stacks.txt"
    child = subprocess.Popen([sys.executable, "-c", DUMPABLE, str(stacks_file)])
    try:
        deadline = time.monotonic() + 20
        while not Path(f"{stacks_file}.ready").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        events = tmp_path / "events.jsonl"
        records = [{"kind": "start", "t": 1.0, "pid": child.pid},
                   {"kind": "stacks", "t": 1.0, "file": str(stacks_file), "main_thread": "0x1"}]
        events.write_text("".join(json.dumps(r) + "\n" for r in records))
        watch = StallWatch(tmp_path, 1.0, lambda s: None)
        watch.dump("a test")
        assert list(watch.dumped) == [child.pid] and "thread" in watch.dumped[child.pid]
        size = stacks_file.stat().st_size
        with events.open("a") as f:
            f.write(json.dumps({"kind": "exit", "t": 2.0, "code": 0}) + "\n")
        watch.dumped.clear()
        t0 = time.monotonic()
        watch.dump("a test")
        assert watch.dumped == {} and stacks_file.stat().st_size == size
        assert time.monotonic() - t0 < 1  # nobody to wait for
    finally:
        child.kill()
        child.wait(timeout=20)
    other = tmp_path / "other"
    other.mkdir()
    (other / "events.jsonl").write_text(
        json.dumps({"kind": "stacks", "t": 1.0, "file": None, "main_thread": None}) + "\n")
    bare = StallWatch(other, 1.0, lambda s: None)
    bare.poll(0.0)
    assert bare.processes[other].stacks is None


def test_a_compile_end_without_its_begin_is_ignored(tmp_path):
    """A compile whose begin the events do not hold (a thread's end twice, a module never
    begun): nothing is closed, nothing fails."""
    now = [1000.0]
    watch = StallWatch(tmp_path, None, lambda s: None, clock=lambda: now[0])
    records = [{"kind": "compile_begin", "t": 1.0, "module": "jit_a", "fdo": False, "thread": "1"},
               {"kind": "compile_end", "t": 2.0, "module": "jit_a", "ok": True, "thread": "9"},
               {"kind": "compile_end", "t": 3.0, "module": "jit_b", "ok": True}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    watch.poll(0.0)
    assert list(watch.processes[tmp_path].compiling) == ["1"]


def test_every_process_that_can_is_asked_for_its_stacks_and_a_slow_one_waited_for(tmp_path):
    """Processes in the run folder and procs/: one exited, one whose pid is gone (it died
    without its exit record), one without a start record, and one stopped for a second (its
    dump comes late): only the last is asked, and its stacks are waited for."""
    import os
    import signal
    import threading
    import time

    def home(name: str) -> Path:
        path = tmp_path if name == "." else tmp_path / "procs" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def records(where: Path, *rs: dict) -> None:
        (where / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=20)
    stacks_file = tmp_path / "late.txt"
    late = subprocess.Popen([sys.executable, "-c", DUMPABLE, str(stacks_file)])
    # Alive, but its events say it exited (its harness wrote the record at exit).
    done = subprocess.Popen([sys.executable, "-c", DUMPABLE, str(tmp_path / "done.txt")])
    resume: threading.Timer | None = None
    try:
        deadline = time.monotonic() + 20
        while not (Path(f"{stacks_file}.ready").exists()
                   and (tmp_path / "done.txt.ready").exists()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        stacks = {"kind": "stacks", "t": 1.0, "main_thread": "0x1"}
        records(home("."), {"kind": "start", "t": 1.0, "pid": done.pid},
                {**stacks, "file": str(tmp_path / "done.txt")}, {"kind": "exit", "t": 2.0, "code": 0})
        records(home("a"), {"kind": "start", "t": 1.0, "pid": gone.pid},
                {**stacks, "file": str(tmp_path / "gone.txt")})
        records(home("b"), {**stacks, "file": str(tmp_path / "nostart.txt")})
        records(home("c"), {"kind": "start", "t": 1.0, "pid": late.pid},
                {**stacks, "file": str(stacks_file)})
        for name in ("gone.txt", "nostart.txt"):
            (tmp_path / name).write_text("")
        os.kill(late.pid, signal.SIGSTOP)  # this test's own child: its dump waits for SIGCONT
        resume = threading.Timer(1.0, late.send_signal, (signal.SIGCONT,))
        resume.start()
        watch = StallWatch(tmp_path, 1.0, lambda s: None)
        t0 = time.monotonic()
        watch.dump("a test")
        assert 1.0 <= time.monotonic() - t0 < 5
        assert list(watch.dumped) == [late.pid] and "thread" in watch.dumped[late.pid]
        # The findings name the processes that wrote their stacks, and only those.
        report = watch._findings(3.0, 1.0, "a rule")
        assert list(report.phases) == [late.pid] and report.stacks == {late.pid: str(stacks_file)}
        assert all((tmp_path / n).read_text() == "" for n in ("done.txt", "gone.txt", "nostart.txt"))
    finally:
        if resume is not None:
            resume.cancel()
            resume.join(timeout=20)
        for p in (late, done):
            p.kill()
            p.wait(timeout=20)


# A process whose stacks come with bytes that are not UTF-8 (a path in another encoding).
UNDECODABLE = """
import signal, sys, time
out = open(sys.argv[1], "ab", buffering=0)
signal.signal(signal.SIGURG, lambda *a: out.write(b"Thread 0x1 in /data/caf\\xe9.py\\n"))
open(sys.argv[1] + ".ready", "w").close()
time.sleep(30)
"""


def test_stacks_that_are_not_utf8_are_read_with_replacements(tmp_path):
    import time

    stacks_file = tmp_path / "stacks.txt"
    child = subprocess.Popen([sys.executable, "-c", UNDECODABLE, str(stacks_file)])
    try:
        deadline = time.monotonic() + 20
        while not Path(f"{stacks_file}.ready").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
            {"kind": "start", "t": 1.0, "pid": child.pid},
            {"kind": "stacks", "t": 1.0, "file": str(stacks_file), "main_thread": "0x1"})))
        watch = StallWatch(tmp_path, 1.0, lambda s: None)
        t0 = time.monotonic()
        watch.dump("a test")
        assert watch.dumped == {child.pid: "Thread 0x1 in /data/caf\ufffd.py\n"}
        # pgle goes on a moment after the stacks are written (looked for every 50 ms, then
        # 0.2 s for a dump still being written), not a second or more later.
        assert time.monotonic() - t0 < 1.0
    finally:
        child.kill()
        child.wait(timeout=20)


def test_the_findings_name_the_compile_in_flight_and_else_the_main_thread(tmp_path):
    """Each process's phase from its dump (read from its stacks file) and its events: a
    compile in flight names the compile; otherwise the main thread the harness recorded is
    the one described (faulthandler pads its ident), not the thread that took the signal."""
    dump = ("Thread 0x00007f00000000bb (most recent call first):\n"
            '  File "/w/train.py", line 7 in wait_for_peer\n'
            '  File "/w/train.py", line 9 in <module>\n\n'
            "Current thread 0x00007f00000000aa (most recent call first):\n"
            '  File "/w/loader.py", line 3 in spin\n')
    stacks_rec = {"kind": "stacks", "t": 1.0, "file": "s.txt", "main_thread": "0x7f00000000bb"}
    homes = {".": 4242, "a": 4343}
    for name, pid in homes.items():
        where = tmp_path if name == "." else tmp_path / "procs" / name
        where.mkdir(parents=True, exist_ok=True)
        rs = [{"kind": "start", "t": 1.0, "pid": pid}, stacks_rec]
        if name == ".":
            rs.append({"kind": "compile_begin", "t": 2.0, "module": "jit_step", "fdo": False,
                       "thread": "1"})
        (where / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    watch = StallWatch(tmp_path, 1.0, lambda s: None)
    watch.poll(0.0)
    watch.dumped.update({pid: dump for pid in homes.values()})  # what each process wrote
    report = watch._findings(3.0, 1.0, "a rule")
    assert report.phases == {4242: "compiling jit_step",
                             4343: "in the user's code at train.py:7 (wait_for_peer)"}
    assert report.message() == (
        "the workload made no progress for 3 s (a rule): process 4242: compiling jit_step; "
        "process 4343: in the user's code at train.py:7 (wait_for_peer); every process's "
        f"Python stacks are in {tmp_path} (stacks.txt, procs/*/); pgle stopped it (exit 124; "
        "--stall-timeout sets the bound)")


def test_seconds_in_words_at_each_units_edge():
    from pgle.launch.stall import describe_seconds

    assert describe_seconds(119.4) == "119 s" and describe_seconds(120) == "2 min"
    assert describe_seconds(7199) == "120 min" and describe_seconds(7381) == "2.1 h"


def test_a_stopped_process_is_told_by_its_state_whatever_its_name():
    """/proc/PID/stat's state follows the last ')': a program named `a) T (b` that sleeps is
    not stopped; one stopped with SIGSTOP is; one that is gone is not."""
    import os
    import signal
    import time

    from pgle.launch.launcher import _stopped

    code = ("import sys, time\nopen('/proc/self/comm', 'w').write('a) T (b')\n"
            "print('named', flush=True)\ntime.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"named\n"
        assert b"(a) T (b)" in Path(f"/proc/{child.pid}/stat").read_bytes()
        deadline = time.monotonic() + 20
        while Path(f"/proc/{child.pid}/stat").read_bytes().split(b") ")[-1][:1] != b"S":
            assert time.monotonic() < deadline  # asleep in time.sleep
            time.sleep(0.01)
        assert not _stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)  # this test's own child
        deadline = time.monotonic() + 10  # stopped at once: a wrong reading fails in time
        while not _stopped(child.pid):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait(timeout=20)
    assert not _stopped(child.pid)  # gone: reaped


# A process held by a debugger: traced (PTRACE_TRACEME, its parent the tracer), then stopped.
TRACED = """
import ctypes, os, signal
if ctypes.CDLL(None, use_errno=True).ptrace(0, 0, None, None) != 0:  # PTRACE_TRACEME
    raise SystemExit(3)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_process_held_by_a_debugger_is_stopped():
    """A workload a debugger holds (gdb, py-spy attached) is in the tracing stop, `t` in
    /proc/PID/stat: stopped like SIGSTOP's `T`, so not a stall."""
    import os
    import signal
    import time

    from pgle.launch.launcher import _stopped

    child = subprocess.Popen([sys.executable, "-c", TRACED])
    try:
        deadline = time.monotonic() + 20
        while (state := Path(f"/proc/{child.pid}/stat").read_bytes().split(b") ")[-1][:1]) \
                not in (b"t", b"Z"):
            assert time.monotonic() < deadline, state
            time.sleep(0.01)
        if state == b"Z":
            pytest.skip("ptrace is not allowed here")
        assert _stopped(child.pid)
    finally:
        # The tracer (this process) is told of the child's stops too: reap it by hand.
        os.kill(child.pid, signal.SIGKILL)  # this test's own child
        while True:
            _, status = os.waitpid(child.pid, 0)
            if not os.WIFSTOPPED(status):
                break
        child.returncode = -9


def test_the_bounds_hold_at_their_exact_second(tmp_path):
    """On the watch's own clock (polls 1 s apart): a quiet spell is reported once it lasted
    report_after_s, not a poll later; a workload is stopped once it lasted the bound; a
    gap between two polls of exactly STOP_GAP_S is not yet pgle being stopped."""
    from pgle.errors import EXIT_STALLED
    from pgle.launch.stall import STOP_GAP_S

    now = [1000.0]
    said: list[str] = []
    report = StallWatch(tmp_path, StallPolicy(None, 5.0, rhythm_stop=False), said.append,
                        clock=lambda: now[0])
    for _ in range(4):
        now[0] += 1.0
        assert report.poll(0.0) is None and report.notes == []
    now[0] += 1.0  # quiet for 5 s exactly
    assert report.poll(0.0) is None and len(report.notes) == 1
    stop = StallWatch(tmp_path, 3.0, said.append, clock=lambda: now[0])
    now[0] += STOP_GAP_S  # exactly the gap: still pgle's own time, the clock runs on
    assert stop.poll(0.0) is None
    now[0] += 1.0  # 3 s quiet exactly
    assert stop.poll(0.0) == EXIT_STALLED


def test_a_rhythm_of_exactly_the_floor_over_the_factor_is_the_floors(tmp_path):
    """Steps 180 s apart: 20x the median is exactly STOP_FLOOR_S (1 h); the bound is the
    floor's, said as the floor."""
    (tmp_path / "events.jsonl").write_text("".join(
        json.dumps({"kind": "step_enter", "t": 180.0 * i, "name": "s", "step_num": i,
                    "index": i}) + "\n" for i in range(RHYTHM_STEPS + 1)))
    watch = StallWatch(tmp_path, None, lambda s: None, clock=lambda: 1000.0)
    watch.poll(0.0)
    assert watch.step_intervals() == [180.0] * RHYTHM_STEPS
    assert STEP_FACTOR * 180.0 == STOP_FLOOR_S
    assert watch.stop_bound() == (STOP_FLOOR_S, "the steps stopped: 60 min, the least the "
                                                "default watchdog waits")


def test_new_process_folders_are_looked_for_every_two_seconds(tmp_path):
    """procs/ is listed at most every 2 s (cheap polls between): a process folder made just
    after a scan is found by the scan 2 s later, to the second."""
    now = [1000.0]
    watch = StallWatch(tmp_path, 30.0, lambda s: None, clock=lambda: now[0])
    watch.poll(0.0)
    assert list(watch.processes) == [tmp_path]
    (tmp_path / "procs" / "a").mkdir(parents=True)
    now[0] += 1.0
    watch.poll(0.0)
    assert list(watch.processes) == [tmp_path]  # not listed again yet
    now[0] += 1.0
    watch.poll(0.0)
    assert list(watch.processes) == [tmp_path, tmp_path / "procs" / "a"]


def test_the_progress_file_touched_is_progress_and_an_off_watch_never_stops(tmp_path):
    """The harness touches its progress file as the workload advances (steps pgle counts in
    a file, not events): each new mtime is progress; once it stays, the bound runs. A watch
    that is off (0) never stops, not even a stopped step rhythm."""
    import os

    from pgle.evidence import schema

    now = [1000.0]
    progress = tmp_path / schema.PROGRESS_NAME
    progress.write_text("")
    watch = StallWatch(tmp_path, 3.0, lambda s: None, clock=lambda: now[0])
    for i in range(10):
        os.utime(progress, ns=(i * 10**9, i * 10**9))  # a new mtime each second
        now[0] += 1.0
        assert watch.poll(0.0) is None, i
    for _ in range(2):
        now[0] += 1.0
        assert watch.poll(0.0) is None
    now[0] += 1.0
    assert watch.poll(0.0) == 124  # 3 s since the last new mtime
    off = tmp_path / "off"
    off.mkdir()
    (off / "events.jsonl").write_text("".join(
        json.dumps({"kind": "step_enter", "t": float(i), "name": "s", "step_num": i,
                    "index": i}) + "\n" for i in range(RHYTHM_STEPS + 1)))
    never = StallWatch(off, 0, lambda s: None, clock=lambda: now[0])
    never.poll(0.0)
    assert never.step_intervals() == [1.0] * RHYTHM_STEPS  # a rhythm, and it stopped
    assert never.stop_bound() is None


def test_progress_of_any_one_process_is_the_workloads_progress(tmp_path):
    """A job's processes each have their events (the run folder's and procs/*/): the first
    one's new line is progress although the next one's file did not move."""
    now = [1000.0]
    (tmp_path / "procs" / "1").mkdir(parents=True)
    for home in (tmp_path, tmp_path / "procs" / "1"):
        (home / "events.jsonl").write_text("")
    watch = StallWatch(tmp_path, 3.0, lambda s: None, clock=lambda: now[0])
    watch.poll(0.0)
    assert list(watch.processes) == [tmp_path, tmp_path / "procs" / "1"]
    for i in range(6):  # a line every second in the first process's events only
        with (tmp_path / "events.jsonl").open("a") as f:
            f.write(json.dumps({"kind": "compile_end", "t": float(i), "module": "jit_a",
                                "ok": True, "thread": "1"}) + "\n")
        now[0] += 1.0
        assert watch.poll(0.0) is None, i
    for _ in range(2):
        now[0] += 1.0
        assert watch.poll(0.0) is None
    now[0] += 1.0
    assert watch.poll(0.0) == 124  # 3 s since the last line
