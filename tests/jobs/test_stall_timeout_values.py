"""`--stall-timeout` refuses a negative duration with one line and exit 2, before anything runs
(issue 37's independent mutants: `-5` was taken as a bound already passed)."""

from __future__ import annotations

from helpers.pgle_testing import pgle_lines, run_pgle, write_profile


def test_a_negative_stall_timeout_is_refused_before_the_launch(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = project / "w.py"
    script.write_text("open('ran', 'w').close()\n")
    for value in ("-5", "-0.5"):
        proc = run_pgle("run", f"--stall-timeout={value}", "--profile", "p.pb", str(script),
                        cwd=project)
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert "Traceback" not in err
        assert any("--stall-timeout" in line and "a duration >= 0" in line
                   for line in pgle_lines(proc)), err
    assert not (project / "ran").exists()


def test_report_mode_reports_and_never_stops():
    """`--stall-timeout report:DURATION` (docs/reliability.md): write the stacks and say so after
    that long, never stop the workload, not even one whose step rhythm stopped."""
    from pgle.jobs.layout import parse_stall_timeout

    for text in ("report:30m", "report"):
        policy = parse_stall_timeout(text)
        assert policy.stop_after_s is None and policy.report_after_s > 0, text
        assert not policy.rhythm_stop, text
        assert policy.describe().endswith("; never stop"), policy.describe()
    assert parse_stall_timeout("report:30m").report_after_s == 1800
    # The default (auto) is the one that stops a stopped rhythm.
    assert parse_stall_timeout("auto") is None
