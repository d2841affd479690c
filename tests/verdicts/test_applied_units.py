"""The PGLE-applied verdict's in-process pieces the run's subprocess tests reach only out of
process (issue 37): the modules the harness never saw the workload compile (XLA's autotuner
candidates), the executed HLO `pgle run` keeps (async collectives made synchronous), the
"collectives covered k/n" count, and the notes on the modules one rule judged.
"""

from __future__ import annotations

import io

from helpers.pgle_testing import REPO
from pgle.evidence.event_kinds import ModuleCompiled
from pgle.evidence.xla_log import Evidence, LogScanner
from pgle.verdicts import collectives
from pgle.verdicts import pgle_applied as pa
from pgle.verdicts.statuses import Applied
from pgle.verdicts.sync_converted import executed_of, load_executed

DATA = REPO / "tests" / "data" / "xla_gpu"
D_TRAIN_012 = DATA / "0.12.0.1" / "hlo" / "dir-pbtxt" / "jit_prog_d_train.txt"
D_TRAIN_0102 = DATA / "0.10.2" / "hlo" / "sync-converted" / "jit_prog_d_train.txt"

S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"


def absl(sev: str, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  1 {file}:538] {msg}"


def _evidence(lines: list[str]) -> Evidence:
    return LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))


def test_a_module_the_workload_never_compiled_is_xlas_own():
    lines = [absl("I", S, "Using PGLE profile from /p.pb")]
    for mod in ("jit_a", "jit_b", "jit_a-clone"):
        lines += [absl("I", S, f"Found profile for module {mod}, using profile guided latency "
                               "estimator"),
                  absl("W", P, "Found 3 instructions from the profile.")]
    # jax <= 0.6 names no module: the fourth one XLA reported.
    lines += [absl("I", S, "Found profile, using profile guided latency estimator"),
              absl("W", P, "Found 2 instructions from the profile.")]
    v = pa.judge(_evidence(lines), workload_modules={"jit_a"})
    assert v.status == "applied"
    assert [m["module"] for m in v.modules] == ["jit_a", None]  # the clone folded into jit_a
    assert v.reasons == [
        "2 of 2 modules applied the profile.",
        "XLA also scheduled 1 module of its own while compiling the workload's (autotuner "
        "candidates, jax >= 0.11: jit_b; told apart by the harness): not the workload's "
        "modules, not counted (report details: sub_compiles)."]
    assert v.details == {"sub_compiles": [{
        "module": "jit_b", "id": None, "fingerprint": None, "compiled_for": None,
        "recognised_by": "not compiled by the workload (pgle's harness)", "read_profile": True,
        "no_profile_file": False, "instructions_found": 3, "instructions_missing": None}]}
    assert pa.summary_lines(v)[0] == "verdict: applied: " + " ".join(v.reasons)
    assert pa.summary_lines(v)[1:] == ["  jit_a: applied (coverage 100%)",
                                       "  unnamed module #4: applied (coverage 100%)"]
    # Every module the workload's: nothing moved.
    v = pa.judge(_evidence(lines), workload_modules={"jit_a", "jit_b"})
    assert [m["module"] for m in v.modules] == ["jit_a", "jit_b", None] and v.details == {}


def test_the_executed_hlo_pgle_run_kept(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not utf-8")
    events = [
        ModuleCompiled(t=1.0, module="jit_no_hlo"),  # no HLO kept
        ModuleCompiled(t=2.0, module="jit_gone", hlo_file=str(tmp_path / "gone.txt")),
        ModuleCompiled(t=3.0, module="jit_bad", hlo_file=str(bad)),
        ModuleCompiled(t=4.0, module="jit_prog_d_train", hlo_file=str(D_TRAIN_012)),
        ModuleCompiled(t=5.0, module=None, hlo_file=str(D_TRAIN_0102)),  # no module name
    ]
    executed = load_executed(events)
    assert len(executed) == 1
    new = executed.find("jit_prog_d_train", None)
    assert new is not None and new.renamed["all-reduce-start"] == "all-reduce.6"
    assert executed.find("jit_prog_d_train", new.fingerprint) is new
    old_fp = executed_of(D_TRAIN_0102.read_text()).fingerprint
    assert old_fp and executed.find("jit_prog_d_train", old_fp) is None
    # The verdict that uses it: the all-reduce XLA made synchronous is no miss.
    v = pa.judge(LogScanner().scan_file(DATA / "0.12.0.1" / "dir-pbtxt.log"),
                 executed=executed, renamed=True, sol_fallback=True)
    row = next(m for m in v.modules if m["module"] == "jit_prog_d_train")
    assert (v.status, row["rule"], row["collectives_converted"]) == (
        "applied", "converted_to_sync", [{"scheduled": "all-reduce-start",
                                          "executed": "all-reduce.6"}])


# A scheduled module with a while loop: its body's collectives count, a computation only
# called from elsewhere does not, and an async pair counts once (its -start).
LOOP_HLO = """HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%cond (c: (s32[], f32[8])) -> pred[] {
  %c = (s32[], f32[8]{0}) parameter(0)
  %ci = s32[] get-tuple-element((s32[], f32[8]{0}) %c), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(s32[] %ci, s32[] %n), direction=LT
}

%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8]{0}) %p), index=0
  %x = f32[8]{0} get-tuple-element((s32[], f32[8]{0}) %p), index=1
  %all-reduce-start.1 = f32[8]{0} all-reduce-start(f32[8]{0} %x), replica_groups={}, to_apply=%add
  %all-reduce-done.1 = f32[8]{0} all-reduce-done(f32[8]{0} %all-reduce-start.1)
  ROOT %t = (s32[], f32[8]{0}) tuple(s32[] %i, f32[8]{0} %all-reduce-done.1)
}

%called_elsewhere (q: f32[8]) -> f32[8] {
  %q = f32[8]{0} parameter(0)
  %collective-permute-start.9 = (f32[8]{0}, f32[8]{0}) collective-permute-start(f32[8]{0} %q), source_target_pairs={{0,1}}
  ROOT %collective-permute-done.9 = f32[8]{0} collective-permute-done((f32[8]{0}, f32[8]{0}) %collective-permute-start.9)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x0 = f32[8]{0} parameter(0)
  %all-gather-start = (f32[8]{0}, f32[8]{0}) all-gather-start(f32[8]{0} %x0), dimensions={0}
  %all-gather-done = f32[8]{0} all-gather-done((f32[8]{0}, f32[8]{0}) %all-gather-start)
  %z = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(s32[] %z, f32[8]{0} %all-gather-done)
  %while = (s32[], f32[8]{0}) while((s32[], f32[8]{0}) %init), condition=%cond, body=%body
  %w = f32[8]{0} get-tuple-element((s32[], f32[8]{0}) %while), index=1
  ROOT %all-reduce.2 = f32[8]{0} all-reduce(f32[8]{0} %w), replica_groups={}, to_apply=%add
}
"""


def test_the_collectives_a_scheduled_module_runs():
    assert collectives.collective_names(LOOP_HLO) == [
        "all-reduce-start.1", "all-gather-start", "all-reduce.2"]


def test_collectives_covered_k_of_n(tmp_path):
    loop = tmp_path / "jit_step.txt"
    loop.write_text(LOOP_HLO)
    bad = tmp_path / "bad.txt"
    bad.write_text("not HLO\n")
    rows = [{"module": "jit_none"}, {"module": "jit_gone"}, {"module": "jit_bad"},
            {"module": None}, {"module": "jit_step"}]
    collectives.annotate_totals(rows, [
        ModuleCompiled(t=1.0, module="jit_gone", hlo_file=str(tmp_path / "gone.txt")),
        ModuleCompiled(t=2.0, module="jit_bad", hlo_file=str(bad)),
        ModuleCompiled(t=3.0, module="jit_step", hlo_file=str(loop)),
        ModuleCompiled(t=4.0, module="jit_step"),  # a later compile that kept no HLO
        ModuleCompiled(t=5.0, module=None, hlo_file=str(loop)),
    ])
    assert rows == [{"module": "jit_none"}, {"module": "jit_gone"}, {"module": "jit_bad"},
                    {"module": None}, {"module": "jit_step", "collectives_total": 3}]


def _case(rows: list[dict], status: Applied) -> pa._Case:
    return pa._Case(evidence=Evidence(), modules=rows, platform="gpu", jax_imported=True,
                    command=False, off_gpu=False, info_hidden=False, looked=True,
                    loaded_from_cache=(), compiled_anew=None, silence="full", device_kind=None,
                    details={}, status=status)


def test_a_note_on_the_modules_one_rule_judged():
    note = pa._rule_note("collectives_unresolved", "miss only what XLA may have renamed.")
    rows = [{"module": f"jit_{c}", "rule": "collectives_unresolved"} for c in "abcde"]
    other = {"module": "jit_z", "rule": "min_coverage"}
    assert note(_case(rows[:2] + [other], Applied.PARTIAL)) == \
        "2 module(s) (jit_a, jit_b) miss only what XLA may have renamed."
    assert note(_case(rows, Applied.APPLIED)) == \
        "5 module(s) (jit_a, jit_b, jit_c, jit_d ...) miss only what XLA may have renamed."
    assert note(_case(rows, Applied.NOT_APPLIED)) is None  # said where PGLE applied to some
    assert note(_case([other], Applied.PARTIAL)) is None
