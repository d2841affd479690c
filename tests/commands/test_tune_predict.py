"""`pgle tune --compare --predict` (issue 34) on CPU: the predicted column's place in the table,
the one line that says why there is none (the estimate's CUDA plugin missing), `--predict`
refused without `--compare`, and `pgle report` showing the same; in the same run (a tune
--compare costs a workload run per arm), what `tune --compare` runs and shows (issue 22). The
prediction itself on the real XLA:GPU compiler: tests/xla_gpu/test_estimate.py."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle
from pgle.commands.compare import predicted_line, predicted_vs_measured, table_lines

ARM_ECHO = str(WORKLOADS / "arm_echo.py")
REPO = Path(__file__).resolve().parents[2]
HINT = "predicted: needs pip install 'pgle[estimate]'"


def _no_plugin_env(tmp_path: Path) -> dict[str, str]:
    # A regular `jax_plugins` package first on the path hides any installed CUDA plugin.
    shadow = tmp_path / "shadow"
    (shadow / "jax_plugins").mkdir(parents=True)
    (shadow / "jax_plugins" / "__init__.py").write_text("")
    env = pgle_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shadow), str(REPO),
                                                     env.get("PYTHONPATH")) if p)
    return env


def _echo(folder: Path) -> dict:
    line = next(ln for ln in (folder / "workload.log").read_text().splitlines()
                if ln.startswith("ARM "))
    return json.loads(line[4:])


def _text(page: str) -> str:
    """The page's visible text, in order (no JSON blob, no styles)."""
    page = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    page = re.sub(r"<(style|svg)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


STATUSES = ("not_applicable", "not_applied", "applied", "partial", "error")
SOL = "--xla_gpu_enable_analytical_sol_latency_estimator"
USER_FLAGS = "--xla_cpu_enable_fast_math=false"


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """One `tune --compare --predict` of every arm (each arm is a workload run), read by the
    tests below: `default` left out of the list (tune adds it first), the user's own flags
    with the sol estimator's turned off, no CUDA plugin for the prediction."""
    tmp_path = tmp_path_factory.mktemp("compare")
    env = _no_plugin_env(tmp_path)
    env.update(XLA_FLAGS=f"{USER_FLAGS} {SOL}=false", ARM_STEPS="16")
    proc = run_pgle("tune", "--compare", "o1,sol,pgle,o1+pgle", "--predict", "--repeat", "1",
                    "--json", "--run-dir", "t", "--report", "r.html", ARM_ECHO, cwd=tmp_path,
                    env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return tmp_path, env, proc


def test_compare_runs_every_arm_with_its_own_settings_and_one_table(compared):
    """Issue 22: honest arms (the user's own flags; only collect changes them), one table in
    the terminal, the JSON and the report, the verdict first."""
    tmp_path, _env, proc = compared
    report = report_of(proc)
    top = tmp_path / "t"
    table = report["compare"]
    assert [r["arm"] for r in table["arms"]] == ["default", "o1", "sol", "pgle", "o1+pgle"]
    folders = {r["arm"]: r["folders"] for r in table["arms"]}
    assert folders == {"default": ["arm-default"], "o1": ["arm-o1"], "sol": ["arm-sol"],
                       "pgle": ["arm-pgle"], "o1+pgle": ["arm-o1-pgle"]}
    # Each arm got exactly what its name says, and the user's own flags; none got collect's.
    for arm, (folder,) in folders.items():
        seen = _echo(top / folder)
        assert seen["level"] == ("O1" if "o1" in arm else "UNKNOWN"), (arm, seen)
        assert USER_FLAGS in seen["xla_flags"]
        assert "command_buffer" not in seen["xla_flags"], (arm, seen)
        # The sol arm sets the estimator flag over the user's; the others keep the user's.
        want = f"{SOL}=true" if arm == "sol" else f"{SOL}=false"
        assert want in seen["xla_flags"], (arm, seen)
    assert f"{SOL}=false" not in _echo(top / "arm-sol")["xla_flags"]
    assert any(f"replacing your {SOL}=false" in ln for ln in pgle_lines(proc))
    assert "--xla_gpu_enable_command_buffer=''" in _echo(top / "collect")["xla_flags"]
    assert report["collect_changed"][1].startswith("--xla_gpu_enable_command_buffer=''")
    # One row per arm: measured step times (no markers: the executions of the step), and on
    # CPU no ratio, no exposed communication: the table says they need a GPU.
    assert table["steps"]["source"] == "executions" and table["steps"]["function"] == "jit(train_step)"
    for row in table["arms"]:
        assert row["step_time"]["count"] >= 5 and row["compile_s"] > 0
        assert row["step_module"] == "jit_train_step" and row["peak_bytes"] > 0
        assert row["communication"] is None
        if row["arm"] != "default":
            assert row["ratio"] is None and row["why_no_ratio"].startswith("needs a GPU")
    assert [r["status"] for r in table["arms"]] == [None, None, None, "not_applicable",
                                                    "not_applicable"]
    assert table["gpu"] is False and "need an NVIDIA GPU" in table["caveat"]
    lines = pgle_lines(proc)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("pgle: arm "))
    assert [ln.split()[1] for ln in lines[head + 1:head + 6]] == ["default", "o1", "sol", "pgle",
                                                                  "o1+pgle"]
    assert "needs a GPU" in lines[head + 2]
    # The HTML: the verdict first, then the same table, word for word.
    page = (tmp_path / "r.html").read_text()
    text = _text(page)
    first = min((text.find(s), s) for s in STATUSES if s in text)[1]
    assert first == "not_applicable"
    assert 'id="compare"' in page and "PGLE, O1/SoL, or nothing?" in page
    for line in lines[head:head + 6]:
        assert line.removeprefix("pgle: ") in html.unescape(page)
    tune = json.loads((top / "tune.json").read_text())
    assert tune["compare"]["arms"] == table["arms"]


def test_predict_without_the_plugin_says_so_once_and_tune_goes_on(compared):
    tmp_path, env, proc = compared
    table = report_of(proc)["compare"]
    pred = table["predicted"]
    assert pred["why"] == "needs pip install 'pgle[estimate]'" and pred["line"] == HINT
    assert [r["predicted_ratio"] for r in table["arms"]] == [None] * 5
    assert not (tmp_path / "t" / "predict").exists()  # nothing ran for it
    lines = [ln.removeprefix("pgle: ") for ln in pgle_lines(proc)]
    head = next(ln for ln in lines if ln.startswith("arm "))
    assert "predicted" not in head  # no column of dashes: one line says why
    assert lines.count(HINT) == 2  # when tune predicts (the log), and under the table
    # pgle report of the tune folder shows the same line under the same table.
    rep = run_pgle("report", "t", cwd=tmp_path, env=env, timeout=300)
    assert rep.returncode == 0, rep.stderr.decode()[-2000:]
    assert HINT in rep.stdout.decode() + rep.stderr.decode()


def test_predict_needs_compare(tmp_path):
    proc = run_pgle("tune", "--predict", ARM_ECHO, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "--predict needs --compare" in err and "Traceback" not in err
    assert not (tmp_path / ".pgle").exists()  # refused before anything ran


def _table(pred):
    row = {"status": None, "step_time": None, "interval": None, "why_no_ratio": None,
           "communication": None, "peak_bytes": None, "compile_s": None}
    arms = [{**row, "arm": a, "predicted_ratio": (pred or {}).get("ratios", {}).get(a)}
            for a in ("default", "pgle", "o1+pgle")]
    return {"baseline": "default", "gpu": True, "steps": None, "arms": arms, "caveat": None,
            "predicted": pred}


def test_the_predicted_column_beside_the_measured_ratio():
    pred = {"ratios": {"default": 1.0, "pgle": 0.627, "o1+pgle": None}, "why": None,
            "target": "h100", "devices": 8, "costs": "the collected profile's costs",
            "run_dir": "/r/predict", "seconds": 41.0, "cannot_help": None}
    lines = table_lines(_table(pred))
    head = lines[0].split()
    assert head[head.index("ratio") + 3] == "predicted"
    cells = {ln.split()[0]: ln.split() for ln in lines[1:4]}
    assert "0.627" in cells["pgle"] and "1.000" in cells["default"]
    assert cells["o1+pgle"].count("-") >= 1  # estimate compiles no o1+pgle arm
    assert lines[-1] == predicted_line(pred)
    # pgle report's lines: predicted beside measured per arm, then the same source line.
    t = _table(pred)
    t["arms"][1]["ratio"] = 0.95
    assert predicted_vs_measured(t) == [
        "predicted ratio vs default: pgle 0.627 (measured 0.950), o1+pgle - (measured -)",
        predicted_line(pred)]
    assert "8 x h100" in lines[-1] and "the collected profile" in lines[-1] and "41 s" in lines[-1]
    # Without --predict the table is as before: no column, no line.
    plain = table_lines(_table(None))
    assert "predicted" not in plain[0] and not any(ln.startswith("predicted") for ln in plain)
