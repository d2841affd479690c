"""The compare table's per-arm facts (pgle.commands.compare.run_facts, `_communication`), in
process from real run folders: compile time (all of it, and the step module's), the step
module's peak memory, whether each executable was compiled or loaded from jax's persistent
cache (per run, per kind), and the exposed/hidden communication of the arm's first run's kept
trace (a GPU-shaped trace whose timeline is known, tests/helpers/gpu_trace.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.gpu_trace import GpuShape, write_gpu_trace
from pgle.commands import compare
from pgle.commands.arms import Arm
from pgle.commands.tune import ArmRuns

USE = "/jax/compilation_cache/compile_requests_use_cache"
HIT = "/jax/compilation_cache/cache_hits"
MIB = 1 << 20


def compile_recs(t, module, seconds, *, hit=False, thread="1", memory=None):
    """One compile as the harness records it (begin, jax's cache events, end, its seconds, the
    module XLA compiled)."""
    recs = [{"kind": "compile_begin", "t": t, "module": module, "thread": thread, "fdo": False},
            {"kind": "jax_event", "t": t + 0.01, "event": USE, "thread": thread}]
    if hit:
        recs.append({"kind": "jax_event", "t": t + 0.02, "event": HIT, "thread": thread})
    recs += [{"kind": "compile_end", "t": t + 0.03, "module": module, "ok": True, "thread": thread},
             {"kind": "compile", "t": t + 0.04, "fun_name": module, "seconds": seconds,
              "thread": thread}]
    if memory is not None:
        recs.append({"kind": "module_compiled", "t": t + 0.05, "module": module, "flops": 1.0,
                     "memory": memory})
    return recs


def run_folder(path: Path, *, step_hit=False, init_hit=False, step_module="jit_train_step",
               step_s=0.01, steps=8):
    """A run: jit_init (0.5 s, 9 MiB peak) and jit_train_step (2 s, 3 MiB peak) compiled or
    loaded from the cache, then marked steps, then the step function's record."""
    recs = [{"kind": "backend", "t": 1.0, "platform": "cuda", "device_count": 1}]
    recs += compile_recs(10.0, "jit_init", 0.5, hit=init_hit,
                         memory={"peak_memory_in_bytes": 9 * MIB})
    recs += compile_recs(20.0, "jit_train_step", 2.0, hit=step_hit,
                         memory={"argument_size_in_bytes": 2 * MIB, "output_size_in_bytes": MIB,
                                 "temp_size_in_bytes": MIB, "alias_size_in_bytes": MIB})
    recs += [{"kind": "step_enter", "t": 100.0 + i * step_s, "name": "train", "step_num": i,
              "index": i} for i in range(steps)]
    if step_module:
        recs.append({"kind": "jit_functions", "t": 200.0, "step": "train_step",
                     "module": step_module, "functions": []})
    path.mkdir(parents=True)
    (path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_run_facts_of_a_run_that_compiled_everything(tmp_path):
    facts = compare.run_facts(run_folder(tmp_path / "a"))
    assert facts == {
        "step_module": "jit_train_step",
        "compile_s": pytest.approx(2.5),  # every compile
        "step_compile_s": pytest.approx(2.0),  # the step module's only
        "peak_bytes": 3 * MIB,  # the step module's (arguments + outputs + temp - aliased)
        "executables": "compiled",
        "step_executable": "compiled",
        "compile_by_kind": {"compiled": {"count": 2, "seconds": pytest.approx(2.5)},
                            "cached": {"count": 0, "seconds": 0.0}},
    }


def test_run_facts_say_cached_and_mixed_per_kind(tmp_path):
    facts = compare.run_facts(run_folder(tmp_path / "a", step_hit=True))
    assert (facts["executables"], facts["step_executable"]) == ("mixed", "cached")
    assert facts["compile_by_kind"] == {"compiled": {"count": 1, "seconds": pytest.approx(0.5)},
                                        "cached": {"count": 1, "seconds": pytest.approx(2.0)}}
    facts = compare.run_facts(run_folder(tmp_path / "b", step_hit=True, init_hit=True))
    assert (facts["executables"], facts["step_executable"]) == ("cached", "cached")
    facts = compare.run_facts(run_folder(tmp_path / "c", init_hit=True))
    assert (facts["executables"], facts["step_executable"]) == ("mixed", "compiled")


def test_without_a_step_module_only_the_totals(tmp_path):
    facts = compare.run_facts(run_folder(tmp_path / "a", step_module=None, step_hit=True))
    assert facts["step_module"] is None and facts["compile_s"] == pytest.approx(2.5)
    assert (facts["step_compile_s"], facts["peak_bytes"], facts["step_executable"]) == (
        None, None, None)
    assert facts["executables"] == "mixed"
    # a step module XLA never reported: no peak memory, its compiles none
    facts = compare.run_facts(run_folder(tmp_path / "b", step_module="jit_other"))
    assert (facts["step_compile_s"], facts["peak_bytes"], facts["step_executable"]) == (
        0.0, None, "-")


def test_a_compile_of_no_seconds_adds_none_and_a_later_compile_keeps_the_peak(tmp_path):
    folder = run_folder(tmp_path / "a")
    more = compile_recs(30.0, "jit_train_step", 0.0, thread="2")  # recompiled: no seconds, no
    more += compile_recs(31.0, "jit_train_step", None, thread="3", memory={})  # memory kept
    with (folder / "events.jsonl").open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in more))
    facts = compare.run_facts(folder)
    assert facts["compile_s"] == pytest.approx(2.5)
    assert facts["step_compile_s"] == pytest.approx(2.0)
    assert facts["peak_bytes"] == 3 * MIB  # the compile that reported memory
    assert facts["compile_by_kind"]["compiled"] == {"count": 4, "seconds": pytest.approx(2.5)}


def test_an_empty_run_folder_has_no_facts(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "events.jsonl").write_text("")
    facts = compare.run_facts(tmp_path / "e")
    assert facts == {"step_module": None, "compile_s": 0.0, "step_compile_s": None,
                     "peak_bytes": None, "executables": "-", "step_executable": None,
                     "compile_by_kind": {"compiled": {"count": 0, "seconds": 0.0},
                                         "cached": {"count": 0, "seconds": 0.0}}}


def test_each_arms_row_labels_every_run_and_shows_the_first_runs_figures(tmp_path):
    runs = [ArmRuns(Arm("default"), [run_folder(tmp_path / "arm-default")]),
            ArmRuns(Arm("o1", o1=True), [run_folder(tmp_path / "arm-o1"),
                                         run_folder(tmp_path / "arm-o1-2", step_hit=True,
                                                    init_hit=True)])]
    t = compare.table(runs, platform="cuda")
    o1 = t["arms"][1]
    assert o1["runs_executables"] == [
        {"folder": "arm-o1", "executables": "compiled", "step_executable": "compiled"},
        {"folder": "arm-o1-2", "executables": "cached", "step_executable": "cached"}]
    assert (o1["compile_s"], o1["peak_bytes"]) == (pytest.approx(2.5), 3 * MIB)
    (line,) = [ln for ln in compare.table_lines(t) if ln.startswith("o1 ")]
    assert line.endswith("3.0 MiB      2.50 s (cached/compiled)")
    (line,) = [ln for ln in compare.table_lines(t) if ln.startswith("default ")]
    assert line.endswith("2.50 s (compiled)")


def _trace(folder: Path, shape: GpuShape) -> None:
    # Where jax.profiler puts a run's trace, as pgle keeps it: trace/plugins/profile/<stamp>/.
    write_gpu_trace(folder / "trace" / "plugins" / "profile" / "2026_11_28_12_00_00", shape)


@pytest.mark.parametrize("devices", [1, 2])
def test_the_first_runs_trace_gives_the_arms_communication(tmp_path, devices):
    # Each step on each device: two 100 us fusions, one 300 us all-gather from 50 us on: 150 us
    # behind the fusions, 150 us exposed after them; 10 steps. Milliseconds per device.
    shape = GpuShape(steps=10, devices=devices, compute_ops=2, op_us=100,
                     collectives=("all-gather",),
                     collective_us=300, host_copy=False)
    first = run_folder(tmp_path / "arm-pgle")
    _trace(first, shape)
    later = run_folder(tmp_path / "arm-pgle-2")  # later runs keep no trace
    runs = [ArmRuns(Arm("default"), [run_folder(tmp_path / "arm-default")]),
            ArmRuns(Arm("pgle", pgle=True), [first, later])]
    t = compare.table(runs, platform="cuda")
    default, pgle = t["arms"]
    assert default["communication"] is None
    assert default["why_no_communication"].startswith("this run kept no trace")
    comm = pgle["communication"]
    assert pgle["why_no_communication"] is None
    assert comm["exposed_ms_per_device"] == pytest.approx(1.5, rel=0.05)  # 10 x 150 us
    assert comm["hidden_ms_per_device"] == pytest.approx(1.5, rel=0.05)
    assert comm["hidden_fraction"] == pytest.approx(0.5, rel=0.05)
    assert comm["collectives"] == 10 * devices
    (line,) = [ln for ln in compare.table_lines(t) if ln.startswith("pgle ")]
    assert f"{comm['exposed_ms_per_device']:.3f} ms" in line
    (line,) = [ln for ln in compare.table_lines(t) if ln.startswith("default ")]
    assert line.split()[6] == "-"  # on a GPU, a run without a trace shows a dash


def test_a_trace_without_collectives_says_so(tmp_path):
    folder = run_folder(tmp_path / "a")
    _trace(folder, GpuShape(steps=4, devices=1, compute_ops=2, collectives=(), host_copy=False))
    comm, why = compare._communication(folder, "cuda")
    assert comm is not None and comm["collectives"] == 0
    assert comm["exposed_ms_per_device"] == 0.0 and comm["hidden_ms_per_device"] == 0.0
    assert why == "the device planes hold no collective (a single-device program?)"


def test_a_run_whose_compiles_name_no_function_has_no_step_compile_time(tmp_path):
    """jax 0.4.35-0.5.3 record the backend compile without the function's name: the step
    module's compile time is unknown there (None), not 0 s; the total stands."""
    folder = run_folder(tmp_path / "a")
    recs = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    for r in recs:
        r.pop("fun_name", None)
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    facts = compare.run_facts(folder)
    assert facts["step_compile_s"] is None and facts["compile_s"] == pytest.approx(2.5)
    assert facts["step_module"] == "jit_train_step"
