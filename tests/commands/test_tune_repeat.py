"""`repeat`, runs of each phase of `pgle tune`: at least 1, through the CLI (exit 2, one line)
and through `pgle.api.tune` (BadInput) alike, before anything runs (issue 37's independent
mutants: the API took 0 and ran nothing, with a verdict)."""

from __future__ import annotations

import pytest

import pgle.api
from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle
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


def test_predict_needs_compare_and_is_taken_with_it(tmp_path, monkeypatch):
    """`--predict` predicts each compared arm's ratio: refused without `--compare` (one line,
    before anything runs), accepted with it."""
    from pgle.commands.arms import parse_arms
    from pgle.commands.options import CollectOptions
    from pgle.commands.tune import TuneOptions
    from pgle.launch.workload import Workload

    script = tmp_path / "w.py"
    script.write_text("open('ran', 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match=r"predict=True needs compare"):
        pgle.api.tune(str(script), predict=True, environ={"JAX_PLATFORMS": "cpu"})
    assert not (tmp_path / "ran").exists()
    copts = CollectOptions(Workload(str(script), None, ()), None)
    arms = tuple(parse_arms("default,pgle", None))
    assert TuneOptions(copts, compare=arms, predict=True).predict


def test_only_the_first_run_of_each_arm_is_traced(tmp_path):
    """tune traces the first run of each arm (the report's timelines); the later runs, whose
    step times the ratio pools, run without the profiler, so no step of theirs is left out.
    The verdict is the first pgle arm's."""
    env = pgle_env(ARM_STEPS="8")
    proc = run_pgle("tune", "--compare", "pgle", "--repeat", "2", "--json", "--run-dir", "t",
                    str(WORKLOADS / "arm_echo.py"), cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    top = tmp_path / "t"
    runs = sorted(p.name for p in top.iterdir() if p.is_dir())
    assert runs == ["arm-default", "arm-default-2", "arm-pgle", "arm-pgle-2", "collect"]
    assert sorted(r for r in runs if (top / r / "trace").exists()) == [
        "arm-default", "arm-pgle", "collect"]
    rows = {r["arm"]: r for r in report_of(proc)["compare"]["arms"]}
    assert rows["default"]["folders"] == ["arm-default", "arm-default-2"]
    # The verdict (and the log it judged) is the first pgle arm's run, not default's: default
    # runs without a profile, so its log could never show one applied.
    report = report_of(proc)
    assert "/t/arm-pgle/" in report["log_path"], report["log_path"]
    assert "/t/arm-pgle/" in report["phases"]["run"]["log_path"]
