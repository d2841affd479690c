"""`pgle report` compares what tune compared and tells the truth first (issue 22): the
before/after picture per collective, compile time both ways, the verdict from the runs' own
logs, and the step module chosen by the step rule, not by FLOPs. GPU-style run folders: events
as the harness writes them, XLA:GPU log lines as XLA prints them (jax 0.10.2 wording), and
synthetic GPU traces (tests/helpers/xspace.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.xspace import US, Event, TraceBuilder, add_host_steps, gpu_overlap_trace

PGLE = [sys.executable, "-m", "pgle"]
LOG_APPLIED = (
    "I1125 10:00:00.000001   4242 gpu_hlo_schedule.cc:377] Using PGLE profile from /p.pbtxt\n"
    "I1125 10:00:00.000002   4242 gpu_hlo_schedule.cc:522] Found profile for module "
    "jit_train_step, using profile guided latency estimator\n")


def hidden_trace(steps: int = 4, devices: int = 2, step_us: int = 1000) -> TraceBuilder:
    """As gpu_overlap_trace, but the compute runs 0..800 us: both collectives fully hidden."""
    b = TraceBuilder()
    b.add_module("jit_train_step", 7)
    starts = [k * step_us * US for k in range(steps)]
    add_host_steps(b, [(k, s, step_us * US) for k, s in enumerate(starts)])
    for d in range(devices):
        compute, comm = b.line(d, "Stream #13(compute)"), b.line(d, "Stream #20(nccl)")
        def ev(op: str, lo: int, hi: int, s: int) -> Event:
            return Event(op, "jit_train_step", 7, s + lo * US, (hi - lo) * US)

        for s in starts:
            compute += [ev("fusion.1", 0, 800, s)]
            comm += [ev("all-gather-start.1", 250, 450, s), ev("all-reduce-start.2", 700, 800, s)]
    return b


def gpu_run_folder(folder: Path, trace: TraceBuilder, step_ms: list[float], *, log: str,
                   compile_s: float, peak: int) -> None:
    """A run as the harness leaves it on a GPU, without step markers: the train step's
    executions (jit_functions), a one-shot `jit_scan` with 100x its FLOPs."""
    folder.mkdir(parents=True)
    t = 1000.0
    starts = [t]
    for ms in [50.0] + step_ms:
        starts.append(starts[-1] + ms / 1e3)
    mem = {"argument_size_in_bytes": 1 << 20, "output_size_in_bytes": 1 << 20,
           "temp_size_in_bytes": 1 << 24, "alias_size_in_bytes": 0, "peak_memory_in_bytes": peak}
    records = [
        {"kind": "backend", "t": t, "platform": "gpu", "device_count": 2,
         "device_kind": "NVIDIA H100 80GB HBM3"},
        {"kind": "jax_imported", "t": t, "version": "0.10.2"},
        {"kind": "compile", "t": t, "fun_name": "jit(scan)", "seconds": 0.5},
        {"kind": "module_compiled", "t": t, "module": "jit_scan", "flops": 2.0e13, "memory": mem},
        {"kind": "compile", "t": t, "fun_name": "jit(train_step)", "seconds": compile_s},
        {"kind": "module_compiled", "t": t, "module": "jit_train_step", "flops": 2.0e11,
         "memory": mem},
        {"kind": "jit_functions", "t": starts[-1], "step": "jit(train_step)",
         "module": "jit_train_step", "starts": starts, "rule": "the rule",
         # the work of each execution after the compile, from the completion of its outputs
         "work": [[a, b - a] for a, b in zip(starts[1:], starts[2:])],
         "watch": {"known": len(starts), "unknown": 0, "no_array": 0},
         "functions": [{"function": "jit(train_step)", "module": "jit_train_step",
                        "executions": len(starts), "seconds": 1.0},
                       {"function": "jit(scan)", "module": "jit_scan", "executions": 1,
                        "seconds": 0.0}]},
        {"kind": "exit", "t": starts[-1], "code": 0}]
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "workload.log").write_text(log)
    trace.write(folder / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00")


def report(*folders: Path) -> dict:
    p = subprocess.run(PGLE + ["report", *map(str, folders), "--json"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_before_and_after_per_collective_compile_time_and_the_step_module(tmp_path):
    before, after = tmp_path / "without", tmp_path / "with"
    gpu_run_folder(before, gpu_overlap_trace(steps=4, devices=2), [10.0, 10.4, 9.8, 10.1, 10.2, 9.9],
                   log="", compile_s=1.5, peak=40 << 20)
    gpu_run_folder(after, hidden_trace(), [8.0, 8.1, 7.9, 8.2, 8.0, 7.8], log=LOG_APPLIED,
                   compile_s=2.5, peak=48 << 20)
    rep = report(before, after)
    data = rep["analysis"]
    # The truth first: the with-profile run's own log says applied.
    assert list(data)[0] == "verdict" and rep["status"] == "applied"
    assert data["verdict"]["what_to_do"].startswith("keep the profile: steps are")
    b, a = data["phases"]
    assert a["label"] == "with profile, 1 run" and b["label"] == "without profile"
    # The step module is the step (by the step rule), not the one-shot jit_scan with 100x FLOPs.
    assert a["step_module"]["module"] == "jit_train_step" and a["step_module"]["flops"] == 2.0e11
    assert a["steps"]["source"] == "executions"
    # Per collective, per device: 200 us of 300 exposed per step before, none after.
    change = {c["op"]: c for c in data["communication_change"]}
    ag = change["all-gather-start.1"]
    assert ag["before_exposed_ps"] == 4 * 100 * US and ag["after_exposed_ps"] == 0
    assert ag["before_hidden_ps"] == 4 * 100 * US and ag["after_hidden_ps"] == 4 * 200 * US
    assert change["all-reduce-start.2"]["before_exposed_ps"] == 4 * 100 * US
    # Compile time and peak memory both ways.
    assert data["compile"]["before"]["step_module_s"] == 1.5
    assert data["compile"]["after"]["step_module_s"] == 2.5
    assert data["compile"]["after"]["total_s"] == 3.0
    row = next(m for m in data["memory"] if m["module"] == "jit_train_step")
    assert row["growth"] == pytest.approx(0.2)
    assert data["step_ratio"]["ratio"] < 1 and data["step_ratio"]["beyond_noise"]


def test_a_run_that_applied_nothing_is_not_labelled_with_profile_and_has_no_ratio(tmp_path):
    before, after = tmp_path / "without", tmp_path / "run"
    gpu_run_folder(before, gpu_overlap_trace(), [10.0, 10.4, 9.8, 10.1, 10.2, 9.9], log="",
                   compile_s=1.0, peak=1 << 20)
    # XLA read no profile at all: "no PGLE line in the log".
    gpu_run_folder(after, gpu_overlap_trace(), [8.0, 8.1, 7.9, 8.2, 8.0, 7.8], log="",
                   compile_s=1.0, peak=1 << 20)
    rep = report(before, after)
    data = rep["analysis"]
    assert rep["status"] == "not_applied" and data["verdict"]["status"] == "not_applied"
    label = data["phases"][1]["label"]
    assert "with profile" not in label and "not_applied" in label
    assert data["step_ratio"] is None
    assert "no module applied the profile" in data["step_ratio_why"]
