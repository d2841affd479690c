"""`pgle tune`'s options, how it reads its collect phase, and the tune.json `pgle report` reads
(pgle.commands.tune), in process: what is refused before an hour-long run starts, when the
collect phase counts as failed, and tune.json's fields exactly as written."""

from __future__ import annotations

import json

import pytest

from pgle.commands import tune
from pgle.commands.arms import PLAIN, Arm
from pgle.commands.options import CollectOptions
from pgle.errors import BadInput
from pgle.launch.workload import Workload
from pgle.report import Report

COLLECT = CollectOptions(workload=Workload("/p/train.py", None, ()), output=None)


def test_tune_options_refuse_before_anything_runs(tmp_path):
    assert tune.TuneOptions(COLLECT).repeat == 3
    assert tune.TuneOptions(COLLECT, repeat=1).repeat == 1
    with pytest.raises(BadInput) as e:
        tune.TuneOptions(COLLECT, repeat=0)
    assert e.value.message == "--repeat 0: at least 1 run per phase."
    with pytest.raises(BadInput) as e:
        tune.TuneOptions(COLLECT, predict=True)
    assert e.value.message == ("--predict needs --compare: it predicts each compared arm's ratio "
                               "(e.g. --compare default,o1,sol,pgle --predict).")
    assert tune.TuneOptions(COLLECT, predict=True, compare=PLAIN).predict is True
    (tmp_path / "r.html").write_text("old")
    with pytest.raises(BadInput) as e:
        tune.TuneOptions(COLLECT, html_report=str(tmp_path / "r.html"))
    assert e.value.message == f"report {tmp_path / 'r.html'} already exists."
    forced = CollectOptions(workload=COLLECT.workload, output=None, force=True)
    assert tune.TuneOptions(forced, html_report=str(tmp_path / "r.html")).html_report
    assert tune.request(tune.TuneOptions(CollectOptions(
        workload=COLLECT.workload, output=None, run_dir="/r/x"))).run_dir == "/r/x"


JOB = {"status": "collected", "exit_code": 0, "workload_exit_code": 0, "mode": "merge",
       "backend": {"platform": "CUDA"}, "profile": {"path": "/r/profile.pb"},
       "log_path": "/r/w.log", "trace_dir": "/r/trace", "store": {"summary": "2 added"},
       "warnings": ["w"], "reasons": ["r"], "summary": ["s"]}


def test_collect_phase_from_a_job_report():
    c = tune.CollectPhase.from_job(JOB)
    assert (c.status, c.exit_code, c.workload_exit_code, c.mode, c.platform) == (
        "collected", 1, 0, "merge", "CUDA")  # used only when it failed: never exit 0 then
    assert (c.profile, c.profile_written, c.log_path, c.trace_dir, c.store_summary) == (
        {"path": "/r/profile.pb"}, "/r/profile.pb", "/r/w.log", "/r/trace", "2 added")
    assert (c.warnings, c.reasons, c.summary) == (("w",), ("r",), ("s",))
    assert c.to_dict() == JOB and c.to_dict() is not JOB
    assert (c.gpu, c.made_profile, c.failed) == (True, True, False)
    bare = tune.CollectPhase.from_job({})
    assert (bare.status, bare.exit_code, bare.platform, bare.profile_written, bare.store_summary,
            bare.warnings) == ("error", 1, None, None, None, ())
    assert (bare.gpu, bare.made_profile, bare.failed) == (False, False, True)
    assert tune.CollectPhase.from_job({"exit_code": 3}).exit_code == 3


@pytest.mark.parametrize("job, made, failed", [
    ({"status": "collected", "backend": {"platform": "gpu"}}, True, False),
    ({"status": "partial", "mode": "merge", "backend": {"platform": "gpu"}}, True, False),
    ({"status": "partial", "mode": "per_rank", "backend": {"platform": "gpu"}}, False, True),
    ({"status": "partial", "backend": {"platform": "rocm"}}, False, True),
    ({"status": "empty", "backend": {"platform": "cpu"}}, False, False),  # expected off a GPU
    ({"status": "empty", "backend": {"platform": "cuda"}}, False, True),
    ({"status": "error", "backend": {"platform": "cpu"}}, False, True),
    ({"status": "collected", "workload_exit_code": 1, "backend": {"platform": "gpu"}}, True, True),
    ({"status": "empty", "workload_exit_code": 2}, False, True),
])
def test_when_the_collect_phase_failed(job, made, failed):
    c = tune.CollectPhase.from_job(job)
    assert (c.made_profile, c.failed) == (made, failed)


def test_tune_json_is_what_report_reads(tmp_path):
    runs = [tune.ArmRuns(Arm("default"), [tmp_path / "arm-default", tmp_path / "arm-default-2"],
                         [Report("run", "not_applicable")]),
            tune.ArmRuns(Arm("o1+sol", o1=True, sol=True), [tmp_path / "arm-o1-sol"], [],
                         "/p/profile.pb")]
    report = Report("tune", "applied", exit_code=0, reasons=["why"], modules=[{"module": "m"}],
                    details={"step_times": {"ratio": 0.9}, "compare": {"arms": []}})
    opts = tune.TuneOptions(COLLECT, repeat=2, compare=(Arm("default"),))
    tune.write_tune_json(tmp_path, opts, runs, report, "cuda", ["profiler on"])
    doc = json.loads((tmp_path / "tune.json").read_text())
    assert doc == {
        "plain": False, "platform": "cuda", "repeat": 2,
        "collect": {"folder": "collect", "changed": ["profiler on"]},
        "arms": [
            {"name": "default", "describe": "your flags, unchanged", "pgle": False, "xla": {},
             "variables": {}, "profile": None, "folders": ["arm-default", "arm-default-2"],
             "statuses": ["not_applicable"]},
            {"name": "o1+sol", "describe": "JAX_OPTIMIZATION_LEVEL=O1 + "
             "--xla_gpu_enable_analytical_sol_latency_estimator=true", "pgle": False,
             "xla": {"xla_gpu_enable_analytical_sol_latency_estimator": "true"},
             "variables": {"JAX_OPTIMIZATION_LEVEL": "O1"}, "profile": "/p/profile.pb",
             "folders": ["arm-o1-sol"], "statuses": []}],
        "verdict": {"status": "applied", "reasons": ["why"], "exit_code": 0},
        "step_times": {"ratio": 0.9}, "compare": {"arms": []}, "modules": [{"module": "m"}],
    }
    tune.write_tune_json(tmp_path, tune.TuneOptions(COLLECT), [], Report("tune", "error"), None, [])
    assert json.loads((tmp_path / "tune.json").read_text())["plain"] is True


FP = "0123456789abcdef0123456789abcdef"


def _store_with_entry(tmp_path):
    from pgle.profiles.files import Profile
    from pgle.store.store import ProfileStore

    st = ProfileStore(tmp_path / "store", create=True)
    entry, _ = st.add(FP, Profile(costs=[("fusion.1", 10.0)]), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="NVIDIA H100 80GB HBM3", device_count=8, source="test",
                      module="jit_step")
    return st, entry


def _compare_report(pred=None, module="jit_step"):
    pred = {"target": "h100", "why": None, "step_module": "jit_other"} if pred is None else pred
    arms_rows = [{"arm": "default", "predicted_ratio": 1.0, "ratio": 1.0},
                 {"arm": "o1", "predicted_ratio": 0.8, "ratio": None},
                 {"arm": "sol", "predicted_ratio": None, "ratio": 0.9},
                 {"arm": "o1+pgle", "predicted_ratio": None, "ratio": None}]  # nothing to keep
    return Report("tune", "applied", details={"compare": {
        "predicted": pred, "steps": {"module": module}, "arms": arms_rows}})


def _first(entry, module="jit_step"):
    return tune.CollectPhase.from_job({"status": "collected", "store": {
        "modules": [{"module": "jit_init", "entry": None, "fingerprint": FP},
                    {"module": module, "entry": entry.entry_id, "fingerprint": FP}],
        "key": {"device_kind": "NVIDIA H100 80GB HBM3", "device_count": "8", "jax": "0.10.2"}}})


def test_predict_with_store_keeps_each_arms_predicted_and_measured_ratio(tmp_path):
    from pgle.version import __version__

    st, entry = _store_with_entry(tmp_path)
    report = _compare_report()
    tune._keep_calibration(report, _first(entry), str(tmp_path / "store"))
    kept = st.calibration(entry)
    assert [(c.arm, c.predicted_ratio, c.measured_ratio) for c in kept] == [
        ("default", 1.0, 1.0), ("o1", 0.8, None), ("sol", None, 0.9)]
    assert {(c.target, c.device_kind, c.device_count, c.jax, c.pgle) for c in kept} == {
        ("h100", "NVIDIA H100 80GB HBM3", 8, "0.10.2", __version__)}
    assert len({c.created for c in kept}) == 1 and kept[0].created.endswith("+00:00")
    assert report.details["compare"]["calibration"] == {
        "fingerprint": FP, "entry": entry.entry_id, "arms": 3}
    assert report.warnings == []


def test_the_step_module_comes_from_the_steps_else_from_the_prediction(tmp_path):
    st, entry = _store_with_entry(tmp_path)
    report = _compare_report(pred={"target": "h100", "why": None, "step_module": "jit_step"},
                             module=None)
    tune._keep_calibration(report, _first(entry), str(tmp_path / "store"))
    assert len(st.calibration(entry)) == 3


def test_nothing_is_kept_without_a_prediction_or_a_stored_entry(tmp_path):
    st, entry = _store_with_entry(tmp_path)
    why = _compare_report(pred={"target": "h100", "why": "needs the CUDA plugin"})
    tune._keep_calibration(why, _first(entry), str(tmp_path / "store"))
    other = _compare_report(module="jit_other")
    tune._keep_calibration(other, _first(entry), str(tmp_path / "store"))
    no_store = _compare_report()
    tune._keep_calibration(no_store, tune.CollectPhase.from_job({}), str(tmp_path / "store"))
    assert st.calibration(entry) == []
    for report in (why, other, no_store):
        assert "calibration" not in report.details["compare"] and report.warnings == []


def test_a_store_that_refuses_the_ratios_is_one_warning(tmp_path):
    st, entry = _store_with_entry(tmp_path)
    first = _first(entry)
    first.job["store"]["modules"][1]["entry"] = "20200101T000000Z-000000"  # not in the store
    report = _compare_report()
    tune._keep_calibration(report, first, str(tmp_path / "store"))
    assert report.warnings == [
        f"the store kept no predicted/measured ratios: store {tmp_path / 'store'}: no entry "
        f"20200101T000000Z-000000 for module {FP}."]
    assert "calibration" not in report.details["compare"]
