"""`pgle tune` end to end in process (pgle.commands.tune.body): which runs it makes in which
order with which options, which arm is the anchor, the ratios' direction, the verdict and exit
code it takes from which run, what it says, and what it writes (tune.json, run folders).

A GPU run cannot happen on a CPU machine, so tune's `phase` (what pgle.jobs.driver gives it:
run one sub-workflow) is played here by `Phases`: for each phase it makes the run folder a run
of a GPU workload leaves (events.jsonl: backend, step markers, the step function's module,
its compile and whether jax loaded it from the persistent cache) and returns the report and
job report the collect or run workflow would. The workload's speed follows what the run was
given, as a real GPU workload's would: the profile halves its step, JAX_OPTIMIZATION_LEVEL=O1
takes a quarter off, the SoL estimator adds half. So every ratio checks that each arm ran with
exactly what its name says, and no other arm did. Everything else is tune's own code: the
compare table, the step times, tune.json, the report `pgle report` writes."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from pgle.commands import arms, tune
from pgle.commands.options import CollectOptions, StoreOptions, VerdictOptions, Window
from pgle.jobs import layout as layouts
from pgle.jobs import ranks
from pgle.jobs.driver import PhaseResult
from pgle.launch.workload import Workload
from pgle.report import Report

WORKLOAD = Workload("/p/train.py", None, ("--steps", "12"))
BASE_S = 0.4  # the workload's step without a profile, O1 or SoL
STEPS = 12
COLLECT_WF = object()  # the sub-workflows tune hands to `phase` (pgle.api's, here markers)
RUN_WF = object()


def step_s(opts) -> float:
    """The step of a GPU workload given these run options (see the module docstring)."""
    s = BASE_S
    if opts.profile is not None or opts.store is not None:
        s *= 0.5
    if dict(opts.env).get("JAX_OPTIMIZATION_LEVEL") == "O1":
        s *= 0.75
    if dict(opts.xla).get(arms.SOL_FLAG) == "true":
        s *= 1.5
    return s


def write_run(folder: Path, step: float, platform: str, *, cached: bool = False) -> None:
    """events.jsonl as the harness writes it: the backend, the step module's compile (loaded
    from jax's persistent cache when `cached`), its memory, STEPS marked steps `step` apart
    (step 0's interval, the compile, is never counted) and the step function's record."""
    t = 1000.0
    recs: list[dict] = [
        {"kind": "backend", "t": t, "platform": platform, "device_count": 1,
         "device_kind": "NVIDIA H100 80GB HBM3"},
        {"kind": "compile_begin", "t": t, "module": "jit_train_step", "thread": "1", "fdo": False},
        {"kind": "jax_event", "t": t + 0.1, "thread": "1",
         "event": "/jax/compilation_cache/compile_requests_use_cache"},
    ]
    if cached:
        recs.append({"kind": "jax_event", "t": t + 0.2, "thread": "1",
                     "event": "/jax/compilation_cache/cache_hits"})
    recs += [
        {"kind": "compile_end", "t": t + 0.3, "module": "jit_train_step", "ok": True,
         "thread": "1"},
        {"kind": "compile", "t": t + 0.4, "fun_name": "jit_train_step",
         "seconds": 0.1 if cached else 2.0, "thread": "1"},
        {"kind": "module_compiled", "t": t + 0.5, "module": "jit_train_step", "flops": 1.0,
         "memory": {"peak_memory_in_bytes": 3 << 20}},
    ]
    t += 5.0  # the compile
    for i in range(STEPS):
        recs.append({"kind": "step_enter", "t": t, "name": "train", "step_num": i, "index": i})
        t += step
    recs.append({"kind": "jit_functions", "t": t, "step": "train_step", "module": "jit_train_step",
                 "functions": []})
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


@dataclasses.dataclass
class Phases:
    """tune's `phase`: records each call, makes its run folder, returns its reports."""

    platform: str = "cuda"
    collect_status: str = "collected"
    collect: dict = dataclasses.field(default_factory=dict)  # more of collect's job report
    statuses: dict = dataclasses.field(default_factory=dict)  # run folder -> its verdict
    exits: dict = dataclasses.field(default_factory=dict)  # run folder -> workload exit code
    calls: list = dataclasses.field(default_factory=list)

    def __call__(self, name, workflow, opts, run_root) -> PhaseResult:
        self.calls.append((name, workflow, opts, run_root))
        folder = Path(run_root)
        if name == "collect":
            assert workflow is COLLECT_WF
            write_run(folder, BASE_S * 1.1, self.platform)  # the profiler slows its steps
            job = {"command": "collect", "status": self.collect_status, "exit_code": 0,
                   "workload_exit_code": 0, "backend": {"platform": self.platform,
                                                        "device_kind": "NVIDIA H100 80GB HBM3",
                                                        "device_count": 1},
                   "log_path": str(folder / "workload.log"), "trace_dir": str(folder / "trace"),
                   "warnings": ["collect warned"], "reasons": ["collect's reason"],
                   "summary": ["collect's summary"]}
            if self.collect_status == "collected":
                Path(opts.default_output).write_bytes(b"profile")
                job["profile"] = {"path": opts.default_output, "modules": 1}
            job.update(self.collect)
            return PhaseResult(Report("collect", job["status"]), job)
        assert workflow is RUN_WF
        # Every later run of an arm loads the executable its first run compiled.
        write_run(folder, step_s(opts), self.platform, cached=folder.name[-2:-1] == "-")
        code = self.exits.get(folder.name, 0)
        own = Report("run", self.statuses.get(folder.name, "applied"), exit_code=code,
                     workload_exit_code=code, run_dir=str(folder),
                     log_path=str(folder / "workload.log"), modules=[{"module": folder.name}],
                     reasons=[f"{folder.name}'s reason"], warnings=["collect warned", "run warned"],
                     summary=[f"{folder.name}'s summary"])
        return PhaseResult(own, own.to_dict())


def run_tune(tmp_path, phases, environ=None, **opts):
    collect = {"output": None, **opts.pop("collect", {})}
    copts = CollectOptions(workload=WORKLOAD, run_dir=str(tmp_path / "tune"), **collect)
    topts = tune.TuneOptions(copts, **opts)
    lay = layouts.resolve(tune.request(topts), ranks.detect({}), None)
    return tune.body(topts, lay, phases, dict(environ or {}), collect_workflow=COLLECT_WF,
                     run_workflow=RUN_WF)


def names(phases):
    return [c[0] for c in phases.calls]


def run_opts(phases, name):
    return next(c[2] for c in phases.calls if c[0] == name)


def notices(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "pgle.commands.tune"]


def tune_json(tmp_path):
    return json.loads((tmp_path / "tune" / "tune.json").read_text())


# --- plain tune: baseline and profile runs, alternating ----------------------------------------

def test_plain_tune_on_a_gpu_alternates_baseline_and_profile_runs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases()
    verdict = VerdictOptions(min_coverage=0.5)
    report = run_tune(tmp_path, phases, verdict=verdict,
                      collect={"window": Window(steps=(2, 3))})
    top = tmp_path / "tune"
    assert names(phases) == ["collect", "baseline", "run", "baseline-2", "run-2", "baseline-3",
                             "run-3"]
    assert [c[3] for c in phases.calls] == [str(top / n) for n in names(phases)]
    # collect writes its profile into the tune folder, never into a run folder of its own
    copts = phases.calls[0][2]
    assert copts.run_dir is None and copts.default_output == str(top / "profile.pb")
    assert copts.window == Window(steps=(2, 3)) and copts.workload == WORKLOAD
    profile = str(top / "profile.pb")
    for name in names(phases)[1:]:
        o = run_opts(phases, name)
        assert o.workload == WORKLOAD and o.verdict == verdict
        assert (o.xla, o.env, o.store) == ((), (), None)
        assert o.profile == (profile if name.startswith("run") else None)
        # the first run of each arm keeps the collect window's trace; later ones none
        assert o.trace_window == (Window(steps=(2, 3)) if "-" not in name else None)
    # the verdict is the first profile run's; its warnings join collect's, once each
    assert (report.command, report.status, report.exit_code) == ("tune", "applied", 0)
    assert report.reasons == ["run's reason"] and report.modules == [{"module": "run"}]
    assert report.log_path == str(top / "run" / "workload.log")
    assert report.run_dir == str(top) and report.trace_dir == str(top / "collect" / "trace")
    assert report.warnings == ["collect warned", "run warned"]
    assert report.profile == {"path": profile, "modules": 1}
    assert report.details["phases"]["collect"]["status"] == "collected"
    assert report.details["phases"]["run"]["run_dir"] == str(top / "run")
    # the profile runs halve the step: the ratio is below 1 (with / without)
    times = report.details["step_times"]
    assert times["ratio"] == pytest.approx(0.5) and times["caveat"] is None
    assert times["runs"] == {"baseline": 3, "run": 3} and times["profile_applied"] is True
    assert times["baseline"]["median_s"] == pytest.approx(BASE_S)
    assert times["run"]["median_s"] == pytest.approx(BASE_S / 2)
    assert report.summary[0] == "run's summary"
    assert report.summary[1].startswith(
        "median step: 400.00 ms without the profile, 200.00 ms with it (ratio 0.500")
    assert report.summary[1].endswith("beyond run-to-run noise; 3 runs each)")
    assert report.summary[-1] == (
        "collect changed: the JAX profiler ran for the window (profiled steps are never timed); "
        "--xla_gpu_enable_command_buffer='' (command buffers off: kernels inside CUDA graphs "
        "are invisible to the profiler)")
    assert report.details["collect_changed"] == report.summary[-1][17:].split("; ")
    said = notices(caplog)
    assert said[:3] == ["phase 1: collect", "phase 2/3: baseline run 1/3 (no profile, your flags)",
                        f"phase 3/3: run with {profile} 1/3"]
    assert said[-1] == f"phase 3/3: run with {profile} 3/3"
    doc = tune_json(tmp_path)
    assert (doc["plain"], doc["platform"], doc["repeat"]) == (True, "cuda", 3)
    assert [(a["name"], a["folders"], a["profile"], a["statuses"]) for a in doc["arms"]] == [
        ("default", ["baseline", "baseline-2", "baseline-3"], None, ["applied"] * 3),
        ("pgle", ["run", "run-2", "run-3"], profile, ["applied"] * 3)]
    assert doc["verdict"] == {"status": "applied", "reasons": ["run's reason"], "exit_code": 0}
    assert doc["step_times"]["ratio"] == pytest.approx(0.5) and doc["compare"] is None
    assert doc["collect"] == {"folder": "collect", "changed": report.details["collect_changed"]}


def test_one_run_per_arm_has_no_tag_and_the_verdict_is_the_profile_runs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(statuses={"baseline": "not_applied", "run": "partial"})
    report = run_tune(tmp_path, phases, repeat=1)
    assert names(phases) == ["collect", "baseline", "run"]
    profile = str(tmp_path / "tune" / "profile.pb")
    assert notices(caplog)[1:] == ["phase 2/3: baseline run (no profile, your flags)",
                                   f"phase 3/3: run with {profile}"]
    assert report.status == "partial" and report.reasons == ["run's reason"]
    times = report.details["step_times"]  # a partial profile still shapes the schedule
    assert times["ratio"] == pytest.approx(0.5) and times["profile_applied"] is True
    assert times["runs"] == {"baseline": 1, "run": 1}
    assert report.summary[1].endswith("; 1 run each)")


def test_a_profile_no_module_applied_gives_no_ratio(tmp_path):
    phases = Phases(statuses={n: "not_applied" for n in ("run", "run-2", "run-3")})
    report = run_tune(tmp_path, phases)
    times = report.details["step_times"]
    assert report.status == "not_applied" and times["ratio"] is None
    assert times["caveat"].startswith("no step-time ratio: no module applied the profile")
    assert times["profile_applied"] is False
    assert report.summary[1].endswith(
        "400.00 ms (baseline), 200.00 ms (run; no module applied the profile)")


def test_per_module_profiles_go_to_a_profiles_folder(tmp_path):
    phases = Phases(collect={"profile": {"path": "/elsewhere/profiles"}})
    run_tune(tmp_path, phases, repeat=1,
             collect={"extraction": dataclasses.replace(CollectOptions(WORKLOAD, None).extraction,
                                                        per_module=True)})
    assert phases.calls[0][2].default_output == str(tmp_path / "tune" / "profiles")
    # the runs use the profile where collect says it wrote it
    assert run_opts(phases, "run").profile == "/elsewhere/profiles"


def test_per_rank_profiles_run_each_rank_with_its_own(tmp_path):
    out = str(tmp_path / "p-%r.pb")
    phases = Phases(collect={"mode": "per_rank", "profile": {"path": "/job/merged.pb"}})
    report = run_tune(tmp_path, phases, repeat=1, collect={"output": out})
    assert run_opts(phases, "run").profile == out  # not the job's one profile
    assert tune_json(tmp_path)["arms"][1]["profile"] == out
    assert report.details["phases"]["collect"]["mode"] == "per_rank"


def test_a_merged_jobs_partial_profile_is_used_and_a_lone_partial_one_fails(tmp_path):
    phases = Phases(collect_status="partial",
                    collect={"mode": "merge", "profile": {"path": "/job/profile.pb"}})
    report = run_tune(tmp_path / "merge", phases, repeat=1)
    assert run_opts(phases, "run").profile == "/job/profile.pb" and report.status == "applied"
    phases = Phases(collect_status="partial", collect={"exit_code": 4})
    report = run_tune(tmp_path / "alone", phases, repeat=1)
    assert names(phases) == ["collect"] and (report.status, report.exit_code) == ("error", 4)


def test_off_a_gpu_one_run_without_a_profile_and_no_ratio(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(platform="cpu", collect_status="empty", statuses={"run": "not_applicable"},
                    collect={"reasons": ["no GPU", "no module ran in the window"]})
    report = run_tune(tmp_path, phases, environ={"XLA_FLAGS": "--xla_gpu_enable_command_buffer="},
                      collect={"window": Window(steps=(1, 2))})
    assert names(phases) == ["collect", "run"]
    o = run_opts(phases, "run")
    assert o.profile is None and o.store is None and o.trace_window == Window(steps=(1, 2))
    assert notices(caplog)[1] == "phase 2/2: run without a profile: backend cpu records none"
    assert report.status == "not_applicable" and report.exit_code == 0
    assert report.reasons == [
        "run's reason", "phase 1 could not produce a profile: no GPU; no module ran in the window"]
    assert report.profile is None
    times = report.details["step_times"]
    assert times["ratio"] is None and times["runs"] == {"baseline": 0, "run": 1}
    assert times["caveat"].startswith("no step-time ratio: backend cpu applies no profile")
    assert report.summary[1] == ("median step: 440.00 ms (collect, profiled steps left out), "
                                 "400.00 ms (run)")
    # command buffers were already off in the user's flags: collect changed only the profiler
    assert report.details["collect_changed"] == [
        "the JAX profiler ran for the window (profiled steps are never timed)"]
    doc = tune_json(tmp_path)
    assert [(a["name"], a["folders"], a["profile"]) for a in doc["arms"]] == [
        ("pgle", ["run"], None)]


def test_a_profile_made_off_a_gpu_is_run_once_and_named(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(platform="cpu", statuses={"run": "not_applicable"})
    report = run_tune(tmp_path, phases)
    profile = str(tmp_path / "tune" / "profile.pb")
    assert names(phases) == ["collect", "run"] and run_opts(phases, "run").profile == profile
    assert notices(caplog)[1] == f"phase 2/2: run with {profile}"
    assert not any(r.startswith("phase 1 could not") for r in report.reasons)
    assert "(run)" in report.summary[1] and "with the profile" not in report.summary[1]
    assert tune_json(tmp_path)["arms"][0]["profile"] == profile


def test_flags_that_never_reached_xla_are_not_said_to_have_changed(tmp_path):
    phases = Phases(collect={"flags_never_reached_xla": ["xla_gpu_enable_command_buffer"]})
    report = run_tune(tmp_path, phases, repeat=1)
    assert report.details["collect_changed"] == [
        "the JAX profiler ran for the window (profiled steps are never timed)"]


def test_a_failed_collect_stops_tune_with_its_code_and_reasons(tmp_path):
    phases = Phases(collect_status="error",
                    collect={"exit_code": 2, "workload_exit_code": 7, "warnings": ["w1"],
                             "store": {"summary": "store: 0 added"}})
    report = run_tune(tmp_path, phases)
    assert names(phases) == ["collect"]
    assert (report.status, report.exit_code, report.workload_exit_code) == ("error", 2, 7)
    assert report.reasons == ["collect's reason"] and report.summary == ["collect's summary"]
    assert report.warnings == ["w1"] and "step_times" not in report.details
    top = tmp_path / "tune"
    assert (report.run_dir, report.log_path, report.trace_dir) == (
        str(top), str(top / "collect" / "workload.log"), str(top / "collect" / "trace"))
    assert list(report.details["phases"]) == ["collect"]  # collect's job report, as it was
    assert report.details["phases"]["collect"]["store"] == {"summary": "store: 0 added"}
    assert not (tmp_path / "tune" / "tune.json").exists()
    # no profile on a GPU is a failure even when the workload ran
    phases = Phases(collect_status="empty", collect={"exit_code": 0})
    report = run_tune(tmp_path / "2", phases)
    assert names(phases) == ["collect"] and (report.status, report.exit_code) == ("error", 1)


def test_a_failing_workload_stops_the_arms_and_its_code_is_tunes(tmp_path):
    phases = Phases(exits={"baseline-2": 3}, statuses={"baseline-2": "error"})
    report = run_tune(tmp_path, phases)
    assert names(phases) == ["collect", "baseline", "run", "baseline-2"]
    assert (report.status, report.exit_code, report.workload_exit_code) == ("error", 3, 3)
    assert report.reasons == ["baseline-2's reason"]
    assert report.details["phases"]["run"]["run_dir"] == str(tmp_path / "tune" / "baseline-2")
    doc = tune_json(tmp_path)
    assert [a["folders"] for a in doc["arms"]] == [["baseline", "baseline-2"], ["run"]]
    assert doc["verdict"]["exit_code"] == 3


def test_a_store_serves_the_profile_runs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    store = tmp_path / "store"
    store.mkdir()
    phases = Phases(collect={"store": {"summary": "store: 1 module added"}})
    opts = {"extraction": dataclasses.replace(CollectOptions(WORKLOAD, None).extraction,
                                              per_module=True),
            "store": StoreOptions(str(store))}
    report = run_tune(tmp_path, phases, repeat=1, collect=opts)
    o = run_opts(phases, "run")
    assert o.profile is None and o.store == StoreOptions(str(store), serve=True)
    assert run_opts(phases, "baseline").store is None
    said = notices(caplog)
    assert "store: 1 module added" in said
    assert f"phase 3/3: run with the store {store}" in said
    assert tune_json(tmp_path)["arms"][1]["profile"] == f"the store {store}"
    assert report.details["step_times"]["run"]["median_s"] == pytest.approx(BASE_S / 2)


def test_off_a_gpu_a_store_is_served_though_collect_made_no_profile(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    store = tmp_path / "store"
    store.mkdir()
    phases = Phases(platform="cpu", collect_status="empty", statuses={"run": "not_applicable"})
    opts = {"extraction": dataclasses.replace(CollectOptions(WORKLOAD, None).extraction,
                                              per_module=True),
            "store": StoreOptions(str(store))}
    report = run_tune(tmp_path, phases, collect=opts)
    assert names(phases) == ["collect", "run"]  # no GPU: one run, no baseline
    assert run_opts(phases, "run").store == StoreOptions(str(store), serve=True)
    assert notices(caplog)[1] == f"phase 2/2: run with the store {store}"
    # the store held a profile to serve: phase 1 is not blamed for having made none
    assert report.reasons == ["run's reason"]
    assert "(run)" in report.summary[1] and "with the profile" not in report.summary[1]


def test_a_store_that_is_not_there_serves_nothing(tmp_path):
    phases = Phases()
    opts = {"extraction": dataclasses.replace(CollectOptions(WORKLOAD, None).extraction,
                                              per_module=True),
            "store": StoreOptions(str(tmp_path / "no-store"))}
    run_tune(tmp_path, phases, repeat=1, collect=opts)
    o = run_opts(phases, "run")
    assert o.store is None and o.profile == str(tmp_path / "tune" / "profiles")
    assert tune_json(tmp_path)["arms"][1]["profile"] == o.profile  # what the runs were given


def test_a_remote_store_is_served_without_looking_for_a_folder(tmp_path):
    phases = Phases()
    opts = {"extraction": dataclasses.replace(CollectOptions(WORKLOAD, None).extraction,
                                              per_module=True),
            "store": StoreOptions("gs://bucket/profiles")}
    run_tune(tmp_path, phases, repeat=1, collect=opts)
    o = run_opts(phases, "run")
    assert o.profile is None and o.store == StoreOptions("gs://bucket/profiles", serve=True)
    assert tune_json(tmp_path)["arms"][1]["profile"] == "the store gs://bucket/profiles"


# --- tune --compare: the named arms --------------------------------------------------------------

PLAN = arms.parse_arms("o1+pgle,sol,pgle,o1")  # default first, added


def test_compare_runs_each_arm_with_what_its_name_says_and_default_is_the_anchor(
        tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(statuses={"arm-o1-pgle": "not_applied"})
    report = run_tune(tmp_path, phases, repeat=2, compare=PLAN)
    order = ["arm-default", "arm-o1-pgle", "arm-sol", "arm-pgle", "arm-o1"]
    assert names(phases) == ["collect", *order, *(f"{n}-2" for n in order)]
    profile = str(tmp_path / "tune" / "profile.pb")
    for name in order:
        o = run_opts(phases, name)
        assert (o.profile == profile) is ("pgle" in name)
        assert o.env == ((("JAX_OPTIMIZATION_LEVEL", "O1"),) if "o1" in name else ())
        assert o.xla == (((arms.SOL_FLAG, "true"),) if "sol" in name else ())
        assert o.trace_window == Window() and run_opts(phases, name + "-2").trace_window is None
    said = notices(caplog)
    assert said[1] == ("arms: default: your flags, unchanged; o1+pgle: JAX_OPTIMIZATION_LEVEL=O1 "
                       "+ the collected profile; sol: --" + arms.SOL_FLAG + "=true; pgle: the "
                       "collected profile; o1: JAX_OPTIMIZATION_LEVEL=O1")
    assert said[2:4] == ["run 1/10: arm default 1/2", "run 2/10: arm o1+pgle 1/2"]
    assert said[-1] == "run 10/10: arm o1 2/2"
    # the verdict is the first pgle arm's first run, not_applied here
    assert report.status == "not_applied" and report.reasons == ["arm-o1-pgle's reason"]
    t = report.details["compare"]
    rows = {r["arm"]: r for r in t["arms"]}
    assert [r["arm"] for r in t["arms"]] == ["default", "o1+pgle", "sol", "pgle", "o1"]
    assert t["baseline"] == "default" and rows["default"]["ratio"] == 1.0
    # each ratio is the arm's step over default's: faster below 1, slower above
    expected = {"o1+pgle": 0.375, "sol": 1.5, "pgle": 0.5, "o1": 0.75}
    for arm, ratio in expected.items():
        assert rows[arm]["ratio"] == pytest.approx(ratio), arm
    assert rows["pgle"]["status"] == "applied" and rows["sol"]["status"] is None
    assert rows["o1+pgle"]["why_no_ratio"].startswith("(its profile was not_applied")
    assert (rows["pgle"]["profile"], rows["o1"]["profile"]) == (profile, None)
    assert rows["o1"]["folders"] == ["arm-o1", "arm-o1-2"]
    # the first run of each arm compiled; the second loaded it from jax's cache
    assert [(r["folder"], r["executables"]) for r in rows["sol"]["runs_executables"]] == [
        ("arm-sol", "compiled"), ("arm-sol-2", "cached")]
    assert report.details["step_times"]["arms"]["pgle"] == rows["pgle"]["step_time"]
    assert report.details["step_times"]["caveat"] is None
    assert report.details["step_times"]["steps"]["module"] == "jit_train_step"
    assert report.summary[0] == "arm-o1-pgle's summary"  # the verdict run's, then the table
    assert report.summary[1].split()[:3] == ["arm", "verdict", "median"]
    (line,) = [ln for ln in report.summary if ln.startswith("sol ")]
    assert "1.500 (" in line and "600.00 ms" in line and "(cached/compiled)" in line
    assert report.summary[-1].startswith("collect changed: ")
    doc = tune_json(tmp_path)
    assert (doc["plain"], doc["repeat"]) == (False, 2)
    assert [a["name"] for a in doc["arms"]] == ["default", "o1+pgle", "sol", "pgle", "o1"]
    assert doc["compare"]["arms"][2]["ratio"] == pytest.approx(1.5)
    assert doc["arms"][1]["statuses"] == ["not_applied", "applied"]


def test_compare_without_a_pgle_arm_takes_the_last_arms_verdict(tmp_path):
    phases = Phases(statuses={"arm-o1": "not_applicable"})
    report = run_tune(tmp_path, phases, repeat=1, compare=arms.parse_arms("default,o1"))
    assert names(phases) == ["collect", "arm-default", "arm-o1"]
    assert report.status == "not_applicable" and report.reasons == ["arm-o1's reason"]
    assert run_opts(phases, "arm-o1").profile is None


def test_compare_off_a_gpu_runs_every_arm_and_says_what_needs_one(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(platform="cpu", collect_status="empty")
    report = run_tune(tmp_path, phases, repeat=1, compare=arms.parse_arms("default,pgle"))
    assert names(phases) == ["collect", "arm-default", "arm-pgle"]
    assert run_opts(phases, "arm-pgle").profile is None
    assert notices(caplog)[1].endswith(
        "pgle: the collected profile (backend cpu records no profile: the pgle arms run "
        "without one)")
    t = report.details["compare"]
    assert t["gpu"] is False and t["arms"][1]["ratio"] is None
    assert report.details["step_times"]["caveat"] == t["caveat"]
    assert t["caveat"].startswith("backend cpu: the arms ran")
    assert tune_json(tmp_path)["arms"][1]["profile"] is None


def test_compare_with_predict_says_why_there_is_no_prediction(tmp_path, caplog, monkeypatch):
    """No CUDA compiler plugin here: the prediction is one line, and tune goes on. Where the
    plugin is installed (the mutation run of `commands`), it is made unimportable for this test
    the way Python's import system does it (None in sys.modules)."""
    import sys

    from pgle.commands import estimate

    monkeypatch.setitem(sys.modules, "jax_plugins", None)
    assert estimate.plugin_missing()
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases()
    report = run_tune(tmp_path, phases, repeat=1, compare=arms.parse_arms("default,pgle"),
                      predict=True)
    said = notices(caplog)
    assert said[1] == "predicting each arm with pgle estimate (XLA:GPU deviceless, on CPU)"
    assert said[2] == "predicted: needs pip install 'pgle[estimate]'"
    pred = report.details["compare"]["predicted"]
    assert pred["why"] == "needs pip install 'pgle[estimate]'"
    assert pred["ratios"] == {"default": None, "pgle": None}
    assert "predicted: needs pip install 'pgle[estimate]'" in report.summary
    assert "calibration" not in report.details["compare"]
    # with a store: nothing predicted, so no calibration kept beside its entry; tune goes on
    store = tmp_path / "store"
    store.mkdir()
    phases = Phases()
    per_module = dataclasses.replace(CollectOptions(WORKLOAD, None).extraction, per_module=True)
    report = run_tune(tmp_path / "2", phases, repeat=1, compare=arms.parse_arms("default,pgle"),
                      predict=True, collect={"extraction": per_module,
                                             "store": StoreOptions(str(store))})
    assert "calibration" not in report.details["compare"] and report.status == "applied"
    assert list(store.iterdir()) == []


def test_the_html_report_is_written_and_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative folder name resolves here, not where pytest started
    page = tmp_path / "tune.html"
    report = run_tune(tmp_path, Phases(), repeat=1, html_report=str(page))
    assert page.is_file() and report.details["analysis"]
    assert str(page) in report.summary[-1]
    assert report.summary[-1].startswith("report written to ") and str(page) in report.summary[-1]
    assert report.summary[-2].startswith("collect changed: ")


def test_predict_in_a_job_says_why_and_keeps_the_jobs_device_count(tmp_path, caplog):
    """Rank 1 of a two-process job: the prediction (one process's) is not made; tune's own
    folder is the rank's folder in the job's."""
    caplog.set_level(logging.INFO, logger="pgle")
    phases = Phases(collect={"backend": {"platform": "cuda", "device_count": 16}})
    topts = tune.TuneOptions(CollectOptions(workload=WORKLOAD, output=None), repeat=1,
                             compare=arms.parse_arms("default,pgle"), predict=True)
    info = ranks.detect({"PGLE_WORLD_SIZE": "2", "PGLE_RANK": "1"})
    lay = layouts.resolve(tune.request(topts), info, tmp_path / "job")
    report = tune.body(topts, lay, phases, {}, collect_workflow=COLLECT_WF, run_workflow=RUN_WF)
    assert report.run_dir == str(tmp_path / "job" / "rank-1")
    assert phases.calls[0][3] == str(tmp_path / "job" / "rank-1" / "collect")
    pred = report.details["compare"]["predicted"]
    assert pred["why"].startswith("not in a multi-process job") and pred["devices"] == 16
    assert notices(caplog)[2] == "predicted: " + pred["why"]
    assert not (tmp_path / "job" / "rank-1" / "predict").exists()


def test_without_a_run_dir_tune_makes_its_own_folder_under_pgle_runs(tmp_path, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)
    phases = Phases()
    topts = tune.TuneOptions(CollectOptions(workload=WORKLOAD, output=None), repeat=1)
    lay = layouts.resolve(tune.request(topts), ranks.detect({}), None)
    report = tune.body(topts, lay, phases, {}, collect_workflow=COLLECT_WF, run_workflow=RUN_WF)
    (top,) = (tmp_path / ".pgle" / "runs").iterdir()
    assert top.name.endswith(f"-tune-{os.getpid()}") and report.run_dir == str(top)
    assert phases.calls[0][2].default_output == str(top / "profile.pb")
    assert (top / "tune.json").is_file()


def test_an_existing_html_report_is_replaced_with_force(tmp_path):
    page = tmp_path / "tune.html"
    page.write_text("old")
    run_tune(tmp_path, Phases(), repeat=1, html_report=str(page), collect={"force": True})
    assert page.read_text() != "old" and "<html" in page.read_text().lower()


def test_compare_with_a_store_but_no_prediction_keeps_no_calibration(tmp_path):
    """Predicted and measured ratios go beside the stored entry only with --predict: a plain
    --compare --store adds nothing to the entry collect stored."""
    from pgle.profiles.files import Profile
    from pgle.store.store import ProfileStore

    fp = "0123456789abcdef0123456789abcdef"
    st = ProfileStore(tmp_path / "store", create=True)
    entry, _ = st.add(fp, Profile(costs=[("fusion.1", 10.0)]), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="NVIDIA H100 80GB HBM3", device_count=1, source="test",
                      module="jit_train_step")
    phases = Phases(collect={"store": {"summary": "store: 1 module added", "key": {},
                                       "modules": [{"module": "jit_train_step", "fingerprint": fp,
                                                    "entry": entry.entry_id}]}})
    per_module = dataclasses.replace(CollectOptions(WORKLOAD, None).extraction, per_module=True)
    report = run_tune(tmp_path, phases, repeat=1, compare=arms.parse_arms("default,pgle"),
                      collect={"extraction": per_module,
                               "store": StoreOptions(str(tmp_path / "store"))})
    assert report.details["compare"]["predicted"] is None
    assert "calibration" not in report.details["compare"] and st.calibration(entry) == []
