"""What `pgle tune` says PGLE is worth (issue 22), end to end on CPU: bad arms refused before
anything runs, and `pgle run --trace-window`.

Elsewhere, each in one run shared with another file's checks (a tune costs several workload
runs): honest arms (the user's own flags; only collect changes them) and the one table of
`--compare`, in tests/commands/test_tune_predict.py; a CPU tune's report that tells the truth
first with the same numbers as the terminal and the JSON, in tests/analysis/test_report.py.
The arms' flags reaching the real XLA:GPU compiler (and changing its schedule) is proven in
tests/xla_gpu/test_compare_arms.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle

ARM_ECHO = str(WORKLOADS / "arm_echo.py")


@pytest.mark.parametrize("arms,words", [
    ("default,fast", "unknown arm 'fast'"),
    ("o1,pgle,o1", "arm 'o1' is listed twice"),
    ("pgle+o1,o1+pgle", "arm 'o1+pgle' is listed twice"),
    (",", "needs arms"),
])
def test_bad_arms_are_refused_before_anything_runs(tmp_path, arms, words):
    proc = run_pgle("tune", "--compare", arms, "--run-dir", "t", ARM_ECHO, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


def test_run_trace_window_keeps_a_trace_outside_the_timed_steps(tmp_path):
    """`pgle run --trace-window`: the after-picture without tune; its steps are not timed."""
    from helpers.pgle_testing import write_profile

    write_profile(tmp_path / "p.pb", {"fusion.1": 1.0})
    proc = run_pgle("run", "--profile", "p.pb", "--trace-window", "--json", "--run-dir", "r",
                    ARM_ECHO, cwd=tmp_path, env=pgle_env(ARM_STEPS="14"))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    assert report["trace_dir"] and list(Path(report["trace_dir"]).rglob("*.xplane.pb"))
    # 14 executions, each timed from the previous one's completion to its own (issue 33):
    # left out, the compile, the next one (the indexing's compile in its interval), and the
    # intervals that touch the trace: its 5 executions and the one after it (its stop) unless
    # the trace's last completion was noted after the stop. No span of held executions
    # crosses the trace's edges, so this holds however fast the machine is (a machine 10x
    # faster than this one left no step timed: one span held the trace and every step after).
    count = report["step_times"]["count"]
    assert report["steps"]["source"] == "executions" and count in (6, 7)
    assert report["steps"]["excluded"] == 14 - count
    assert any("keeping a trace of" in ln for ln in pgle_lines(proc))
