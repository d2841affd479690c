"""Every way users write a training step is seen (issue 22): `@jax.jit`, `@jax.jit(...)` with
arguments, `functools.partial(jax.jit, ...)`, `jax.pmap`, pjit, `jax.jit(f).lower().compile()`,
flax `nnx.jit`, equinox `eqx.filter_jit`; one rule (pgle.launch.step_rule) picks the step for
the profiling window and for the step times, although a cheaper jitted helper runs as often
and before it (tests/workloads/real/step_forms.py)."""

from __future__ import annotations

import json
import statistics

import pytest

from helpers.pgle_testing import WORKLOADS, report_of, run_pgle

FORMS = WORKLOADS / "real" / "step_forms.py"


def _events(folder):
    return [json.loads(ln) for ln in (folder / "events.jsonl").read_text().splitlines() if ln.strip()]


@pytest.mark.parametrize("form,function,first", [
    ("decorator", "jit(train_step)", 2),
    ("decorator-args", "jit(train_step)", 2),
    ("partial", "jit(_step)", 2),
    # jax 0.10.2 compiles the pmap again at its second call (its inputs are now committed to
    # the device): no work is known for the step until its third, so the rule answers a call
    # later (ProfilerWindow._choose) and the window starts after both compiles.
    ("pmap", "pmap(_pstep)", 3),
    ("pjit", "jit(_train)", 2),
    ("aot", "jit(_train)", 2),
    ("flax", "jit(train_step)", 2),
    ("equinox", "jit(train_step)", 2),
])
def test_the_step_is_found_in_every_form(tmp_path, form, function, first):
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", "--run-dir", "c",
                    str(FORMS), "--", "--form", form, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    window = report_of(proc)["window"]
    assert window["purpose"] == "executions" and window["function"] == function
    # Where one sample each leaves the choice unclear (the watcher's wake-up in a span, on a
    # loaded machine: harness.DECIDE_MARGIN), it waits for a second each: an iteration later.
    assert first <= window["first_execution"] <= first + 1 and window["executions"] == 5, window
    events = _events(tmp_path / "c")
    jit = next(r for r in events if r["kind"] == "jit_functions")
    assert jit["step"] == function and len(jit["starts"]) == 14
    compiled = {r["module"] for r in events if r["kind"] == "module_compiled"}
    # The module XLA compiled for the step (jax 0.10.2 compiles jax.pmap(f) as jit__fun).
    assert jit["module"] in compiled
    helper = next(f for f in jit["functions"] if f["function"] == "jit(next_batch)")
    assert helper["executions"] == 14  # as often as the step: host time decided


def test_a_script_whose_only_step_is_a_decorator_with_arguments_is_profiled(tmp_path):
    # Before issue 22: "no jax.jit function executed more than 2 time(s)", exit 1.
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json", str(FORMS), "--",
                    "--form", "decorator-args", "--only-step", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert report_of(proc)["window"]["function"] == "jit(train_step)"


def test_run_times_the_executions_of_the_step_without_markers(tmp_path):
    from helpers.pgle_testing import write_profile

    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--json", "--run-dir", "r", str(FORMS), "--",
                    "--form", "aot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    steps = report["steps"]
    assert steps["source"] == "executions" and steps["function"] == "jit(_train)"
    assert steps["step_time_source"] == "completion"
    # Each execution timed from the previous one's completion to its own (issue 33: the
    # loop's throughput), the compile's left out; its work alone is kept for the step rule.
    jit = next(r for r in _events(tmp_path / "r") if r["kind"] == "jit_functions")
    # Rows are spans: [start, work each, completion, last number, compiles, executions].
    rows = sorted(jit["work"], key=lambda r: r[3])
    assert all(len(r) == 6 for r in rows)
    # The first: the compile's execution alone, its work unknown (a row all the same: its
    # completion is where the next execution's time starts, issue 37's fast-machine fix).
    assert rows[0][3] == rows[0][5] == 1 and rows[0][1] is None
    assert all(r[1] is None or r[1] > 0 for r in rows) and any(r[1] for r in rows)
    # Left out: an interval with a backend compile in it (of another function), and one over
    # executions with no row (the watcher knew no work for their span: a compile in it, or
    # outputs freed before they could be waited on; seen on a loaded machine).
    times = [t for a, b in zip(rows, rows[1:])
             if b[2] > a[2] and b[4] == a[4] and b[3] - b[5] == a[3]
             for t in [(b[2] - a[2]) / (b[3] - a[3])] * b[5]]
    # 11 of the 12 intervals between executions 2..14 (the eval's compile takes one; 11 in each
    # of six runs side by side); 9 once in a test run beside a mutation run, the product
    # counting one fewer than this check did before it left out intervals over missing rows.
    assert report["step_times"]["count"] == len(times) >= 5
    assert report["step_times"]["median_s"] == pytest.approx(statistics.median(times), rel=1e-3)


def test_auto_does_not_pay_for_counting(tmp_path):
    """auto (and prewarm, and the Nsight run) read no step times: the harness counts nothing
    there (a few microseconds per top-level jitted call saved)."""
    proc = run_pgle("auto", "--json", "--run-dir", "a", str(FORMS), "--", "--form", "decorator",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    events = _events(tmp_path / "a")
    assert not any(r["kind"] == "jit_functions" for r in events)
    spec = json.loads((tmp_path / "a" / "spec.json").read_text())
    assert spec["count_jits"] is False


def test_the_step_is_found_while_the_device_is_still_on_the_first_steps(tmp_path):
    """A loader holds the host between a helper and a long step, and nothing syncs: at the
    helper's third call the step's work is still running. pgle waits for it before it picks,
    and profiles the step from its third call (before: the helper, by its host time, in
    every run; tests/workloads/real/loader_loop.py)."""
    proc = run_pgle("collect", "-o", "p.pb", "--allow-empty", "--json",
                    str(WORKLOADS / "real" / "loader_loop.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    window = report_of(proc)["window"]
    assert (window["function"], window["first_execution"], window["executions"]) == \
        ("jit(train_step)", 2, 5)
