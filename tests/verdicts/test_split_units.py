"""How a module's missing collectives are sorted, and the small rules of the PGLE-applied
verdict, in process (issue 37): sync_converted.split by the executed HLO (real, from the
XLA:GPU compiler of jax 0.12.0.1 in the deviceless lane) or by the log's pass lines; the rule a
silent module gets, the coverage ratio, the modules' count sentence, and a read no module used.
"""

from __future__ import annotations

import io

import pytest

from helpers.pgle_testing import REPO
from pgle.evidence.xla_log import LogScanner, ModuleEvidence
from pgle.verdicts import pgle_applied as pa
from pgle.verdicts.checker import SILENCE_FULL, SILENCE_OFF, SILENCE_UNKNOWN
from pgle.verdicts.across_ranks import aggregate_modules
from pgle.verdicts.sync_converted import ExecutedModules, Split, executed_of, split
from pgle.verdicts.sync_converted import unknown_note as sc_unknown
from pgle.verdicts.sync_converted import unresolved_note as sc_unresolved

HLO = REPO / "tests" / "data" / "xla_gpu" / "0.12.0.1"
D_TRAIN = executed_of((HLO / "hlo" / "dir-pbtxt" / "jit_prog_d_train.txt").read_text())
TRITON = executed_of((HLO / "issue32" / "hlo" / "triton-psum-good.txt").read_text())


def test_sorted_by_the_executed_hlo():
    # all-reduce-start ran as all-reduce.6; collective-permute-start.9 is not in the module;
    # synchronous collectives and host copies run under their names.
    assert split(["all-reduce-start", "collective-permute-start.9", "all-reduce.3",
                  "copy-start.2"], executed=D_TRAIN) == Split(
        missing=["all-reduce.3", "copy-start.2"],
        converted=[("all-reduce-start", "all-reduce.6"), ("collective-permute-start.9", None)],
        by="hlo")
    # A Triton collective fusion is the all-reduce it runs; an async start the module still
    # runs is missing; a custom call the HLO does not hold stays of unknown kind.
    assert split(["fusion-start", "all-gather-start", "custom-call-start"],
                 executed=TRITON) == Split(
        missing=["fusion-start", "all-gather-start"], unknown=["custom-call-start"],
        labels={"fusion-start": "all-reduce, read from the executed HLO"})


def test_sorted_by_the_logs_pass_lines():
    assert split(["fusion-start", "custom-call-start.1"]) == Split(
        unknown=["fusion-start", "custom-call-start.1"])
    # jax <= 0.11.0 keeps the names of the pairs it makes synchronous: missing.
    assert split(["all-reduce-start", "all-gather-start"], added_pairs=["all-reduce-start"],
                 renamed=False) == Split(missing=["all-reduce-start", "all-gather-start"])
    # jax >= 0.11.1: a pair it made synchronous is converted; one its pass looked at and kept
    # async is missing; one it never mentions cannot be told.
    assert split(["all-reduce-start.1", "all-gather-start", "reduce-scatter-start"],
                 seen=["all-gather-start", "all-reduce-start.1"],
                 added_pairs=["all-reduce-start.1"], renamed=True) == Split(
        missing=["all-gather-start"], converted=[("all-reduce-start.1", None)],
        unresolved=["reduce-scatter-start"], by="log", why_unresolved="no_lines")
    # The jax unknown: a pair made synchronous may or may not have been renamed.
    for names in (["all-reduce-start.1", "all-gather-start"],
                  ["all-gather-start", "all-reduce-start.1"]):
        assert split(names, added_pairs=["all-reduce-start.1"], renamed=None) == Split(
            unresolved=names, why_unresolved="version")


@pytest.mark.parametrize("m, silence, rule", [
    (ModuleEvidence("m", no_profile_file=True, discarded=True), SILENCE_FULL, "no_profile_file"),
    (ModuleEvidence("m", discarded=True, not_in_module=["x"]), SILENCE_FULL, "discarded"),
    (ModuleEvidence("m", not_in_module=["x"], fingerprint_only=True), SILENCE_FULL,
     "not_in_module"),
    (ModuleEvidence("m", fingerprint_only=True), SILENCE_FULL, "no_profile_read"),
    (ModuleEvidence("m"), SILENCE_FULL, "checker_silent"),
    (ModuleEvidence("m"), SILENCE_UNKNOWN, "checker_silence_unknown"),
    (ModuleEvidence("m"), SILENCE_OFF, "no_checker"),
])
def test_the_rule_of_a_module_the_checker_said_nothing_for(m, silence, rule):
    assert pa._rule_of("applied", m, silence) == rule


def test_the_coverage_ratio():
    assert pa._ratio(3, 1) == 0.75 and pa._ratio(0, 4) == 0.0
    assert pa._ratio(0, 0) is None and pa._ratio(None, 1) is None and pa._ratio(1, None) is None


def test_the_modules_count_sentence():
    reasons: list[str] = ["earlier"]
    mods = [{"status": s} for s in ("applied", "partial", "not_applied", "not_applied")]
    assert pa._module_ruling(mods, reasons) == "partial"
    assert reasons == ["earlier", "1 of 4 modules applied the profile, 1 partially, 2 not at "
                                  "all."]
    reasons = []
    assert pa._module_ruling([{"status": "applied"}], reasons) == "applied"
    assert reasons == ["1 of 1 module applied the profile."]


def test_a_read_no_module_used():
    log = b"I0822 12:34:56.789012  1 gpu_hlo_schedule.cc:538] Using PGLE profile from /p.pb\n"
    v = pa.judge(LogScanner().scan_stream(io.BytesIO(log)))
    assert (v.status, v.reasons, v.modules) == (
        "not_applied", ["XLA read the profile but no module reported using it."], [])


def test_executed_modules_by_fingerprint_and_by_name():
    fp = D_TRAIN.fingerprint
    assert fp == "206051e0bbc148cac6d904e652181980"
    # A fingerprint XLA printed short is no fingerprint.
    text = (HLO / "hlo" / "dir-pbtxt" / "jit_prog_d_train.txt").read_text()
    assert executed_of(text.replace(fp, fp[:16])).fingerprint is None
    # Kept without a module name (found by fingerprint only), or under two names.
    bare = ExecutedModules([D_TRAIN])
    assert len(bare) == 1 and bare.find(None, fp) is D_TRAIN and bare.find("jit_x", None) is None
    twice = ExecutedModules([("jit_a", D_TRAIN), ("jit_b", D_TRAIN)])
    assert len(twice) == 2 and twice.find("jit_a", None) is D_TRAIN


def _row(name: str, fp: str | None, status: str = "applied") -> dict:
    return {"module": name, "fingerprint": fp, "status": status, "rank": None}


def test_modules_matched_across_ranks_by_name_fingerprint_and_compile():
    # jit_a compiled three times on rank 0 (its third compile absent on rank 1); jit_b another
    # program on each rank (other fingerprints): not one module.
    rows = aggregate_modules({
        0: [_row("jit_a", "f1"), _row("jit_a", "f1", "partial"), _row("jit_b", "b0"),
            _row("jit_a", "f1", "not_applied")],
        1: [_row("jit_a", "f1"), _row("jit_a", "f1", "partial"), _row("jit_b", "b1")],
    })
    assert [(r["module"], r["fingerprint"], r["ranks"], r["absent_ranks"]) for r in rows] == [
        ("jit_a", "f1", {"applied": [0, 1]}, []),
        ("jit_a", "f1", {"partial": [0, 1]}, []),
        ("jit_b", "b0", {"applied": [0]}, [1]),
        ("jit_a", "f1", {"not_applied": [0]}, [1]),
        ("jit_b", "b1", {"applied": [1]}, [0]),
    ]


VERIFIER = ("FAILED_PRECONDITION: during context [hlo verifier]: Expected instruction name to "
            "remain the same. Was 'all-gather-start.1' is 'all-gather.4'.")  # jax 0.11.2


def _judged(m: ModuleEvidence, **kw) -> tuple:
    r = pa._judge_module(m, None, SILENCE_FULL, **kw).to_dict()
    return r["status"], r["rule"], r["coverage"], r["notes"]


def test_a_module_whose_compile_failed():
    assert _judged(ModuleEvidence("jit_a", checker_found=3, checker_missing=1,
                                  compile_failed=VERIFIER)) == (
        "not_applied", "compile_failed", 0.75, [
            f"the compile failed (XLA: {VERIFIER})",
            "jax >= 0.11 under PGLE_STRICTNESS_LEVEL_ERROR fails a module whose async collective "
            "XLA makes synchronous, whatever the profile: use PGLE_STRICTNESS_LEVEL_WARN"])
    assert _judged(ModuleEvidence("jit_b", checker_found=3, checker_missing=1,
                                  compile_failed="INTERNAL: out of memory")) == (
        "not_applied", "compile_failed", 0.75, ["the compile failed (XLA: INTERNAL: out of memory)"])
    # The ERROR checker discarded the profile: that is the rule, with XLA's words.
    discard = "INVALID_ARGUMENT: Found 7 missing instructions. Discarding the profile."
    assert _judged(ModuleEvidence("jit_c", checker_found=3, checker_missing=7, discarded=True,
                                  compile_failed=discard)) == (
        "not_applied", "discarded", 0.3, [
            "the accuracy checker (ERROR level) discarded the profile and the compile failed "
            f"(XLA: {discard})"])


def test_compute_missing_without_the_sol_rule_is_the_thresholds():
    m = ModuleEvidence("jit_d", checker_found=18, checker_missing=2)
    assert _judged(m) == ("applied", "min_coverage", 0.9, [])
    assert _judged(m, sol_fallback=True)[1] == "sol_fallback"


def test_a_module_xla_read_nothing_for_or_discarded():
    assert _judged(ModuleEvidence("jit_e", fingerprint="ab" * 16, fingerprint_only=True)) == (
        "not_applied", "no_profile_read", None, [
            "XLA read no profile for it (it logged only the module's fingerprint: no file for it "
            "in a profile directory, which jax <= 0.5.x does not report, or no profile reached "
            "XLA)"])
    assert _judged(ModuleEvidence("jit_f", checker_found=1, checker_missing=3,
                                  discarded=True)) == (
        "not_applied", "discarded", 0.25, [
            "the accuracy checker (ERROR level) discarded the profile and the compile failed"])


BASE = {"async_unknown": [], "collectives_converted": [], "collectives_missing": [],
        "collectives_total": None, "collectives_unresolved": [], "coverage": None,
        "fingerprint": None, "instructions_found": None, "instructions_missing": None,
        "missing_instructions": [], "notes": [], "ordinal": None, "profile_found": True,
        "profile_path": None, "rank": None}


def _whole(m: ModuleEvidence, silence: str = SILENCE_FULL) -> dict:
    return pa._judge_module(m, None, silence).to_dict()


def test_each_modules_whole_row():
    fp = "ab" * 16
    assert _whole(ModuleEvidence("jit_u", rank=2, fingerprint=fp, profile_path=f"/p/{fp}.pb",
                               found_profile=True), SILENCE_UNKNOWN) == {
        **BASE, "module": "jit_u", "status": "applied", "rule": "checker_silence_unknown",
        "rank": 2, "fingerprint": fp, "profile_path": f"/p/{fp}.pb", "notes": [
            "coverage unknown: XLA printed no accuracy-checker block for it, and this jax's WARN "
            "checker prints nothing even when instructions are missing (jax 0.4.36-0.5.0); rerun "
            "with --xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR to prove the fit"]}
    assert _whole(ModuleEvidence("jit_o", profile_path="/p.pb", found_profile=True,
                               fallback_from="/d/x.pbtxt", note="an XLA note", missed_costs=2),
                SILENCE_OFF) == {
        **BASE, "module": "jit_o", "status": "applied", "rule": "no_checker",
        "profile_path": "/p.pb", "notes": [
            "coverage unverified: the run had no accuracy checker (jax < 0.4.36 has none by "
            "default, or PGLE_STRICTNESS_LEVEL_OFF), so the log proves the profile was read, not "
            "which instructions it covers",
            "XLA could not parse /d/x.pbtxt and read the .pb beside it (its lookup order: .pbtxt, "
            "then .pb)",
            "an XLA note",
            "XLA's estimator found no cost for 2 instructions ('PGLE missed cost for')"]}
    assert _whole(ModuleEvidence(None, ordinal=3, found_profile=True)) == {
        **BASE, "module": None, "status": "applied", "rule": "checker_silent", "ordinal": 3,
        "coverage": 1.0, "instructions_missing": 0,
        "notes": ["XLA did not log the module's name (set TF_CPP_VMODULE=gpu_hlo_schedule=1)"]}
    assert _whole(ModuleEvidence("jit_n", fingerprint="cd" * 16, no_profile_file=True)) == {
        **BASE, "module": "jit_n", "status": "not_applied", "rule": "no_profile_file",
        "fingerprint": "cd" * 16, "profile_found": False,
        "notes": [f"no {'cd' * 16}.pb or .pbtxt in the profile directory"]}
    assert _whole(ModuleEvidence("jit_m", checker_found=5, not_in_module=["fusion.9"],
                               found_profile=True)) == {
        **BASE, "module": "jit_m", "status": "partial", "rule": "not_in_module",
        "instructions_found": 5, "notes": [
            "XLA: the profile has entries that are not in this module (first: fusion.9); it is "
            "used where names match, coverage unknown"]}
    both = Split(unresolved=["all-reduce-start"], why_unresolved="no_lines",
                 unknown=["fusion-start"])
    assert _whole(ModuleEvidence("jit_c", checker_found=18, checker_missing=3,
                               missing_names=["fusion.3", "all-reduce-start", "fusion-start"],
                               missing_communication=["all-reduce-start", "fusion-start"],
                               found_profile=True, profile_path="/p.pb")) == {
        **BASE, "module": "jit_c", "status": "partial", "rule": "collectives_unresolved",
        "instructions_found": 18, "instructions_missing": 3, "coverage": 18 / 21,
        "profile_path": "/p.pb",
        "missing_instructions": ["fusion.3", "all-reduce-start", "fusion-start"],
        "collectives_missing": ["all-reduce-start"], "collectives_unresolved": ["all-reduce-start"],
        "async_unknown": ["fusion-start"],
        "notes": [sc_unresolved(both), sc_unknown(both)]}
