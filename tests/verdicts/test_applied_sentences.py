"""The sentences of the PGLE-applied verdict a user reads, pinned whole (issue 37): async
collectives XLA made synchronous, async wrappers of unknown kind, the unresolved ones, the HLO
verifier's failure, the speed-of-light rule, XLA's own sub-compiles and the collective
combiner's clones (pgle/verdicts/pgle_applied.py, sync_converted.py). Most reach a user only
through `pgle run` / `verify` subprocesses, which mutmut does not map.
"""

from __future__ import annotations

import pytest

from pgle.evidence.xla_log import ModuleEvidence
from pgle.verdicts import pgle_applied as pa
from pgle.verdicts import sync_converted as sc
from pgle.verdicts.rows import AppliedRow

S = sc.Split



def test_async_collectives_made_synchronous():
    assert sc.converted_note(S(converted=[("all-reduce-start", "all-reduce.6"), ("all-gather-start", None)], by="hlo")) == (
        '2 async collectives the scheduler asked for are in no profile and cannot be: '
        'all-reduce-start ran as the synchronous all-reduce.6, all-gather-start is not '
        'in the executed module (read from the executed HLO). Nothing was scheduled to '
        'overlap them, so XLA turned them into new synchronous instructions after '
        'scheduling (jax >= 0.11.1); a trace of the module, and any profile made from '
        'one, names those. Not counted, and collecting again would not change it.')
    assert sc.converted_note(S(converted=[("all-reduce-start", None)], by="log")) == (
        '1 async collective the scheduler asked for is in no profile and cannot be: '
        "all-reduce-start (the log's `Added pair` lines: XLA made them synchronous after "
        'scheduling, and jax >= 0.11.1 renames such a pair). Nothing was scheduled to '
        'overlap them, so XLA turned them into new synchronous instructions after '
        'scheduling (jax >= 0.11.1); a trace of the module, and any profile made from '
        'one, names those. Not counted, and collecting again would not change it.')


def test_async_wrappers_of_unknown_kind():
    assert sc.unknown_note(S(unknown=["fusion-start", "custom-call-start.2"])) == (
        'fusion-start, custom-call-start.2: async instructions not in the profile whose '
        'kind the log does not show, so pgle never counts them as compute: on jax >= '
        '0.11 a small all-reduce compiles to an async Triton collective fusion '
        '(fusion-start/-done), and async custom calls (custom-call-start) carry '
        "communication (TransformerEngine-JAX's expert-parallel dispatch/combine, "
        'collective GEMMs). To tell: run the workload under `pgle run` (it reads the '
        "executed HLO: the fusion's backend kind, the custom call's target), or dump the "
        'HLO (--xla_dump_to) and look for the fusion_backend_config kind '
        '"__triton_collective" or the custom call\'s custom_call_target.')


def test_collectives_the_log_cannot_resolve():
    assert sc.unresolved_note(S(unresolved=["all-reduce-start"], why_unresolved="version")) == (
        'all-reduce-start: not in the profile; the log says XLA made it synchronous '
        'after scheduling (`Added pair`), and whether that renamed it (so that no '
        'profile can hold it) depends on the jax version (jax >= 0.11.1 renames, <= '
        '0.11.0 keeps the name), which the log does not show: pass --jax.')
    assert sc.unresolved_note(S(unresolved=["all-reduce-start", "all-gather-start"], why_unresolved="no_lines")) == (
        'all-reduce-start, all-gather-start: not in the profile. Either the profile '
        'lacks a collective the module runs (the scheduler guessed its cost), or XLA '
        'made it synchronous after scheduling, which jax >= 0.11.1 does to an async '
        'collective nothing overlaps, renaming it (all-reduce-start -> all-reduce.N) so '
        'that no profile can hold it. This log cannot tell which. To tell: run the '
        'workload under `pgle run` (it reads the executed HLO), or rerun it with '
        'TF_CPP_VMODULE=gpu_hlo_schedule=1,convert_async_collectives_to_sync=3 and '
        'verify that log (XLA then logs `Added pair: {<start>, <done>` for each pair it '
        'makes synchronous).')


def test_the_hlo_verifiers_failure():
    assert pa.verifier_sentence(["Expected x", "y"]) == (
        'the compile failed in XLA\'s HLO verifier (2 times): "Expected x". On jax >= '
        '0.11 (seen on 0.11.2 and 0.12.0.1) '
        '--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR fails every module '
        'with an async collective XLA makes synchronous after scheduling (it renames it, '
        'which the verifier rejects), whatever the profile, even with none: use '
        'PGLE_STRICTNESS_LEVEL_WARN (pgle reads its lines; --require-applied fails the '
        'job on a profile that does not fit).')
    assert pa.verifier_sentence(["only"]) == (
        'the compile failed in XLA\'s HLO verifier (1 time): "only". On jax >= 0.11 (seen '
        'on 0.11.2 and 0.12.0.1) '
        '--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR fails every module '
        'with an async collective XLA makes synchronous after scheduling (it renames it, '
        'which the verifier rejects), whatever the profile, even with none: use '
        'PGLE_STRICTNESS_LEVEL_WARN (pgle reads its lines; --require-applied fails the '
        'job on a profile that does not fit).')


def test_the_speed_of_light_rule():
    assert pa.sol_rule_sentence([{"module": f"jit_{c}"} for c in "abcde"], None) == (
        'the speed-of-light rule decided 5 modules (jit_a, jit_b, jit_c, jit_d ...): '
        '--min-coverage was not given, no collective is missing, and XLA prices the '
        'missing compute with its SoL model (jax >= 0.10.1 on Hopper/Blackwell; assumed '
        'a Hopper/Blackwell GPU, as the log names none (--device-kind names it)); '
        '--min-coverage makes coverage decide.')
    assert pa.sol_rule_sentence([{"module": "jit_a"}], "NVIDIA H100 80GB HBM3") == (
        'the speed-of-light rule decided 1 module (jit_a): --min-coverage was not given, '
        'no collective is missing, and XLA prices the missing compute with its SoL model '
        '(jax >= 0.10.1 on Hopper/Blackwell; the device: NVIDIA H100 80GB HBM3); '
        '--min-coverage makes coverage decide.')
    assert pa.sol_rule_sentence([{"module": f"jit_{c}"} for c in "abcd"], "GB200").startswith(
        "the speed-of-light rule decided 4 modules (jit_a, jit_b, jit_c, jit_d): ")
    for note in (sc.converted_note, sc.unknown_note, sc.unresolved_note):
        assert note(S(missing=["all-reduce.3"])) is None


def test_xlas_own_sub_compiles():
    assert pa.sub_compile_sentence([ModuleEvidence("cand_1", by="module id"), ModuleEvidence(None, by="module id"), ModuleEvidence("cand_1", by="module id")]) == (
        "XLA also scheduled 3 modules of its own while compiling the workload's "
        '(autotuner candidates, jax >= 0.11: cand_1, ?; told apart by their module ids): '
        "not the workload's modules, not counted (report details: sub_compiles).")
    assert pa.sub_compile_sentence([ModuleEvidence(f"c{i}", by="not compiled by the workload (pgle's harness)") for i in range(8)]) == (
        "XLA also scheduled 8 modules of its own while compiling the workload's "
        '(autotuner candidates, jax >= 0.11: c0, c1, c2, c3, c4, c5 and 2 more; told '
        "apart by the harness): not the workload's modules, not counted (report details: "
        'sub_compiles).')
    assert pa.sub_compile_sentence([ModuleEvidence("c1", by="name"), ModuleEvidence("c2", by="module id")]) == (
        "XLA also scheduled 2 modules of its own while compiling the workload's "
        '(autotuner candidates, jax >= 0.11: c1, c2; told apart by their names (no '
        'module ids logged: TF_CPP_VMODULE=gpu_hlo_schedule=1 shows them)): not the '
        "workload's modules, not counted (report details: sub_compiles).")
    m = ModuleEvidence("c1", module_id=7, fingerprint="ab" * 16, parent="jit_main", by="module id",
                       found_profile=True, no_profile_file=True, checker_found=5, checker_missing=2)
    assert pa.sub_compile_row(m) == {
        "module": "c1", "id": 7, "fingerprint": "ab" * 16, "compiled_for": "jit_main",
        "recognised_by": "module id", "read_profile": True, "no_profile_file": True,
        "instructions_found": 5, "instructions_missing": 2}


FP = "0123456789abcdef" * 2


def _row(module: str, found: bool = True, cov: float | None = 1.0, path: str | None = "/p.pb"):
    return AppliedRow(module, "applied", 3, 0, cov, None, path, found, None, [], []).to_dict()


def test_the_collective_combiners_clones_are_notes():
    rows = [_row("jit_a-clone", found=False, cov=None, path=None), _row("jit_a"),
            _row("jit_b-clone", cov=None), _row("jit_b"),
            _row("jit_c-clone", cov=0.857, path=f"/dir/{FP}.pbtxt"), _row("jit_c"),
            _row("jit_d-clone", cov=0.5)]
    notes = {r["module"]: r["notes"] for r in pa.fold_clones(rows)}
    copy = "(a copy XLA's collective combiner schedules and never runs)"
    assert notes == {
        "jit_a": [f"jit_a-clone {copy} found no file for its own fingerprint (expected); not "
                  "counted"],
        "jit_b": [f"jit_b-clone {copy} read the profile; not counted"],
        "jit_c": [f"jit_c-clone {copy} read the profile, coverage 86%; not counted; a clone that "
                  "reads a profile changes the module's own fingerprint: keep only main-module "
                  "fingerprints in a profile directory (as `pgle collect --per-module` writes), "
                  "or compile without clones "
                  "(--xla_gpu_experimental_enable_heuristic_collective_combining=false)"],
        "jit_d": ["XLA did not schedule jit_d itself after its clone jit_d-clone: this row is "
                  "the clone's evidence"],
    }


@pytest.mark.parametrize("path, is_fp", [
    (f"/d/{FP}.pb", True), (f"{FP}.pbtxt", True), (f"/d/{FP}.txt", False),
    (f"/d/{FP[:-1]}.pb", False), (f"/d/{FP}0.pb", False), (f"/d/{FP.upper()}.pb", False),
    (f"/d/{FP[:-1]}g.pb", False), ("/d/x.pb", False), (f"/{FP}/p.pb", False), (FP, False),
])
def test_a_profile_file_named_by_a_fingerprint(path, is_fp):
    assert pa._is_fingerprint_file(path) is is_fp
