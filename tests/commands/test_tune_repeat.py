"""`repeat`, runs of each phase of `pgle tune`: at least 1, through the CLI (exit 2, one line)
and through `pgle.api.tune` (BadInput) alike, before anything runs (issue 37's independent
mutants: the API took 0 and ran nothing, with a verdict)."""

from __future__ import annotations

import pytest

import pgle.api
from helpers.pgle_testing import pgle_lines, run_pgle
from pgle.errors import BadInput


def test_repeat_zero_is_refused_everywhere(tmp_path, monkeypatch):
    script = tmp_path / "w.py"
    script.write_text("open('ran', 'w').close()\n")
    proc = run_pgle("tune", "--repeat", "0", str(script), cwd=tmp_path)
    assert proc.returncode == 2 and "--repeat" in proc.stderr.decode(), proc.stderr.decode()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match=r"repeat 0: at least 1 run per phase"):
        pgle.api.tune(str(script), repeat=0, environ={"JAX_PLATFORMS": "cpu"})
    assert not (tmp_path / "ran").exists()
    assert pgle_lines(proc)
