"""`pgle tune`'s arms and step-time comparison (pgle.commands.arms), in process: each arm's
name, folder, flags and description as tune prints them; what --compare refuses (the exact
sentence); the step times pooled from real run folders (events.jsonl with step markers); the
ratio's direction (with the profile over without) and each caveat where no ratio is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgle.commands import arms
from pgle.errors import BadInput

SOL = "xla_gpu_enable_analytical_sol_latency_estimator"


def test_parse_arms_spells_each_arm_one_way_default_first():
    got = arms.parse_arms(" PGLE+o1 , sol,,default ")
    assert [(a.name, a.o1, a.sol, a.pgle) for a in got] == [
        ("default", False, False, False), ("o1+pgle", True, False, True),
        ("sol", False, True, False)]
    assert [a.name for a in arms.parse_arms("pgle+sol+o1")] == ["default", "o1+sol+pgle"]
    assert [a.name for a in arms.parse_arms("pgle,default")] == ["default", "pgle"]
    assert [a.name for a in arms.parse_arms("o1", jax=None)] == ["default", "o1"]
    assert [a.name for a in arms.parse_arms("default")] == ["default"]


@pytest.mark.parametrize("text, message", [
    ("o2", "--compare: unknown arm 'o2': use default, o1, sol or pgle or sums of them (o1+pgle)."),
    ("o1+o1", "--compare: unknown arm 'o1+o1': use default, o1, sol or pgle or sums of them (o1+pgle)."),
    ("o1+", "--compare: unknown arm 'o1+': use default, o1, sol or pgle or sums of them (o1+pgle)."),
    ("default+pgle", "--compare: unknown arm 'default+pgle': use default, o1, sol or pgle or sums of them (o1+pgle)."),
    ("pgle,PGLE", "--compare: arm 'pgle' is listed twice."),
    ("default,default", "--compare: arm 'default' is listed twice."),
    ("", "--compare needs arms, e.g. default,o1,pgle,o1+pgle."),
    (" , ", "--compare needs arms, e.g. default,o1,pgle,o1+pgle."),
])
def test_parse_arms_refuses_with_one_sentence(text, message):
    with pytest.raises(BadInput) as e:
        arms.parse_arms(text)
    assert e.value.message == message.replace("sol or pgle", "sol, pgle")


def test_o1_needs_jax_0_6_2_only_when_an_arm_has_it():
    with pytest.raises(BadInput) as e:
        arms.parse_arms("pgle,o1+pgle", jax=(0, 6, 1))
    assert e.value.message == ("--compare o1: jax 0.6.1 has no JAX_OPTIMIZATION_LEVEL (pgle "
                               "checked it from jax 0.6.2).")
    assert [a.name for a in arms.parse_arms("pgle,sol", jax=(0, 4, 35))] == ["default", "pgle", "sol"]
    assert [a.name for a in arms.parse_arms("o1", jax=(0, 7, 0))] == ["default", "o1"]


def test_an_arm_sets_only_what_its_name_says():
    default, o1, sol, everything = arms.parse_arms("o1,sol,o1+sol+pgle")
    assert (default.variables, default.xla) == ({}, {})
    assert (o1.variables, o1.xla) == ({"JAX_OPTIMIZATION_LEVEL": "O1"}, {})
    assert (sol.variables, sol.xla) == ({}, {SOL: "true"})
    assert (everything.variables, everything.xla) == ({"JAX_OPTIMIZATION_LEVEL": "O1"}, {SOL: "true"})
    assert default.describe() == "your flags, unchanged"
    assert o1.describe() == "JAX_OPTIMIZATION_LEVEL=O1"
    assert sol.describe() == f"--{SOL}=true"
    assert everything.describe() == f"JAX_OPTIMIZATION_LEVEL=O1 + --{SOL}=true + the collected profile"
    assert arms.Arm("pgle", pgle=True).describe() == "the collected profile"


def test_arm_folders():
    default, pgle = arms.PLAIN
    assert [default.folder(True, i) for i in range(3)] == ["baseline", "baseline-2", "baseline-3"]
    assert [pgle.folder(True, i) for i in range(2)] == ["run", "run-2"]
    both = arms.Arm("o1+pgle", o1=True, pgle=True)
    assert [both.folder(False, i) for i in range(2)] == ["arm-o1-pgle", "arm-o1-pgle-2"]
    assert default.folder(False, 0) == "arm-default"


def test_collect_changes_names_the_profiler_and_command_buffers_only_when_changed():
    from pgle.xla import flag_table

    profiler = "the JAX profiler ran for the window (profiled steps are never timed)"
    assert arms.collect_changes({}) == [profiler]
    assert arms.collect_changes({flag_table.COMMAND_BUFFER: ""}) == [
        profiler,
        f"--{flag_table.COMMAND_BUFFER}='' (command buffers off: kernels inside CUDA graphs are "
        "invisible to the profiler)"]


def test_ratio_needs_five_step_times_each_side_and_is_after_over_before():
    five, four = [0.010] * 5, [0.010] * 4
    interval, why = arms.ratio(five, [0.020] * 5)
    assert why is None and interval["ratio"] == pytest.approx(2.0)
    assert interval["beyond_noise"] is True
    assert arms.ratio(four, five) == (None, "no step-time ratio: 4 and 5 step times, fewer than "
                                           "5 each; run more steps or --repeat more")
    assert arms.ratio(five, [0.01]) == (None, "no step-time ratio: 5 and 1 step time, fewer than "
                                              "5 each; run more steps or --repeat more")


# -- run folders ---------------------------------------------------------------------------
def run_folder(path: Path, step_s: float, n: int = 8) -> Path:
    """A run folder whose events mark `n` steps `step_s` apart (step 0's time left out)."""
    path.mkdir(parents=True)
    lines = [{"kind": "step_enter", "t": 100.0 + i * step_s, "name": "train", "step_num": i,
              "index": i} for i in range(n)]
    (path / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_folder_steps_and_pooled(tmp_path):
    assert arms.folder_steps(tmp_path) is None
    a = run_folder(tmp_path / "a", 0.5, n=4)
    b = run_folder(tmp_path / "b", 0.25, n=3)
    steps = arms.folder_steps(a)
    assert steps.times == pytest.approx([0.5, 0.5])
    times, first = arms.pooled([tmp_path / "none", a, b])
    assert times == pytest.approx([0.5, 0.5, 0.25])
    assert first.times == steps.times  # the first run that has events
    assert arms.pooled([]) == ([], None)


def test_compare_step_times_ratio_with_the_profile_over_without(tmp_path):
    c = run_folder(tmp_path / "collect", 0.030)
    b = [run_folder(tmp_path / "baseline", 0.020), run_folder(tmp_path / "baseline-2", 0.020)]
    r = [run_folder(tmp_path / "run", 0.010)]
    out = arms.compare_step_times(c, b, r, platform="CUDA", applied=True)
    assert out["ratio"] == pytest.approx(0.5) and out["interval"]["ratio"] == out["ratio"]
    assert out["caveat"] is None and out["profile_applied"] is True
    assert out["runs"] == {"baseline": 2, "run": 1}
    assert out["collect"]["median_s"] == pytest.approx(0.030) and out["collect"]["count"] == 6
    assert out["baseline"]["count"] == 12 and out["run"]["count"] == 6
    assert out["steps"]["source"] == "markers"
    line = arms.step_time_lines(out, profiled=True)
    assert line == ["median step: 20.00 ms without the profile, 10.00 ms with it (ratio 0.500, "
                    "95% interval 0.500..0.500, beyond run-to-run noise; 1 run each)"]


def test_compare_step_times_caveats(tmp_path):
    c = run_folder(tmp_path / "collect", 0.030)
    b = [run_folder(tmp_path / "baseline", 0.020)]
    r = [run_folder(tmp_path / "run", 0.010)]
    cpu = arms.compare_step_times(c, b, r, platform="cpu", applied=True)
    assert (cpu["ratio"], cpu["interval"], cpu["profile_applied"]) == (None, None, False)
    assert cpu["caveat"] == ("no step-time ratio: backend cpu applies no profile, so every phase "
                             "ran the same program (and collect's ran with the profiler on)")
    none = arms.compare_step_times(c, b, r, platform=None, applied=True)
    assert none["caveat"].startswith("no step-time ratio: backend None applies no profile")
    for platform in ("gpu", "rocm", "cuda"):
        assert arms.compare_step_times(c, b, r, platform=platform, applied=True)["ratio"] is not None
    unapplied = arms.compare_step_times(c, b, r, platform="gpu", applied=False)
    assert unapplied["caveat"] == ("no step-time ratio: no module applied the profile, so both "
                                   "sides ran the same schedule")
    assert unapplied["profile_applied"] is False
    no_profile = arms.compare_step_times(c, [], r, platform="gpu", applied=True)
    assert no_profile["caveat"] == "no step-time ratio: there was no profile to run with"
    assert no_profile["profile_applied"] is False
    few = arms.compare_step_times(c, [run_folder(tmp_path / "b3", 0.02, n=5)], r,
                                  platform="gpu", applied=True)
    assert (few["ratio"], few["interval"]) == (None, None)
    assert few["caveat"].startswith("no step-time ratio: 3 and 6 step times, fewer than 5 each")
    nothing = arms.compare_step_times(tmp_path / "x", [tmp_path / "y"], [tmp_path / "z"],
                                      platform="gpu", applied=True)
    assert nothing["caveat"] == ("no step times: the workload marks no steps and no jitted "
                                 "function executed at least 3 times")
    assert (nothing["steps"], nothing["collect"], nothing["baseline"], nothing["run"]) == (
        None, None, None, None)


def test_step_time_lines_without_a_ratio(tmp_path):
    c = run_folder(tmp_path / "collect", 0.030)
    b = [run_folder(tmp_path / "baseline", 0.020)]
    r = [run_folder(tmp_path / "run", 0.010)]
    cpu = arms.compare_step_times(c, b, r, platform="cpu", applied=True)
    assert arms.step_time_lines(cpu, profiled=True) == [
        "median step: 30.00 ms (collect, profiled steps left out), 20.00 ms (baseline), "
        "10.00 ms (run; no module applied the profile)",
        cpu["caveat"]]
    only_run = {"run": {"median_s": 0.0125}, "collect": None, "caveat": None}
    assert arms.step_time_lines(only_run, profiled=False) == [
        "median step: - (collect, profiled steps left out), 12.50 ms (run)"]
    assert arms.step_time_lines({"caveat": "no step times: x"}, profiled=True) == ["no step times: x"]
    assert arms.step_time_lines({}, profiled=True) == []
    by_executions = {"steps": {"source": "executions", "how": "the 9 executions of step"},
                     "collect": {"median_s": 0.001}}
    assert arms.step_time_lines(by_executions, profiled=False) == [
        "steps: the 9 executions of step",
        "median step: 1.00 ms (collect, profiled steps left out), - (run)"]
    within = {"ratio": 1.0, "interval": {"ratio": 1.0, "low": 0.9, "high": 1.1, "confidence": 0.9,
                                         "beyond_noise": False},
              "baseline": {"median_s": 0.01}, "run": {"median_s": 0.01}, "runs": {"run": 3}}
    assert arms.step_time_lines(within, profiled=True) == [
        "median step: 10.00 ms without the profile, 10.00 ms with it (ratio 1.000, 90% interval "
        "0.900..1.100, within run-to-run noise; 3 runs each)"]
