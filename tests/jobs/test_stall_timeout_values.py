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
