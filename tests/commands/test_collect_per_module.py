"""`pgle collect --per-module`: refusals, the VLOG environment, the manifest, and (on a synthetic
GPU trace, since CPU traces hold no device events) the directory XLA reads, round-tripped into
`pgle run --profile DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle
from pgle.commands import collect as collect_mod
from pgle.commands.collect import CollectOptions, merge_vmodule
from pgle.commands.extract import steps_window
from pgle.commands.options import Extraction
from pgle.errors import BadInput
from pgle.evidence.events import read_events
from pgle.profiles.files import load_profile_source
from pgle.launch.workload import Workload

from helpers.run_folder import finish_run_folder
from helpers.xspace import Event, TraceBuilder

ECHO = str(WORKLOADS / "vmodule_echo.py")
REPLAY = str(WORKLOADS / "replay_xla_log.py")
FA, FB, FC, FD = "a" * 32, "0123456789abcdef" * 2, "c" * 32, "d" * 32
START_NS = 1_700_000_000_000_000_000
STEP_NS = 1_000_000  # 1 ms per step


def echo_of(proc) -> dict:
    out = proc.stdout.decode() + proc.stderr.decode()
    line = next(l for l in out.splitlines() if l.startswith("VMODULE_ECHO "))
    return json.loads(line.split(" ", 1)[1])


# --- refusals: one line, exit 2, nothing launched --------------------------------------------------


@pytest.mark.parametrize("setup,args,words", [
    (None, ["-o", "x.pb"], "names a single profile file"),
    (None, ["-o", "x.pbtxt"], "names a single profile file"),
    ("file", ["-o", "out"], "is not a directory"),
    ("nonempty", ["-o", "out"], "already exists and is not empty"),
    ("foreign", ["-o", "out", "--force"], "not part of a profile directory"),
    (None, ["-o", "out", "--stat", "avg"], "unknown statistic"),
    (None, ["-o", "out", "--qualify"], "--qualify is for a single file"),
    (None, ["-o", "out", "--converter", "jaxlib"], "needs pgle's converter"),
])
def test_per_module_refusals(project, setup, args, words):
    out = project / "out"
    if setup == "file":
        out.write_text("keep me")
    elif setup == "nonempty":
        out.mkdir()
        (out / f"{FA}.pb").write_bytes(b"")
    elif setup == "foreign":
        out.mkdir()
        (out / f"{FA}.pb").write_bytes(b"")
        (out / "notes.txt").write_text("my work")
    before = sorted(p.name for p in out.iterdir()) if out.is_dir() else None
    proc = run_pgle("collect", "--per-module", *args, ECHO, cwd=project, timeout=60)
    assert proc.returncode == 2, proc.stderr.decode()
    lines = pgle_lines(proc)
    assert len(lines) == 1 and words in lines[0], lines
    assert "Traceback" not in proc.stderr.decode()
    assert not (project / ".pgle").exists()  # refused before any launch
    if setup == "file":
        assert out.read_text() == "keep me"
    elif before is not None:
        assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("args,words", [
    (["--stat", "mean"], "--stat applies to pgle's converter"),
    (["--format", "text"], "--format applies to --per-module"),
    (["--qualify"], "--qualify needs pgle's converter"),
])
def test_single_file_option_refusals(project, args, words):
    proc = run_pgle("collect", "-o", "p.pb", *args, ECHO, cwd=project, timeout=60)
    assert proc.returncode == 2 and words in pgle_lines(proc)[0], proc.stderr.decode()


# --- real runs on CPU ----------------------------------------------------------------------------------


def test_per_module_run_on_cpu_sets_vlog_env_and_reports_empty(project):
    env = pgle_env(TF_CPP_VMODULE="foo=2,bar=1", ECHO_FINGERPRINT=FA)
    proc = run_pgle("collect", "--per-module", "-o", "profiles", "--steps", "1:2", "--json",
                    ECHO, cwd=project, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr.decode()
    # The user's TF_CPP_VMODULE entries are kept; XLA's INFO log is on.
    assert echo_of(proc) == {"TF_CPP_VMODULE": "foo=2,bar=1,gpu_hlo_schedule=1",
                             "TF_CPP_MIN_LOG_LEVEL": "0"}
    report = report_of(proc)
    assert report["status"] == "empty" and report["exit_code"] == 1
    assert any("backend cpu" in r for r in report["reasons"])
    assert report["profile"]["path"] is None and not (project / "profiles").exists()
    # The run's own log went to the converter: it found the VLOG line.
    assert report["converter"]["fingerprints"]["log_lines"] == 1
    assert report["converter"]["log"] == str(Path(report["log_path"]))
    window = report["window"]["steps_window"]
    assert window["first_step"] == 1 and window["steps"] == 2
    assert 0 < window["end_ns"] - window["start_ns"] < 60e9
    assert any("--allow-empty" in l for l in pgle_lines(proc))


def test_per_module_allow_empty_writes_directory_and_manifest(project):
    env = pgle_env(TF_CPP_MIN_LOG_LEVEL="2")
    proc = run_pgle("collect", "--per-module", "-o", "profiles/", "--steps", "1:2", "--stat",
                    "p90", "--format", "text", "--allow-empty", "--json", ECHO, cwd=project,
                    env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    # A user's TF_CPP_MIN_LOG_LEVEL is kept, with a warning that it hides the fingerprints.
    assert echo_of(proc) == {"TF_CPP_VMODULE": "gpu_hlo_schedule=1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    report = report_of(proc)
    assert report["status"] == "empty"
    assert any("TF_CPP_MIN_LOG_LEVEL=2 hides" in w for w in report["warnings"])
    assert any("log holds no 'Fingerprint before LHS' line" in r for r in report["reasons"])
    d = project / "profiles"
    assert sorted(p.name for p in d.iterdir()) == ["manifest.json"]
    man = json.loads((d / "manifest.json").read_text())
    assert man["backend"] == "cpu" and man["modules"] == []
    assert man["converter"]["stat"] == "p90" and man["converter"]["per_module"] is True
    assert man["profile"]["kind"] == "directory" and man["profile"]["format"] == "text"
    assert man["window"]["steps_window"]["first_step"] == 1
    assert man["environment"]["TF_CPP_VMODULE"] == "gpu_hlo_schedule=1"
    # An empty directory is no profile for `pgle run`: one clear line, exit 2.
    proc = run_pgle("run", "--profile", "profiles", ECHO, cwd=project, timeout=60)
    assert proc.returncode == 2 and "holds no <fingerprint>" in pgle_lines(proc)[-1]


def test_without_per_module_the_environment_is_untouched_and_pgle_converter_works(project):
    proc = run_pgle("collect", "-o", "p.pbtxt", "--steps", "1:2", "--converter", "pgle",
                    "--stat", "min", "--allow-empty", "--json", ECHO, cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert echo_of(proc) == {"TF_CPP_VMODULE": None, "TF_CPP_MIN_LOG_LEVEL": None}
    report = report_of(proc)
    assert report["profile"]["converter"] == "pgle" and report["converter"]["stat"] == "min"
    assert (project / "p.pbtxt").read_bytes() == b""
    man = json.loads((project / "p.pbtxt.manifest.json").read_text())
    assert man["converter"]["steps_window"]["first_step"] == 1
    # --qualify needs fingerprints, so it turns the VLOG line on too.
    proc = run_pgle("collect", "-o", "q.pb", "--steps", "1:1", "--converter", "pgle", "--qualify",
                    "--allow-empty", ECHO, cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert echo_of(proc)["TF_CPP_VMODULE"] == "gpu_hlo_schedule=1"


def test_tune_per_module_on_cpu(project):
    proc = run_pgle("tune", "--per-module", "--steps", "1:2", "--json", ECHO, cwd=project,
                    timeout=180)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["status"] == "not_applicable"
    first = report["phases"]["collect"]
    assert first["status"] == "empty" and first["converter"]["per_module"] is True


# --- a synthetic GPU run folder through the same extraction collect uses -------------------------------


def gpu_run_folder(root: Path, *, steps: int = 6, window=(2, 4), recompiled: bool = False) -> Path:
    """What a GPU collect run leaves: events.jsonl, workload.log (with VLOG fingerprint lines)
    and trace/plugins/profile/<stamp>/<host>.xplane.pb. Steps 0 and 1 are warm-up (5x slower)
    and lie before the profiled window; jit_step's fingerprint is only in the log; jit_other's
    is nowhere. `recompiled`: jit_step compiled twice (program ids 6 and 7, one fingerprint in
    the log), its fusion.5 taking 6 us in the first executable and 2 us in the second."""
    run = root / "run"
    t = TraceBuilder("host0", profile_start_ns=START_NS)
    t.add_module("jit_train", 5, FA, "module")
    t.add_module("jit_eval", 9, FB, "root")
    t.add_module("jit_step", 6, None, None)
    t.add_module("jit_other", 11, None, None)
    if recompiled:
        t.add_module("jit_step", 7, None, None)
    step_ps = STEP_NS * 1000
    for d in range(2):
        compute = t.line(d, "Stream #13(compute)")
        comm = t.line(d, "Stream #20(nccl)")
        for step in range(steps):
            base = step * step_ps + 100_000_000 + d * 1000  # 100 us into the step
            slow = 5 if step < 2 else 1
            compute += [
                Event("fusion.3", "jit_train", 5, base, 10_000 * slow),
                Event("fusion.7", "jit_train", 5, base + 20_000, (3_000 + step) * slow),
                Event("cublas-gemm.1", "jit_train", 5, base + 40_000, 7_000 * slow,
                      scope_range_id=100 + step),
                Event("cublas-gemm.1", "jit_train", 5, base + 50_000, 1_000 * slow,
                      scope_range_id=100 + step),
                Event("fusion.3", "jit_eval", 9, base + 500_000, 2_000 * slow),
                Event("fusion.5", "jit_step", 6, base + 550_000, 6_000 * slow),
                Event("fusion.1", "jit_other", 11, base + 600_000, 4_000 * slow),
            ]
            if recompiled:
                compute += [Event("fusion.5", "jit_step", 7, base + 700_000, 2_000 * slow)]
            comm += [Event("all-reduce-start.1", "jit_train", 5, base + 60_000, 20_000 * slow)]
    t.write(run / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00")
    first, count = window
    sec = lambda ns: ns / 1e9  # noqa: E731  (time.time() in the harness)
    records = [{"kind": "start", "t": sec(START_NS - STEP_NS)},
               {"kind": "backend", "t": sec(START_NS), "platform": "gpu", "device_count": 2,
                "device_kind": "NVIDIA H100", "process_count": 1}]
    for i in range(steps):
        if i == first:
            records.append({"kind": "trace_start", "t": sec(START_NS + i * STEP_NS),
                            "purpose": "window"})
        records.append({"kind": "step_enter", "t": sec(START_NS + i * STEP_NS + 50_000),
                        "name": "train", "step_num": i, "index": i})
        records.append({"kind": "step_exit", "t": sec(START_NS + (i + 1) * STEP_NS - 50_000),
                        "index": i})
        if i == first + count - 1:
            records.append({"kind": "trace_stop", "t": sec(START_NS + (i + 1) * STEP_NS),
                            "purpose": "window", "first_step": first, "steps": count,
                            "seconds": count * STEP_NS / 1e9, "dir": str(run / "trace")})
    records.append({"kind": "exit", "t": sec(START_NS + steps * STEP_NS), "code": 0})
    (run / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "workload.log").write_text(
        "I1122 04:33:12.000520  4101 gpu_hlo_schedule.cc:520] Fingerprint before LHS for module "
        f"jit_step(6) = {FC}\n"
        "2024-01-01 10:00:00.000001: I external/xla/xla/service/gpu/gpu_hlo_schedule.cc:573] "
        f"Fingerprint before LHS for module jit_train(5) = {FA}\n"
        + (f"I1122 04:33:13.000520  4101 gpu_hlo_schedule.cc:520] Fingerprint before LHS for "
           f"module jit_step(7) = {FC}\n" if recompiled else ""))
    return run


def opts_for(output, force=False, **extraction) -> CollectOptions:
    return CollectOptions(workload=Workload(str(WORKLOADS / "train.py"), None, ("--x",)),
                          output=str(output), extraction=Extraction(per_module=True, **extraction),
                          force=force)


def test_steps_window_from_events(tmp_path):
    run = gpu_run_folder(tmp_path)
    window = steps_window(read_events(run / "events.jsonl"))
    assert window["first_step"] == 2 and window["steps"] == 4
    assert abs(window["start_ns"] - (START_NS + 2 * STEP_NS + 50_000)) < 1000
    assert abs(window["end_ns"] - (START_NS + 6 * STEP_NS)) < 1000


def test_synthetic_run_folder_gives_the_directory_xla_reads(tmp_path):
    run = gpu_run_folder(tmp_path)
    out = tmp_path / "profiles"
    report = finish_run_folder(opts_for(out, stat="max"), run)
    assert report.status == "collected" and report.exit_code == 0, report.reasons
    # Exactly what XLA looks up first: <32-hex>.pbtxt per module with a fingerprint, from the trace's
    # module attribute (FA), its ROOT attribute (FB) and the log (FC); jit_other has none.
    src = load_profile_source(out)
    assert src.kind == "directory" and sorted(src.modules) == sorted([FA, FB, FC])
    assert [f.name for f in src.files] == sorted(f"{fp}.pbtxt" for fp in (FA, FB, FC))
    assert src.ignored == ["manifest.json"] and not src.shadowed
    train = dict(src.modules[FA].costs)
    assert sorted(train) == ["all-reduce-start.1", "cublas-gemm.1", "fusion.3", "fusion.7"]
    # Only the profiled steps: the 5x slower warm-up executions are out, even for --stat max.
    assert train["fusion.3"] == pytest.approx(0.01)
    assert train["fusion.7"] == pytest.approx(0.003005)
    assert train["cublas-gemm.1"] == pytest.approx(0.011)  # two kernels of one execution
    assert dict(src.modules[FB].costs) == {"fusion.3": pytest.approx(0.002)}
    assert dict(src.modules[FC].costs) == {"fusion.5": pytest.approx(0.006)}
    assert report.details["converter"]["events_outside_window"] > 0
    assert any("no profile file for 1 module: jit_other(11)" in w for w in report.warnings)

    man = json.loads((out / "manifest.json").read_text())
    rows = {r["module"]: r for r in man["modules"]}
    assert rows["jit_train(5)"] == {
        "module": "jit_train(5)", "name": "jit_train", "program_id": 5, "fingerprint": FA,
        "fingerprint_source": "hlo-module", "instruction_count": 4, "event_count": 8 * 5,
        "file": f"{FA}.pbtxt"}
    assert rows["jit_eval(9)"]["fingerprint_source"] == "hlo-root"
    assert rows["jit_step(6)"]["fingerprint_source"] == "log"
    assert rows["jit_other(11)"]["fingerprint"] is None and rows["jit_other(11)"]["file"] is None
    assert man["converter"]["stat"] == "max"
    assert man["converter"]["fingerprints"]["log_lines"] == 2
    assert man["window"]["steps_window"]["first_step"] == 2
    assert man["profile"]["sha256"] == src.sha256 and man["profile"]["instructions"] == 6
    assert man["backend"] == "gpu" and man["device_count"] == 2
    assert man["argv"] == [str(WORKLOADS / "train.py"), "--x"]
    statuses = {m["module"]: m["status"] for m in report.modules}
    assert statuses["jit_other(11)"] == "no fingerprint" and statuses["jit_eval(9)"] == "written"

    # Again: refused without --force; with --force the directory is replaced as a whole, here
    # by the binary form.
    with pytest.raises(BadInput, match="not empty"):
        finish_run_folder(opts_for(out), run)
    report = finish_run_folder(opts_for(out, fmt="binary", force=True), run)
    assert report.status == "collected"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{fp}.pb" for fp in (FA, FB, FC)] + ["manifest.json"])
    src = load_profile_source(out)
    assert dict(src.modules[FA].costs)["fusion.7"] == pytest.approx(0.0030035)  # median of steps 2..5
    assert not list(tmp_path.glob(".profiles.*"))  # no temp or aside folder left behind


def test_two_compiles_of_one_fingerprint_pool_their_executions(tmp_path):
    # One module compiled twice (two program ids, one fingerprint: the same HLO): XLA reads one
    # <fingerprint>.pbtxt for both, so its costs come from both executables' events, pooled.
    run = gpu_run_folder(tmp_path, recompiled=True)
    out = tmp_path / "profiles"
    report = finish_run_folder(opts_for(out), run)
    assert report.status == "collected", report.reasons
    costs = dict(load_profile_source(out).modules[FC].costs)
    # 8 events of 6 us and 8 of 2 us (2 devices x steps 2..5): their median, not either half.
    assert costs == {"fusion.5": pytest.approx(0.004)}


def test_synthetic_run_folder_without_any_fingerprint_is_empty(tmp_path):
    run = gpu_run_folder(tmp_path)
    (run / "workload.log").write_text("no VLOG lines\n")
    # Drop every module-level fingerprint: rebuild the trace without any.
    trace_dir = next((run / "trace" / "plugins" / "profile").iterdir())
    t = TraceBuilder("host0", profile_start_ns=START_NS)
    t.add_module("jit_step", 6, None, None)
    t.line(0, "Stream #1").append(Event("fusion.5", "jit_step", 6, 2 * STEP_NS * 1000 + 10**8,
                                        6_000))
    t.write(trace_dir)
    out = tmp_path / "profiles"
    report = finish_run_folder(opts_for(out), run)
    assert report.status == "empty" and report.exit_code == 1
    assert any("no module in the trace has a fingerprint (1 module)" in r
               for r in report.reasons)
    assert any("jit_step(6)" in w and "no 'Fingerprint before LHS' line" in w
               for w in report.warnings)
    assert not out.exists()


def test_collected_directory_round_trips_into_pgle_run(project):
    run = gpu_run_folder(project)
    finish_run_folder(opts_for(project / "profiles"), run)
    proc = run_pgle("run", "--profile", "profiles", "--json", REPLAY, cwd=project, timeout=120,
                    env=pgle_env(REPLAY_SCENARIO="directory", REPLAY_FP_TRAIN=FA,
                                 REPLAY_FP_EVAL=FD))
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["profile"]["kind"] == "directory"
    assert sorted(report["profile"]["modules"]) == sorted([FA, FB, FC])
    assert report["directory"] == {"found": [FA], "looked_up_missing": [FD],
                                   "unused": sorted([FB, FC])}
    given = Path(report["profile"]["given_to_xla"])
    assert sorted(p.name for p in given.iterdir()) == sorted(f"{fp}.pbtxt" for fp in (FA, FB, FC))
    # `pgle run` read the manifest inside the directory for its drift check (collected on 2
    # devices, running on 1 CPU device now).
    assert "2 devices when collecting, 1 now" in report["warnings"]


def test_a_file_xla_looked_up_in_vain_is_not_also_unused(project):
    """The directory's file of a module whose lookup XLA logged as missing (XLA saw no file
    there: the eval module's lookup answers nothing) is listed as looked up in vain, not as
    a file no module used."""
    run = gpu_run_folder(project)
    finish_run_folder(opts_for(project / "profiles"), run)
    proc = run_pgle("run", "--profile", "profiles", "--json", REPLAY, cwd=project, timeout=120,
                    env=pgle_env(REPLAY_SCENARIO="directory", REPLAY_FP_TRAIN=FA,
                                 REPLAY_FP_EVAL=FB))
    assert proc.returncode == 0, proc.stderr.decode()
    assert report_of(proc)["directory"] == {"found": [FA], "looked_up_missing": [FB],
                                           "unused": [FC]}


def test_merge_vmodule_keeps_the_users_entries():
    assert merge_vmodule(None) == "gpu_hlo_schedule=1"
    assert merge_vmodule("") == "gpu_hlo_schedule=1"
    assert merge_vmodule("foo=2") == "foo=2,gpu_hlo_schedule=1"
    assert merge_vmodule("gpu_hlo_schedule=3,foo=1") == "gpu_hlo_schedule=3,foo=1"
    assert merge_vmodule("foo=1,gpu_hlo_schedule=0") == "foo=1,gpu_hlo_schedule=1"
    assert merge_vmodule("foo=1,") == "foo=1,gpu_hlo_schedule=1"
    # The user's own entry at exactly the level needed stays as typed (spaces, zeros and all).
    assert merge_vmodule(" gpu_hlo_schedule = 01 ,foo=1") == " gpu_hlo_schedule = 01 ,foo=1"
    env, notices, warnings = collect_mod.fingerprint_environment(
        {"TF_CPP_VMODULE": "gpu_hlo_schedule=2", "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert env["TF_CPP_VMODULE"] == "gpu_hlo_schedule=2" and not notices and not warnings
