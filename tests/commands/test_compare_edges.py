"""Edges of `pgle tune`'s comparison, in process from real run folders (events.jsonl as the
harness writes it): which phase's steps describe how steps were found, runs without step
times, arms without runs or without a default, an empty arm between commas, a trace without
a device timeline, what `pgle report` shows from a kept table, the calibration records of a
store key missing fields, and tune.json holding a value JSON has no type for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.gpu_trace import GpuShape, write_gpu_trace
from pgle.commands import arms, compare, tune
from pgle.commands.arms import Arm
from pgle.commands.options import CollectOptions
from pgle.commands.tune import ArmRuns
from pgle.launch.workload import Workload
from pgle.report import Report


def folder(path: Path, step_s: float = 0.4, steps: int = 8, name: str = "train") -> Path:
    """A run's events: `steps` marked steps `step_s` apart (none: an events file without)."""
    path.mkdir(parents=True)
    recs = [{"kind": "backend", "t": 1.0, "platform": "cuda", "device_count": 1}]
    recs += [{"kind": "step_enter", "t": 1000.0 + i * step_s, "name": name, "index": i}
             for i in range(steps)]
    (path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


# --- plain tune's step times ----------------------------------------------------------------

# The report's and tune.json's `step_times`, in order: scripts read them.
STEP_TIMES_KEYS = ["collect", "baseline", "run", "runs", "steps", "ratio", "interval", "caveat",
                   "profile_applied"]


def test_how_steps_were_found_comes_from_the_runs_then_the_baseline_then_collect(tmp_path):
    c = folder(tmp_path / "collect", steps=4)
    b = folder(tmp_path / "baseline", steps=6)
    r = folder(tmp_path / "run", steps=9)
    times = arms.compare_step_times(c, [b], [r], platform="cuda", applied=True)
    assert list(times) == STEP_TIMES_KEYS
    assert times["steps"]["count"] == 7  # the profile runs' (step 0's interval, compile, left out)
    times = arms.compare_step_times(c, [b], [], platform="cuda", applied=True)
    assert times["steps"]["count"] == 4  # no profile run: the baseline's
    assert times["caveat"].startswith("no step-time ratio: 4 and 0 step times")
    times = arms.compare_step_times(c, [], [], platform="cpu", applied=False)
    assert times["steps"]["count"] == 2 and times["runs"] == {"baseline": 0, "run": 0}


def test_a_collect_without_step_times_does_not_hide_the_runs(tmp_path):
    c = folder(tmp_path / "collect", steps=0)
    b = folder(tmp_path / "baseline", 0.4, steps=8)
    r = folder(tmp_path / "run", 0.2, steps=8)
    times = arms.compare_step_times(c, [b], [r], platform="cuda", applied=True)
    assert times["collect"] is None and times["ratio"] == pytest.approx(0.5)
    times = arms.compare_step_times(c, [b], [r], platform="cpu", applied=True)
    assert times["caveat"].startswith("no step-time ratio: backend cpu applies no profile")


def test_no_step_times_says_how_the_steps_were_looked_for(tmp_path):
    # One marked step each: markers, but no interval between two of them.
    one = [folder(tmp_path / n, steps=1) for n in ("collect", "baseline", "run")]
    times = arms.compare_step_times(one[0], [one[1]], [one[2]], platform="cuda", applied=True)
    assert times["caveat"].startswith("no step times: StepTraceAnnotation steps named 'train'")
    none = [folder(tmp_path / f"none-{n}", steps=0) for n in ("collect", "baseline", "run")]
    times = arms.compare_step_times(none[0], [none[1]], [none[2]], platform="cuda", applied=True)
    assert times["caveat"] == ("no step times: the workload marks no steps and no jitted "
                               "function executed at least 3 times")


def test_a_baseline_alone_is_shown():
    lines = arms.step_time_lines({"baseline": {"median_s": 0.4}, "caveat": "why"}, profiled=True)
    assert lines == [("median step: - (collect, profiled steps left out), 400.00 ms (baseline), "
                      "- (with the profile)"), "why"]


def test_an_empty_arm_between_commas_is_skipped_not_the_end():
    assert [a.name for a in arms.parse_arms("o1,,pgle")] == ["default", "o1", "pgle"]
    assert [a.name for a in arms.parse_arms(",sol")] == ["default", "sol"]


# --- the compare table ----------------------------------------------------------------------

def test_how_steps_were_found_is_the_first_arm_with_steps(tmp_path):
    dead = tmp_path / "arm-default"
    dead.mkdir()  # a run that left no events file (killed before the harness wrote one)
    runs = [ArmRuns(Arm("default"), [dead]),
            ArmRuns(Arm("o1", o1=True), [folder(tmp_path / "arm-o1", steps=7)]),
            ArmRuns(Arm("sol", sol=True), [folder(tmp_path / "arm-sol", steps=9)])]
    t = compare.table(runs, platform="cuda")
    assert t["steps"]["count"] == 5 and t["steps"]["source"] == "markers"
    default, o1, sol = t["arms"]
    assert default["step_time"] is None and default["ratio"] is None
    assert o1["why_no_ratio"].startswith("no step-time ratio: 0 and 5 step times")
    empty = compare.table([ArmRuns(Arm("default"), [dead])], platform="cuda")
    assert empty["steps"] is None


def test_off_a_gpu_every_arm_says_it_needs_one(tmp_path):
    runs = [ArmRuns(Arm(n, o1=n == "o1", sol=n == "sol"), [folder(tmp_path / n)])
            for n in ("default", "o1", "sol")]
    rows = compare.table(runs, platform="cpu")["arms"]
    assert [r["why_no_ratio"] for r in rows] == [None] + [
        "needs a GPU: backend cpu applies no profile and has no latency-hiding scheduler"] * 2


def test_without_a_default_arm_no_arm_has_a_ratio(tmp_path):
    # parse_arms always adds default; the table of arms given without it still says why.
    runs = [ArmRuns(Arm("o1", o1=True), [folder(tmp_path / "o1")]),
            ArmRuns(Arm("sol", sol=True), [folder(tmp_path / "sol")])]
    rows = compare.table(runs, platform="cuda")["arms"]
    assert [r["ratio"] for r in rows] == [None, None]
    assert rows[0]["why_no_ratio"].startswith("no step-time ratio: 0 and 6 step times")


def test_a_gpu_trace_without_a_device_plane_asks_about_cupti(tmp_path):
    run = folder(tmp_path / "arm-default")
    write_gpu_trace(run / "trace" / "plugins" / "profile" / "2026_11_28_12_00_00",
                    GpuShape(steps=3, devices=0, collectives=()))
    (row,) = compare.table([ArmRuns(Arm("default"), [run])], platform="cuda")["arms"]
    assert row["communication"] is None
    assert row["why_no_communication"] == (
        "the trace holds no /device:GPU plane (was CUPTI available to the profiler?)")
    (row,) = compare.table([ArmRuns(Arm("default"), [run])], platform="cpu")["arms"]
    assert row["why_no_communication"].startswith("the trace holds no device plane: XLA:CPU runs")


def test_report_shows_the_prediction_line_as_tune_kept_it():
    pred = {"ratios": {}, "why": None, "target": "h100", "devices": 8, "costs": "c",
            "run_dir": "/r", "seconds": 3.0, "cannot_help": None,
            "line": "predicted: pgle estimate, as an older pgle worded it"}
    t = {"predicted": pred, "baseline": "default",
         "arms": [{"arm": "default", "predicted_ratio": 1.0, "ratio": 1.0}]}
    assert compare.predicted_vs_measured(t)[-1] == pred["line"]


# --- what tune keeps ------------------------------------------------------------------------

def test_calibration_records_of_a_store_key_missing_fields_are_empty_not_made_up(tmp_path):
    from pgle.profiles.files import Profile
    from pgle.store.store import ProfileStore

    fp = "0123456789abcdef0123456789abcdef"
    st = ProfileStore(tmp_path / "store", create=True)
    entry, _ = st.add(fp, Profile(costs=[("fusion.1", 10.0)]), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="NVIDIA H100 80GB HBM3", device_count=8, source="test",
                      module="jit_step")
    report = Report("tune", "applied", details={"compare": {
        "predicted": {"why": None, "step_module": "jit_step"}, "steps": None,
        "arms": [{"arm": "default", "predicted_ratio": 1.0, "ratio": 1.0}]}})
    first = tune.CollectPhase.from_job({"status": "collected", "store": {
        "modules": [{"module": "jit_step", "entry": entry.entry_id, "fingerprint": fp}]}})
    tune._keep_calibration(report, first, str(tmp_path / "store"))
    (kept,) = st.calibration(entry)
    assert (kept.target, kept.device_kind, kept.device_count, kept.jax) == ("", "", 0, "")


def test_tune_json_writes_a_value_json_has_no_type_for_as_its_text(tmp_path):
    opts = tune.TuneOptions(CollectOptions(workload=Workload("/p/t.py", None, ()), output=None))
    report = Report("tune", "applied", details={"step_times": {"folder": tmp_path / "run"}})
    tune.write_tune_json(tmp_path, opts, [], report, "cuda", [])
    doc = json.loads((tmp_path / arms.TUNE_JSON).read_text())
    assert doc["step_times"] == {"folder": str(tmp_path / "run")}
