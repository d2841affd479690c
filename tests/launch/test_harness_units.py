"""pgle.launch.harness in process and in real runs: what a user reads in the run folder when
the window is cut to a size, when the workload marked fewer steps than --steps asks for, and
where a line written after a write-out sits among the marked steps (issue 37: bugs of the
harness that its other tests let through, tests/mutants/heldout5.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import step_records
from helpers.pgle_testing import run_pgle, script_json, write_profile
from helpers.step_marker import Marker
from pgle.evidence import schema
from pgle.launch.harness import Events, Harness, ProfilerCalls, ProfilerWindow


def _pgle_run(tmp_path: Path, *workload: str, code: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """`pgle run --profile p.pb --run-dir run WORKLOAD` (a one-instruction profile) in tmp_path:
    it exits `code`; its stdout and its run folder's events are returned."""
    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--run-dir", "run", *workload, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr.decode()[-3000:]
    return proc.stdout.decode(), [json.loads(line) for line in
                                  (tmp_path / "run" / "events.jsonl").read_text().splitlines()]


def _run(tmp_path: Path, script: str) -> list[dict[str, Any]]:
    """`pgle run` of `script` (as w.py) in tmp_path: it exits 0; its run folder's events."""
    (tmp_path / "w.py").write_text(script)
    return _pgle_run(tmp_path, "w.py")[1]


def _jit_functions(lines: list[dict[str, Any]]) -> dict[str, Any]:
    (jit,) = [e for e in lines if e["kind"] == schema.JIT_FUNCTIONS]
    return jit


class Profiler:
    """start_trace/stop_trace: a stop writes `size` bytes of trace into the last start's
    folder, as jax's profiler writes its export."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls: list[tuple[str, str | None]] = []
        self.target: str | None = None

    def start(self, target: str, options: Any = None) -> None:
        self.calls.append(("start", target))
        self.target = target

    def stop(self) -> None:
        self.calls.append(("stop", None))
        assert self.target is not None
        Path(self.target, "plugins").mkdir(parents=True, exist_ok=True)
        Path(self.target, "plugins", "host.xplane.pb").write_bytes(b"x" * self.size)


def _harness(path: Path, **spec: Any) -> Harness:
    """A harness writing `path`, of a script w.py (schema.HarnessSpec's other fields: `spec`)."""
    return Harness(schema.HarnessSpec(events=str(path), workload=schema.WorkloadSpec("w.py", None),
                                      **spec))


def _of_kind(events: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in step_records.old_lines(events) if e["kind"] == kind]


def test_a_step_name_gets_one_id_and_one_record(tmp_path: Path) -> None:
    """Each step name is written once (its step_name record, before any step of it), and its
    id is the same every time it is asked: a reader maps each id to one name."""
    path = tmp_path / "events.jsonl"
    events = Events(str(path))
    ids = [events.name_id(n) for n in ("train", "eval", "train", "eval", "train")]
    events.close()
    assert ids == [0, 1, 0, 1, 0]
    named = [(r["id"], r["name"]) for r in map(json.loads, path.read_text().splitlines())
             if r["kind"] == schema.STEP_NAME]
    assert named == [(0, "train"), (1, "eval")]


def test_a_step_whose_trace_alone_is_over_the_size_bound_is_still_profiled(tmp_path: Path) -> None:
    """--trace-max-bytes 4 with --steps 3:3, and step 2 alone traces to 5 bytes: the window
    keeps one step (3), the least a profile can hold, and says so early (and, after, that the
    trace is over the bound); never none."""
    path = tmp_path / "events.jsonl"
    events = Events(str(path))
    profiler = Profiler(size=5)
    calls = ProfilerCalls(start=profiler.start, stop=profiler.stop, settle=lambda: None)
    window = ProfilerWindow(
        schema.WindowSpec("steps", str(tmp_path / "trace"), start=3, count=3, max_bytes=4),
        events, calls)
    try:
        for i in range(8):
            window.on_step_enter(i)
            window.on_step_exit(i)
        events.flush()
        assert [c[0] for c in profiler.calls] == ["start", "stop", "start", "stop"]
        assert profiler.calls[2][1] == str(tmp_path / "trace")  # the window itself ran
        (stop,) = _of_kind(path, schema.TRACE_STOP)
        assert (stop["first_step"], stop["steps"]) == (3, 1)
        cut, over = (w["message"] for w in _of_kind(path, schema.WINDOW_WARNING))
        assert "holds 1 step (steps 3..3), not 3" in cut
        assert "the trace is 5 bytes, over --trace-max-bytes 4" in over  # said after, too
    finally:
        events.close()


def test_a_line_written_after_a_write_out_keeps_its_place_among_the_steps(tmp_path: Path) -> None:
    """The flusher writes the buffered steps out every second while the loop runs; a warning
    raised inside a later step is read there (between that step's edges), not before step 0."""
    path = tmp_path / "events.jsonl"
    spec = schema.HarnessSpec(events=str(path), workload=schema.WorkloadSpec("w.py", None))
    harness = Harness(spec)
    step = harness.step_class(Marker)
    try:
        for i in range(3):
            step("train", step_num=i).__exit__(None, None, None)
        harness.events.flush()  # the flusher's write-out
        for i in range(3, 5):
            marker = step("train", step_num=i)
            if i == 4:
                harness.events.write(schema.WARNING, category="UserWarning",
                                     message="inside step 4", filename="w.py", lineno=1)
            marker.__exit__(None, None, None)
    finally:
        harness.events.close()
    order = [(e["kind"], e.get("index"), e.get("message"))
             for e in step_records.old_lines(path)
             if e["kind"] in ("step_enter", "step_exit", schema.WARNING)]
    assert order[-3:] == [("step_enter", 4, None), (schema.WARNING, None, "inside step 4"),
                          ("step_exit", 4, None)], order


THREE_STEPS = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: x + 1)
x = jnp.ones(4)
for i in range(3):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x).block_until_ready()
"""


def test_steps_asked_past_the_workloads_last_step_are_said_with_its_count(tmp_path: Path) -> None:
    """`pgle collect --steps 5:2` on a script that marks 3 steps: nothing profiled, and the
    run says the window never opened because the workload marked only 3 steps."""
    (tmp_path / "w.py").write_text(THREE_STEPS)
    proc = run_pgle("collect", "--steps", "5:2", "--allow-empty", "-o", "p.pb", "--run-dir",
                    "run", "w.py", cwd=tmp_path)
    err = proc.stderr.decode()
    lines = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text()
             .splitlines()]
    warnings = [e["message"] for e in lines if e["kind"] == schema.WINDOW_WARNING]
    assert warnings == [("--steps 5:2 (steps 5..6) never opened: the workload marked only "
                         "3 steps")], (warnings, err[-2000:])
    assert not [e for e in lines if e["kind"] == schema.TRACE_START]


FORKED_CHILD_KILLED = """
import os, warnings
import jax
with jax.profiler.StepTraceAnnotation("train", step_num=0):
    pass
pid = os.fork()
if pid == 0:
    warnings.warn("said in the forked child")
    os.kill(os.getpid(), 9)  # a worker killed before any cleanup: its own process only
os.waitpid(pid, 0)
"""


def test_a_forked_childs_lines_are_written_at_once(tmp_path: Path) -> None:
    """A process the workload forks has no flusher thread: each of its lines is written as it
    happens, so a worker killed right after its warning still leaves it in the events."""
    lines = _run(tmp_path, FORKED_CHILD_KILLED)
    said = [e["message"] for e in lines if e["kind"] == schema.WARNING]
    assert said == ["said in the forked child"], said


DONATING_STEP = """
import functools
import jax, jax.numpy as jnp

@jax.jit
def slow(a):  # the device is busy on it while the steps after it are dispatched
    for _ in range(6):
        a = jnp.tanh(a @ a)
    return a

@functools.partial(jax.jit, donate_argnums=0)
def train_step(w, x):
    return w - 0.01 * (x @ w), jnp.mean(w)

big, x, w = jnp.ones((512, 512)) / 512, jnp.ones((64, 64)) / 64, jnp.ones((64, 64))
jax.block_until_ready(slow(big))
w, loss = train_step(w, x)
jax.block_until_ready((w, loss))
losses, outs = [loss], []
for _ in range(3):
    outs.append(slow(big))
    for _ in range(5):
        w, loss = train_step(w, x)  # donates the state the previous call returned
        losses.append(loss)
    jax.block_until_ready((w, losses, outs))
"""


def test_a_donating_step_that_returns_state_and_loss_is_waited_on_by_its_loss(
        tmp_path: Path) -> None:
    """`state, loss = step(state, x)` with the state donated to the next call: the watcher
    waits on the loss (the last output, which no call donates), so every execution it reaches
    has a known completion even when the next call has already taken the state."""
    lines = _run(tmp_path, DONATING_STEP)
    jit = _jit_functions(lines)
    assert jit["watch"]["unknown"] == 0 and jit["watch"]["known"] >= 6, jit["watch"]
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(train_step)"]["executions"] == 16


LIGHT_LOOP = """
import time
import jax, jax.numpy as jnp
step = jax.jit(lambda x: x * 0.5 + 1.0)
x = jnp.ones((16, 16))
for _ in range(20_000):
    x = step(x)
jax.block_until_ready(x)
time.sleep(2.5)  # the events flusher rewrites the progress file at least twice meanwhile
"""


def test_the_progress_file_counts_every_execution_of_a_light_step(tmp_path: Path) -> None:
    """The stall watchdog reads the progress file: once the step function goes light (its
    calls only count, one in several is sampled), every execution still reaches the count,
    not one per sample, or a healthy fast loop would look stalled."""
    lines = _run(tmp_path, LIGHT_LOOP)
    jit = _jit_functions(lines)
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(<lambda>)"]["executions"] == 20_000
    assert len(jit["starts"]) < 20_000  # it went light: not every start was kept
    assert (tmp_path / "run" / schema.PROGRESS_NAME).read_text().split() == ["20000"]


MANY_FUNCTIONS = """
import jax, jax.numpy as jnp

def helper(i):
    def f(a):
        return a * i + 1.0
    f.__name__ = f"helper{i}"
    return jax.jit(f)

@jax.jit
def step(a):
    return jnp.tanh(a @ a)

x, y = jnp.ones((16, 16)), jnp.ones((768, 768)) / 768
for h in [helper(i) for i in range(24)]:
    for _ in range(3):
        jax.block_until_ready(h(x))  # microseconds of work each
for _ in range(100):
    y = step(y)  # ~10 ms each, ~1 s in all: far more than a helper's one timed execution
    # with the watcher's wake-up in it, x 3 executions (with 30 steps of 512x512, ~1 ms
    # each, a helper outranked the step in 1 run of 3 beside another test's jax)
jax.block_until_ready(y)
"""


def test_the_jit_functions_record_lists_the_busiest_first_and_keeps_the_step(
        tmp_path: Path) -> None:
    """25 jitted functions: jit_functions keeps the 20 busiest, the step (the most work) first,
    so the module lists that read it still name the step's module."""
    lines = _run(tmp_path, MANY_FUNCTIONS)
    jit = _jit_functions(lines)
    listed = [f["function"] for f in jit["functions"]]
    assert len(listed) == 20 and listed[0] == "jit(step)" == jit["step"], listed
    assert jit["module"] == "jit_step"
    # the step's start times (s) and work rows [start, work per execution (s), done (s), ...]
    # as the rule and the step times read them: microseconds, the work to the nanosecond
    assert len(jit["starts"]) == 100 and all(t == round(t, 6) for t in jit["starts"])
    # (a span whose work is unknown, such as the compile's, keeps its row with no work)
    assert jit["work"][0][1] is None and jit["work"][0][3] == 1, jit["work"][:3]
    assert any(w is not None for _, w, *_ in jit["work"])
    assert all((w is None or 0 < w < 1 and w == round(w, 9)) and t == round(t, 6)
               for t, w, *_ in jit["work"]), jit["work"][:3]


def test_a_module_runs_as_python_m_runs_it_and_jaxs_version_is_recorded(tmp_path: Path) -> None:
    """`pgle run -m pkg.mod -- a`: the module is `__main__` with sys.argv[0] its file, as
    `python -m` makes it; the run folder records the jax version the workload imported."""
    import jax

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(
        "import json, sys\nimport jax\n"
        "print('ARGV', json.dumps([sys.argv, __name__, sys.modules['__main__'].__file__]))\n")
    out, lines = _pgle_run(tmp_path, "-m", "pkg.mod", "--", "a")
    (line,) = [x for x in out.splitlines() if x.startswith("ARGV ")]
    mod = str(tmp_path / "pkg" / "mod.py")
    assert json.loads(line[5:]) == [[mod, "a"], "__main__", mod]
    assert [e["version"] for e in lines if e["kind"] == schema.JAX_IMPORTED] == [jax.__version__]
    # the compile observer said installed (a run's module records rest on it)
    assert [e["installed"] for e in lines if e["kind"] == schema.OBSERVE_MODULES] == [True]


def test_a_script_runs_as_main_as_python_runs_it(tmp_path: Path) -> None:
    """`pgle run script.py`: the script's `if __name__ == "__main__":` body runs (the idiom of
    most training scripts), with sys.argv[0] the script."""
    (tmp_path / "w.py").write_text("import json, sys\nimport jax\n"
                                   "if __name__ == '__main__':\n"
                                   "    print('MAIN', json.dumps(sys.argv))\n")
    out, _ = _pgle_run(tmp_path, "w.py", "--", "x")
    assert [x for x in out.splitlines() if x.startswith("MAIN ")] == [
        f"MAIN {json.dumps([str(tmp_path / 'w.py'), 'x'])}"]


def test_a_workload_stopped_by_ctrl_c_is_recorded_as_interrupted(tmp_path: Path) -> None:
    """A KeyboardInterrupt out of the script: the run's exit record is 130, interrupted, and
    pgle exits 130 as python would."""
    (tmp_path / "w.py").write_text("import jax\nraise KeyboardInterrupt\n")
    _, lines = _pgle_run(tmp_path, "w.py", code=130)
    assert [(e["code"], e.get("interrupted")) for e in lines if e["kind"] == schema.EXIT] == [
        (130, True)]


def test_a_run_too_short_for_a_step_records_its_functions_and_no_step(tmp_path: Path) -> None:
    """One jitted function executed once: it is listed, no step is picked (the rule needs
    more executions), and the record says so rather than failing."""
    lines = _run(tmp_path, "import jax, jax.numpy as jnp\n"
                           "jax.jit(lambda a: a + 1.0)(jnp.ones(3)).block_until_ready()\n")
    jit = _jit_functions(lines)
    assert [f["executions"] for f in jit["functions"]] == [1]
    assert (jit["step"], jit["module"], jit["starts"], jit["work"]) == (None, None, [], [])
    assert [e for e in lines if e["kind"] == schema.OBSERVE_ERROR] == []


SLOW_COMPILE = """
import jax, jax.numpy as jnp

@jax.jit
def helper(a):  # hundreds of ops: its compile takes far longer than its executions
    for i in range(300):
        a = jnp.sin(a) * 1.001 + i
    return a

@jax.jit
def step(a):
    return jnp.tanh(a @ a)

x = jnp.ones((64, 64)) / 64
for _ in range(3):
    jax.block_until_ready(helper(x))
for _ in range(10):
    x = step(x)
jax.block_until_ready(x)
"""


def test_a_functions_host_time_leaves_out_its_first_execution(tmp_path: Path) -> None:
    """The host time a function accounts for (what the rule ranks by where no completion is
    known) leaves out its first execution, whose tracing and compile are no step's cost."""
    lines = _run(tmp_path, SLOW_COMPILE)
    compiled = sum(e["seconds"] for e in lines
                   if e["kind"] == schema.COMPILE and "helper" in (e["fun_name"] or ""))
    jit = _jit_functions(lines)
    rows = {f["function"]: f for f in jit["functions"]}
    assert rows["jit(helper)"]["executions"] == 3
    assert compiled > 0 and rows["jit(helper)"]["seconds"] < compiled / 2, (compiled, rows)


OWN_TRACES = """
import sys
import jax, jax.numpy as jnp
jax.profiler.start_trace(sys.argv[0] + ".a")
jnp.ones(4).block_until_ready()
jax.profiler.stop_trace()
def traced():
    with jax.profiler.trace(sys.argv[0] + ".b"):
        jnp.ones(4).block_until_ready()
traced()
"""


def test_the_scripts_own_profiler_calls_are_named_by_the_scripts_lines(tmp_path: Path) -> None:
    """The workload's own start_trace/stop_trace and `with jax.profiler.trace(...)`: each call
    is recorded at the script's line that made it (not a line of pgle's hooks, contextlib's or
    jax's), with the folder it traces into; a script in a folder named jax (a checkout's
    examples) too (it was named by runpy's line, `<frozen runpy>:88`)."""
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "w.py").write_text(OWN_TRACES)
    _, lines = _pgle_run(tmp_path, "jax/w.py")
    calls = [(e["call"], e["site"], e["dir"]) for e in lines if e["kind"] == schema.SCRIPT_TRACE]
    script = str(tmp_path / "jax" / "w.py")
    a, b = script + ".a", script + ".b"
    assert calls == [("start", script + ":4", a), ("stop", script + ":6", a),
                     ("start", script + ":8", b), ("stop", script + ":8", b)], calls


def test_only_the_imported_jax_packages_files_are_jaxs(tmp_path: Path) -> None:
    """What the call site and the warnings take for jax's own frames: the files of the jax
    package imported, not jaxlib's or a plugin's beside it, nor a workload's file that lies in
    a folder named jax."""
    import jax
    import jax._src.profiler
    import jaxlib

    from pgle.launch.harness import _from_jax

    root = Path(jax.__file__).parent
    assert _from_jax(jax._src.profiler.__file__) and _from_jax(str(root / "__init__.py"))
    assert not _from_jax(jaxlib.__file__)
    assert not _from_jax(str(root) + "_plugins/xla_cuda12/__init__.py")
    assert not _from_jax(str(tmp_path / "jax" / "w.py")) and not _from_jax("")


def test_a_marker_class_with_an_init_of_its_own_or_none_keeps_jaxs_construction() -> None:
    """The marker constructs jax's StepTraceAnnotation through TraceMe's own __init__ only
    when the class's __init__ is jax's known one (jax_internals.step_trace_init); a subclass
    that defines its own, or none (inheriting one), is constructed through its __init__ with
    the caller's keywords only."""
    import jax

    from pgle.launch.jax_internals import step_trace_init

    class Inherits(jax.profiler.StepTraceAnnotation):
        pass

    class Own(jax.profiler.StepTraceAnnotation):
        def __init__(self, name: str, **kwargs: Any) -> None:
            super().__init__(name, **kwargs)

    assert step_trace_init(Inherits) == (Inherits.__init__, {})
    assert step_trace_init(Own) == (Own.__init__, {})


def test_settling_waits_for_the_device_work_still_queued() -> None:
    """Before the window's trace stops (harness._wait_for_devices), every live array's work
    has finished, so the trace holds whole steps under async dispatch (jax.effects_barrier
    alone does not wait for it). Its effects barrier is not tested here: on CPU a callback's
    effect has run by the time its call returns (jax 0.10.2), so there is nothing to wait on."""
    import jax
    import jax.numpy as jnp

    from pgle.launch import harness

    x = jnp.ones((1500, 1500))
    heavy = jax.jit(lambda a: (a @ a @ a @ a).sum())
    heavy(x).block_until_ready()  # compiled
    y = heavy(x)
    assert not y.is_ready()  # still queued: async dispatch
    harness._wait_for_devices()
    assert y.is_ready()


def test_the_persistent_caches_jax_events_are_recorded_with_the_compiles_thread(
        tmp_path: Path) -> None:
    """jax's listener call for each monitoring event (`record_event(name, **kwargs)`): the
    persistent compilation cache's events are recorded (compiles.py reads hits and writes
    from them), named by the thread that compiled, every other field as text; other events
    are not."""
    import threading

    path = tmp_path / "events.jsonl"
    harness = _harness(path)
    try:
        harness._on_event("/jax/compilation_cache/cache_hits")
        harness._on_event("/jax/compilation_cache/cache_misses", fun_name="jit_f", size=3,
                          thread="not the compile's")
        harness._on_event("/jax/core/compile/jaxpr_trace", fun_name="jit_f")
    finally:
        harness.events.close()
    me = str(threading.get_native_id())
    assert [{k: v for k, v in e.items() if k not in ("kind", "t", "edges")}
            for e in _of_kind(path, schema.JAX_EVENT)] == [
        {"event": "/jax/compilation_cache/cache_hits", "thread": me},
        {"event": "/jax/compilation_cache/cache_misses", "thread": me, "fun_name": "jit_f",
         "size": "3"}]


def test_each_backend_compile_is_recorded_and_the_first_checks_flags_and_backend(
        tmp_path: Path, monkeypatch: Any) -> None:
    """jax's duration listener call: each backend compile is one record (its function when jax
    names it, its seconds, the compiling thread) and one compile counted; the first one also
    checks XLA_FLAGS against pgle's and records the backend, once; other durations are not
    compiles."""
    import threading

    from pgle.launch import harness as hooks
    from pgle.launch.harness import BACKEND_COMPILE_EVENT

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/dump")  # the script assigned it
    path = tmp_path / "events.jsonl"
    want = "--xla_gpu_pgle_profile_file_or_directory_path=p.pb"
    harness = _harness(path, expected_xla_flags={
        "xla_gpu_pgle_profile_file_or_directory_path": want})
    try:
        harness._on_duration("/jax/core/compile/jaxpr_trace_duration", 0.5, fun_name="jit_f")
        # inside the first call of the counted function jit(f), as its proxy marks it
        hooks._depth.name = "jit(f)"
        try:
            harness._on_duration(BACKEND_COMPILE_EVENT, 0.25, fun_name="jit_f")
        finally:
            hooks._depth.name = None
        harness._on_duration(BACKEND_COMPILE_EVENT, 0.5)  # jax <= 0.5.3 names no function
        harness._on_duration(BACKEND_COMPILE_EVENT, 0.125, fun_name="jit_g")
    finally:
        harness.events.close()
    me = str(threading.get_native_id())
    assert [(e["fun_name"], e["seconds"], e["thread"]) for e in _of_kind(path, schema.COMPILE)] \
        == [("jit_f", 0.25, me), (None, 0.5, me), ("jit_g", 0.125, me)]
    assert harness.jits.compiles == 3 and harness.jits.modules == {"jit(f)": "jit_f"}
    (seen,) = _of_kind(path, schema.XLA_FLAGS_SEEN)
    assert (seen["effective"], seen["missing"]) == (
        "--xla_dump_to=/tmp/dump", ["xla_gpu_pgle_profile_file_or_directory_path"])
    (backend,) = _of_kind(path, schema.BACKEND)
    import jax

    assert {k: v for k, v in backend.items() if k not in ("kind", "t", "edges")} == {
        "platform": "cpu", "device_count": len(jax.devices()),
        "local_device_count": jax.local_device_count(),
        "device_kind": jax.devices()[0].device_kind, "process_index": 0, "process_count": 1}


def test_warnings_are_recorded_and_jaxs_forced_ones_shown_once_per_place(
        tmp_path: Path) -> None:
    """Every warning the workload shows is recorded (category, message, file, line). The
    categories pgle makes "always" (auto PGLE's empty-profile warning) are forced for jax's
    own modules only, and each distinct one from jax's files reaches the terminal once, as
    Python's default rule would show it; the user's own warnings are shown as Python shows
    them. A category name this Python lacks forces every jax warning."""
    import io
    import warnings

    import jax

    jax_file = str(Path(jax.__file__).parent / "_src" / "profiler.py")
    out = io.StringIO()

    def shown(always: list[str], calls: list[tuple[str, type[Warning], str, int]]
              ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[Any]]:
        path = tmp_path / f"events-{len(always)}.jsonl"
        harness = _harness(path, warnings_always=tuple(always))
        terminal: list[tuple[Any, ...]] = []
        with warnings.catch_warnings():  # restores Python's showwarning and filters after
            warnings.showwarning = lambda m, c, f, n, file=None, line=None: terminal.append(
                (str(m), c.__name__, f, n, file, line))
            harness._capture_warnings()
            filters = [(a, c, getattr(mod, "pattern", mod)) for a, _, c, mod, _ in
                       warnings.filters[:len(always)]]
            for message, category, filename, lineno in calls:
                warnings.showwarning(message, category, filename, lineno, out, "src")
        harness.events.close()
        return terminal, [(e["category"], e["message"], e["filename"], e["lineno"])
                          for e in _of_kind(path, schema.WARNING)], filters

    calls = [("empty profile", UserWarning, jax_file, 10), ("mine", UserWarning, "/w/t.py", 3)]
    calls = calls + calls + [("empty profile for jit_g", UserWarning, jax_file, 10)]
    calls += [("deprecated", DeprecationWarning, jax_file, 12)] * 2
    terminal, recorded, filters = shown(["UserWarning"], calls)
    assert filters == [("always", UserWarning, "jax\\.")]
    assert recorded == [(c.__name__, m, f, n) for m, c, f, n in calls]
    assert terminal == [(m, c.__name__, f, n, out, "src") for m, c, f, n in
                        [calls[0], calls[1], calls[3], calls[4], calls[5], calls[6]]]
    terminal, _, filters = shown(["UserWarning", "NoSuchWarning"], calls)
    assert filters == [("always", Warning, "jax\\."), ("always", UserWarning, "jax\\.")]
    assert [t[:4] for t in terminal] == [(m, c.__name__, f, n) for m, c, f, n in
                                         [calls[0], calls[1], calls[3], calls[4], calls[5]]]


STACK_DUMP = """
import json, os, signal, sys, threading
from pgle.evidence import schema
from pgle.launch import harness
home = sys.argv[1]
os.umask(0o022)
own = []  # the workload's own handler of that signal: pgle's dump does not call it
signal.signal(getattr(signal, schema.DUMP_SIGNAL), lambda *a: own.append(1))
events = harness.Events(os.path.join(home, "events.jsonl"))
harness._register_stack_dump(home, events)
waiting = threading.Event()
t = threading.Thread(target=waiting.wait, name="loader", daemon=True)
t.start()
os.kill(os.getpid(), getattr(signal, schema.DUMP_SIGNAL))  # what the stall watchdog sends
waiting.set()
t.join()
events.close()
print(json.dumps({"main": hex(threading.main_thread().ident), "loader": hex(t.ident),
                  "own": len(own)}))
"""


def test_pgles_signal_dumps_every_threads_stack_and_a_planted_link_is_refused(
        tmp_path: Path) -> None:
    """The stall watchdog's signal makes the workload write every thread's Python stack to
    the run folder's stacks.txt (recorded with the signal and the main thread's id, which the
    dump names), and the process goes on. A link planted where the file goes (a shared run
    folder) is not followed: the failure is recorded and the run goes on without dumps."""
    home = tmp_path / "run"
    home.mkdir()
    out = script_json(tmp_path, "dump.py", STACK_DUMP, str(home))
    (stacks,) = _of_kind(home / "events.jsonl", schema.STACKS)
    assert (stacks["file"], stacks["main_thread"]) == (str(home / "stacks.txt"), out["main"])
    assert stacks["signal"] == 23 and out["own"] == 0  # SIGURG on Linux
    assert (home / "stacks.txt").stat().st_mode & 0o777 == 0o644  # 0o666 less the umask
    dump = (home / "stacks.txt").read_text()
    main, loader = (f"{int(out[k], 16):#018x}" for k in ("main", "loader"))  # as faulthandler
    assert f"Current thread {main}" in dump and f"Thread {loader}" in dump
    assert 'File "' in dump and "dump.py" in dump
    planted = tmp_path / "planted"
    planted.mkdir()
    target = tmp_path / "elsewhere.txt"
    (planted / "stacks.txt").symlink_to(target)
    script_json(tmp_path, "dump.py", STACK_DUMP.replace(
        "os.kill(os.getpid(), getattr(signal, schema.DUMP_SIGNAL))", "pass"), str(planted))
    assert not target.exists() and not _of_kind(planted / "events.jsonl", schema.STACKS)
    (error,) = _of_kind(planted / "events.jsonl", schema.OBSERVE_ERROR)
    assert error["error"].startswith("stack dump: OSError: [Errno 40]"), error


def test_pgles_flags_are_found_in_xla_flags_as_xla_reads_them(tmp_path: Path,
                                                               monkeypatch: Any,
                                                               capsys: Any) -> None:
    """At the first compile the harness reads XLA_FLAGS as XLA does (a quoted value holds its
    spaces: a profile in "proj ü/"), so pgle's flag is found there; a script that deleted
    XLA_FLAGS dropped them, recorded with the empty value it left and said on the workload's
    stderr with the fix. XLA_FLAGS set after XLA read it to words XLA could not read (no
    leading "--", no such file) is looked through word by word."""
    from pgle.launch.harness import BACKEND_COMPILE_EVENT

    name = "xla_gpu_pgle_profile_file_or_directory_path"
    lhs = "xla_gpu_enable_latency_hiding_scheduler"
    want, also = f'--{name}="/proj ü/p.pb"', f"--{lhs}=true"

    def seen(flags: str | None, expected: dict[str, str]) -> list[Any]:
        if flags is None:
            monkeypatch.delenv("XLA_FLAGS", raising=False)
        else:
            monkeypatch.setenv("XLA_FLAGS", flags)
        path = tmp_path / f"events-{len(list(tmp_path.iterdir()))}.jsonl"
        harness = _harness(path, expected_xla_flags=expected)
        harness._on_duration(BACKEND_COMPILE_EVENT, 0.1, fun_name="jit_f")
        harness.events.close()
        return [(e["effective"], e["missing"]) for e in _of_kind(path, schema.XLA_FLAGS_SEEN)]

    assert seen(f"--xla_dump_to=/d {want}", {name: want}) == [(f"--xla_dump_to=/d {want}", [])]
    assert capsys.readouterr().err == ""
    assert seen(None, {name: want, lhs: also}) == [("", [lhs, name])]  # by name
    assert capsys.readouterr().err == (
        f"pgle: warning: the workload replaced XLA_FLAGS before XLA read it, so pgle's {also} "
        f"{want} never reached XLA (XLA_FLAGS is now ''). Make the script append: "
        "os.environ['XLA_FLAGS'] = os.environ.get('XLA_FLAGS', '') + ' ...'\n")
    # a profile in a folder named for its hyperparameters
    simple = f"--{name}=/runs/lr=3e-4/p.pb"
    assert seen(f"stray --xla_dump_to=/d {simple}", {name: simple}) == [
        (f"stray --xla_dump_to=/d {simple}", [])]
    assert seen("stray --xla_dump_to=/d", {name: simple}) == [("stray --xla_dump_to=/d", [name])]


PARENT_WATCH = """
import json, os, subprocess, sys, threading, time
from pgle.launch import harness
mode = sys.argv[1]
raw = os.environ.get("PGLE_PARENT_FD")
if mode == "children":
    harness.watch_parent(for_children=True)
else:
    harness.watch_parent()  # script mode, as harness.main calls it
try:
    inheritable = os.get_inheritable(int(raw))
except (TypeError, ValueError, OSError):  # no such descriptor
    inheritable = None
# the workload's own child, in its group
child = subprocess.Popen(["sleep", "120"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps({"left": os.environ.get("PGLE_PARENT_FD"), "inheritable": inheritable,
                  "watching": [t.name for t in threading.enumerate()
                               if t.name == "pgle-parent-watch"],
                  "child": child.pid}), flush=True)
if mode != "ends":
    time.sleep(120)
"""


def test_the_workload_and_its_children_die_when_pgle_is_gone(tmp_path: Path) -> None:
    """pgle hands the workload the read end of a pipe only pgle writes to (PGLE_PARENT_FD):
    once pgle is gone (its end closed, even by SIGKILL) the workload's whole process group is
    killed. In script mode the variable is taken out and the descriptor kept from the
    workload's own subprocesses; in command mode both stay for the Python processes below. A
    variable that names no open descriptor watches nothing."""
    import os
    import signal
    import subprocess
    import sys

    from helpers.pgle_testing import REPO, pgle_env, pythonpath
    from helpers.processes import gone, wait_until

    script = tmp_path / "watched.py"
    script.write_text(PARENT_WATCH)

    def started(mode: str, fd_value: str | None, keep: int | None = None) -> tuple[Any, dict]:
        env = pgle_env(PYTHONPATH=pythonpath(str(REPO)))
        if fd_value is not None:
            env["PGLE_PARENT_FD"] = fd_value
        proc = subprocess.Popen([sys.executable, str(script), mode], env=env, cwd=tmp_path,
                                pass_fds=[keep] if keep is not None else [],
                                start_new_session=True,  # its own group: what pgle starts
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        return proc, json.loads(proc.stdout.readline())

    for mode, left, inheritable in (("script", None, False), ("children", "FD", True)):
        r, w = os.pipe()
        proc, info = started(mode, str(r), keep=r)
        os.close(r)
        assert info["watching"] == ["pgle-parent-watch"], info
        assert info["left"] == (str(r) if left else None) and info["inheritable"] is inheritable
        os.close(w)  # pgle is gone
        assert proc.wait(timeout=60) == -signal.SIGKILL
        proc.communicate()
        # the group's SIGKILL reaches the child at once; init reaps it
        wait_until(lambda child=info["child"]: gone(child), "the workload's child killed",
                   timeout=30)
    r, w = os.pipe()  # a workload that ends while pgle lives: the watch does not hold it
    proc, info = started("ends", str(r), keep=r)
    os.close(r)
    try:
        assert info["watching"] == ["pgle-parent-watch"] and proc.wait(timeout=60) == 0
    finally:
        os.close(w)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    for value in (None, "abc", "987"):  # none (no pgle); not a number; no such descriptor
        proc, info = started("script", value)
        try:
            assert info["watching"] == [] and info["left"] is None, info
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()




def test_a_pjit_step_is_counted_as_jit_and_keeps_jaxs_deprecation_warning(
        tmp_path: Path) -> None:
    """`jax.experimental.pjit.pjit` (deprecated since jax 0.8, still in older training code):
    its calls are counted as the jit of the same function, and importing it still warns as
    jax does (jax 0.10.2 serves it from the module's deprecation table)."""
    from helpers.pgle_testing import WORKLOADS, script_json

    script = (WORKLOADS / "pjit_counted_script.py").read_text()
    out = script_json(tmp_path, "pjit_step.py", script, str(tmp_path))
    assert out == {"warned": ["DeprecationWarning"], "outs": [[2.0, 2.0, 2.0]] * 3,
                   "functions": [["jit(step)", 3]]}


def test_the_workloads_exit_is_recorded_once(tmp_path: Path) -> None:
    """The harness finishes at the script's end and again from its exit hooks (atexit, an
    os._exit wrapper, a signal): the exit is recorded once, with the first code."""
    path = tmp_path / "events.jsonl"
    harness = _harness(path)
    harness._finish(0)
    harness._finish(3, "SystemExit: 3")
    assert [(e["code"], e["error"]) for e in _of_kind(path, schema.EXIT)] == [(0, None)]


def test_a_window_or_a_statistic_that_fails_at_the_end_never_hides_the_exit(
        tmp_path: Path) -> None:
    """The window's last word and the jitted-function record are said before the exit; each
    that raises is recorded with its error, and the exit record (code and error) still comes."""
    path = tmp_path / "events.jsonl"
    harness = _harness(path)
    harness.jax_ready = True  # as once the workload imported jax

    def window_fails(*args: Any) -> None:
        raise RuntimeError("the window broke")

    def record_fails(events: Events) -> None:
        raise ValueError("the statistic broke")

    harness.window.on_exit = window_fails  # type: ignore[method-assign]
    harness.jits.record = record_fails  # type: ignore[method-assign]
    harness._finish(2, "SystemExit: 2")
    kinds = [e["kind"] for e in step_records.old_lines(path)]
    assert kinds[-3:] == [schema.TRACE_ERROR, schema.OBSERVE_ERROR, schema.EXIT], kinds
    assert [e["error"] for e in _of_kind(path, schema.TRACE_ERROR)] == [
        "RuntimeError: the window broke"]
    assert [e["error"] for e in _of_kind(path, schema.OBSERVE_ERROR)] == [
        "ValueError: the statistic broke"]
    assert [(e["code"], e["error"]) for e in _of_kind(path, schema.EXIT)] == [
        (2, "SystemExit: 2")]


def test_a_steps_window_of_a_workload_that_marks_no_step_adds_nothing_at_its_end(
        tmp_path: Path) -> None:
    """--steps 0:2 and no step marked: at the end the window says nothing of a count of
    steps (collect says the window never opened, with 0 steps seen:
    pgle.commands.extract.window_never_opened); a name given, the names seen are said."""
    path = tmp_path / "events.jsonl"
    harness = _harness(path, profile=schema.WindowSpec("steps", str(tmp_path / "t"), start=0,
                                                       count=2))
    harness.jax_ready = True
    harness._finish(0)
    assert _of_kind(path, schema.WINDOW_WARNING) == []


def test_a_hold_in_a_process_without_jax_distributed_is_released_with_why(
        tmp_path: Path) -> None:
    """`--gather kv` asks the workload to hold at its end; a process with no jax.distributed
    client cannot: released at once, saying so, after its exit record."""
    path = tmp_path / "events.jsonl"
    harness = _harness(path, hold=True, hold_timeout_s=30.0)
    harness.jax_ready = True
    harness._finish(0)
    kinds = [e["kind"] for e in step_records.old_lines(path)]
    assert kinds[-2:] == [schema.EXIT, schema.RELEASED], kinds
    assert [e["error"] for e in _of_kind(path, schema.RELEASED)] == [
        "no jax.distributed client in this process"]
    assert not (tmp_path / schema.HANDOFF_DIR).exists()


HELD_EXIT = """
import json, socket, sys
import jax
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                           process_id=0)
from pgle.evidence import schema
from pgle.launch import handoff
from pgle.launch.harness import Harness
held = []
real_hold = handoff.hold
handoff.hold = lambda *args: held.append(1) or real_hold(*args)  # counts, then holds
harness = Harness(schema.HarnessSpec(events=sys.argv[1], workload=schema.WorkloadSpec("w.py", None),
                                     hold=True, hold_timeout_s=0.3))
harness.jax_ready = True
harness._finish(0)
harness._finish(0)  # the exit hooks finish again (atexit, os._exit): no second hold
print(json.dumps([len(held), [json.loads(line) for line in open(sys.argv[1])]]))
"""


def test_a_held_exit_waits_for_pgle_in_the_run_folder_then_is_released(
        tmp_path: Path) -> None:
    """With a jax.distributed client the workload holds at its end, in the run folder's
    hand-off folder, and is released when pgle asks nothing within the hold's timeout; the
    exit hooks that finish again after it hold no more (a second hold would keep the job for
    another timeout, 900 s by default)."""
    path = tmp_path / "run" / "events.jsonl"
    path.parent.mkdir()
    holds, lines = script_json(tmp_path, "held.py", HELD_EXIT, str(path), timeout=120)
    assert holds == 1
    kinds = [e["kind"] for e in lines]
    assert kinds[-3:] == [schema.EXIT, schema.HOLD, schema.RELEASED], kinds
    (hold,) = [e for e in lines if e["kind"] == schema.HOLD]
    assert (hold["process_index"], hold["process_count"]) == (0, 1)
    assert hold["dir"] == str(tmp_path / "run" / schema.HANDOFF_DIR)
    assert (tmp_path / "run" / schema.HANDOFF_DIR).is_dir()
    assert lines[-1]["error"] == "pgle asked nothing within 0.3 s"


def test_a_hold_that_cannot_make_its_folder_is_released_with_the_error(tmp_path: Path) -> None:
    """A file where the hand-off folder goes (another user's, a planted one): the workload is
    released at once, the error in the record, and the file is left as it was."""
    path = tmp_path / "run" / "events.jsonl"
    path.parent.mkdir()
    (tmp_path / "run" / schema.HANDOFF_DIR).write_text("not pgle's")
    holds, lines = script_json(tmp_path, "held.py", HELD_EXIT, str(path), timeout=120)
    assert holds == 1
    assert [e["kind"] for e in lines][-2:] == [schema.EXIT, schema.RELEASED]
    error = str(tmp_path / "run" / schema.HANDOFF_DIR)
    assert lines[-1]["error"] == f"FileExistsError: [Errno 17] File exists: '{error}'"
    assert (tmp_path / "run" / schema.HANDOFF_DIR).read_text() == "not pgle's"


NO_BACKEND = """
import json, sys
import jax
from pgle.evidence import schema
from pgle.launch.harness import Harness
harness = Harness(schema.HarnessSpec(events=sys.argv[1],
                                     workload=schema.WorkloadSpec("w.py", None)))
harness._record_backend()
harness.events.close()
try:
    jax.devices()
except Exception as e:
    raised = f"{type(e).__name__}: {e}"
print(json.dumps([raised, [json.loads(line) for line in open(sys.argv[1])]]))
"""


def test_a_backend_that_cannot_come_up_is_recorded_with_jaxs_error(tmp_path: Path) -> None:
    """A platform jax does not know (JAX_PLATFORMS=nosuch): jax.devices() raises, and the
    harness records jax's error (its type and message, as jax raises it again after) rather
    than a backend. (jax 0.10.2 with JAX_PLATFORMS=cuda and no CUDA plugin raises a bare
    AssertionError instead: the record says what jax said.)"""
    raised, lines = script_json(tmp_path, "nobackend.py", NO_BACKEND,
                                str(tmp_path / "events.jsonl"), timeout=120,
                                env={"JAX_PLATFORMS": "nosuch"})
    assert raised.startswith("RuntimeError: Unable to initialize backend 'nosuch'"), raised
    assert [(e["kind"], e.get("error")) for e in lines if e["kind"].startswith("backend")] == [
        (schema.BACKEND_ERROR, raised)]


def test_a_forked_child_that_exits_normally_records_no_exit_of_its_own(tmp_path: Path) -> None:
    """A workload forks a child that ends with sys.exit (its interpreter's exit hooks run,
    with the parent's harness in its memory): the run folder holds one exit, the workload's."""
    lines = _run(tmp_path, "import os, sys\n"
                           "import jax\n"
                           "pid = os.fork()\n"
                           "if pid == 0:\n"
                           "    sys.exit(7)\n"
                           "os.waitpid(pid, 0)\n")
    assert [(e["code"], e["error"]) for e in lines if e["kind"] == schema.EXIT] == [(0, None)]


def test_a_marked_step_with_no_jitted_call_inside_has_no_completion_to_count(
        tmp_path: Path) -> None:
    """jax's own StepTraceAnnotation, marked steps with nothing dispatched inside (an eval
    loop of host work, a step whose call is outside the marker): no completion is looked
    for, and none is counted as a step whose outputs held no array."""
    import jax

    path = tmp_path / "events.jsonl"
    harness = _harness(path)
    step = harness.step_class(jax.profiler.StepTraceAnnotation)
    for i in range(3):
        with step("train", step_num=i):
            pass
    marks = harness.jits.steps
    assert (len(marks.rows), marks.no_array, marks.unknown, marks.waited_on) == (0, 0, 0, 0)
    harness._finish(0)
    assert _of_kind(path, schema.STEP_COMPLETIONS) == []
    assert [e["step_num"] for e in _of_kind(path, schema.STEP_ENTER)] == [0, 1, 2]
