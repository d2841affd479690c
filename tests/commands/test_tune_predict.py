"""`pgle tune --compare --predict` (issue 34) on CPU: the predicted column's place in the table,
the one line that says why there is none (the estimate's CUDA plugin missing), `--predict`
refused without `--compare`, and `pgle report` showing the same. The prediction itself on the
real XLA:GPU compiler: tests/xla_gpu/test_estimate.py."""

from __future__ import annotations

import os
from pathlib import Path

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


def test_predict_without_the_plugin_says_so_once_and_tune_goes_on(tmp_path):
    env = _no_plugin_env(tmp_path)
    proc = run_pgle("tune", "--compare", "default,pgle,o1+pgle", "--predict", "--repeat", "1",
                    "--json", "--run-dir", "t", ARM_ECHO, cwd=tmp_path, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    table = report_of(proc)["compare"]
    pred = table["predicted"]
    assert pred["why"] == "needs pip install 'pgle[estimate]'" and pred["line"] == HINT
    assert [r["predicted_ratio"] for r in table["arms"]] == [None, None, None]
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
