"""`pgle tune --compare`'s table reads the right way round (issue 37: the arm ratios inverted
survived every test): each arm's ratio is its median step over `default`'s, so a faster arm
is below 1 in the JSON, in the terminal table and in its interval. Real events files as the
harness writes them, read by the compare table's own code (the ratio needs a GPU run: on CPU
the table prints none, tests/commands/test_tune_predict.py)."""

from __future__ import annotations

import json

from pgle.commands import compare
from pgle.commands.arms import Arm
from pgle.commands.tune import ArmRuns


def _folder(root, name, step_s, steps=12):
    d = root / name
    d.mkdir()
    lines, t = [], 1000.0
    for i in range(steps):
        lines.append(json.dumps({"kind": "step_enter", "t": t, "name": "train", "index": i}))
        t += step_s
    (d / "events.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_a_faster_arm_is_below_one_and_a_slower_one_above(tmp_path):
    runs = [
        ArmRuns(Arm("default"), [_folder(tmp_path, "arm-default", 0.4)]),
        ArmRuns(Arm("o1", o1=True), [_folder(tmp_path, "arm-o1", 0.1)]),  # 4x faster
        ArmRuns(Arm("sol", sol=True), [_folder(tmp_path, "arm-sol", 0.8)]),  # 2x slower
    ]
    t = compare.table(runs, platform="cuda")
    rows = {r["arm"]: r for r in t["arms"]}
    assert rows["default"]["ratio"] == 1.0
    assert abs(rows["o1"]["ratio"] - 0.25) < 1e-9 and abs(rows["sol"]["ratio"] - 2.0) < 1e-9
    assert rows["o1"]["interval"]["high"] < 1.0 < rows["sol"]["interval"]["low"]
    assert rows["o1"]["interval"]["beyond_noise"] and rows["sol"]["interval"]["beyond_noise"]
    lines = compare.table_lines(t)
    (o1,) = [ln for ln in lines if ln.startswith("o1 ")]
    (sol,) = [ln for ln in lines if ln.startswith("sol ")]
    assert "100.00 ms" in o1 and "0.250 (0.250..0.250)" in o1
    assert "800.00 ms" in sol and "2.000 (2.000..2.000)" in sol
    (default,) = [ln for ln in lines if ln.startswith("default ")]
    assert "400.00 ms" in default and "1 (baseline)" in default


def test_every_repeat_of_an_arm_is_pooled(tmp_path):
    # `--repeat 2`: each arm's ratio and step time pool both runs (10 step times each).
    runs = [
        ArmRuns(Arm("default"), [_folder(tmp_path, "arm-default", 0.4),
                                 _folder(tmp_path, "arm-default-2", 0.4)]),
        ArmRuns(Arm("o1", o1=True), [_folder(tmp_path, "arm-o1", 0.1),
                                     _folder(tmp_path, "arm-o1-2", 0.3)]),
    ]
    rows = {r["arm"]: r for r in compare.table(runs, platform="cuda")["arms"]}
    assert rows["o1"]["step_time"]["count"] == rows["default"]["step_time"]["count"] == 20
    assert abs(rows["o1"]["ratio"] - 0.5) < 1e-9  # median 0.2 s over 0.4 s


def test_a_ratio_says_when_its_arms_profile_was_not_applied(tmp_path):
    """An arm whose profile XLA did not apply measures its other flags only, and its ratio says
    so; a partially applied profile still shapes the schedule: its ratio stands unqualified."""
    from pgle.report import Report

    runs = [
        ArmRuns(Arm("default"), [_folder(tmp_path, "arm-default", 0.4)]),
        ArmRuns(Arm("pgle", pgle=True), [_folder(tmp_path, "arm-pgle", 0.3)],
                [Report("run", "partial")]),
        ArmRuns(Arm("o1+pgle", o1=True, pgle=True), [_folder(tmp_path, "arm-o1-pgle", 0.2)],
                [Report("run", "not_applied")]),
    ]
    rows = {r["arm"]: r for r in compare.table(runs, platform="cuda")["arms"]}
    assert rows["pgle"]["status"] == "partial" and rows["pgle"]["why_no_ratio"] is None
    assert abs(rows["pgle"]["ratio"] - 0.75) < 1e-9
    assert abs(rows["o1+pgle"]["ratio"] - 0.5) < 1e-9
    assert "its profile was not_applied" in rows["o1+pgle"]["why_no_ratio"]


def test_off_a_gpu_the_caveat_names_what_needs_one(tmp_path):
    """On CPU the arms run but no arm has a ratio or exposed communication; the verdict needs
    a GPU only where an arm's profile was judged not_applicable."""
    from pgle.report import Report

    def table(status):
        runs = [ArmRuns(Arm("default"), [_folder(tmp_path / status, "arm-default", 0.4)]),
                ArmRuns(Arm("pgle", pgle=True), [_folder(tmp_path / status, "arm-pgle", 0.4)],
                        [Report("run", status)])]
        return compare.table(runs, platform="cpu")

    (tmp_path / "applied").mkdir()
    (tmp_path / "not_applicable").mkdir()
    t = table("applied")
    assert t["needs_gpu"] == ["step-time ratio", "exposed communication"]
    assert t["caveat"] == ("backend cpu: the arms ran, but the step-time ratio, exposed "
                           "communication need an NVIDIA GPU")
    assert table("not_applicable")["needs_gpu"] == [
        "step-time ratio", "exposed communication", "verdict"]
