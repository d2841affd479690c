"""What pgle runs in the workload's thread per marked step, counted in frames (issue 33).

On a short marked step that calls one jitted function, each Python frame pgle adds costs
several times what it costs in a bare loop of the hooks (the execution in between evicts the
interpreter's state from the caches): with the step hooks in frames of their own and a
jitted call's count, pgle ran five frames a step. A real `pgle run` of a real jax script on
CPU; the script counts the Python calls its own thread makes (sys.setprofile, per thread)
over steps taken after the count-only path began (LIGHT_AFTER_STEPS), and the step records
and execution counts must stay exact."""

from __future__ import annotations

import json

from helpers import step_records
from helpers.pgle_testing import run_pgle, write_profile

from pgle.launch.harness import LIGHT_AFTER_STEPS, Harness
from pgle.evidence import schema

WARM = 2 * LIGHT_AFTER_STEPS
COUNTED = 50

SCRIPT = f"""
import collections, json, sys
import jax, jax.numpy as jnp

jax.config.update("jax_cpu_enable_async_dispatch", False)
step = jax.jit(lambda x: jnp.tanh(x @ x.T).sum(axis=0))
x = jnp.ones((8, 8))
calls = collections.Counter()

def profile(frame, event, arg):
    name = frame.f_code.co_filename
    if event == "call" and name.endswith(("harness.py", "jax/_src/profiler.py")):
        calls[frame.f_code.co_qualname] += 1

for i in range({WARM} + {COUNTED}):
    if i == {WARM}:
        sys.setprofile(profile)
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        step(x).block_until_ready()
sys.setprofile(None)
with open(sys.argv[1], "w") as f:
    json.dump(calls, f)
"""


def test_a_short_marked_step_runs_three_pgle_frames(tmp_path):
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    (tmp_path / "w.py").write_text(SCRIPT)
    proc = run_pgle(
        "run", "--profile", "p.pb", "--run-dir", "r", "w.py", "calls.json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    calls = json.loads((tmp_path / "calls.json").read_text())
    # The marker's two methods (the hooks inline) and the jitted call's count, once each; jax's
    # StepTraceAnnotation.__init__ (it only adds `_r=1`) is skipped.
    assert calls == {
        "Harness.step_class.<locals>.StepTraceAnnotation.__init__": COUNTED,
        "Harness.step_class.<locals>.StepTraceAnnotation.__exit__": COUNTED,
        "_marked_class.<locals>.__call__": COUNTED,  # the count-only call of marked steps
    }
    events = step_records.old_lines(tmp_path / "r" / "events.jsonl")
    enters = [e for e in events if e["kind"] == "step_enter"]
    exits = [e for e in events if e["kind"] == "step_exit"]
    assert [e["step_num"] for e in enters] == list(range(WARM + COUNTED))
    assert [e["index"] for e in exits] == list(range(WARM + COUNTED))
    (jit,) = [e for e in events if e["kind"] == "jit_functions"]
    assert [(f["function"], f["executions"]) for f in jit["functions"]] == [
        ("jit(<lambda>)", WARM + COUNTED)
    ]


class OwnInit:
    """A marker base whose __init__ does more than jax's: the harness must keep calling it."""

    def __init__(self, name: str, **kwargs: object) -> None:
        self.seen = (name, kwargs)

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_marker_base_whose_init_does_more_than_jax_s_keeps_it(tmp_path):
    spec = schema.HarnessSpec(
        events=str(tmp_path / "events.jsonl"), workload=schema.WorkloadSpec("w.py", None)
    )
    harness = Harness(spec)
    try:
        step = harness.step_class(OwnInit)
        marker = step("train", step_num=7)
        marker.__exit__(None, None, None)
        assert marker.seen == ("train", {"step_num": 7})
        harness.events.flush()
        (enter, exit_) = step_records.records(tmp_path / "steps.bin")
        assert enter[1:3] == (0, 7) and exit_[1] == 0 and exit_[0] < 0
    finally:
        harness.events.close()


STEP_ROOTS = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: x @ x)
x = jnp.ones((64, 64))
for i in range(4):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x).block_until_ready()
"""


def test_pgles_marker_keeps_the_step_root_jax_gives_the_profiler(tmp_path):
    """pgle's marker constructs jaxlib's TraceMe itself (no frame of jax's __init__): with the
    `_r=1` jax's own passes, so the trace's `train` events carry the step-root stat the
    profile viewers find steps by, as without pgle."""
    from pgle.profiles.proto import xspace_class

    (tmp_path / "w.py").write_text(STEP_ROOTS)
    proc = run_pgle("collect", "--steps", "1:2", "--allow-empty", "-o", "p.pb", "--run-dir",
                    "run", "w.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    (path,) = (tmp_path / "run" / "trace").rglob("*.xplane.pb")
    space = xspace_class()()
    space.ParseFromString(path.read_bytes())
    steps = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.event_metadata.items()}
        stats = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if names.get(event.metadata_id) == "train":
                    steps.append({stats.get(s.metadata_id): s.int64_value or s.uint64_value
                                  for s in event.stats})
    assert len(steps) == 2 and all(s.get("_r") == 1 for s in steps), steps
