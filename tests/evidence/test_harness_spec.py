"""spec.json, what pgle asks the harness in the workload's process to do (issue 37), read in
process: every field pgle writes comes back as written; the fields a spec leaves out (one that
an older pgle wrote) take the defaults the harness runs with; the workload's real arguments
replace the redacted ones spec.json holds (pgle.evidence.schema)."""

from __future__ import annotations

import json

from pgle.evidence.schema import HarnessSpec, WindowSpec, WorkloadSpec

FULL = HarnessSpec(
    events="/runs/r1/events.jsonl",
    workload=WorkloadSpec(script=None, module="train.main", args=("--lr", "0.1"),
                          command=("bash", "run.sh")),
    profile=WindowSpec(mode="steps", dir="/runs/r1/trace", start=3, count=4, delay=1.5,
                       duration=9.0, step_name="train", warmup=1, executions=7,
                       max_seconds=12.0, detail="full", max_bytes=1 << 30),
    step_name="train",
    capture_loggers=({"name": "jax._src.compiler", "level": "DEBUG"},),
    warnings_always=("UserWarning", "RuntimeWarning"),
    observe_pgle=True,
    expected_xla_flags={"--xla_gpu_enable_latency_hiding_scheduler": "true"},
    count_jits=False,
    hold=True,
    hold_timeout_s=120.0,
    export_dir="/runs/r1/export",
)


def test_every_field_pgle_writes_comes_back():
    text = FULL.to_json()
    assert json.loads(text)["profile"]["max_bytes"] == 1 << 30 and text.startswith("{\n  \"")
    assert HarnessSpec.from_json(text) == FULL
    assert FULL.command_mode


def test_the_fields_a_spec_leaves_out_take_the_harness_s_defaults():
    spec = HarnessSpec.from_json(json.dumps({
        "events": "/runs/r2/events.jsonl",
        "workload": {"script": "/w/train.py", "module": None, "args": None},
        "profile": None, "hold_timeout_s": None, "export_dir": "",
    }))
    assert spec == HarnessSpec(
        events="/runs/r2/events.jsonl",
        workload=WorkloadSpec(script="/w/train.py", module=None, args=(), command=()),
        profile=None, step_name=None, capture_loggers=(), warnings_always=(),
        observe_pgle=False, expected_xla_flags=None, count_jits=True, hold=False,
        hold_timeout_s=900.0, export_dir=None)
    assert not spec.command_mode
    # a window of its mode and folder only: the rest its defaults
    window = HarnessSpec.from_json(json.dumps({
        "events": "e", "workload": {"script": "s", "module": None},
        "profile": {"mode": "auto", "dir": "/t"}})).profile
    assert window == WindowSpec(mode="auto", dir="/t", start=0, count=0, delay=None,
                                duration=None, step_name=None, warmup=2, executions=5,
                                max_seconds=30.0, detail="pgle", max_bytes=0)


def test_the_real_arguments_replace_the_redacted_ones():
    spec = HarnessSpec.from_json(FULL.to_json())
    real = spec.with_args_from(json.dumps(["--password", "hunter2", 3]))
    assert real.workload == WorkloadSpec(script=None, module="train.main",
                                         args=("--password", "hunter2", "3"),
                                         command=("bash", "run.sh"))
    assert dict(vars(real), workload=None) == dict(vars(spec), workload=None)
    assert spec.with_args_from(None) is spec
    assert spec.with_args_from("[]").workload.args == ()
