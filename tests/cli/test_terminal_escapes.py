"""Text from foreign data (a profile's names, a store entry, a log line) never reaches the
terminal raw (issue 20): control characters and bidi overrides are printed as escapes by the
one renderer, cli/output.py, for stdout products and for pgle's own lines alike."""

from __future__ import annotations

from helpers.pgle_testing import run_pgle

from pgle.profiles.files import Profile, write_profile

# Retitles the window, clears the screen, rings the bell, reverses the text that follows.
EVIL = "fusion.1\x1b]0;owned\x07\x1b[2J\u202e"


def raw_controls(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0
            or 0x202a <= ord(c) <= 0x202e]


def test_inspect_shows_escapes_not_control_characters(tmp_path):
    write_profile(Profile([(EVIL, 5.0), ("fusion.2", 1.0)]), tmp_path / "p.pbtxt")
    proc = run_pgle("inspect", "p.pbtxt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert raw_controls(proc.stdout + proc.stderr) == []
    assert "fusion.1\\x1b]0;owned\\x07\\x1b[2J\\u202e" in proc.stdout.decode()


def test_verify_shows_a_log_lines_escapes(tmp_path):
    line = ("I0822 12:34:56.789012  1 gpu_hlo_schedule.cc:538] Found profile for module "
            f"jit_{EVIL}, using profile guided latency estimator")
    (tmp_path / "run.log").write_text(line + "\n")
    proc = run_pgle("verify", "run.log", cwd=tmp_path)
    assert raw_controls(proc.stdout + proc.stderr) == [], proc.stderr
    assert "\\x1b]0;owned" in proc.stderr.decode()
