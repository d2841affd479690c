"""The stall watchdog's documented bounds and what counts as progress (issue 37: a printing
workload's output not counted, and a compile floor of 6 minutes instead of an hour, both
survived every test). docs/guide/cluster.md: "Progress is anything pgle sees the workload do:
a line of output, ..."; "while XLA compiles ... at least 1 h, or 5x the longest compile so
far; otherwise at least 10 min, or 20x the median step time"."""

from __future__ import annotations

import json

from helpers.pgle_testing import run_pgle
from pgle.launch.stall import StallWatch

PRINTER = """
import sys, time
for i in range(12):
    print(f"tick {i}", flush=True)
    time.sleep(0.5)
print("done", end="", flush=True)
"""


def _profile(project):
    path = project / "p.pbtxt"
    path.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    return path


def test_a_workload_printing_every_half_second_is_not_stopped_by_a_2s_bound(project):
    """Six seconds of output every 0.5 s, no jax, no steps: its lines are its progress."""
    script = project / "printer.py"
    script.write_text(PRINTER)
    proc = run_pgle("run", "--profile", str(_profile(project)), "--stall-timeout", "2s",
                    "--run-dir", "r", str(script), cwd=project, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err[-3000:]
    assert "no progress" not in err
    log = (project / "r" / "workload.log").read_text()
    assert [f"tick {i}" for i in range(12)] == [ln for ln in log.splitlines() if ln.startswith("tick")]
    assert log.rstrip("\n").endswith("done")  # the last line, without its newline, is kept


def test_the_same_bound_stops_a_workload_that_goes_quiet(project):
    """The control: the same 2 s bound does stop a workload silent for longer."""
    script = project / "quiet.py"
    script.write_text("import time\nprint('start', flush=True)\ntime.sleep(60)\n")
    proc = run_pgle("run", "--profile", str(_profile(project)), "--stall-timeout", "2s",
                    str(script), cwd=project, timeout=120)
    assert proc.returncode == 124, proc.stderr.decode()[-3000:]
    assert "no progress for" in proc.stderr.decode()


def test_the_documented_default_bounds(tmp_path):
    """At least 1 h while XLA compiles (the compile floor), 5x the longest compile past that;
    at least 10 min otherwise, 20x the median step past that: the numbers the guide gives."""
    now = [10_000.0]
    watch = StallWatch(tmp_path, None, lambda s: None, clock=lambda: now[0])
    events = tmp_path / "events.jsonl"
    events.touch()
    assert watch.bound() == (600.0, "the default bound, 10 min")

    def write(*records):
        with open(events, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)

    write({"kind": "compile_begin", "t": 1.0, "module": "jit_step", "fdo": False, "thread": "1"})
    assert watch.poll(now[0]) is None
    assert watch.bound() == (3600.0, "the bound while XLA compiles: 60 min")
    now[0] += 3599.0
    assert watch.poll(0.0) is None  # a compile of 59 min 59 s is not a stall
    now[0] += 2.0
    assert watch.poll(0.0) == 124
    # 5x a 20-minute compile: 100 min.
    watch = StallWatch(tmp_path / "b", None, lambda s: None, clock=lambda: now[0])
    (tmp_path / "b").mkdir()
    events = tmp_path / "b" / "events.jsonl"
    write({"kind": "compile_begin", "t": 1.0, "module": "jit_step", "fdo": False, "thread": "1"},
          {"kind": "compile_end", "t": 1201.0, "module": "jit_step", "ok": True},
          {"kind": "compile_begin", "t": 1300.0, "module": "jit_step", "fdo": True, "thread": "1"})
    watch.poll(now[0])
    assert watch.bound() == (6000.0, "5x the longest compile so far")
