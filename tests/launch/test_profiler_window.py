"""pgle.launch.harness.ProfilerWindow on its own: the window's rules, driven step by step with
a recorded profiler (start/stop calls kept, a stop writes a trace file as jax's does) and a
clock the test moves. The events are the real events file the harness writes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import step_records
from helpers.step_marker import Marker
from pgle.evidence import schema
from pgle.launch.harness import Events, Harness, ProfilerCalls, ProfilerWindow


class FakeClock:
    """Seconds on a clock only the test (and the window's sleeps) move."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class RecordedProfiler:
    """start_trace/stop_trace as calls kept in order, with the clock's time; a stop writes a
    trace file into the folder of the last start, as jax's profiler does."""

    def __init__(self, clock: FakeClock, *, fail_start: bool = False,
                 fail_stop: bool = False) -> None:
        self.clock = clock
        self.calls: list[tuple[str, str | None, float]] = []
        self.fail_start, self.fail_stop = fail_start, fail_stop
        self.target: str | None = None
        self.options: list[Any] = []  # the profiler_options of each start
        self.trace_steps = 1  # a stop writes `payload` this many times
        self.payload = b"trace"
        self.writes = True  # False: a stop writes no trace at all (not even its folder)
        self.stop_seconds = 0.0  # how long a stop takes on the clock

    def start(self, target: str, options: Any = None) -> None:
        self.calls.append(("start", target, self.clock()))
        self.options.append(options)
        if self.fail_start:
            raise RuntimeError("Profile has already been started")
        self.target = target

    def stop(self) -> None:
        self.calls.append(("stop", None, self.clock()))
        self.clock.now += self.stop_seconds
        if self.fail_stop:
            raise RuntimeError("No profile started")
        assert self.target is not None
        if not self.writes:
            return
        os.makedirs(os.path.join(self.target, "plugins"), exist_ok=True)
        Path(self.target, "plugins", "host.xplane.pb").write_bytes(self.payload * self.trace_steps)

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


def calls_for(profiler: RecordedProfiler, clock: FakeClock, origin: float = 0.0) -> ProfilerCalls:
    return ProfilerCalls(start=profiler.start, stop=profiler.stop, clock=clock,
                         sleep=clock.sleep, settle=lambda: None, origin=origin)


def events_of(path: Path) -> list[dict[str, Any]]:
    """The events, steps.bin's records as step lines (tests/helpers/step_records.py)."""
    return step_records.old_lines(path)


def of_kind(path: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in events_of(path) if e["kind"] == kind]


class Setup:
    def __init__(self, tmp_path: Path, spec: schema.WindowSpec, *, origin: float = 0.0,
                 now: float = 100.0, **failures: bool) -> None:
        self.path = tmp_path / "events.jsonl"
        self.clock = FakeClock(now)
        self.profiler = RecordedProfiler(self.clock, **failures)
        self.events = Events(str(self.path))
        self.window = ProfilerWindow(spec, self.events, calls_for(self.profiler, self.clock,
                                                                    origin))

    def steps(self, indices: range) -> list[list[str]]:
        """Enter and exit each step; the profiler calls seen after each entry and exit."""
        seen = []
        for i in indices:
            self.window.on_step_enter(i)
            seen.append(self.profiler.kinds())
            self.clock.now += 1.0
            self.window.on_step_exit(i)
            seen.append(self.profiler.kinds())
        return seen

    def backend_up_and_time_window(self) -> None:
        """The backend comes up; a time window's thread runs its waits (on the fake clock)."""
        self.window.on_backend_up()
        assert self.window._time_thread is not None
        self.window._time_thread.join(timeout=60)

    def written(self, kind: str) -> list[dict[str, Any]]:
        self.events.flush()
        return of_kind(self.path, kind)

    def close(self) -> None:
        self.events.close()


Make = Callable[..., Setup]


@pytest.fixture
def made(tmp_path: Path) -> Iterator[Make]:
    made: list[Setup] = []

    def make(spec: schema.WindowSpec, **kwargs: Any) -> Setup:
        setup = Setup(tmp_path, spec, **kwargs)
        made.append(setup)
        return setup

    yield make
    for setup in made:
        setup.close()


def test_steps_window_opens_at_start_steps_entry_and_holds_count_steps(made: Make, tmp_path: Path) -> None:
    """--steps 3:2 profiles steps 3 and 4: start as step 3 is entered (not at step 2's exit,
    not at step 4), stop as step 4 exits, nothing more."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=3, count=2))
    seen = s.steps(range(8))
    # seen[2*i]: after step i's entry; seen[2*i+1]: after its exit
    assert seen[5] == []  # step 2 exited: not yet
    assert seen[6] == ["start"]  # step 3 entered: open
    assert seen[7] == ["start"]  # step 3 exited: one of two steps
    assert seen[8] == ["start"]  # step 4 entered
    assert seen[9] == ["start", "stop"]  # step 4 exited: the second step, closed
    assert seen[-1] == ["start", "stop"]  # never reopens
    (start,) = s.written(schema.TRACE_START)
    assert start["purpose"] == "window" and start["dir"] == str(tmp_path / "trace")
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["first_step"], stop["steps"], stop["purpose"]) == (3, 2, "window")
    assert stop["seconds"] == 2.0  # two steps of one second each, on the window's clock


def test_steps_window_of_one_step_closes_at_that_steps_exit(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=1))
    seen = s.steps(range(3))
    assert seen[0] == ["start"] and seen[1] == ["start", "stop"]
    assert s.written(schema.TRACE_STOP)[0]["steps"] == 1


def test_steps_window_that_never_opens_says_so(made: Make, tmp_path: Path) -> None:
    """--steps 5:2 on a workload of three steps: no trace at all, and a warning naming the
    steps asked and the steps marked."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=5, count=2))
    s.steps(range(3))
    s.window.on_exit(2, None, [])
    assert s.profiler.calls == []
    (warning,) = s.written(schema.WINDOW_WARNING)
    assert warning["message"] == ("--steps 5:2 (steps 5..6) never opened: the workload "
                                  "marked only 3 steps")
    assert s.written(schema.TRACE_STOP) == []


def test_steps_window_cut_short_by_the_workloads_end(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=1, count=5))
    s.steps(range(3))
    s.window.on_exit(2, None, [])
    assert s.profiler.kinds() == ["start", "stop"]
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["first_step"], stop["steps"], stop["reason"]) == (1, 2, "workload ended")
    (warning,) = s.written(schema.WINDOW_WARNING)
    assert "cut short: the workload ended after step 2" in warning["message"]
    assert "holds 2 steps, not 5" in warning["message"]


def test_delay_counts_from_process_start_not_from_the_backend(made: Make, tmp_path: Path) -> None:
    """--delay 10 --duration 5 with the process started at 100 and the backend up at 104:
    the trace starts at 110 (6 s after the backend), stops at 115."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=10.0, duration=5.0),
             origin=100.0, now=104.0)
    s.backend_up_and_time_window()
    assert s.clock.slept == [6.0, 5.0]
    assert [(k, t) for k, _, t in s.profiler.calls] == [("start", 110.0), ("stop", 115.0)]
    (stop,) = s.written(schema.TRACE_STOP)
    assert stop["seconds"] == 5.0 and stop["purpose"] == "window"


def test_delay_already_past_when_the_backend_comes_up_starts_at_once(made: Make, tmp_path: Path) -> None:
    """The trace never starts before the backend: a backend up at 130 (past the 110 the delay
    asked) starts it at 130, with no wait."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=10.0, duration=5.0),
             origin=100.0, now=130.0)
    s.backend_up_and_time_window()
    assert s.clock.slept == [5.0]
    assert [(k, t) for k, _, t in s.profiler.calls] == [("start", 130.0), ("stop", 135.0)]


def test_time_window_does_not_start_before_the_backend(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=0.0, duration=5.0))
    s.steps(range(5))  # steps before the first compile: no backend yet
    assert s.profiler.calls == [] and s.window._time_thread is None


def test_a_time_window_records_the_marked_steps_it_holds(made: Make, tmp_path: Path) -> None:
    """--delay with no --duration: the window runs from the delay to the workload's end, and
    the marked steps inside it are the trace's (its first step and count), as a steps window
    records them: the profiled steps' times are left out of the run's step times."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=0.0, duration=0.0))
    s.steps(range(3))  # before the window
    s.backend_up_and_time_window()
    assert s.profiler.kinds() == ["start"]
    s.steps(range(3, 7))
    s.window.on_exit(6, "train", [])
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["purpose"], stop["first_step"], stop["steps"]) == ("window", 3, 4), stop


class CountingLock:
    """The window's lock, counting how often a step takes it."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.taken = lock, 0

    def __enter__(self) -> Any:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.lock.__exit__(*exc)


@pytest.mark.parametrize("spec", ["none", "done", "time"])
def test_a_marked_step_takes_no_lock_once_nothing_is_left_to_decide(
        made: Make, tmp_path: Path, spec: str) -> None:
    """Issue 25: with no window asked, once the window is done, or with a time window (steps
    decide nothing there) not running, a marked step's entry returns before the window's lock
    (a step loop pays no lock per step)."""
    if spec == "none":
        events = Events(str(tmp_path / "none.jsonl"))
        window = ProfilerWindow(None, events)
    elif spec == "time":
        window = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=0.0,
                                        duration=5.0)).window  # before the backend: not yet
    else:
        s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=1, count=1))
        s.steps(range(3))
        window = s.window
        assert window.done and window.active is None
    window.on_step_enter(0)  # the first step is seen under the lock
    counting = window.lock = CountingLock(window.lock)  # type: ignore[assignment]
    for i in range(1, 50):
        window.on_step_enter(i)
        window.on_step_exit(i)
    assert counting.taken == 0
    if spec == "none":
        events.close()


def test_executions_window_without_markers(made: Make, tmp_path: Path) -> None:
    """auto on a script without markers: after `warmup` executions of the step function the
    next `executions` ones are profiled; another function's executions do not count; the
    trace, kept apart while markers could still come, ends in the window's folder."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("auto", str(trace), warmup=2, executions=3))
    s.window.on_backend_up()
    told = [s.window.before_execution("train_step", n) for n in (1, 2)]
    assert told == [False, False] and s.profiler.calls == []
    assert s.window.before_execution("train_step", 3) is True
    assert s.profiler.calls[0][:2] == ("start", str(trace / ".executions"))
    for _ in range(2):
        s.window.after_execution("train_step")
        s.window.after_execution("eval_step")  # not the step: not counted
    assert s.profiler.kinds() == ["start"]
    s.window.after_execution("train_step")
    assert s.profiler.kinds() == ["start", "stop"]
    assert (trace / "plugins" / "host.xplane.pb").read_bytes() == b"trace"
    assert not (trace / ".executions").exists()
    (plan,) = s.written(schema.WINDOW_PLAN)
    assert (plan["function"], plan["first_execution"], plan["executions"]) == \
        ("train_step", 2, 3)
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["purpose"], stop["function"], stop["first_execution"], stop["executions"]) == \
        ("executions", "train_step", 2, 3)


def test_executions_window_bounded_by_max_seconds(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=0, executions=100,
                               max_seconds=30.0))
    s.window.on_backend_up()
    assert s.window.before_execution("step", 1)
    s.clock.now += 31.0
    s.window.after_execution("step")
    assert s.profiler.kinds() == ["start", "stop"]
    assert s.written(schema.TRACE_STOP)[0]["reason"] == "the 30 s bound"


def test_markers_after_an_executions_window_drop_it_for_steps_2_to_6(made: Make, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("auto", str(trace), warmup=0, executions=100))
    s.window.on_backend_up()
    assert s.window.before_execution("step", 1)
    s.steps(range(7))
    assert [c[:2] for c in s.profiler.calls] == [
        ("start", str(trace / ".executions")), ("stop", None), ("start", str(trace)),
        ("stop", None)]
    # dropped as the first marked step is entered (the clock: 100 s, then 1 s a step)
    assert [c[2] for c in s.profiler.calls] == [100.0, 100.0, 102.0, 107.0]
    assert not (trace / ".executions").exists()
    (discard,) = s.written(schema.TRACE_DISCARD)
    assert discard["dir"] == str(trace / ".executions")
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["first_step"], stop["steps"]) == (2, 5)


def test_step_name_filter_counts_only_the_named_steps(tmp_path: Path) -> None:
    """--step-name train: eval steps between train steps neither open nor close the window
    nor count toward START."""
    spec = schema.HarnessSpec(
        events=str(tmp_path / "events.jsonl"), workload=schema.WorkloadSpec("w.py", None),
        profile=schema.WindowSpec("steps", str(tmp_path / "trace"), start=2, count=2,
                                  step_name="train"))
    clock = FakeClock(0.0)
    profiler = RecordedProfiler(clock)
    harness = Harness(spec, calls=calls_for(profiler, clock))
    step = harness.step_class(Marker)
    try:
        seen = []
        for i in range(5):
            for name in ("eval", "train", "eval"):
                step(name, step_num=i).__exit__(None, None, None)
                seen.append((name, i, profiler.kinds()))
        # train step 2 (the third train step) opened it, train step 3 closed it
        assert seen[6] == ("eval", 2, [])
        assert seen[7] == ("train", 2, ["start"])
        assert seen[10] == ("train", 3, ["start", "stop"])
        harness.events.flush()
        steps = of_kind(tmp_path / "events.jsonl", schema.STEP_ENTER)
        assert {e["name"] for e in steps} == {"train"} and len(steps) == 5
        (stop,) = of_kind(tmp_path / "events.jsonl", schema.TRACE_STOP)
        assert (stop["first_step"], stop["steps"]) == (2, 2)
    finally:
        harness.events.close()


def test_a_step_name_that_matches_nothing_is_named_with_the_names_seen(tmp_path: Path) -> None:
    spec = schema.HarnessSpec(
        events=str(tmp_path / "events.jsonl"), workload=schema.WorkloadSpec("w.py", None),
        profile=schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=2,
                                  step_name="trian"))
    clock = FakeClock(0.0)
    profiler = RecordedProfiler(clock)
    harness = Harness(spec, calls=calls_for(profiler, clock))
    step = harness.step_class(Marker)
    try:
        for i in range(4):
            step("train", step_num=i).__exit__(None, None, None)
        harness.jax_ready = True  # as once the workload imported jax
        harness._finish(0)  # the workload's end: the window says what it did not profile
        assert profiler.calls == []
        (warning,) = of_kind(tmp_path / "events.jsonl", schema.WINDOW_WARNING)
        assert warning["message"] == ("--step-name 'trian' matched no step of the workload "
                                      "(it marks 'train'); nothing was profiled")
    finally:
        harness.events.close()


def test_a_step_name_in_a_workload_that_marks_no_step_says_so(made: Make,
                                                              tmp_path: Path) -> None:
    """--step-name train and no marker at all: the warning says the workload marks none."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=2,
                               step_name="train"))
    s.window.on_exit(None, "train", [])
    assert [w["message"] for w in s.written(schema.WINDOW_WARNING)] == [
        "--step-name 'train' matched no step of the workload (it marks no step with "
        "jax.profiler.StepTraceAnnotation); nothing was profiled"]


def test_a_start_that_raises_is_recorded_and_ends_the_window(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=1, count=2),
             fail_start=True)
    s.steps(range(6))
    s.window.on_exit(5, None, [])
    assert s.profiler.kinds() == ["start"]  # tried once, never again, never stopped
    assert s.window.active is None and s.window.done
    (error,) = s.written(schema.TRACE_ERROR)
    assert error["error"] == "RuntimeError: Profile has already been started"
    assert s.written(schema.TRACE_START) == [] and s.written(schema.TRACE_STOP) == []


def test_a_stop_that_raises_is_recorded_and_closes_the_window(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=1),
             fail_stop=True)
    s.steps(range(4))
    s.window.on_exit(3, None, [])
    assert s.profiler.kinds() == ["start", "stop"]  # not stopped again at the exit
    assert s.window.active is None and s.window.done
    (error,) = s.written(schema.TRACE_ERROR)
    assert error["error"] == "RuntimeError: No profile started"


def test_a_stop_that_raises_in_an_executions_window_does_not_break_the_workload(made: Make,
                                                                                tmp_path: Path) -> None:
    """No trace folder was written: nothing to move into place, and the call the workload's
    execution made returns."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("auto", str(trace), warmup=0, executions=1), fail_stop=True)
    s.window.on_backend_up()
    assert s.window.before_execution("step", 1)
    s.window.after_execution("step")
    assert s.window.active is None and s.window.done
    assert [e["error"] for e in s.written(schema.TRACE_ERROR)] == [
        "RuntimeError: No profile started"]


def test_the_scripts_own_trace_ends_an_open_window(made: Make, tmp_path: Path) -> None:
    """The workload calls jax.profiler.start_trace while pgle's window is open: pgle's trace is
    dropped, the window never reopens, and the script's trace is the one recorded."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("steps", str(trace), start=1, count=3))
    s.steps(range(2))
    assert s.profiler.kinds() == ["start"]
    s.window.on_script_start("train.py:12", "/tmp/mine")
    assert s.profiler.kinds() == ["start", "stop"]
    (discard,) = s.written(schema.TRACE_DISCARD)
    assert discard["dir"] == str(trace)
    s.steps(range(2, 8))
    s.clock.now += 4.0
    s.window.on_script_stop("train.py:20")
    s.window.on_exit(7, None, [])
    assert s.profiler.kinds() == ["start", "stop"]
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["purpose"], stop["dir"], stop["site"]) == ("script", "/tmp/mine", "train.py:12")
    assert stop["seconds"] == 10.0  # 6 steps of 1 s and 4 s more, on the window's clock
    assert [e["call"] for e in s.written(schema.SCRIPT_TRACE)] == ["start", "stop"]
    assert s.written(schema.WINDOW_WARNING) == []  # the script's window: nothing to warn


def test_the_scripts_own_trace_before_the_window_keeps_it_shut(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=2, count=2))
    s.window.on_script_start("train.py:3", None)
    s.steps(range(6))
    assert s.profiler.calls == []


# -- what the profiler is asked for, and the size bound (issue 36) ------------------------


def test_the_window_asks_jax_for_pgles_options_and_records_them(made: Make,
                                                                tmp_path: Path) -> None:
    """The real jax.profiler.ProfileOptions reaches start_trace: no Python tracer, host
    annotations only, HLO protos; the trace_start record says so; the stop records the
    trace's bytes and says the export began (trace_export) before stop_trace ran."""
    from jax import profiler

    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=1, count=2))
    s.steps(range(4))
    (options,) = s.profiler.options
    assert isinstance(options, profiler.ProfileOptions)
    assert (options.python_tracer_level, options.host_tracer_level) == (0, 1)
    assert options.enable_hlo_proto is True
    (start,) = s.written(schema.TRACE_START)
    assert start["options"] == {
        "detail": "pgle",
        "asked": {"host_tracer_level": 1, "python_tracer_level": 0, "enable_hlo_proto": True},
        "ignored": [],
        "why": None,
    }
    kinds = [e["kind"] for e in events_of(s.path)]
    assert kinds.index(schema.TRACE_EXPORT) < kinds.index(schema.TRACE_STOP)
    (stop,) = s.written(schema.TRACE_STOP)
    assert stop["bytes"] == len(b"trace")
    assert s.written(schema.TRACE_PROBE) == []  # no bound asked: no probe


def test_full_detail_passes_no_options(made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=1,
                               detail="full"))
    s.steps(range(2))
    assert s.profiler.options == [None]
    (start,) = s.written(schema.TRACE_START)
    assert start["options"]["asked"] == {} and "defaults" in start["options"]["why"]


def test_the_size_bound_probes_the_step_before_and_cuts_the_window(made: Make,
                                                                   tmp_path: Path) -> None:
    """--trace-max-bytes 12 with --steps 3:5: step 2 is traced alone (5 bytes, into a scratch
    folder that is deleted), so the window holds 12 // 5 = 2 steps: 3 and 4; said early."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("steps", str(trace), start=3, count=5, max_bytes=12))
    seen = s.steps(range(10))
    assert seen[4] == ["start"]  # step 2 entered: the probe
    assert seen[5] == ["start", "stop"]  # ... and written as it exits
    assert s.profiler.calls[0][1] == str(trace / ".probe")
    assert s.profiler.kinds() == ["start", "stop", "start", "stop"]
    assert s.profiler.calls[2][1] == str(trace)
    assert not (trace / ".probe").exists()
    before, probe = s.written(schema.TRACE_PROBE)  # said as it starts, and once written
    assert (before["step"], before.get("bytes"), before["steps"]) == (2, None, 5)
    assert (probe["step"], probe["bytes"], probe["steps"]) == (2, 5, 2)
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["first_step"], stop["steps"]) == (3, 2)
    (warning,) = s.written(schema.WINDOW_WARNING)
    assert "holds 2 steps (steps 3..4), not 5" in warning["message"] and warning["early"]
    s.window.on_exit(9, None, [])
    assert len(s.written(schema.WINDOW_WARNING)) == 1  # the cut is no "cut short"


def test_the_size_bound_probes_an_auto_window_too(made: Make, tmp_path: Path) -> None:
    """collect's own window (auto: steps 2..6) under --trace-max-bytes 12: step 1 is the probe
    (5 bytes), so the window holds steps 2 and 3."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("auto", str(trace), max_bytes=12))
    s.window.on_backend_up()
    s.steps(range(10))
    assert [c[1] for c in s.profiler.calls] == [str(trace / ".probe"), None, str(trace), None]
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["first_step"], stop["steps"]) == (2, 2)


def test_a_window_of_one_step_is_never_probed(made: Make, tmp_path: Path) -> None:
    """--steps 3:1 under --trace-max-bytes: one step is the least a window holds, so no step
    before it is traced to size it."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("steps", str(trace), start=3, count=1, max_bytes=4))
    s.steps(range(6))
    assert [c[1] for c in s.profiler.calls] == [str(trace), None]
    assert s.written(schema.TRACE_PROBE) == []


def test_the_size_bound_keeps_a_window_that_fits(
        made: Make, tmp_path: Path) -> None:
    fits = made(schema.WindowSpec("steps", str(tmp_path / "a"), start=3, count=5,
                                  max_bytes=1 << 20))
    fits.steps(range(10))
    _, probe = fits.written(schema.TRACE_PROBE)
    assert probe["steps"] == 5 and fits.written(schema.WINDOW_WARNING) == []
    (stop,) = fits.written(schema.TRACE_STOP)
    assert stop["steps"] == 5


def test_a_window_from_step_0_is_not_probed_and_its_size_is_checked_after(
        made: Make, tmp_path: Path) -> None:
    first = made(schema.WindowSpec("steps", str(tmp_path / "b"), start=0, count=3, max_bytes=1))
    first.steps(range(5))  # no step before the window: nothing to measure, no probe
    assert first.profiler.kinds() == ["start", "stop"] and first.written(schema.TRACE_PROBE) == []
    (over,) = first.written(schema.WINDOW_WARNING)
    assert "over --trace-max-bytes 1" in over["message"]  # said after the stop


def test_a_probe_the_profiler_refuses_leaves_the_window_as_asked(made: Make,
                                                                  tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=2, count=2, max_bytes=1),
             fail_start=True)
    s.steps(range(5))
    (probe,) = s.written(schema.TRACE_PROBE)
    assert probe["error"] == "RuntimeError: Profile has already been started"
    assert (probe["step"], probe["steps"]) == (1, 2)
    # The window's own start is refused too (the same profiler): one trace_error, no retry.
    assert [e["error"] for e in s.written(schema.TRACE_ERROR)] == [
        "RuntimeError: Profile has already been started"]


def _counted_loop(window: ProfilerWindow, functions: list[tuple[str, Any, float]],
                  rounds: int) -> None:
    """Real jitted calls, counted as the harness's _counted_call counts them (begin, ask the
    window, call, hand the output to the watcher); each function then holds the host for its
    seconds, as a loader or a logger does. A function is called with (x, the round)."""
    import time

    import jax.numpy as jnp

    counter = window.jits
    assert counter is not None
    x = jnp.ones((512, 512)) * 0.01
    for i in range(rounds):
        for name, fn, seconds in functions:
            n, t = counter.begin(name)
            told = window.before_execution(name, n)
            out = fn(x, i)
            counter.watcher.put(name, n, t, out)
            if told:
                window.after_execution(name)
            time.sleep(seconds)
    counter.watcher.finish(30.0)


def test_the_window_chooses_by_the_work_of_executions_still_running(made: Make,
                                                                     tmp_path: Path) -> None:
    """The helper holds the host (a loader after it), the step holds the device and is still
    running when the helper's third call asks which function is the step: the window waits for
    the watcher to see the step's completions and profiles the step from its third call (issue
    33: by host time, on the samples it had, it profiled the helper)."""
    import jax

    from pgle.launch.harness import JitCounter

    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=2, executions=3))
    s.window.on_backend_up()
    s.window.jits = JitCounter()

    def heavy(x: Any, i: int) -> Any:
        for _ in range(24):
            x = jax.numpy.tanh(x @ x)
        return x

    helper, step = jax.jit(lambda x, i: x * i), jax.jit(heavy)
    # Compiled before the loop: no counted span holds a compile, so at the first ask both
    # have two executions of known work once the watcher has reached them, and the step's
    # least work outranks the helper's by far: one ask, on any machine (a span holding a
    # compile leaves a margin of timings to decide, which a loaded run once missed).
    x = jax.numpy.ones((512, 512)) * 0.01
    jax.block_until_ready([helper(x, 0), step(x, 0)])
    _counted_loop(s.window, [("jit(helper)", helper, 0.03), ("jit(step)", step, 0.0)], rounds=8)
    (plan,) = s.written(schema.WINDOW_PLAN)
    assert (plan["function"], plan["first_execution"]) == ("jit(step)", 2)
    assert s.window.asks == 1


def test_a_candidate_whose_work_stays_unknown_is_ranked_by_host_time_after_a_few_asks(
        made: Make, tmp_path: Path) -> None:
    """A function compiled again at every call (a new shape each time: variable-length
    batches) has no known work ever, as a span holding a compile is not timed: the rule is
    asked again at the next calls (each lets the watcher catch up) and answers by host time
    at the DECIDE_ASKS-th, so the window still opens. (The step then holds the host far
    longer than the compile: a checkpoint or a logger after it.)"""
    import jax

    from pgle.launch import harness

    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=2, executions=3))
    s.window.on_backend_up()
    counter = s.window.jits = harness.JitCounter()
    pad = jax.jit(lambda x: x.sum())

    def ragged(x: Any, i: int) -> Any:
        counter.compiled(None, None)  # as the harness's listener of jax's compile events does
        return pad(x[: 8 + i])

    _counted_loop(s.window, [("jit(pad)", ragged, 0.0),
                             ("jit(step)", jax.jit(lambda x, i: x @ x), 0.4)], rounds=6)
    assert harness.DECIDE_ASKS == 4  # asked at pad 3, step 3, pad 4, and answered at step 4
    (plan,) = s.written(schema.WINDOW_PLAN)
    assert (plan["function"], plan["first_execution"]) == ("jit(step)", 3)
    assert s.window.asks == harness.DECIDE_ASKS


def test_the_choice_weighs_the_executions_the_watcher_reached(made: Make, tmp_path: Path) -> None:
    """Asked at the helper's fourth call, the helper has 4 executions counted and the step 3;
    each has two timed executions (10 ms of work each against 12 ms) and a first one with the
    compile. By counted executions the helper weighs 40 ms against 36 ms; by the executions
    the watcher reached, 3 each, 30 ms against 36 ms: the step (the spans as the watcher
    hands them to JitCounter.worked)."""
    from pgle.launch.harness import JitCounter

    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=3, executions=3))
    s.window.on_backend_up()
    counter = s.window.jits = JitCounter()
    for name in ("helper", "step", "helper", "step", "helper", "step", "helper"):
        counter.begin(name)
    counter.worked([("helper", 1.0, 1, 1), ("step", 1.1, 1, 1)], None, 1.2, 2)  # the compiles
    counter.worked([("helper", 1.3, 2, 1)], 0.010, 1.31, 2)
    counter.worked([("step", 1.4, 2, 1)], 0.012, 1.412, 2)
    counter.worked([("helper", 1.5, 3, 1)], 0.010, 1.51, 2)
    counter.worked([("step", 1.6, 3, 1)], 0.012, 1.612, 2)
    assert s.window.before_execution("helper", 4) is False  # not the step
    assert s.window.pending == "step" and s.window.asks == 1
    counter.begin("step")
    assert s.window.before_execution("step", 4) is True
    (plan,) = s.written(schema.WINDOW_PLAN)
    assert (plan["function"], plan["first_execution"]) == ("step", 3)


def test_one_sample_each_answers_only_a_clear_lead_then_the_least_work_ranks(
        made: Make, tmp_path: Path) -> None:
    """The watcher's wake-up only adds to a span: on one sample each, a cheap helper whose
    span held 8 ms of wake-up is within DECIDE_MARGIN of the step's 3 ms, so the choice waits
    for a second sample each; then each one's least work ranks them (the helper's 50 us; by
    the mean, 4 ms x 3 executions would outweigh the step's 3 ms x 3), and
    the step's next call opens the window (issue 33: `jit(next_batch)` was profiled under
    load). A lead of DECIDE_MARGIN or more answers on the first sample."""
    from pgle.launch.harness import DECIDE_MARGIN, JitCounter

    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=2, executions=3))
    s.window.on_backend_up()
    counter = s.window.jits = JitCounter()
    for name in ("helper", "step", "helper", "step", "helper"):
        counter.begin(name)
    counter.worked([("helper", 1.0, 1, 1), ("step", 1.1, 1, 1)], None, 1.2, 2)  # the compiles
    counter.worked([("helper", 1.3, 2, 1)], 0.008, 1.308, 2)  # 50 us of work, 8 ms of wake-up
    counter.worked([("step", 1.4, 2, 1)], 0.003, 1.403, 2)
    assert s.window.before_execution("helper", 3) is False
    assert s.window.pending is None and s.window.asks == 1  # 8 ms against 3 ms: not clear
    counter.begin("step")
    counter.worked([("helper", 1.5, 3, 1)], 0.00005, 1.50005, 2)
    assert s.window.before_execution("step", 3) is False  # the step has one sample still
    assert s.window.pending is None and s.window.asks == 2
    counter.begin("helper")
    counter.worked([("step", 1.6, 3, 1)], 0.003, 1.603, 2)
    assert s.window.before_execution("helper", 4) is False
    assert s.window.pending == "step" and s.window.asks == 3
    counter.begin("step")
    assert s.window.before_execution("step", 4) is True
    (plan,) = s.written(schema.WINDOW_PLAN)
    assert (plan["function"], plan["first_execution"]) == ("step", 3)

    # A clear lead on one sample each: the first ask answers.
    s2 = made(schema.WindowSpec("auto", str(tmp_path / "trace2"), warmup=2, executions=3))
    s2.window.on_backend_up()
    counter = s2.window.jits = JitCounter()
    for name in ("helper", "step", "helper", "step", "helper"):
        counter.begin(name)
    counter.worked([("helper", 1.0, 1, 1), ("step", 1.1, 1, 1)], None, 1.2, 2)
    counter.worked([("helper", 1.3, 2, 1)], 0.003 / DECIDE_MARGIN, 1.301, 2)
    counter.worked([("step", 1.4, 2, 1)], 0.003, 1.403, 2)
    assert s2.window.before_execution("helper", 3) is False
    assert s2.window.pending == "step" and s2.window.asks == 1


# -- the workload's own profiler, the time window, --steps without markers (issue 37) -------


def _fields(line: dict[str, Any]) -> dict[str, Any]:
    """An event's own fields (without the kind and the time and order every line has)."""
    return {k: v for k, v in line.items() if k not in ("kind", "t", "edges")}


def test_the_scripts_own_trace_is_recorded_and_said_where_it_goes(
        made: Make, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its start and stop are each a `script_trace` line with the call site and the folder
    (None: a session kept in memory, which pgle exports where its window would have written
    when it stops); the stop closes the script's trace as a window's (`trace_stop`, purpose
    script), and the user is told once, at its start, which trace collect converts."""
    trace = tmp_path / "trace"
    s = made(schema.WindowSpec("steps", str(trace), start=5, count=2))
    s.window.on_script_start("train.py:7", None)
    said = capsys.readouterr().err
    assert said == ("pgle: the workload starts its own profiler at train.py:7 (jax.profiler); "
                    "pgle uses that trace (kept in memory; pgle exports it when it stops) "
                    "instead of its own window\n")
    s.clock.now += 2.5
    s.window.on_script_stop("train.py:9", exported_to=str(trace))
    assert [_fields(e) for e in s.written(schema.SCRIPT_TRACE)] == [
        {"call": "start", "site": "train.py:7", "dir": None},
        {"call": "stop", "site": "train.py:9", "dir": str(trace)}]
    (stop,) = s.written(schema.TRACE_STOP)
    assert _fields(stop) == {
        "dir": str(trace), "purpose": "script", "seconds": 2.5, "stop_trace_seconds": None,
        "first_step": None, "steps": None, "reason": None, "site": "train.py:7"}
    assert capsys.readouterr().err == ""

    s2 = made(schema.WindowSpec("steps", str(tmp_path / "trace2"), start=5, count=2))
    s2.window.on_script_start("train.py:3", tmp_path / "mine")  # a PathLike: said as a str
    assert "pgle uses that trace (" + str(tmp_path / "mine") + ") instead" in (
        capsys.readouterr().err)
    s2.window.on_script_stop("train.py:4")  # nothing exported: its own folder stays
    # (s and s2 write the same events file)
    assert [e["dir"] for e in s2.written(schema.SCRIPT_TRACE)
            if e["site"] in ("train.py:3", "train.py:4")] == [str(tmp_path / "mine")] * 2


def test_a_scripts_stop_without_its_start_is_only_recorded(made: Make, tmp_path: Path) -> None:
    """A stop_trace with no start_trace seen (the script's own error): one `script_trace` line,
    no trace to close, whatever was exported."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=5, count=2))
    s.window.on_script_stop("train.py:9", exported_to=str(tmp_path / "trace"))
    (line,) = s.written(schema.SCRIPT_TRACE)
    assert (line["call"], line["site"], line["dir"]) == ("stop", "train.py:9", None)
    assert s.written(schema.TRACE_STOP) == []


def test_without_a_window_the_scripts_trace_is_recorded_and_nothing_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pgle run` with no profile window: the script's trace is noted, not announced (pgle
    takes no trace of its own to give way), and no window's stop is written."""
    events = Events(str(tmp_path / "events.jsonl"))
    window = ProfilerWindow(None, events)
    try:
        window.on_script_start("train.py:7", "/tmp/mine")
        window.on_script_stop("train.py:9")
        events.flush()
    finally:
        events.close()
    assert capsys.readouterr().err == ""
    lines = of_kind(tmp_path / "events.jsonl", schema.SCRIPT_TRACE)
    assert [(e["call"], e["dir"]) for e in lines] == [("start", "/tmp/mine"), ("stop", "/tmp/mine")]
    assert of_kind(tmp_path / "events.jsonl", schema.TRACE_STOP) == []


def test_the_scripts_own_trace_ends_the_counting_of_marked_steps(tmp_path: Path) -> None:
    """Once the script traces itself no window will open, so after LIGHT_AFTER_STEPS marked
    steps the counter only counts executions (JitCounter.marked), as it does when no window
    was asked."""
    from pgle.launch.harness import LIGHT_AFTER_STEPS

    clock = FakeClock(100.0)
    profiler = RecordedProfiler(clock)
    spec = schema.HarnessSpec(events=str(tmp_path / "events.jsonl"),
                              workload=schema.WorkloadSpec("w.py", None),
                              profile=schema.WindowSpec("auto", str(tmp_path / "trace")))
    harness = Harness(spec, calls=calls_for(profiler, clock))
    step = harness.step_class(Marker)
    try:
        harness.window.on_script_start("train.py:3", None)
        assert harness.window.counting is False
        for i in range(LIGHT_AFTER_STEPS + 1):
            step("train", step_num=i).__exit__(None, None, None)
        assert harness.jits.marked is True
        assert profiler.calls == []
    finally:
        harness.events.close()


def test_a_time_window_with_no_delay_nor_duration_starts_at_once_and_runs_to_the_end(
        made: Make, tmp_path: Path) -> None:
    """--delay and --duration unset, the backend up as the process starts: no wait, and
    the trace runs until the workload ends (its stop is the exit's)."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace")), origin=100.0, now=100.0)
    s.backend_up_and_time_window()
    assert s.clock.slept == [] and s.profiler.kinds() == ["start"]
    s.clock.now += 3.0
    s.window.on_exit(None, None, [])
    assert [(k, t) for k, _, t in s.profiler.calls] == [("start", 100.0), ("stop", 103.0)]


def test_a_time_window_waits_and_runs_fractions_of_a_second(made: Make, tmp_path: Path) -> None:
    """--delay 10 with the backend up at 109.5: half a second's wait; --duration 0.5."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=10.0, duration=0.5),
             origin=100.0, now=109.5)
    s.backend_up_and_time_window()
    assert s.clock.slept == [0.5, 0.5]
    assert [(k, t) for k, _, t in s.profiler.calls] == [("start", 110.0), ("stop", 110.5)]


def test_a_time_window_of_zero_seconds_is_not_stopped_by_its_thread(made: Make,
                                                                   tmp_path: Path) -> None:
    """--duration 0 reads as unset: the trace runs to the workload's end."""
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=0.0, duration=0.0),
             origin=100.0, now=100.0)
    s.backend_up_and_time_window()
    assert s.clock.slept == [] and s.profiler.kinds() == ["start"]


def test_a_time_window_gives_way_to_the_scripts_own_trace_started_before_it(
        made: Make, tmp_path: Path) -> None:
    s = made(schema.WindowSpec("time", str(tmp_path / "trace"), delay=10.0, duration=5.0),
             origin=100.0, now=100.0)
    s.window.on_script_start("train.py:3", None)
    s.backend_up_and_time_window()
    assert s.profiler.calls == [] and s.clock.slept == [10.0]


def test_steps_asked_of_a_workload_that_marks_none_are_said_impossible_once(
        made: Make, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--steps 2:3 and a jitted function executed NO_MARKER_EXECUTIONS times with no step
    marked: the user is told at once (an early window warning and a `pgle:` line), once, and
    the window stops counting executions; at exit nothing more is said."""
    from pgle.launch.harness import NO_MARKER_EXECUTIONS

    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=2, count=3))
    for n in range(1, NO_MARKER_EXECUTIONS):
        assert s.window.before_execution("jit(step)", n) is False
    assert s.written(schema.WINDOW_WARNING) == [] and s.window.counting is True
    for n in range(NO_MARKER_EXECUTIONS, NO_MARKER_EXECUTIONS + 3):
        assert s.window.before_execution("jit(step)", n) is False
    message = (
        f"--steps 2:3 cannot be met: jit(step) has executed {NO_MARKER_EXECUTIONS} times and "
        "the workload marks no step with jax.profiler.StepTraceAnnotation; nothing will be "
        "profiled. Drop --steps (pgle then profiles executions of the most-executed jitted "
        "function), pass --step-name NAME if the steps have another name, use "
        "--delay/--duration, or wrap the step: `with jax.profiler.StepTraceAnnotation("
        "'train', step_num=i):`")
    s.window.on_exit(None, None, [])
    (warning,) = s.written(schema.WINDOW_WARNING)
    assert (warning["message"], warning["early"]) == (message, True)
    assert capsys.readouterr().err == f"pgle: warning: {message}\n"
    assert s.window.counting is False and s.profiler.calls == []


def test_the_probes_bytes_and_stop_time_are_recorded_and_a_one_byte_step_cuts_the_window(
        made: Make, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trace-max-bytes 2 with --steps 3:5 and a step that traces to 1 byte: 2 steps; the
    probe's record holds its bytes and its stop_trace's seconds, and the user is told."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=3, count=5,
                               max_bytes=2))
    s.profiler.payload, s.profiler.stop_seconds = b"x", 0.25
    s.steps(range(3))
    _, probe = s.written(schema.TRACE_PROBE)
    assert _fields(probe) == {"step": 2, "bytes": 1, "stop_trace_seconds": 0.25, "steps": 2}
    message = ("--trace-max-bytes 2: step 2 alone traced to 1 bytes, so the window holds 2 "
               "steps (steps 3..4), not 5")
    assert capsys.readouterr().err == f"pgle: warning: {message}\n"


def test_a_probe_that_wrote_nothing_leaves_the_window_as_asked(made: Make,
                                                               tmp_path: Path) -> None:
    """A probe whose stop wrote no trace (not even its folder): 0 bytes tell nothing, so the
    window keeps the steps asked; the missing scratch folder is no error."""
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=3, count=5,
                               max_bytes=2))
    s.profiler.writes = False
    s.steps(range(10))
    _, probe = s.written(schema.TRACE_PROBE)
    assert (probe["bytes"], probe["steps"]) == (0, 5)
    assert s.profiler.kinds() == ["start", "stop", "start", "stop"]


def test_a_probe_whose_stop_fails_is_recorded_with_the_error(made: Make,
                                                             tmp_path: Path) -> None:
    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=3, count=5,
                               max_bytes=2), fail_stop=True)
    s.steps(range(3))
    _, probe = s.written(schema.TRACE_PROBE)
    assert _fields(probe) == {"step": 2, "steps": 5,
                              "error": "RuntimeError: No profile started"}


def test_the_probe_starts_from_an_empty_folder_with_the_windows_options(
        made: Make, tmp_path: Path) -> None:
    """A probe folder left by an earlier run (killed in its probe) is removed before the probe,
    so the step's bytes are its own; the probe records what the window will (the same
    options)."""
    trace = tmp_path / "trace"
    (trace / ".probe").mkdir(parents=True)
    (trace / ".probe" / "left.xplane.pb").write_bytes(b"x" * 100)
    s = made(schema.WindowSpec("steps", str(trace), start=3, count=5, max_bytes=12))
    s.steps(range(10))
    _, probe = s.written(schema.TRACE_PROBE)
    assert (probe["bytes"], probe["steps"]) == (5, 2)
    assert s.profiler.kinds() == ["start", "stop", "start", "stop"]
    assert s.profiler.options[0] is s.profiler.options[1] is s.window.options()[0]
    assert s.profiler.options[0] is not None


def test_an_auto_step_window_is_bounded_by_its_seconds_and_a_steps_window_is_not(
        made: Make, tmp_path: Path) -> None:
    """Auto's default window (steps 2..6) stops once it has run max_seconds (30 s), at the end
    of the step that crossed it, and says why; a window the user asked for with --steps holds
    its steps however long they take."""
    auto = made(schema.WindowSpec("auto", str(tmp_path / "auto"), max_seconds=30.0))
    asked = made(schema.WindowSpec("steps", str(tmp_path / "asked"), start=2, count=5,
                                   max_seconds=30.0))
    for s in (auto, asked):
        for i in range(10):
            s.window.on_step_enter(i)
            s.clock.now += 20.0
            s.window.on_step_exit(i)
    stops = {e["dir"]: e for e in auto.written(schema.TRACE_STOP)}  # one events file
    assert (stops[str(tmp_path / "auto")]["steps"],
            stops[str(tmp_path / "auto")]["reason"]) == (2, "the 30 s bound")
    assert (stops[str(tmp_path / "asked")]["steps"],
            stops[str(tmp_path / "asked")]["reason"]) == (5, None)


def test_a_kept_in_memory_sessions_export_that_fails_is_recorded_and_its_stop_still_returns(
        made: Make, tmp_path: Path) -> None:
    """jax >= 0.12's ProfileSession with no log_dir keeps its trace in memory, and pgle exports
    it when the workload stops it (tests/xla_gpu/test_profile_session.py, on jax 0.12). Here a
    class of the same methods whose export fails (a full disk): the workload's own stop still
    returns what it returned, the error is recorded, and no trace folder is claimed."""
    from pgle.launch.harness import _hook_session

    class Session:
        log_dir = None

        def start(self) -> str:
            return "started"

        def stop(self) -> str:
            return "stopped"

        def export_profile_data(self, where: str) -> None:
            raise OSError(28, "No space left on device")

    s = made(schema.WindowSpec("steps", str(tmp_path / "trace"), start=0, count=1))
    _hook_session(Session, s.window)
    session = Session()
    assert (session.start(), session.stop()) == ("started", "stopped")
    assert [e["error"] for e in s.written(schema.TRACE_ERROR)] == [
        "OSError: [Errno 28] No space left on device"]
    assert [(e["call"], e["dir"]) for e in s.written(schema.SCRIPT_TRACE)] == [
        ("start", None), ("stop", None)]


def test_an_executions_window_the_workload_ends_early_says_how_many_it_holds(
        made: Make, tmp_path: Path) -> None:
    """auto without markers, 5 executions asked and the workload ends after 2 of them: the
    window stops at the exit and says the profile holds 2 executions of the function."""
    s = made(schema.WindowSpec("auto", str(tmp_path / "trace"), warmup=0, executions=5))
    s.window.on_backend_up()
    assert s.window.before_execution("jit(step)", 1) is True
    s.window.after_execution("jit(step)")
    assert s.window.before_execution("jit(step)", 2) is True
    s.window.after_execution("jit(step)")
    s.window.on_exit(None, None, [])
    (stop,) = s.written(schema.TRACE_STOP)
    assert (stop["executions"], stop["reason"]) == (2, "workload ended")
    assert [w["message"] for w in s.written(schema.WINDOW_WARNING)] == [
        "the execution window was cut short: the workload ended after 2 profiled executions "
        "of jit(step), not 5"]
