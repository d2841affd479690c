"""What `pgle tune` says PGLE is worth (issue 22), end to end on CPU: honest arms (the user's
own flags; only collect changes them), `--compare default,o1,pgle,o1+pgle`, and a report that
tells the truth first with the same numbers as the terminal and the JSON.

The arms' flags reaching the real XLA:GPU compiler (and changing its schedule) is proven in
tests/xla_gpu/test_compare_arms.py."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from helpers.pgle_testing import EXAMPLES, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle

ARM_ECHO = str(WORKLOADS / "arm_echo.py")
STATUSES = ("not_applicable", "not_applied", "applied", "partial", "error")


def _echo(folder: Path) -> dict:
    line = next(ln for ln in (folder / "workload.log").read_text().splitlines()
                if ln.startswith("ARM "))
    return json.loads(line[4:])


def _text(page: str) -> str:
    """The page's visible text, in order (no JSON blob, no styles)."""
    page = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    page = re.sub(r"<(style|svg)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_compare_runs_every_arm_with_its_own_settings_and_one_table(tmp_path):
    user_flags = "--xla_cpu_enable_fast_math=false"
    proc = run_pgle("tune", "--compare", "default,o1,pgle,o1+pgle", "--repeat", "1", "--json",
                    "--run-dir", "t", "--report", "r.html", ARM_ECHO, cwd=tmp_path,
                    env=pgle_env(XLA_FLAGS=user_flags, ARM_STEPS="16"), timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    top = tmp_path / "t"
    table = report["compare"]
    assert [r["arm"] for r in table["arms"]] == ["default", "o1", "pgle", "o1+pgle"]
    folders = {r["arm"]: r["folders"] for r in table["arms"]}
    assert folders == {"default": ["arm-default"], "o1": ["arm-o1"], "pgle": ["arm-pgle"],
                       "o1+pgle": ["arm-o1-pgle"]}
    # Each arm got exactly what its name says, and the user's own flags; none got collect's.
    for arm, (folder,) in folders.items():
        seen = _echo(top / folder)
        assert seen["level"] == ("O1" if "o1" in arm else "UNKNOWN"), (arm, seen)
        assert user_flags in seen["xla_flags"]
        assert "command_buffer" not in seen["xla_flags"], (arm, seen)
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
    assert [r["status"] for r in table["arms"]] == [None, None, "not_applicable", "not_applicable"]
    assert table["gpu"] is False and "need an NVIDIA GPU" in table["caveat"]
    lines = pgle_lines(proc)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("pgle: arm "))
    assert [ln.split()[1] for ln in lines[head + 1:head + 5]] == ["default", "o1", "pgle", "o1+pgle"]
    assert "needs a GPU" in lines[head + 2]
    # The HTML: the verdict first, then the same table, word for word.
    page = (tmp_path / "r.html").read_text()
    text = _text(page)
    first = min((text.find(s), s) for s in STATUSES if s in text)[1]
    assert first == "not_applicable"
    assert 'id="compare"' in page and "PGLE, O1/SoL, or nothing?" in page
    for line in lines[head:head + 5]:
        assert line.removeprefix("pgle: ") in html.unescape(page)
    tune = json.loads((top / "tune.json").read_text())
    assert tune["compare"]["arms"] == table["arms"]


def test_compare_sol_arm_sets_the_estimator_flag_over_the_users(tmp_path):
    flag = "--xla_gpu_enable_analytical_sol_latency_estimator"
    proc = run_pgle("tune", "--compare", "sol", "--repeat", "1", "--json", "--run-dir", "t",
                    ARM_ECHO, cwd=tmp_path, env=pgle_env(XLA_FLAGS=f"{flag}=false"), timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    arms = report_of(proc)["compare"]["arms"]
    assert [r["arm"] for r in arms] == ["default", "sol"]  # default added: ratios need it
    assert f"{flag}=false" in _echo(tmp_path / "t" / "arm-default")["xla_flags"]
    assert f"{flag}=true" in _echo(tmp_path / "t" / "arm-sol")["xla_flags"]
    assert any(f"replacing your {flag}=false" in ln for ln in pgle_lines(proc))


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


def test_cpu_tune_report_tells_the_truth_first_with_the_terminals_numbers(tmp_path):
    """Issue 22 item 5: the HTML of a CPU tune says not_applicable first, never labels the run
    "with profile", gives no ratio where the terminal said none, and shows the terminal's
    numbers; `pgle report` on the folder afterwards says the same."""
    proc = run_pgle("tune", "--json", "--run-dir", "t", "--report", "r.html",
                    str(EXAMPLES / "train.py"), "--", "--steps", "12", cwd=tmp_path,
                    timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = report_of(proc)
    times = report["step_times"]
    assert report["status"] == "not_applicable" and times["ratio"] is None
    page = (tmp_path / "r.html").read_text()
    text = _text(page)
    first = min((text.find(s), s) for s in STATUSES if s in text)[1]
    assert first == "not_applicable"
    assert text.index("not_applicable") < text.index("Step time")
    assert "with profile" not in text and "ratio (" not in text
    analysis = report["analysis"]
    assert analysis["verdict"]["status"] == "not_applicable"
    assert list(analysis)[0] == "verdict"
    # The terminal's step lines, the JSON's numbers and the page agree.
    lines = [ln.removeprefix("pgle: ") for ln in pgle_lines(proc)]
    median = next(ln for ln in lines if ln.startswith("median step: "))
    assert f"{times['run']['median_s'] * 1e3:.2f} ms (run)" in median
    assert f"{times['collect']['median_s'] * 1e3:.2f} ms (collect" in median
    assert median in html.unescape(page) and times["caveat"] in html.unescape(page)
    run_phase = next(p for p in analysis["phases"] if p["role"] == "run")
    assert run_phase["step_time"]["median_s"] == pytest.approx(times["run"]["median_s"])
    assert f"{run_phase['step_time']['median_s'] * 1e3:.3f} ms" in page
    # `pgle report` on the tune folder: the same verdict first, the same numbers.
    again = run_pgle("report", "t", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr.decode()
    rep = report_of(again)
    assert rep["status"] == "not_applicable" and rep["analysis"]["step_ratio"] is None
    assert pgle_lines(again)[0].startswith("pgle: verdict: not_applicable")
    assert rep["analysis"]["tune_lines"] == [ln for ln in lines if ln in rep["analysis"]["tune_lines"]]
    assert median in rep["analysis"]["tune_lines"]


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
    # left out, the compile, the next one (no completion before it to start from), and the
    # intervals that touch the trace: its 5 executions and the one after it (its stop), and
    # the one before when that completed after the trace started.
    count = report["step_times"]["count"]
    assert report["steps"]["source"] == "executions" and count in (5, 6)
    assert report["steps"]["excluded"] == 14 - count
    assert any("keeping a trace of" in ln for ln in pgle_lines(proc))
