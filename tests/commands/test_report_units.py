"""`pgle report` in process (issue 37): which sides it shows and how it labels them, the
verdict and what to do, the ratio it prints, the sections it cannot fill and why, and the
page it writes or refuses to overwrite. Run folders are written here as pgle keeps them
(events.jsonl, workload.log, hlo/), no workload runs: mutmut maps a mutant of
pgle/commands/report.py to these tests (a `python -m pgle report` subprocess maps nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.deadline import returns_within

from pgle.commands import report
from pgle.errors import EXIT_USAGE, BadInput
from pgle.verdicts.statuses import Applied

H100 = "NVIDIA H100 80GB HBM3"
# XLA:GPU's lines for a module that read the profile and found every instruction in it
# (absl prefix, the wording of tests/verdicts/test_verdict.py).
APPLIED_LOG = (
    "I0822 12:34:56.789012  1 gpu_hlo_schedule.cc:538] Using PGLE profile from /p.pb\n"
    "I0822 12:34:56.789012  1 gpu_hlo_schedule.cc:538] Found profile for module "
    "jit_train_step, using profile guided latency estimator\n"
    "W0822 12:34:56.789012  1 profile_guided_latency_estimator.cc:538] Found 3 instructions "
    "from the profile.\n"
)


def run_folder(
    path: Path,
    step_ms=(10.0, 10.0, 10.0, 10.0, 10.0, 10.0),
    *,
    platform: str = "gpu",
    device_kind: str | None = H100,
    log: str | None = APPLIED_LOG,
    modules=(("jit_train_step", 4.0e12),),
    step_module: str | None = "jit_train_step",
    compiles=(("jit(train_step)", 1.5), ("jit(init)", 0.25)),
    hlo: dict[str, str] | None = None,
    jax: bool = True,
    backend: bool = True,
    markers: bool = True,
    peak: int = 1 << 20,
    extra: tuple[dict, ...] = (),
) -> Path:
    """A run folder as pgle keeps it: a backend, compiles, each module XLA compiled, step
    markers `step_ms` apart (step 0, the warm-up, is never counted) and the harness's record
    of the step function. `jax`, `backend`, `markers`: False leaves that record out (a
    workload that never imported jax, a run that died before its backend was known, one that
    marks no steps); `extra`: more records, as the harness writes them."""
    path.mkdir(parents=True)
    t = 1000.0
    recs: list[dict] = [{"kind": "jax_imported", "t": t, "version": "0.10.2"}] if jax else []
    if backend:
        recs.append({"kind": "backend", "t": t, "platform": platform, "device_count": 1,
                     "device_kind": device_kind})
    recs += [{"kind": "compile", "t": t, "fun_name": f, "seconds": s} for f, s in compiles]
    for name, flops in modules:
        rec = {"kind": "module_compiled", "t": t, "module": name, "flops": flops,
               "memory": {"peak_memory_in_bytes": peak}}
        if hlo and name in hlo:
            (path / "hlo").mkdir(exist_ok=True)
            rec["hlo_file"] = str(path / "hlo" / f"{name}.txt")
            Path(rec["hlo_file"]).write_text(hlo[name])
        recs.append(rec)
    for i, ms in enumerate([50.0, *step_ms, 10.0] if markers else []):
        recs.append({"kind": "step_enter", "t": t, "name": "train", "step_num": i, "index": i})
        t += ms / 1e3
    if step_module:
        recs.append({"kind": "jit_functions", "t": t, "step": "train_step", "module": step_module,
                     "functions": []})
    recs += extra
    (path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    if log is not None:
        (path / "workload.log").write_text(log)
    return path


def tune_folder(top: Path, tune: dict, **folders: dict) -> Path:
    """A `pgle tune` folder: tune.json and the run folders it names."""
    for name, kw in folders.items():
        run_folder(top / name, **kw)
    (top / "tune.json").write_text(json.dumps(tune))
    return top


def bad(run_dirs, match: str) -> str:
    with pytest.raises(BadInput, match=match) as e:
        report.resolve([str(d) for d in run_dirs])
    assert e.value.exit_code == EXIT_USAGE
    return str(e.value)


# --- which folders, which sides -------------------------------------------------------------

def test_folder_counts_and_missing_folders_are_refused(tmp_path):
    bad([], "no run folder given")
    a = run_folder(tmp_path / "a")
    bad([a, a, a], "^3 run folders given; pass one tune run folder, or two")
    bad([tmp_path / "gone"], "run folder .*gone does not exist or is not a directory")
    (tmp_path / "file").write_text("x")
    bad([tmp_path / "file"], "is not a directory")
    (tmp_path / "empty").mkdir()
    # Two folders: each must be a run folder (either position).
    bad([tmp_path / "empty", a], r"empty is not a pgle run folder \(no events.jsonl\)")
    bad([a, tmp_path / "empty"], r"empty is not a pgle run folder \(no events.jsonl\)")
    # One folder: a run folder, or a tune folder with its phases.
    bad([tmp_path / "empty"], r"no events.jsonl, and no collect/ and run/ phases")
    with pytest.raises(BadInput) as e:
        report.resolve([str(tmp_path / "empty")])
    assert e.value.hint == "Pass a folder under .pgle/runs/."


def test_one_run_folder_is_shown_alone_under_its_name(tmp_path):
    sides, tune = report.resolve([str(run_folder(tmp_path / "20260101-run-7"))])
    assert tune is None
    assert [(s.label, s.role, s.folders) for s in sides] == [
        ("20260101-run-7", "single", [tmp_path / "20260101-run-7"])]


def test_two_folders_are_without_then_with_and_with_only_when_applied(tmp_path):
    a = run_folder(tmp_path / "a", log="")
    b = run_folder(tmp_path / "b")
    sides, tune = report.resolve([str(a), str(b)])
    assert tune is None
    assert [(s.label, s.role) for s in sides] == [
        ("without profile", "baseline"), ("with profile, 1 run", "with_profile")]
    assert sides[0].folders == [a] and sides[1].folders == [b]
    assert sides[1].status == Applied.APPLIED
    # The second one's log shows no module applying the profile: never "with profile".
    c = run_folder(tmp_path / "c", log="hello\n")
    sides, _ = report.resolve([str(a), str(c)])
    assert (sides[1].label, sides[1].role) == ("run (profile not_applied, 1 run)", "run")
    assert sides[1].status == Applied.NOT_APPLIED
    # No log to judge: said so.
    d = run_folder(tmp_path / "d", log=None)
    sides, _ = report.resolve([str(a), str(d)])
    assert (sides[1].label, sides[1].role) == ("with profile (no log to judge, 1 run)",
                                               "with_profile")
    assert sides[1].status is None
    # The second one ran on a CPU: no profile applies there, said so.
    e = run_folder(tmp_path / "e", log="", platform="cpu", device_kind="cpu")
    sides, _ = report.resolve([str(a), str(e)])
    assert sides[1].label == "run (no profile applies on backend cpu, 1 run)"
    # The hints a user reads after the error line.
    with pytest.raises(BadInput) as err:
        report.resolve([])
    assert err.value.hint == "Pass a .pgle/runs/<stamp>-tune-<pid>/ folder."
    with pytest.raises(BadInput) as err:
        report.resolve([str(a), str(tmp_path)])
    assert err.value.hint == "Pass folders under .pgle/runs/ (a tune folder's baseline/ and run/)."


def test_the_profile_label_per_verdict_and_backend():
    assert report._profile_label(Applied.APPLIED, "gpu", 3) == ("with profile, 3 runs",
                                                               "with_profile")
    assert report._profile_label(Applied.PARTIAL, "gpu", 1) == ("with profile, 1 run",
                                                               "with_profile")
    assert report._profile_label(Applied.NOT_APPLICABLE, "CPU", 2) == (
        "run (no profile applies on backend CPU, 2 runs)", "run")
    assert report._profile_label(Applied.NOT_APPLIED, "CUDA", 2) == (
        "run (profile not_applied, 2 runs)", "run")
    assert report._profile_label("", None, 2) == ("run (profile not applied, 2 runs)", "run")


def test_the_collect_phase_says_what_it_was():
    assert report._collect_label(None) == "collect (profiler on)"
    assert report._collect_label(["a flag", "command buffers off (--xla_gpu_x)"]) == (
        "collect (profiler on, command buffers off)")


def test_numbered_runs_stop_at_the_first_gap(tmp_path):
    for name in ("run", "run-2", "run-4"):
        run_folder(tmp_path / name)
    (tmp_path / "run-3").mkdir()  # no events.jsonl: not a run
    with returns_within(2.0):  # a counter that never moves on loops forever
        assert report._numbered(tmp_path, "run") == [tmp_path / "run", tmp_path / "run-2"]
        assert report._numbered(tmp_path, "baseline") == []


def test_a_tune_folder_before_tune_json_without_baseline(tmp_path):
    top = tmp_path / "tune"
    run_folder(top / "collect")
    run_folder(top / "run", log="hello\n", platform="cpu", device_kind="cpu")
    run_folder(top / "run-2", platform="cpu", device_kind="cpu")
    with returns_within(2.0):
        sides, tune = report.resolve([str(top)])
    assert tune is None
    assert [(s.label, s.role) for s in sides] == [
        ("collect (profiler on)", "collect"),
        ("run (no profile applies on backend cpu, 2 runs)", "run")]
    assert sides[0].folders == [top / "collect"]
    assert sides[1].folders == [top / "run", top / "run-2"]
    assert sides[1].status == Applied.NOT_APPLICABLE  # judged on run/, the first run
    # Only collect/ and no run/: a run folder is wanted.
    only = tmp_path / "only"
    run_folder(only / "collect")
    bad([only], "is not a pgle run folder")


PLAIN = {
    "plain": True, "platform": "gpu",
    "collect": {"folder": "collect", "changed": ["command buffers off"]},
    "arms": [
        {"name": "default", "folders": ["baseline", "baseline-2"]},
        {"name": "pgle", "pgle": True, "profile": "p.pb", "statuses": ["applied"],
         "folders": ["run", "run-2", "run-9"]},
    ],
    "verdict": {"status": "applied", "reasons": ["every module applied the profile"]},
    "step_times": {"interval": {"ratio": 0.8, "low": 0.75, "high": 0.85, "confidence": 0.95,
                                "beyond_noise": True},
                   "caveat": None, "ratio": 0.8, "baseline": {"median_s": 0.01},
                   "run": {"median_s": 0.008},
                   "runs": {"baseline": 2, "run": 2}},
}


def test_a_plain_tune_folder_is_baseline_against_the_runs_with_the_profile(tmp_path):
    top = tune_folder(tmp_path / "t", PLAIN, collect={}, baseline={}, **{"baseline-2": {}},
                      run={}, **{"run-2": {}})
    sides, tune = report.resolve([str(top)])
    assert tune == PLAIN
    assert [(s.label, s.role, s.arm, s.status) for s in sides] == [
        ("collect (profiler on, command buffers off)", "collect", None, None),
        ("baseline (no profile, 2 runs)", "baseline", "default", None),
        ("with profile, 2 runs", "with_profile", "pgle", "applied")]
    # A folder tune.json names but that is gone is left out; an arm with none is dropped.
    assert sides[2].folders == [top / "run", top / "run-2"]
    (top / "baseline" / "events.jsonl").unlink()
    (top / "baseline-2" / "events.jsonl").unlink()
    sides, _ = report.resolve([str(top)])
    assert [s.role for s in sides] == ["collect", "with_profile"]


def test_a_plain_tune_folder_whose_profile_did_not_apply(tmp_path):
    tune = json.loads(json.dumps(PLAIN))
    tune["arms"][1]["statuses"] = ["not_applied"]
    tune["collect"] = {}
    top = tune_folder(tmp_path / "t", tune, collect={}, baseline={}, run={})
    sides, _ = report.resolve([str(top)])
    assert sides[0].label == "collect (profiler on)" and sides[0].folders == [top / "collect"]
    assert (sides[2].label, sides[2].role) == ("run (profile not_applied, 1 run)", "run")


COMPARE = {
    "platform": "gpu", "collect": {"folder": "collect"},
    "arms": [
        {"name": "default", "describe": "jax's defaults", "folders": ["default"]},
        {"name": "o1", "describe": "JAX_OPTIMIZATION_LEVEL=O1", "folders": ["o1"]},
        {"name": "pgle", "pgle": True, "describe": "the collected profile",
         "statuses": ["not_applied"], "folders": ["pgle"]},
        {"name": "o1+pgle", "pgle": True, "describe": "O1 and the profile",
         "statuses": ["partial"], "folders": ["o1-pgle"]},
    ],
    "verdict": {"status": "partial", "reasons": ["jit_b missed 2 instructions"]},
    "compare": {"baseline": "default", "gpu": True, "arms": [
        {"arm": "default", "status": None, "step_time": {"median_s": 0.01}, "interval": None},
        {"arm": "pgle", "status": "not_applied", "step_time": {"median_s": 0.012},
         "interval": {"ratio": 1.2, "low": 1.1, "high": 1.3, "confidence": 0.95,
                      "beyond_noise": True}, "why_no_ratio": None},
    ]},
}


def test_a_compare_tune_folder_shows_each_arm_and_a_profile_that_missed(tmp_path):
    top = tune_folder(tmp_path / "t", COMPARE, collect={}, default={}, o1={}, pgle={},
                      **{"o1-pgle": {}})
    sides, _ = report.resolve([str(top)])
    assert [(s.label, s.role, s.arm, s.status) for s in sides[1:]] == [
        ("arm default (jax's defaults)", "arm", "default", None),
        ("arm o1 (JAX_OPTIMIZATION_LEVEL=O1)", "arm", "o1", None),
        ("arm pgle (the collected profile; profile not_applied)", "arm", "pgle", "not_applied"),
        ("arm o1+pgle (O1 and the profile)", "arm", "o1+pgle", "partial")]
    tune = json.loads(json.dumps(COMPARE))
    del tune["arms"][0]["describe"]
    (top / "tune.json").write_text(json.dumps(tune))
    assert report.resolve([str(top)])[0][1].label == "arm default (default)"


def test_an_unreadable_tune_json_is_one_line(tmp_path):
    top = tmp_path / "t"
    top.mkdir()
    (top / "tune.json").write_text("{not json")
    msg = bad([top], r"tune.json is not readable JSON \(")
    assert "\n" not in msg


@pytest.mark.parametrize("name", ["../outside", "/abs/outside", "..", "", 7, "link"])
def test_a_tune_json_naming_a_folder_outside_the_tune_folder_is_refused(tmp_path, name):
    """A tune folder in a shared place is written by others too: tune.json's folder names are
    one plain name each, never a path or a link out of the tune folder; the report refuses
    before it reads any of them."""
    outside = run_folder(tmp_path / "outside")
    top = tune_folder(tmp_path / "t", COMPARE, collect={}, default={}, o1={}, pgle={},
                      **{"o1-pgle": {}})
    (top / "link").symlink_to(outside)
    tune = json.loads(json.dumps(COMPARE))
    tune["arms"][2]["folders"] = [name]
    (top / "tune.json").write_text(json.dumps(tune))
    msg = bad([top], f"names {name!r} as a run folder: not a folder inside ")
    assert "\n" not in msg
    tune = json.loads(json.dumps(COMPARE))
    tune["collect"]["folder"] = name
    (top / "tune.json").write_text(json.dumps(tune))
    bad([top], f"names {name!r} as a run folder")


# --- one side -------------------------------------------------------------------------------

def test_a_side_holds_its_step_times_module_throughput_and_compiles(tmp_path):
    f = run_folder(tmp_path / "r", [10.0, 12.0, 14.0, 16.0],
                   modules=(("jit_init", 9.0e12), ("jit_train_step", 4.0e12)))
    side = report.Side("with profile, 1 run", "with_profile", [f], "pgle", "applied")
    p = report._side(side, "bf16")
    assert (p["label"], p["role"], p["arm"], p["status"]) == (
        "with profile, 1 run", "with_profile", "pgle", "applied")
    assert p["folder"] == str(f) and p["folders"] == [str(f)]
    assert (p["platform"], p["device_kind"], p["device_count"]) == ("gpu", H100, 1)
    assert p["step_times_s"] == pytest.approx([0.010, 0.012, 0.014, 0.016])
    assert p["step_time"]["median_s"] == pytest.approx(0.013)
    assert p["step_time"]["count"] == 4
    # The step function's module, not the one with the most FLOPs.
    assert p["step_module"]["module"] == "jit_train_step" and p["step_module"]["flops"] == 4.0e12
    assert p["step_module_source"] == "the step function"
    assert [m["module"] for m in p["modules"]] == ["jit_init", "jit_train_step"]
    assert p["modules"][0]["memory"]["peak_memory_in_bytes"] == 1 << 20
    # H100 SXM, bf16: 989.5 TFLOP/s dense.
    assert p["throughput"]["achieved_tflops"] == pytest.approx(4.0 / 0.013)
    assert p["throughput"]["mfu"] == pytest.approx(4.0e12 / 0.013 / 989.5e12)
    assert report._side(side, "fp8")["throughput"]["dtype"] == "fp8"
    # Compile seconds: all modules, and the step function's module.
    assert p["compile"]["total_s"] == pytest.approx(1.75) and p["compile"]["count"] == 2
    assert p["compile"]["step_module_s"] == pytest.approx(1.5)
    assert "why_no_step_module" not in p and "why_no_modules" not in p


def test_a_run_before_step_detection_takes_the_module_with_the_most_flops(tmp_path):
    f = run_folder(tmp_path / "r", step_module=None,
                   modules=(("jit_a", 1.0e9), ("jit_scan", 9.0e12), ("jit_b", None)))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    assert p["step_module"]["module"] == "jit_scan"
    assert p["step_module_source"] == (
        "the module with the most FLOPs (the run predates pgle's step detection)")
    assert p["compile"]["step_module_s"] is None  # no step module named by the run
    # Nothing XLA recorded either: why, for the step module and for the modules.
    g = run_folder(tmp_path / "g", step_module=None, modules=(), compiles=())
    p = report._side(report.Side("g", "single", [g]), "bf16")
    assert p["step_module"] is None and p["step_module_source"] is None
    assert p["why_no_step_module"].startswith("the StepTraceAnnotation steps ran no jitted")
    assert p["why_no_modules"].startswith("the run recorded no module_compiled events")
    assert p["compile"] == {**p["compile"], "total_s": 0.0, "count": 0, "step_module_s": None}


def test_a_step_module_xla_did_not_record_is_said(tmp_path):
    f = run_folder(tmp_path / "r", step_module="jit_gone", modules=(("jit_other", 5.0e12),))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    # The run named its step: no FLOPs stand-in.
    assert p["step_module"] is None and p["step_module_source"] is None
    assert p["why_no_step_module"] == (
        "XLA recorded no module jit_gone (run by a pgle without per-module recording)")
    assert p["throughput"]["mfu"] is None


def test_the_last_compile_of_the_step_module_is_the_one_shown(tmp_path):
    f = run_folder(tmp_path / "r", modules=(("jit_train_step", 1.0e12), ("jit_train_step", 2.0e12)),
                   compiles=(("jit(train_step)", 1.0), ("jit(train_step)", 0.5), ("jit(x)", None)))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    assert p["step_module"]["flops"] == 2.0e12
    assert p["compile"]["step_module_s"] == pytest.approx(1.5)
    assert p["compile"]["total_s"] == pytest.approx(1.5) and p["compile"]["count"] == 3


# --- the comparison -------------------------------------------------------------------------

ASYNC_HLO = """HloModule jit_train_step, is_scheduled=true

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %all-reduce-start = f32[8]{0} all-reduce-start(%p), replica_groups={}, to_apply=%add
  %fusion.1 = f32[8]{0} fusion(%p), kind=kLoop, calls=%f
  %all-reduce-done = f32[8]{0} all-reduce-done(%all-reduce-start)
  ROOT %fusion.2 = f32[8]{0} fusion(%all-reduce-done), kind=kLoop, calls=%f
}
"""

SYNC_HLO = """HloModule jit_train_step, is_scheduled=true

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %all-reduce = f32[8]{0} all-reduce(%p), replica_groups={}, to_apply=%add
}
"""


def phase(tmp_path, name, hlo=None, platform="gpu"):
    f = run_folder(tmp_path / name, platform=platform,
                   hlo={"jit_train_step": hlo} if hlo else None)
    return report._side(report.Side(name, "x", [f]), "bf16")


def test_the_schedule_section_says_why_it_is_empty(tmp_path):
    gpu_a, gpu_b = phase(tmp_path, "a", ASYNC_HLO), phase(tmp_path, "b", ASYNC_HLO)
    res, why = report._schedule(gpu_a, gpu_b)
    assert why is None and res["pair_count"] == 1 and res["moved_count"] == 0
    assert res["before_file"].endswith("a/hlo/jit_train_step.txt")
    assert res["after_file"].endswith("b/hlo/jit_train_step.txt")
    bare = phase(tmp_path, "bare")
    assert report._schedule(gpu_a, bare) == (
        None, "no scheduled HLO with async ops was kept for the step module in both phases")
    assert report._schedule(bare, gpu_a)[0] is None
    cpu = phase(tmp_path, "cpu", platform="cpu")
    res, why = report._schedule(cpu, cpu)
    assert res is None and why.startswith("the step module has no async collective on cpu: "
                                          "XLA:CPU runs collectives synchronously")
    sync_a, sync_b = phase(tmp_path, "sa", SYNC_HLO), phase(tmp_path, "sb", SYNC_HLO)
    assert report._schedule(sync_a, sync_b) == (
        None, "the step module's kept HLO has no async pair in either phase")
    sync_cpu = phase(tmp_path, "sc", SYNC_HLO, platform="cpu")
    assert "runs collectives synchronously" in report._schedule(sync_cpu, sync_cpu)[1]
    Path(gpu_b["modules"][0]["hlo_file"]).unlink()
    assert report._schedule(gpu_a, gpu_b) == (
        None, f"the kept HLO {gpu_b['modules'][0]['hlo_file']} is gone")


def test_the_schedule_takes_the_step_modules_last_hlo(tmp_path):
    before = {"platform": "gpu", "step_module": {"module": "jit_step"}, "modules": [
        {"module": "jit_step", "hlo_file": str(tmp_path / "old.txt")},
        {"module": "jit_step", "hlo_file": str(tmp_path / "new.txt")},
        {"module": "jit_other", "hlo_file": str(tmp_path / "other.txt")},
        {"module": "jit_step", "hlo_file": None}]}
    (tmp_path / "new.txt").write_text(ASYNC_HLO)
    (tmp_path / "other.txt").write_text(SYNC_HLO)
    res, why = report._schedule(before, before)
    assert why is None and res["before_file"] == str(tmp_path / "new.txt")
    # No step module known: the last kept HLO of any module.
    before["step_module"] = None
    assert report._schedule(before, before)[1] == (
        "the step module's kept HLO has no async pair in either phase")


def comm(planes, *ops):
    return {"device_planes": planes, "per_op": [
        {"op": o, "module": m, "exposed_ps": e, "span_ps": s, "count": c}
        for o, m, e, s, c in ops]}


def test_the_communication_change_per_collective_per_device(tmp_path):
    before = {"label": "without", "communication": comm(
        2, ("all-reduce.1", "jit_s", 400, 1000, 4), ("all-gather.2", "jit_s", 100, 100, 2))}
    after = {"label": "with", "communication": comm(
        1, ("all-reduce.1", "jit_s", 50, 500, 2), ("all-gather.2", "jit_s", 900, 1000, 2),
        ("all-reduce.1", "jit_t", 10, 10, 1))}
    rows, why = report.communication_change(before, after)
    assert why is None
    assert rows == [
        {"op": "all-gather.2", "module": "jit_s", "before_exposed_ps": 50, "before_hidden_ps": 0,
         "before_count": 2, "after_exposed_ps": 900, "after_hidden_ps": 100, "after_count": 2},
        {"op": "all-reduce.1", "module": "jit_s", "before_exposed_ps": 200,
         "before_hidden_ps": 300, "before_count": 4, "after_exposed_ps": 50,
         "after_hidden_ps": 450, "after_count": 2},
        {"op": "all-reduce.1", "module": "jit_t", "after_exposed_ps": 10, "after_hidden_ps": 0,
         "after_count": 1}]
    # A trace with no device plane counts as one; top_exposed stands in for per_op.
    top = {"label": "x", "communication": {"device_planes": 0, "top_exposed": [
        {"op": "a", "module": "m", "exposed_ps": 8, "span_ps": 10, "count": 1}]}}
    rows, _ = report.communication_change(top, top)
    assert rows[0]["before_exposed_ps"] == 8 and rows[0]["after_hidden_ps"] == 2
    missing = {"label": "with", "communication": None, "communication_why": "no trace kept"}
    assert report.communication_change(before, missing) == (None, "with: no trace kept")
    assert report.communication_change(missing, {**missing, "label": "w2"}) == (
        None, "with: no trace kept; w2: no trace kept")


# --- the verdict, the ratio and the report --------------------------------------------------

def interval(ratio, beyond):
    return {"ratio": ratio, "low": ratio - 0.01, "high": ratio + 0.01, "confidence": 0.95,
            "beyond_noise": beyond}


@pytest.mark.parametrize("status, ratio, todo", [
    ("applied", interval(0.8, True), "keep the profile: steps are 20.0 % faster with it"),
    ("applied", interval(1.25, True), ("the profile makes steps 25.0 % slower: run without it, "
                                       "or collect it again from a longer window")),
    ("applied", interval(0.8, False), ("the profile applies but the step time does not change "
                                       "beyond run-to-run noise")),
    ("applied", interval(1.0, True), "the profile makes steps 0.0 % slower"),
    ("applied", None, "the profile applies; too few steps"),
    ("partial", interval(0.8, True), "collect the profile again from this exact program"),
    ("not_applied", None, ("make sure the profile flag reaches XLA (see the reasons) and "
                           "run again")),
    ("error", None, "fix what the reasons say, then run again"),
    ("not_applicable", None, "nothing to do on backend gpu: PGLE is an XLA:GPU feature"),
    (None, None, "no verdict: the run left no log to judge"),
])
def test_what_to_do_follows_the_verdict_and_the_ratio(status, ratio, todo):
    data = {"phases": [{"platform": None}, {"platform": "gpu"}], "step_ratio": ratio,
            "step_ratio_why": "too few steps"}
    v = report._verdict([], {"verdict": {"status": status, "reasons": ["r1", "r2"]}}, data)
    assert v["what_to_do"].startswith(todo)
    assert v["status"] == status and v["reasons"] == ["r1", "r2"]


def test_the_verdict_without_tune_json_is_the_profiled_sides(tmp_path):
    a = run_folder(tmp_path / "a", log="hello\n")
    b = run_folder(tmp_path / "b")
    sides = [report.Side("w/o", "baseline", [a]), report.Side("w", "with_profile", [b])]
    v = report._verdict(sides, None, {"phases": [], "step_ratio": None})
    assert v["status"] == "applied" and "modules" not in v
    assert v["what_to_do"] == "the profile applies; no step-time ratio"
    # No profiled side: the last one is judged.
    v = report._verdict([report.Side("w", "baseline", [b]), report.Side("w/o", "single", [a])],
                        None, {"phases": [], "step_ratio": None})
    assert v["status"] == "not_applied"
    gone = run_folder(tmp_path / "gone", log=None)
    v = report._verdict([report.Side("g", "single", [gone])], None, {"phases": []})
    assert v["status"] is None and v["reasons"] == [f"{gone} kept no workload.log"]
    assert report._verdict([], {}, {"phases": []})["reasons"] == []


def test_two_folders_build_the_ratio_with_and_without(tmp_path):
    a = run_folder(tmp_path / "a", [10.0, 10.1, 9.9, 10.0, 10.2, 9.8], log="")
    b = run_folder(tmp_path / "b", [8.0, 8.1, 7.9, 8.0, 8.2, 7.8])
    data = report.build(report.ReportOptions([str(a), str(b)]))
    assert data["comparison"] == {"before": "without profile", "after": "with profile, 1 run"}
    r = data["step_ratio"]
    assert r["ratio"] == pytest.approx(0.8, abs=0.01) and r["beyond_noise"] and r["high"] < 1
    assert data["verdict"]["status"] == "applied"
    assert data["verdict"]["what_to_do"].startswith("keep the profile: steps are 20")
    assert data["compile"]["before"]["count"] == 2 and data["compile"]["after"]["count"] == 2
    assert data["tune_lines"] is None and data["collect_changed"] is None
    # The profile did not apply on the second: no ratio (nothing to credit it with).
    c = run_folder(tmp_path / "c", [8.0, 8.1, 7.9, 8.0, 8.2, 7.8], log="hello\n")
    data = report.build(report.ReportOptions([str(a), str(c)]))
    assert data["step_ratio"] is None and data["step_ratio_why"]
    # Too few steps on one side: why, and no ratio.
    d = run_folder(tmp_path / "d", [8.0, 8.1])
    data = report.build(report.ReportOptions([str(a), str(d)]))
    assert data["step_ratio"] is None
    assert data["step_ratio_why"].startswith("no step-time ratio: 6 and 2 step times")


def test_one_side_has_nothing_to_compare(tmp_path):
    a = run_folder(tmp_path / "a")
    data = report.build(report.ReportOptions([str(a)]))
    assert data["comparison"] is None
    assert (data["step_ratio"], data["step_ratio_why"]) == (None,
                                                            "one side only: nothing to compare")
    assert data["schedule"] is None and data["schedule_why"] == "one side only: nothing to compare"
    assert data["communication_change"] is None
    assert data["communication_change_why"] == data["schedule_why"]
    assert data["compile"]["before"] is None and data["compile"]["after"]["count"] == 2
    assert data["memory"][0]["module"] == "jit_train_step"
    cpu = run_folder(tmp_path / "cpu", platform="cpu", device_kind="cpu", log="")
    data = report.build(report.ReportOptions([str(cpu)]))
    assert "XLA:CPU runs collectives synchronously" in data["schedule_why"]
    assert data["verdict"]["status"] == "not_applicable"


def test_a_plain_tune_folder_reports_tunes_own_numbers(tmp_path):
    tune = json.loads(json.dumps(PLAIN))
    top = tune_folder(tmp_path / "t", tune, collect={}, baseline={}, run={})
    data = report.build(report.ReportOptions([str(top)]))
    # tune.json's ratio, not one computed again from the (equal) step times.
    assert data["step_ratio"] == PLAIN["step_times"]["interval"]
    assert data["step_ratio_why"] == ""
    assert data["comparison"] == {"before": "baseline (no profile, 1 run)",
                                  "after": "with profile, 1 run"}
    assert data["collect_changed"] == ["command buffers off"]
    assert data["verdict"]["reasons"] == ["every module applied the profile"]
    assert any("ratio 0.800" in line for line in data["tune_lines"])
    # tune said why there is no ratio: that, not a ratio.
    tune["step_times"] = {"interval": None, "caveat": "the profile applied to no module"}
    (top / "tune.json").write_text(json.dumps(tune))
    data = report.build(report.ReportOptions([str(top)]))
    assert data["step_ratio"] is None
    assert data["step_ratio_why"] == "the profile applied to no module"
    # A tune folder with no baseline (tune runs none off a GPU).
    del tune["arms"][0]
    (top / "tune.json").write_text(json.dumps(tune))
    data = report.build(report.ReportOptions([str(top)]))
    assert data["comparison"] is None
    assert data["schedule_why"].startswith("no baseline run to compare with")
    # No step times in tune.json: no lines to rebuild.
    tune.pop("step_times")
    (top / "tune.json").write_text(json.dumps(tune))
    assert report.build(report.ReportOptions([str(top)]))["tune_lines"] is None


def test_a_compare_tune_folder_compares_pgle_against_default(tmp_path):
    top = tune_folder(tmp_path / "t", COMPARE, collect={}, default={}, o1={}, pgle={},
                      **{"o1-pgle": {}})
    data = report.build(report.ReportOptions([str(top)]))
    assert data["comparison"] == {"before": "arm default (jax's defaults)",
                                  "after": "arm pgle (the collected profile; profile not_applied)"}
    assert data["step_ratio"] == COMPARE["compare"]["arms"][1]["interval"]
    assert data["step_ratio_why"] == ""  # tune gave a ratio: no why (never a placeholder)
    assert data["compare"] == COMPARE["compare"]
    assert data["verdict"]["what_to_do"].startswith("collect the profile again")
    tune = json.loads(json.dumps(COMPARE))
    tune["compare"]["arms"] = tune["compare"]["arms"][:1]
    (top / "tune.json").write_text(json.dumps(tune))
    data = report.build(report.ReportOptions([str(top)]))
    assert data["step_ratio"] is None
    assert data["step_ratio_why"] == (
        "the compared arms hold no plain pgle arm: see the arms table")
    tune = json.loads(json.dumps(COMPARE))
    tune["compare"]["arms"][1].update(interval=None, why_no_ratio="too few")
    (top / "tune.json").write_text(json.dumps(tune))
    assert report.build(report.ReportOptions([str(top)]))["step_ratio_why"] == "too few"


def test_the_report_writes_the_page_and_refuses_to_overwrite(tmp_path):
    a = run_folder(tmp_path / "a", [10.0, 10.1, 9.9, 10.0, 10.2, 9.8], log="")
    b = run_folder(tmp_path / "b", [8.0, 8.1, 7.9, 8.0, 8.2, 7.8])
    out = tmp_path / "page.html"
    rep = report.report(report.ReportOptions([str(a), str(b)], output=str(out)))
    assert rep.command == "report" and rep.exit_code == 0 and rep.status == "applied"
    assert rep.run_dir == f"{a}, {b}"
    assert rep.details["html"] == str(out.resolve())
    assert rep.summary[-1] == f"report written to {out}"
    assert rep.details["what_to_do"].startswith("keep the profile")
    assert rep.details["analysis"]["verdict"]["status"] == "applied"
    assert "<html" in out.read_text().lower()
    # Without --force the page is kept, and nothing is computed.
    out.write_text("mine")
    with pytest.raises(BadInput, match="report .*page.html already exists") as e:
        report.report(report.ReportOptions([str(a), str(tmp_path / "nope")], output=str(out)))
    assert e.value.exit_code == EXIT_USAGE and out.read_text() == "mine"
    rep = report.report(report.ReportOptions([str(a), str(b)], output=str(out), force=True))
    assert out.read_text() != "mine"
    # No -o: nothing written, no html key.
    rep = report.report(report.ReportOptions([str(a)]))
    assert "html" not in rep.details and not any("written" in s for s in rep.summary)
    # No verdict: the report's status says unknown, and it still succeeded.
    c = run_folder(tmp_path / "c", log=None)
    rep = report.report(report.ReportOptions([str(c)]))
    assert rep.status == "unknown" and rep.exit_code == 0


def test_the_summary_lines_a_user_reads(tmp_path):
    a = run_folder(tmp_path / "a", [10.0, 10.0, 10.0, 12.0, 12.0, 12.0], log="")
    b = run_folder(tmp_path / "b", [8.0, 8.0, 8.0, 8.0, 8.0, 8.0])
    data = report.build(report.ReportOptions([str(a), str(b)]))
    lines = report.summary_lines(data)
    assert lines[0] == "verdict: applied: " + data["verdict"]["reasons"][0]
    assert lines[1] == "what to do: " + data["verdict"]["what_to_do"]
    assert lines[2].startswith("without profile: median step 11.00 ms (p25 10.00 ms, "
                               "p75 12.00 ms, n=6), 364 TFLOP/s per device, MFU 36.75 % (bf16)")
    assert lines[3].startswith("with profile, 1 run: median step 8.00 ms (p25 8.00 ms, "
                               "p75 8.00 ms, n=6), 500 TFLOP/s per device, MFU 50.53 % (bf16)")
    r = data["step_ratio"]
    assert lines[4] == (f"step-time ratio with/without the profile {r['ratio']:.3f} "
                        f"(95% interval {r['low']:.3f}..{r['high']:.3f}: beyond run-to-run noise)")
    assert len(lines) == 5


def test_the_summary_of_sections_filled_by_hand():
    data = {
        "verdict": {"status": "applied", "reasons": [], "what_to_do": "w"},
        "phases": [{"label": "p", "step_time": None, "throughput": {},
                    "communication": {"span_ps": 4e9, "exposed_ps": 3e9, "device_planes": 2,
                                      "hidden_fraction": 0.25, "collectives": 7},
                    "recompilations": [{"function": f"f{i}", "count": i} for i in range(5)]}],
        "step_ratio": {"ratio": 1.0, "low": 0.9, "high": 1.1, "confidence": 0.9,
                       "beyond_noise": False},
        "schedule": {"moved_count": 2, "pair_count": 5, "more_overlap": 1, "less_overlap": 1},
        "memory": [{"module": f"m{i}", "growth": 0.1 * i, "flagged": i > 0} for i in range(5)],
    }
    assert report.summary_lines(data) == [
        "verdict: applied: ",
        "what to do: w",
        ("p: no step times, exposed communication 1.500 ms per device (75.0 % of 7 collective "
         "executions)"),
        ("step-time ratio with/without the profile 1.000 (90% interval 0.900..1.100: within "
         "run-to-run noise)"),
        "schedule: 2 of 5 async pairs moved (1 overlap more work, 1 less)",
        "peak memory grew with the profile: m1 +10.0 %, m2 +20.0 %, m3 +30.0 %",
        "p: f0 compiled 0x after warm-up", "p: f1 compiled 1x after warm-up",
        "p: f2 compiled 2x after warm-up",
    ]
    data.update(step_ratio=None, step_ratio_why="why not", schedule=None, memory=None)
    data["phases"][0].update(communication={"span_ps": 0}, recompilations=[])
    assert report.summary_lines(data)[2:] == ["p: no step times", "why not"]


# --- what the mutation run's survivors showed untested (issue 37) ---------------------------

USE = "/jax/compilation_cache/compile_requests_use_cache"
HIT = "/jax/compilation_cache/cache_hits"


def compile_recs(t, module, seconds, *, hit=False, thread="1"):
    """One compile as the harness records it (tests/commands/test_compare_facts.py): begin,
    jax's cache events, end, then its seconds."""
    recs = [{"kind": "compile_begin", "t": t, "module": module, "thread": thread, "fdo": False},
            {"kind": "jax_event", "t": t + 0.01, "event": USE, "thread": thread}]
    if hit:
        recs.append({"kind": "jax_event", "t": t + 0.02, "event": HIT, "thread": thread})
    return recs + [
        {"kind": "compile_end", "t": t + 0.03, "module": module, "ok": True, "thread": thread},
        {"kind": "compile", "t": t + 0.04, "fun_name": module, "seconds": seconds,
         "thread": thread}]


def test_a_side_holds_xlas_cost_analysis_and_how_each_executable_was_made(tmp_path):
    xla = {"kind": "module_compiled", "t": 1000.0, "module": "jit_train_step", "flops": 4.0e12,
           "transcendentals": 2.5e9, "bytes_accessed": 7.0e10,
           "memory": {"peak_memory_in_bytes": 3 << 20}}
    f = run_folder(tmp_path / "r", modules=(), compiles=(("jit(train_step)", None),),
                   extra=(xla, *compile_recs(10.0, "jit_init", 0.5),
                          *compile_recs(20.0, "jit_train_step", 2.0, hit=True)))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    assert p["step_module"] == {"module": "jit_train_step", "flops": 4.0e12,
                                "transcendentals": 2.5e9, "bytes_accessed": 7.0e10}
    assert p["modules"] == [{"module": "jit_train_step", "flops": 4.0e12,
                             "memory": {"peak_memory_in_bytes": 3 << 20}, "hlo_file": None}]
    # The steps as found, the warm-up interval left out (said so).
    assert p["steps"] == {"source": "markers", "function": "train_step",
                          "module": "jit_train_step", "how": p["steps"]["how"],
                          "step_time_source": "markers", "count": 6, "excluded": 1}
    assert p["profiled_steps_excluded"] == 1
    # A compile jax gave no seconds adds nothing, to the total or to the step module's.
    c = p["compile"]
    assert c["count"] == 3 and c["total_s"] == pytest.approx(2.5)
    assert c["step_module_s"] == pytest.approx(2.0)
    # Compiled, or loaded from jax's persistent cache: per executable, per kind, in a word.
    assert [(e["module"], e["kind"]) for e in c["executables"]] == [
        ("jit_init", "compiled"), ("jit_train_step", "cached")]
    assert c["by_kind"] == {"compiled": {"count": 1, "seconds": pytest.approx(0.5)},
                            "cached": {"count": 1, "seconds": pytest.approx(2.0)}}
    assert c["label"] == "mixed"


def test_a_gpu_of_unknown_peak_and_a_trace_without_device_planes_are_said_per_backend(tmp_path):
    from helpers.gpu_trace import GpuShape, write_gpu_trace

    f = run_folder(tmp_path / "r", device_kind="NVIDIA L4")
    write_gpu_trace(f / "trace" / "plugins" / "profile" / "2026_11_29_12_00_00",
                    GpuShape(steps=3, devices=0, collectives=()))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    assert p["throughput"]["achieved_tflops"] is None and p["throughput"]["mfu"] is None
    assert p["throughput"]["why_no_mfu"].startswith(
        "no bf16 peak known for device 'NVIDIA L4' (gpu backend): ")
    # A GPU run whose trace has no device plane: CUPTI, not "XLA:CPU has no device timeline".
    assert p["communication"] is None
    assert p["communication_why"] == (
        "the trace holds no /device:GPU plane (was CUPTI available to the profiler?)")


def test_a_run_that_recorded_its_jitted_functions_gets_no_flops_stand_in(tmp_path):
    # The harness recorded the jitted functions but named no step module: the run is not one
    # from before step detection, so the module with the most FLOPs does not stand in.
    record = {"kind": "jit_functions", "t": 2000.0, "step": None, "module": None,
              "functions": []}
    f = run_folder(tmp_path / "r", step_module=None, modules=(("jit_big", 9.0e12),),
                   extra=(record,))
    p = report._side(report.Side("r", "single", [f]), "bf16")
    assert p["step_module"] is None and p["step_module_source"] is None
    # its steps are marked: not "no step was found" (no StepTraceAnnotation markers)
    assert p["why_no_step_module"] == (
        "the StepTraceAnnotation steps ran no jitted function pgle could name (none executed "
        "3 times or more inside them)")
    # Nothing found and nothing recorded: the whole sentence of each why.
    g = run_folder(tmp_path / "g", step_module=None, modules=(), compiles=(), markers=False)
    p = report._side(report.Side("g", "single", [g]), "bf16")
    assert p["why_no_step_module"] == (
        "no step was found (no StepTraceAnnotation markers, no jitted function executed "
        "3 times or more)")
    assert p["why_no_modules"] == (
        "the run recorded no module_compiled events (run by a pgle without per-module "
        "recording, or jax internals changed)")


def test_a_tune_folder_whose_collect_run_is_gone_still_reports(tmp_path):
    # Users delete the biggest folder first: collect/ (its trace). tune.json still names it.
    tune = json.loads(json.dumps(PLAIN))
    top = tune_folder(tmp_path / "t", tune, baseline={}, run={})
    data = report.build(report.ReportOptions([str(top)]))
    collect = data["phases"][0]
    assert (collect["label"], collect["folder"]) == (
        "collect (profiler on, command buffers off)", str(top / "collect"))
    assert collect["platform"] is None
    assert (collect["device_kind"], collect["device_count"]) == (None, None)
    assert collect["step_times_s"] == [] and collect["step_time"] is None
    assert collect["steps"] is None and collect["profiled_steps_excluded"] == 0
    assert collect["throughput"]["why_no_mfu"] == "no step time"
    assert data["step_ratio"] == PLAIN["step_times"]["interval"]  # the comparison is intact
    assert report.summary_lines(data)[2] == (
        "collect (profiler on, command buffers off): no step times")


def test_the_collect_side_is_the_folder_tune_json_names(tmp_path):
    tune = json.loads(json.dumps(PLAIN))
    tune["collect"]["folder"] = "collect-kept"
    top = tune_folder(tmp_path / "t", tune, **{"collect-kept": {}}, baseline={}, run={})
    sides, _ = report.resolve([str(top)])
    assert sides[0].folders == [top / "collect-kept"]
    # A tune.json without a collect entry: collect/, as tune always named it.
    del tune["collect"]
    (top / "tune.json").write_text(json.dumps(tune))
    sides, _ = report.resolve([str(top)])
    assert (sides[0].label, sides[0].folders) == ("collect (profiler on)", [top / "collect"])


def test_the_arms_without_the_profile_carry_no_profile_status(tmp_path):
    # tune.json keeps every arm's run statuses; only a profiled arm's is a PGLE verdict.
    tune = json.loads(json.dumps(COMPARE))
    tune["arms"][0]["statuses"] = ["not_applied"]
    tune["arms"][1]["statuses"] = ["error"]
    top = tune_folder(tmp_path / "t", tune, collect={}, default={}, o1={}, pgle={},
                      **{"o1-pgle": {}})
    sides, _ = report.resolve([str(top)])
    assert [(s.arm, s.status) for s in sides[1:]] == [
        ("default", None), ("o1", None), ("pgle", "not_applied"), ("o1+pgle", "partial")]
    assert sides[1].label == "arm default (jax's defaults)"


def test_a_plain_tune_folder_off_a_gpu_says_no_profile_applies(tmp_path):
    tune = json.loads(json.dumps(PLAIN))
    tune.update(platform="cpu")
    tune["arms"][1]["statuses"] = ["not_applicable"]
    top = tune_folder(tmp_path / "t", tune, collect={}, baseline={}, run={})
    sides, _ = report.resolve([str(top)])
    assert (sides[2].label, sides[2].role) == (
        "run (no profile applies on backend cpu, 1 run)", "run")


def test_a_tune_folder_before_tune_json_with_baselines_and_one_run(tmp_path):
    top = tmp_path / "tune"
    run_folder(top / "collect")
    run_folder(top / "baseline", log="")
    run_folder(top / "baseline-2", log="")
    run_folder(top / "run")  # one run: the platform is read from run/, the only one
    with returns_within(2.0):
        sides, tune = report.resolve([str(top)])
    assert [(s.label, s.role) for s in sides] == [
        ("collect (profiler on)", "collect"),
        ("baseline (no profile, 2 runs)", "baseline"),
        ("with profile, 1 run", "with_profile")]
    assert sides[1].folders == [top / "baseline", top / "baseline-2"]
    # Its report: the baseline against the run, the ratio computed from the folders.
    with returns_within(2.0):
        data = report.build(report.ReportOptions([str(top)]))
    assert data["comparison"] == {"before": "baseline (no profile, 2 runs)",
                                  "after": "with profile, 1 run"}
    # No baseline: one side, said so (no tune.json: not tune's "no baseline run" reason).
    for name in ("baseline", "baseline-2"):
        (top / name / "events.jsonl").unlink()
    with returns_within(2.0):
        data = report.build(report.ReportOptions([str(top)]))
    assert (data["step_ratio"], data["step_ratio_why"]) == (
        None, "one side only: nothing to compare")
    assert data["schedule_why"] == "one side only: nothing to compare"


def test_the_refusals_word_for_word(tmp_path):
    with pytest.raises(BadInput) as e:
        report.resolve([])
    assert e.value.args[0] == "no run folder given."
    a = run_folder(tmp_path / "a")
    with pytest.raises(BadInput) as e:
        report.resolve([str(a)] * 3)
    assert e.value.args[0] == ("3 run folders given; pass one tune run folder, or two run "
                               "folders (without the profile, then with it).")


def test_the_report_carries_the_verdicts_reasons(tmp_path):
    a = run_folder(tmp_path / "a", log="")
    b = run_folder(tmp_path / "b", log="hello\n")
    rep = report.report(report.ReportOptions([str(a), str(b)]))
    assert rep.status == "not_applied"
    assert rep.reasons == rep.details["analysis"]["verdict"]["reasons"] and rep.reasons
    assert rep.summary[0] == f"verdict: not_applied: {rep.reasons[0]}"


def traced_run(path: Path, collective_us: int, **kw) -> Path:
    """A GPU run folder with its kept HLO (one async pair) and the trace of its first run:
    2 devices, 4 steps, one all-gather per step partly behind two 100 us fusions."""
    from helpers.gpu_trace import GpuShape, write_gpu_trace

    f = run_folder(path, hlo={"jit_train_step": ASYNC_HLO}, **kw)
    write_gpu_trace(f / "trace" / "plugins" / "profile" / "2026_11_29_12_00_00",
                    GpuShape(steps=4, devices=2, compute_ops=2, op_us=100,
                             collectives=("all-gather",), collective_us=collective_us,
                             host_copy=False))
    return f


def test_two_traced_runs_fill_every_section_the_verdict_first(tmp_path):
    a = traced_run(tmp_path / "a", 300, log="")
    b = traced_run(tmp_path / "b", 120, peak=2 << 20)
    data = report.build(report.ReportOptions([str(a), str(b)]))
    assert list(data)[0] == "verdict"  # the JSON's first word (and the page's)
    assert data["verdict"]["status"] == "applied"
    # Peak memory per module, before and after: doubled, flagged.
    (mem,) = data["memory"]
    assert (mem["module"], mem["before_bytes"], mem["after_bytes"]) == (
        "jit_train_step", 1 << 20, 2 << 20)
    assert mem["growth"] == pytest.approx(1.0) and mem["flagged"]
    # The schedule of the step module's kept HLO, both sides.
    assert data["schedule_why"] is None
    assert data["schedule"]["pair_count"] == 1
    assert data["schedule"]["before_file"] == str(a / "hlo" / "jit_train_step.txt")
    assert data["schedule"]["after_file"] == str(b / "hlo" / "jit_train_step.txt")
    # The communication per collective and per device, from each side's trace.
    before, after = data["phases"]
    assert data["communication_change_why"] is None
    (row,) = data["communication_change"]
    assert (row["op"], row["module"]) == ("all-gather-start.1", "jit_train_step")
    assert row["before_exposed_ps"] == before["communication"]["exposed_ps"] / 2
    assert row["after_exposed_ps"] == after["communication"]["exposed_ps"] / 2
    assert row["before_exposed_ps"] > row["after_exposed_ps"] > 0
    lines = report.summary_lines(data)
    ms = before["communication"]["exposed_ps"] / 1e9 / 2
    hidden = before["communication"]["hidden_fraction"]
    assert lines[2].endswith(f", exposed communication {ms:.3f} ms per device "
                             f"({(1 - hidden) * 100:.1f} % of 8 collective executions)")
    assert "schedule: 0 of 1 async pairs moved (0 overlap more work, 0 less)" in lines
    assert "peak memory grew with the profile: jit_train_step +100.0 %" in lines


def test_a_second_folder_the_profile_missed_is_still_compared(tmp_path):
    a = run_folder(tmp_path / "a", log="")
    c = run_folder(tmp_path / "c", log="hello\n")
    data = report.build(report.ReportOptions([str(a), str(c)]))
    assert data["comparison"] == {"before": "without profile",
                                  "after": "run (profile not_applied, 1 run)"}
    assert data["compile"]["before"] is not None
    assert data["step_ratio_why"] == (
        "no step-time ratio: no module applied the profile, so both sides ran the same schedule")


def test_the_ratio_takes_the_profiled_sides_backend_else_the_baselines(tmp_path):
    fast = [8.0, 8.1, 7.9, 8.0, 8.2, 7.8]
    slow = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8]
    # Baseline recorded on a CPU, the profiled run on the GPU: the GPU's rule (a ratio).
    a = run_folder(tmp_path / "a", slow, log="", platform="cpu", device_kind="cpu")
    b = run_folder(tmp_path / "b", fast)
    data = report.build(report.ReportOptions([str(a), str(b)]))
    assert data["step_ratio"]["ratio"] == pytest.approx(0.8, abs=0.01)
    assert data["step_ratio_why"] == ""  # a ratio, no caveat (the JSON's empty why)
    # The profiled run left no backend record: the baseline's backend stands in.
    c = run_folder(tmp_path / "c", slow, log="")
    d = run_folder(tmp_path / "d", fast, backend=False)
    data = report.build(report.ReportOptions([str(c), str(d)]))
    assert data["step_ratio"]["ratio"] == pytest.approx(0.8, abs=0.01)
    # The reverse: a CPU profiled run against a GPU baseline has no ratio, and says why.
    data = report.build(report.ReportOptions([str(c), str(a)]))
    assert data["step_ratio"] is None
    assert data["step_ratio_why"].startswith("no step-time ratio: backend cpu applies no profile")


def test_a_compare_tune_folder_missing_an_arms_runs(tmp_path):
    top = tune_folder(tmp_path / "t", COMPARE, collect={}, o1={}, pgle={},
                      **{"o1-pgle": {"compiles": (("jit(train_step)", 7.0),)}})
    (top / "default").mkdir()  # its runs' folder emptied: no events.jsonl
    data = report.build(report.ReportOptions([str(top)]))
    # No default arm: no comparison; the one shown is the pgle arm, not the last arm.
    assert data["comparison"] is None
    assert data["compile"]["before"] is None
    assert data["compile"]["after"]["total_s"] == pytest.approx(1.75)
    assert data["schedule_why"] == ("no baseline run to compare with (tune runs one when a "
                                    "profile can apply: on a GPU)")
    # No pgle arm's runs either: the last arm stands in.
    (top / "pgle" / "events.jsonl").unlink()
    data = report.build(report.ReportOptions([str(top)]))
    assert data["comparison"] is None
    assert data["compile"]["after"]["total_s"] == pytest.approx(7.0)


def test_the_schedule_reads_either_sides_backend_and_says_why_in_full(tmp_path):
    sync = ("the step module has no async collective on cpu: XLA:CPU runs collectives "
            "synchronously, so there is no start/done pair for a profile to move")
    cpu = {"label": "c", "platform": "cpu", "step_module": None, "modules": []}
    unknown = {"label": "u", "platform": None, "step_module": None, "modules": []}
    assert report._schedule(cpu, unknown) == (None, sync)
    assert report._schedule(unknown, cpu) == (None, sync)
    assert report._schedule(unknown, unknown) == (
        None, "no scheduled HLO with async ops was kept for the step module in both phases")


def test_the_kept_hlo_is_read_as_utf8_whatever_the_locale(tmp_path):
    import locale

    # XLA writes metadata (source paths, op names) in UTF-8; a user's locale may be ASCII.
    hlo = ASYNC_HLO.replace("calls=%f\n", 'calls=%f, metadata={source_file="/home/josé/t.py"}\n')
    a, b = phase(tmp_path, "a", hlo), phase(tmp_path, "b", hlo)
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        res, why = report._schedule(a, b)
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
    assert why is None and res["pair_count"] == 1


@pytest.mark.parametrize("status, ratio, todo", [
    ("not_applicable", None, "nothing to do on backend gpu: PGLE is an XLA:GPU feature; run "
                             "this on an NVIDIA GPU to learn what it buys"),
    ("applied", interval(1.0, False), "the profile applies but the step time does not change "
                                      "beyond run-to-run noise: the schedule was already good "
                                      "(or the job is not communication-bound); PGLE is not "
                                      "worth its runs here"),
    ("partial", None, "collect the profile again from this exact program (same flags, shapes, "
                      "sharding, jax version); the modules below say what it misses"),
])
def test_what_to_do_word_for_word(status, ratio, todo):
    data = {"phases": [{"platform": "gpu"}], "step_ratio": ratio}
    assert report._verdict([], {"verdict": {"status": status}}, data)["what_to_do"] == todo


def test_the_verdict_reads_the_executed_hlo_the_run_kept(tmp_path):
    # jax 0.12.0.1's log of a module whose async all-reduce XLA made synchronous: from the log
    # alone, partial; with the executed HLO `pgle run` kept, applied (tests/verdicts/
    # test_sync_converted.py has the rule; here: the report passes that evidence on).
    data = Path(__file__).parents[1] / "data" / "xla_gpu" / "0.12.0.1"
    hlo = (data / "hlo" / "dir-pbtxt" / "jit_prog_d_train.txt").read_text()
    f = run_folder(tmp_path / "r", log=(data / "dir-pbtxt.log").read_text(),
                   modules=(("jit_prog_d_train", 1.0e9),), hlo={"jit_prog_d_train": hlo})
    assert report._verdict_of(f)["status"] == "applied"
    g = run_folder(tmp_path / "g", log=(data / "dir-pbtxt.log").read_text(),
                   modules=(("jit_prog_d_train", 1.0e9),))
    assert report._verdict_of(g)["status"] == "partial"


def test_a_workload_that_never_imported_jax_is_said(tmp_path):
    f = run_folder(tmp_path / "r", log="", jax=False, modules=(), compiles=())
    v = report._verdict_of(f)
    assert v["status"] == "not_applied"
    assert v["reasons"][0].startswith("the workload never imported jax, so XLA compiled nothing")


def test_tunes_own_lines_come_back_from_tune_json(tmp_path):
    from pgle.commands import arms, compare
    from pgle.commands.tune import ArmRuns

    # Plain tune: the runs with the profile are labelled so only where tune gave one.
    times = {"collect": {"median_s": 0.012}, "baseline": None, "run": {"median_s": 0.01},
             "runs": {"baseline": 0, "run": 1}, "ratio": None, "interval": None,
             "caveat": "no step-time ratio: there was no profile to run with",
             "profile_applied": False}
    plain = {"plain": True, "arms": [{"name": "pgle", "pgle": True, "profile": "p.pb"}],
             "step_times": times}
    assert report._tune_lines(plain) == [
        "median step: 12.00 ms (collect, profiled steps left out), 10.00 ms (run; no module "
        "applied the profile)", times["caveat"]]
    # A compare tune folder: its table, rebuilt as tune printed it.
    top = tmp_path / "t"
    runs = [ArmRuns(arms.Arm("default"), [run_folder(top / "default", log="")]),
            ArmRuns(arms.Arm("pgle", pgle=True), [run_folder(top / "pgle")])]
    t = compare.table(runs, platform="gpu")
    lines = report._tune_lines({"compare": t, "step_times": times})
    assert lines == compare.table_lines(t) and lines[0].startswith("arm ")


def test_the_compare_summary_ends_with_predicted_against_measured(tmp_path):
    pred = {"ratios": {"default": 1.0, "pgle": 0.9}, "why": None, "target": "H100", "devices": 8,
            "costs": "the collected profile's costs", "run_dir": "/r/est", "seconds": 41.6,
            "cannot_help": None}
    t = {"baseline": "default", "predicted": pred,
         "arms": [{"arm": "default", "predicted_ratio": 1.0, "ratio": 1.0},
                  {"arm": "pgle", "predicted_ratio": 0.9, "ratio": 0.95}]}
    data = {"verdict": {"status": "applied", "reasons": ["first", "second"], "what_to_do": "w"},
            "phases": [], "step_ratio": None, "step_ratio_why": "why", "compare": t}
    assert report.summary_lines(data) == [
        "verdict: applied: first",  # the first reason only
        "what to do: w",
        "why",
        "predicted ratio vs default: pgle 0.900 (measured 0.950)",
        ("predicted: pgle estimate, XLA:GPU's scheduler for 8 x H100 (no GPU), every arm's "
         "schedule replayed with the collected profile's costs (42 s; /r/est)"),
    ]


def test_the_exposed_communication_in_milliseconds_per_device():
    def line(exposed_ps, planes):
        data = {"verdict": {"status": None, "reasons": [], "what_to_do": "w"}, "step_ratio": None,
                "phases": [{"label": "p", "step_time": None, "throughput": {}, "recompilations": [],
                            "communication": {"span_ps": 1, "exposed_ps": exposed_ps,
                                              "device_planes": planes, "hidden_fraction": 0.5,
                                              "collectives": 3}}]}
        return report.summary_lines(data)[2]

    assert line(3_000_000, 1) == ("p: no step times, exposed communication 0.003 ms per device "
                                  "(50.0 % of 3 collective executions)")
    assert line(3_000_000, 0).startswith("p: no step times, exposed communication 0.003 ms")
    # ps to ms exactly: 1000.0005005 ms rounds up (a divisor off by one part in 1e9 does not).
    assert "exposed communication 1000.001 ms per device" in line(1_000_000_500_500, 1)


def test_collectives_exposed_on_neither_side_sort_last():
    before = {"label": "w/o", "communication": comm(
        2, ("all-reduce.1", "m", 0, 10, 1), ("all-gather.2", "m", 1, 10, 1))}
    after = {"label": "w", "communication": comm(
        2, ("all-reduce.1", "m", 0, 10, 1), ("all-gather.2", "m", 1, 10, 1),
        ("reduce-scatter.3", "m", 600, 1000, 1))}
    rows, _ = report.communication_change(before, after)
    # Per device: 300 ps, 0.5 ps, 0: the most exposed first, the never exposed last.
    assert [r["op"] for r in rows] == ["reduce-scatter.3", "all-gather.2", "all-reduce.1"]
    # The biggest exposure of either side orders them: here the one before the profile.
    before = {"label": "w/o", "communication": comm(1, ("a", "m", 900, 1000, 1),
                                                     ("b", "m", 100, 1000, 1))}
    after = {"label": "w", "communication": comm(1, ("a", "m", 10, 1000, 1),
                                                  ("b", "m", 200, 1000, 1))}
    rows, _ = report.communication_change(before, after)
    assert [r["op"] for r in rows] == ["a", "b"]
