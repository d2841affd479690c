"""`pgle tune --compare`'s table (pgle.commands.compare), in process, from real run folders
(events.jsonl with step markers and compile events as the harness writes them): each row's
figures, what a CPU run says instead of a ratio, a profile that was not applied, the terminal
table line by line, and the `--predict` column and line."""

from __future__ import annotations

import json

import pytest

from pgle.commands import compare
from pgle.commands.arms import Arm
from pgle.commands.tune import ArmRuns
from pgle.report import Report


def folder(root, name, step_s, steps=8, compile_s=None):
    d = root / name
    d.mkdir()
    lines = [{"kind": "step_enter", "t": 1000.0 + i * step_s, "name": "train", "index": i}
             for i in range(steps)]
    if compile_s is not None:
        lines.append({"kind": "compile", "t": 999.0, "seconds": compile_s, "fun_name": "jit_step"})
    (d / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return d


def test_on_cpu_the_arms_run_but_ratios_and_communication_need_a_gpu(tmp_path):
    runs = [ArmRuns(Arm("default"), [folder(tmp_path, "arm-default", 0.02)]),
            ArmRuns(Arm("o1", o1=True), [folder(tmp_path, "arm-o1", 0.01),
                                         folder(tmp_path, "arm-o1-2", 0.01)])]
    t = compare.table(runs, platform="cpu")
    assert (t["baseline"], t["platform"], t["gpu"], t["predicted"]) == ("default", "cpu", False, None)
    assert t["needs_gpu"] == ["step-time ratio", "exposed communication"]
    assert t["caveat"] == ("backend cpu: the arms ran, but the step-time ratio, exposed "
                           "communication need an NVIDIA GPU")
    default, o1 = t["arms"]
    assert (default["arm"], default["ratio"], default["why_no_ratio"]) == ("default", 1.0, None)
    assert (o1["arm"], o1["ratio"], o1["interval"]) == ("o1", None, None)
    assert o1["why_no_ratio"] == ("needs a GPU: backend cpu applies no profile and has no "
                                  "latency-hiding scheduler")
    assert o1["why_no_communication"].startswith("this run kept no trace")  # the run's reason first
    assert (o1["runs"], o1["folders"], o1["describe"]) == (2, ["arm-o1", "arm-o1-2"],
                                                           "JAX_OPTIMIZATION_LEVEL=O1")
    assert o1["step_time"]["count"] == 12 and o1["step_time"]["median_s"] == pytest.approx(0.01)
    assert [r["folder"] for r in o1["runs_executables"]] == ["arm-o1", "arm-o1-2"]
    assert "predicted_ratio" not in o1
    lines = compare.table_lines(t)
    assert lines[0].split() == ["arm", "verdict", "median", "step", "ratio", "vs", "default",
                                "exposed", "comm", "peak", "memory", "compile"]
    assert lines[1].startswith("default  -        20.00 ms     1 (baseline)      needs a GPU")
    assert lines[2].startswith("o1       -        10.00 ms     needs a GPU       needs a GPU")
    assert lines[3:] == [t["caveat"]]  # no per-arm reason lines off a GPU


def test_on_a_gpu_each_ratio_is_against_default_and_an_unapplied_profile_is_said(tmp_path):
    runs = [ArmRuns(Arm("default"), [folder(tmp_path, "arm-default", 0.02, compile_s=1.5)]),
            ArmRuns(Arm("pgle", pgle=True), [folder(tmp_path, "arm-pgle", 0.01)],
                    [Report("run", "not_applied")], "/p/profile.pb"),
            ArmRuns(Arm("sol", sol=True), [folder(tmp_path, "arm-sol", 0.04, steps=4)])]
    t = compare.table(runs, platform="GPU")
    assert (t["gpu"], t["needs_gpu"], t["caveat"]) == (True, [], None)
    default, pgle, sol = t["arms"]
    assert default["ratio"] == 1.0 and default["status"] is None
    assert default["compile_s"] == pytest.approx(1.5)
    assert pgle["status"] == "not_applied" and pgle["profile"] == "/p/profile.pb"
    assert pgle["ratio"] == pytest.approx(0.5)
    assert pgle["why_no_ratio"] == ("(its profile was not_applied: the ratio measures the "
                                    "arm's other flags only)")
    assert sol["ratio"] is None
    assert sol["why_no_ratio"] == ("no step-time ratio: 6 and 2 step times, fewer than 5 each; "
                                   "run more steps or --repeat more")
    lines = compare.table_lines(t)
    assert lines[-2:] == [f"pgle: {pgle['why_no_ratio']}", f"sol: {sol['why_no_ratio']}"]
    (pl,) = [ln for ln in lines if ln.startswith("pgle ")]
    assert pl.split()[:5] == ["pgle", "not_applied", "10.00", "ms", "0.500"]
    (dl,) = [ln for ln in lines if ln.startswith("default ")]
    assert "1.50 s" in dl
    (sl,) = [ln for ln in lines if ln.startswith("sol ")]
    assert sl.split()[4] == "-"  # no ratio on a GPU: a dash, not "needs a GPU"


def test_an_applied_or_partial_profile_adds_no_reason(tmp_path):
    for status in ("applied", "partial"):
        d = tmp_path / status
        d.mkdir()
        runs = [ArmRuns(Arm("default"), [folder(d, "a", 0.02)]),
                ArmRuns(Arm("pgle", pgle=True), [folder(d, "b", 0.01)], [Report("run", status)])]
        pgle = compare.table(runs, platform="cuda")["arms"][1]
        assert (pgle["status"], pgle["why_no_ratio"]) == (status, None)


def test_a_not_applicable_verdict_is_named_among_what_needs_a_gpu(tmp_path):
    runs = [ArmRuns(Arm("default"), [folder(tmp_path, "a", 0.02)]),
            ArmRuns(Arm("pgle", pgle=True), [folder(tmp_path, "b", 0.01)],
                    [Report("run", "not_applicable")])]
    t = compare.table(runs, platform="cpu")
    assert t["needs_gpu"] == ["step-time ratio", "exposed communication", "verdict"]
    assert t["caveat"] == ("backend cpu: the arms ran, but the step-time ratio, exposed "
                           "communication, verdict need an NVIDIA GPU")


def test_a_default_arm_without_step_times_has_no_ratio(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "events.jsonl").write_text("")
    runs = [ArmRuns(Arm("default"), [empty]), ArmRuns(Arm("o1", o1=True), [])]
    t = compare.table(runs, platform="cuda")
    default, o1 = t["arms"]
    assert default["ratio"] is None and default["step_time"] is None
    assert o1["runs"] == 0 and o1["communication"] is None and o1["runs_executables"] == []
    assert o1["why_no_ratio"].startswith("no step-time ratio: 0 and 0 step times")
    assert o1["why_no_communication"] is None
    cpu = compare.table(runs, platform="cpu")["arms"][1]
    assert cpu["why_no_communication"] == "needs a GPU"  # no run of its own to say more


PRED = {"ratios": {"default": 1.0, "o1": 0.8123, "sol": None}, "why": None, "target": "H100",
        "devices": 8, "costs": "the collected profile's costs", "run_dir": "/r/est",
        "seconds": 41.6, "cannot_help": None}


def test_the_predicted_column_and_line(tmp_path):
    runs = [ArmRuns(Arm("default"), [folder(tmp_path, "a", 0.02)]),
            ArmRuns(Arm("o1", o1=True), [folder(tmp_path, "b", 0.01)]),
            ArmRuns(Arm("sol", sol=True), [folder(tmp_path, "c", 0.01)])]
    t = compare.table(runs, platform="cpu", predicted=PRED)
    line = ("predicted: pgle estimate, XLA:GPU's scheduler for 8 x H100 (no GPU), every arm's "
            "schedule replayed with the collected profile's costs (42 s; /r/est)")
    assert t["predicted"] == {**PRED, "line": line}
    assert "line" not in PRED  # the caller's dict is not changed
    assert [r["predicted_ratio"] for r in t["arms"]] == [1.0, 0.8123, None]
    lines = compare.table_lines(t)
    assert lines[0].split()[:8] == ["arm", "verdict", "median", "step", "ratio", "vs", "default",
                                    "predicted"]
    assert lines[2].split()[:6] == ["o1", "-", "10.00", "ms", "needs", "a"]
    assert "0.812" in lines[2] and lines[3].split()[7] == "-"
    assert lines[-2:] == [line, t["caveat"]]
    assert compare.predicted_vs_measured(t) == [
        "predicted ratio vs default: o1 0.812 (measured -), sol - (measured -)", line]


def test_predicted_line_variants_and_no_column_when_there_is_no_prediction(tmp_path):
    assert compare.predicted_text(None) == "-"
    assert compare.predicted_text(1.23456) == "1.235"
    assert compare.predicted_line({"why": "needs the CUDA plugin"}) == "predicted: needs the CUDA plugin"
    helpless = {**PRED, "cannot_help": "no collectives to overlap"}
    assert compare.predicted_line(helpless).endswith("(42 s; /r/est); no collectives to overlap")
    assert compare.predicted_vs_measured({"predicted": None, "arms": []}) == []
    why = {"ratios": {}, "why": "not in a multi-process job"}
    runs = [ArmRuns(Arm("default"), [folder(tmp_path, "a", 0.02)])]
    t = compare.table(runs, platform="cuda", predicted=why)
    lines = compare.table_lines(t)
    assert "predicted" not in lines[0]  # no column: there is no prediction
    assert lines[-1] == "predicted: not in a multi-process job"
    assert compare.predicted_vs_measured(t) == ["predicted: not in a multi-process job"]
    # a table read back from an older tune.json, without the line
    old = {"predicted": dict(PRED), "baseline": "default",
           "arms": [{"arm": "default", "predicted_ratio": 1.0, "ratio": 1.0},
                    {"arm": "o1", "predicted_ratio": 0.5, "ratio": 0.61}]}
    assert compare.predicted_vs_measured(old) == [
        "predicted ratio vs default: o1 0.500 (measured 0.610)", compare.predicted_line(PRED)]


def test_mib_and_ms_cells():
    assert compare._mib(None) == "-"
    assert compare._mib(3 * 1024 * 1024) == "3.0 MiB"
    assert compare._ms(None) == "-"
    assert compare._ms({"median_s": 0.0123}) == "12.30 ms"


def test_predict_in_a_job_says_why_without_running_anything(tmp_path):
    plan = (Arm("default"), Arm("o1", o1=True), Arm("o1+pgle", o1=True, pgle=True))
    out = compare.predict(plan, workload=None, profile=None, device_kind=None, device_count=4,
                          run_dir=tmp_path / "est", in_job=True)
    assert out == {"ratios": {"default": None, "o1": None, "o1+pgle": None},
                   "why": "not in a multi-process job (pgle estimate runs the script in one "
                          "process)",
                   "target": None, "devices": 4, "costs": None, "run_dir": None, "seconds": None,
                   "cannot_help": None}
    assert list(tmp_path.iterdir()) == []


def row(arm, **over):
    r = {"arm": arm, "status": None, "step_time": None, "interval": None, "ratio": None,
         "why_no_ratio": None, "communication": None, "peak_bytes": None, "compile_s": None,
         "runs_executables": []}
    r.update(over)
    return r


def test_the_terminal_table_cell_by_cell():
    """A table as tune.json keeps it (what `pgle report` reads back): every cell's format."""
    t = {"baseline": "default", "gpu": True, "caveat": None, "predicted": None,
         "steps": {"source": "executions", "how": "the 12 executions of jit_step"},
         "arms": [
             row("default", step_time={"median_s": 0.1}, compile_s=12.345, peak_bytes=3 << 30,
                 communication={"exposed_ms_per_device": 1.23456},
                 runs_executables=[{"executables": "compiled"}, {"executables": "cached"}]),
             row("o1+pgle", status="applied", step_time={"median_s": 0.05},
                 interval={"ratio": 0.5, "low": 0.49, "high": 0.5123}, compile_s=0.0,
                 runs_executables=[{"executables": None}]),
             row("sol", why_no_ratio="no step-time ratio: 2 and 2 step times, fewer than 5 each"),
         ]}
    assert compare.table_lines(t) == [
        "steps: the 12 executions of jit_step",
        "arm      verdict  median step  ratio vs default      exposed comm  peak memory  compile",
        "default  -        100.00 ms    1 (baseline)          1.235 ms      3.0 GiB      12.35 s (cached/compiled)",
        "o1+pgle  applied  50.00 ms     0.500 (0.490..0.512)  -             -            0.00 s",
        "sol      -        -            -                     -             -            -",
        "sol: no step-time ratio: 2 and 2 step times, fewer than 5 each",
    ]


def test_the_terminal_table_off_a_gpu_with_a_prediction():
    pred = {**PRED, "line": "predicted: from somewhere"}
    t = {"baseline": "default", "gpu": False, "caveat": "backend cpu: the arms ran",
         "predicted": pred, "steps": {"source": "markers", "how": "marked"},
         "arms": [row("default", predicted_ratio=1.0, step_time={"median_s": 0.002}),
                  row("o1", predicted_ratio=0.8123, why_no_ratio="needs a GPU: x")]}
    assert compare.table_lines(t) == [
        "arm      verdict  median step  ratio vs default  predicted  exposed comm  peak memory  compile",
        "default  -        2.00 ms      1 (baseline)      1.000      needs a GPU   -            -",
        "o1       -        -            needs a GPU       0.812      needs a GPU   -            -",
        "predicted: from somewhere",
        "backend cpu: the arms ran",
    ]
    del pred["line"]  # a table from before the line was kept: made from the prediction
    assert compare.table_lines(t)[-2] == compare.predicted_line(PRED)
