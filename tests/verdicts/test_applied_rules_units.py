"""The PGLE-applied verdict's log-level rules and notes, in process, on real XLA:GPU logs
(issue 37: the survivors of the verdicts package's mutation run; pgle/verdicts/pgle_applied.py).

Each rule and note is pinned whole (the sentence a user reads), with the condition that adds
it tested on both sides: the end-to-end tests reach these through `pgle verify` subprocesses,
which mutmut maps to no test. The logs are the deviceless lane's (tests/data/xla_gpu/README.md);
where a case needs fewer compiles or another mix, it keeps a subset of one log's real lines.
"""

from __future__ import annotations

import io

import pytest

from helpers.pgle_testing import REPO
from pgle.evidence.event_kinds import ModuleCompiled
from pgle.evidence.xla_log import Evidence, LogScanner
from pgle.verdicts import pgle_applied as pa
from pgle.verdicts.across_ranks import judge_job
from pgle.verdicts.origin import Origin, path_matcher
from pgle.verdicts.sync_converted import VMODULE, load_executed

DATA = REPO / "tests" / "data" / "xla_gpu"
D_TRAIN_012 = DATA / "0.12.0.1" / "hlo" / "dir-pbtxt" / "jit_prog_d_train.txt"


def _lines(log: str) -> list[str]:
    return (DATA / log).read_text().splitlines()


def _scan(lines: list[str]) -> Evidence:
    return LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))


def _log(log: str, drop: str | None = None) -> Evidence:
    """One lane log; `drop`: leave out the lines holding it (a run with less VLOG on)."""
    return _scan([ln for ln in _lines(log) if drop is None or drop not in ln])


def _compiles(log: str, n: int) -> Evidence:
    """The first `n` compiles of a lane log (each begins with its module's fingerprint line)."""
    out: list[str] = []
    seen = 0
    for ln in _lines(log):
        if "Fingerprint before LHS" in ln:
            seen += 1
            if seen > n:
                break
        out.append(ln)
    return _scan(out)


# -- the log-level rules ---------------------------------------------------------------------


def test_an_unknown_flag_aborts_before_any_compile():
    v = pa.judge(_log("0.12.0.1/unknown-checker-flag.log"))
    assert (v.status, v.modules) == ("error", [])
    assert v.reasons == [
        "XLA aborted before compiling: it does not know "
        "--xla_gpu_enable_pgle_accuracy_checker=true (\"Unknown flag in XLA_FLAGS\"); this jax's "
        "XLA has no such flag (see `pgle flags explain`)."]
    # Two processes of a command, each with its own XLA_FLAGS: each flag once, in order (jax
    # 0.4.35 lists the rest of XLA_FLAGS after two spaces: only the first is the unknown one).
    old = _lines("0.4.35/unknown-checker-flag.log")
    new = _lines("0.9.2/unknown-checker-flag.log")
    v = pa.judge(_scan(old + new + new))
    assert v.reasons[0].startswith(
        "XLA aborted before compiling: it does not know "
        "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN "
        "--xla_gpu_enable_pgle_accuracy_checker=true (\"Unknown flag")


def test_the_profile_discarded_at_error_strictness():
    v = pa.judge(_log("0.12.0.1/runtime-error.log"))
    assert v.status == "error"
    assert v.reasons[0] == (
        "the compile failed (1 time): XLA's accuracy checker at ERROR strictness discarded the "
        "profile (\"Found 10 missing instructions. Discarding the profile.\"): the profile misses "
        "instructions of the modules below; collect it again or use PGLE_STRICTNESS_LEVEL_WARN.")
    v = pa.judge(_log("0.10.2/partial-error.log"))
    assert (v.status, v.reasons) == ("error", [
        "the compile failed (5 times): XLA's accuracy checker at ERROR strictness discarded the "
        "profile (\"Found 9 missing instructions. Discarding the profile.\"): the profile misses "
        "instructions of the modules below; collect it again or use PGLE_STRICTNESS_LEVEL_WARN."])
    # The rows stay: they say which modules missed what.
    assert [m["status"] for m in v.modules] == ["not_applied"] * 5


def test_the_profile_xla_could_not_parse_said_once_with_its_count():
    msg = ("XLA could not parse the profile: /tmp/pgle-lane/0.10.2/profiles/garbage.pb: Read "
           "less bytes than requested")
    for n, tail in ((1, ""), (2, " (2 compiles)"), (3, " (3 compiles)"), (5, " (5 compiles)")):
        v = pa.judge(_compiles("0.10.2/garbage-pb.log", n))
        assert (v.status, v.reasons) == ("error", [msg + tail]), n


def test_a_profile_file_xla_did_not_find():
    v = pa.judge(_log("0.10.2/absent.log"))
    assert (v.status, v.reasons) == (
        "error", ["XLA found no profile file at /tmp/pgle-lane/0.10.2/profiles/absent.pbtxt"])


WORKLOAD = (
    "the workload never imported jax, so XLA compiled nothing and no profile could apply (a "
    "wrapper that starts the training script in another process? give it as `-- COMMAND "
    "ARGS`: pgle then reaches every Python process below it).")
COMMAND = (
    "no process of the command imported jax under pgle's harness, so no profile could apply "
    "(the harness travels by PYTHONPATH: a python started with -I, -E or -S does not read it).")
NO_LINE = ("no PGLE line in the log: XLA never read a profile (is the INFO log on, "
           "TF_CPP_MIN_LOG_LEVEL=0, and did the profile flag reach XLA? jax <= 0.5.3 logs nothing "
           "when the profile file does not exist).")


def test_a_workload_that_never_imported_jax():
    # The workload printed nothing: an empty log.
    v = pa.judge(_scan([]), jax_imported=False)
    assert (v.status, v.reasons, v.modules) == ("not_applied", [WORKLOAD], [])
    v = pa.judge(_scan([]), jax_imported=False, command=True)
    assert (v.status, v.reasons) == ("not_applied", [COMMAND])
    # Unknown (a log given to `verify`) or imported: the log alone speaks.
    assert pa.judge(_scan([]), jax_imported=None).reasons == [NO_LINE]
    assert pa.judge(_scan([]), jax_imported=True).reasons == [NO_LINE]
    # XLA compiled modules, or read a profile: jax was imported after all (a process the
    # harness did not see); the log's evidence decides.
    v = pa.judge(_log("0.10.2/no-profile.log"), jax_imported=False)
    assert (v.status, len(v.modules)) == ("not_applied", 10)
    assert v.reasons[0].startswith("XLA compiled 10 modules and read no profile for any")
    read = [ln for ln in _lines("0.10.2/good-pb.log") if "Using PGLE profile from" in ln][:1]
    v = pa.judge(_scan(read), jax_imported=False)
    assert (v.status, v.reasons) == (
        "not_applied", ["XLA read the profile but no module reported using it."])


HIDDEN = ("XLA's INFO log is hidden (TF_CPP_MIN_LOG_LEVEL is not 0), so the log cannot show which "
          "modules used the profile")


def test_a_log_that_hides_xlas_info_lines():
    # TF_CPP_MIN_LOG_LEVEL=1: only the checker's WARNING lines show.
    ev = _log("0.12.0.1/no-log-level.log")
    v = pa.judge(ev)
    assert (v.status, v.modules, v.evidence) == ("error", [], ev)
    assert v.reasons == [
        HIDDEN + "; its WARNING lines show the accuracy checker ran on 2 modules. Rerun with "
        "TF_CPP_MIN_LOG_LEVEL=0."]
    assert pa.judge(_log("0.8.3/no-log-level.log")).reasons == [
        HIDDEN + "; its WARNING lines show the accuracy checker ran on 4 modules. Rerun with "
        "TF_CPP_MIN_LOG_LEVEL=0."]
    # One checker line is enough to tell.
    one = pa.judge(_scan(_lines("0.12.0.1/no-log-level.log")[:1]))
    assert one.reasons == [HIDDEN + "; its WARNING lines show the accuracy checker ran on 1 "
                                    "module. Rerun with TF_CPP_MIN_LOG_LEVEL=0."]
    # The run's environment says so (pgle run): said without the checker's count.
    v = pa.judge(_scan([]), info_log_hidden=True)
    assert (v.status, v.reasons) == ("error", [HIDDEN + ". Rerun with TF_CPP_MIN_LOG_LEVEL=0."])
    # The backend decides, spelled in any case: XLA:GPU's names keep the rule...
    for gpu in ("gpu", "GPU", "cuda", "rocm"):
        assert pa.judge(_log("0.12.0.1/no-log-level.log"), platform=gpu).status == "error", gpu
    # ... another backend explains a log without PGLE lines whatever it hides.
    v = pa.judge(_scan([]), info_log_hidden=True, platform="cpu")
    assert (v.status, v.reasons) == ("not_applicable", [
        "backend cpu: PGLE is an XLA:GPU feature, so no module used a profile and none could; "
        "run on an NVIDIA GPU to apply it."])
    # XLA read a profile: the INFO lines show after all; the modules decide.
    v = pa.judge(_log("0.10.2/good-pb.log"), info_log_hidden=True)
    assert (v.status, v.reasons) == ("applied", ["5 of 5 modules applied the profile."])


def test_no_pgle_line_in_a_log_that_shows_info_lines():
    # XLA's INFO lines show, so only the flag is in doubt.
    ev = _scan([ln for ln in _lines("0.10.2/no-profile.log")
                if "Fingerprint before LHS" not in ln])
    assert ev.info_lines and not ev.modules
    assert pa.judge(ev).reasons == [
        "no PGLE line in the log: XLA never read a profile (did the profile flag reach XLA? jax "
        "<= 0.5.3 logs nothing when the profile file does not exist)."]
    assert pa.judge(_scan([])).reasons == [NO_LINE]


def test_the_cached_modules_named_up_to_five():
    five = [f"jit_{i}" for i in range(5)]
    v = pa.judge(_scan([]), loaded_from_cache=five, compiled_anew=0)
    assert v.reasons[0].startswith(
        "every executable was loaded from jax's persistent compilation cache (5 modules: jit_0, "
        "jit_1, jit_2, jit_3, jit_4): XLA compiled nothing")


# -- the reads that are not the user's profile ------------------------------------------------

GIVEN = "/tmp/pgle-lane/0.10.2/profiles/given.pbtxt"
OTHER = ("XLA read /tmp/pgle-lane/0.10.2/profiles/fpo.pbtxt, which is not the profile pgle "
         f"handed over ({GIVEN}) nor inside it: not counted.")


def _origin() -> Origin:
    return Origin(profile_match=path_matcher(GIVEN), profile_given=GIVEN)


def test_a_read_of_another_file_is_said_first_on_the_verdict_and_on_each_row():
    ev = _log("0.10.2/fp-other.log")
    v = pa.judge(ev, origin=_origin())
    assert v.evidence is ev
    assert (v.status, v.reasons) == ("not_applied", [OTHER, "0 of 5 modules applied the profile, "
                                                            "5 not at all."])
    assert v.details == {"not_counted": {"reads": ["/tmp/pgle-lane/0.10.2/profiles/fpo.pbtxt"]}}
    assert all(m["notes"][0] == OTHER and m["coverage"] is None for m in v.modules)
    # A log-level rule speaks after it; the row's own note follows it.
    v = pa.judge(_log("0.10.2/fp-other-error.log"), origin=_origin())
    assert v.status == "error" and v.reasons[0] == OTHER
    assert v.reasons[1].startswith("the compile failed (5 times): XLA's accuracy checker")
    assert v.modules[0]["notes"] == [
        OTHER, "the accuracy checker (ERROR level) discarded the profile and the compile failed "
        "(XLA: INVALID_ARGUMENT: Found 10 missing instructions. Discarding the profile.)"]
    # The path handed over: every read counts.
    v = pa.judge(_log("0.10.2/fp-other.log"),
                 origin=Origin(profile_match=path_matcher("/tmp/pgle-lane/0.10.2/profiles"),
                               profile_given="/tmp/pgle-lane/0.10.2/profiles"))
    assert "not_counted" not in v.details and OTHER not in v.reasons


def test_a_foreign_log_keeps_its_evidence():
    ev = _log("0.10.2/good-pb.log")
    v = pa.judge(ev, origin=Origin(compile_platforms=("cpu",)))
    assert (v.status, v.evidence) == ("not_applicable", ev)


# -- what the judge hands each module ---------------------------------------------------------


def test_min_coverage_and_the_sol_fallback_reach_each_module():
    # jax 0.10.2: XLA prices the modules' unprofiled compute with its SoL model.
    sol = {m["module"]: m["rule"] for m in pa.judge(_log("0.10.2/threads.log")).modules}
    assert [k for k, r in sol.items() if r == "sol_fallback"] == [
        "jit_prog_c_scan", "jit_prog_d_train", "jit_prog_b_cond"]
    # --min-coverage makes coverage decide.
    v = pa.judge(_log("0.10.2/threads.log"), min_coverage=0.5)
    assert "sol_fallback" not in [m["rule"] for m in v.modules]
    assert not any("speed-of-light" in r for r in v.reasons)
    # jax 0.5.1 logs no SoL line: the caller's sol_fallback (the jax's own rule) decides.
    assert "sol_fallback" not in [m["rule"] for m in pa.judge(_log("0.5.1/threads.log")).modules]
    v = pa.judge(_log("0.5.1/threads.log"), sol_fallback=True)
    assert [m["rule"] for m in v.modules].count("sol_fallback") == 4


def test_the_sol_note_names_the_device():
    v = pa.judge(_log("0.10.2/threads.log"))
    assert v.reasons[1] == (
        "the speed-of-light rule decided 3 modules (jit_prog_c_scan, jit_prog_d_train, "
        "jit_prog_b_cond): --min-coverage was not given, no collective is missing, and XLA prices "
        "the missing compute with its SoL model (jax >= 0.10.1 on Hopper/Blackwell; assumed a "
        "Hopper/Blackwell GPU, as the log names none (--device-kind names it)); --min-coverage "
        "makes coverage decide.")
    v = pa.judge(_log("0.10.2/threads.log"), device_kind="NVIDIA H200")
    assert "(jax >= 0.10.1 on Hopper/Blackwell; the device: NVIDIA H200); " in v.reasons[1]


def test_the_executed_hlo_is_found_by_name_without_fingerprint_lines():
    # Without gpu_hlo_schedule=1 a profile file (not a directory) gives no fingerprint: `pgle
    # run`'s executed HLO is found by the module's name, and the all-reduce XLA made
    # synchronous is no miss.
    ev = _log("0.12.0.1/good-pbtxt.log", drop="Fingerprint before LHS")
    assert [m.fingerprint for m in ev.modules] == [None] * 5
    executed = load_executed([ModuleCompiled(t=1.0, module="jit_prog_d_train",
                                             hlo_file=str(D_TRAIN_012))])
    rows = {m["module"]: m for m in pa.judge(ev, executed=executed, renamed=True).modules}
    assert (rows["jit_prog_d_train"]["rule"], rows["jit_prog_d_train"]["collectives_converted"]) \
        == ("converted_to_sync", [{"scheduled": "all-reduce-start", "executed": "all-reduce.6"}])
    rows = {m["module"]: m for m in pa.judge(_log("0.12.0.1/good-pbtxt.log",
                                                  drop="Fingerprint before LHS")).modules}
    assert rows["jit_prog_d_train"]["rule"] == "collectives_unresolved"


# -- the notes after the status ---------------------------------------------------------------

UNKNOWN = ("coverage unknown for {}: this jax's WARN accuracy checker prints nothing even when "
           "instructions are missing (jax 0.4.36-0.5.0); PGLE_STRICTNESS_LEVEL_ERROR proves the "
           "fit.")


def test_coverage_unknown_where_the_checker_is_silent_by_design():
    # jax 0.5.0 under WARN: no checker block, whatever the profile misses.
    v = pa.judge(_log("0.5.0/good-pb.log"), silence=pa.SILENCE_UNKNOWN)
    assert v.reasons == ["5 of 5 modules applied the profile.", UNKNOWN.format("5 modules")]
    assert v.details == {"coverage_unknown": 5}
    # Only the modules that applied it count, not those without a file in the directory.
    v = pa.judge(_log("0.5.0/dir-some-missing.log"), silence=pa.SILENCE_UNKNOWN)
    assert [(m["status"], m["coverage"]) for m in v.modules] == [
        ("applied", None), ("not_applied", None), ("applied", None), ("not_applied", None),
        ("not_applied", None)]
    assert v.reasons == ["2 of 5 modules applied the profile, 3 not at all.",
                         UNKNOWN.format("2 modules")]
    assert v.details == {"coverage_unknown": 2}
    # A checker silent when nothing is missing (full), or none at all (off): no such note.
    for silence in (pa.SILENCE_FULL, pa.SILENCE_OFF):
        v = pa.judge(_log("0.5.0/good-pb.log"), silence=silence)
        assert v.reasons == ["5 of 5 modules applied the profile."], silence
        assert "coverage_unknown" not in v.details
    # Nothing applied: nothing to be unsure of.
    v = pa.judge(_log("0.10.2/partial-error.log"), silence=pa.SILENCE_UNKNOWN)
    assert "coverage_unknown" not in v.details


def test_the_unresolved_note_and_the_pairs_no_module_can_take():
    # jax 0.12.0.1 with the pass's VLOG but not gpu_hlo_schedule=1: the `Added pair` lines
    # cannot be given to a module.
    v = pa.judge(_log("0.12.0.1/sync-converted.log", drop="Fingerprint before LHS"))
    assert v.reasons[-1] == (
        "XLA logged 4 `Added pair` line(s) (async collectives it made synchronous) that pgle "
        "cannot give to a module: without the VLOG fingerprint lines nothing shows where each "
        f"module's compile begins; rerun with TF_CPP_VMODULE={VMODULE}.")
    # Unresolved modules without such lines: only the unresolved note.
    v = pa.judge(_log("0.12.0.1/dir-pbtxt.log"))
    assert not any("Added pair" in r for r in v.reasons)
    # Pairs every module resolved with: nothing to say.
    v = pa.judge(_log("0.12.0.1/sync-converted.log"), renamed=True)
    assert v.status == "applied" and not any("Added pair" in r for r in v.reasons)


def test_an_unnamed_module_is_named_by_its_place_in_the_notes():
    # jax 0.6.2 without TF_CPP_VMODULE names no module (`Found profile, using ...`).
    v = pa.judge(_log("0.6.2/threads.log", drop="Fingerprint before LHS"), sol_fallback=True)
    assert v.reasons[1].startswith(
        "the speed-of-light rule decided 4 modules (unnamed module #2, unnamed module #3, "
        "unnamed module #4, unnamed module #5): ")
    assert v.reasons[2].startswith("1 module(s) (unnamed module #1) miss only async collectives")


FALLBACK = ("{} did not parse and XLA read the <fp>.pb beside {} instead (its lookup order): not "
            "an error, but remove the broken {}, e.g. {}.")
FB = "/tmp/pgle-lane/0.10.2/profiles/dir-fallback/"


def test_the_broken_pbtxt_files_xla_read_the_pb_beside():
    v = pa.judge(_log("0.10.2/dir-pbtxt-fallback.log"))
    assert v.reasons == ["5 of 5 modules applied the profile.", FALLBACK.format(
        "5 <fp>.pbtxt files", "each", "files", FB + "fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pbtxt")]
    v = pa.judge(_compiles("0.10.2/dir-pbtxt-fallback.log", 2))
    assert v.reasons[-1] == FALLBACK.format(
        "2 <fp>.pbtxt files", "each", "files", FB + "fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pbtxt")
    v = pa.judge(_compiles("0.10.2/dir-pbtxt-fallback.log", 1))
    assert v.reasons == ["1 of 1 module applied the profile.", FALLBACK.format(
        "1 <fp>.pbtxt file", "it", "file", FB + "fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pbtxt")]
    assert not any("did not parse" in r for r in pa.judge(_log("0.10.2/dir-pbtxt.log")).reasons)


LHS = ("XLA warned that --xla_gpu_enable_latency_hiding_scheduler is unset ({}): this jax "
       "schedules with the profile anyway, but jax 0.4.34 ignores a profile without the flag; set "
       "it to true to keep the run's flags portable.")


def test_the_latency_hiding_scheduler_left_unset():
    v = pa.judge(_log("0.5.1/no-lhs-flag.log"))
    assert v.reasons == ["5 of 5 modules applied the profile.", LHS.format("5 times")]
    assert v.details == {"lhs_unset": 5}
    v = pa.judge(_compiles("0.5.1/no-lhs-flag.log", 1))
    assert v.reasons == ["1 of 1 module applied the profile.", LHS.format("1 time")]
    assert "lhs_unset" not in pa.judge(_log("0.5.1/good-pb.log")).details


@pytest.mark.parametrize("name, fingerprint", [
    ("fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pb", True),
    ("/p/d/fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pbtxt", True),
    ("/p/x.y/fe8bd59d0f5f8ed3e9de8db97e1ec5eb.pb", True),
    ("/p/fe8bd59d0f5f8ed3e9de8db97e1ec5eX.pb", False),  # not hex
    ("/p/FE8BD59D0F5F8ED3E9DE8DB97E1EC5EB.pb", False),  # XLA writes lower case
    ("/p/fe8bd59d0f5f8ed3e9de8db97e1ec5e.pb", False),  # 31 digits
    ("/p/fe8bd59d0f5f8ed3e9de8db97e1ec5eb.txt", False),
    ("/p/profile.pb", False),
])
def test_a_fingerprint_file_name(name: str, fingerprint: bool):
    # A clone that reads its own fingerprint's file changes the module's fingerprint: said on
    # the module's row (pgle_applied._clone_note).
    assert pa._is_fingerprint_file(name) is fingerprint



def test_the_executed_hlo_tells_an_async_wrappers_kind():
    # jax 0.12.0.1, issue 32's Triton psum: the checker names `fusion-start`, whose kind only
    # the executed HLO tells (an all-reduce): a missing collective, not an unknown async.
    log = DATA / "0.12.0.1" / "issue32" / "triton-psum-missing.log"
    hlo = DATA / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-missing.txt"
    executed = load_executed([ModuleCompiled(t=1.0, module="jit_prog_j_demo", hlo_file=str(hlo))])
    (row,) = pa.judge(LogScanner().scan_file(log), executed=executed, renamed=True).modules
    assert (row["status"], row["rule"], row["async_unknown"]) == ("partial", "collectives", [])
    assert row["collectives_missing"] == ["fusion-start", "fusion-done"]
    assert row["notes"] == [
        "the profile misses 2 collectives or host copies (all-reduce, read from the executed "
        "HLO: fusion-start, fusion-done): the scheduler guesses their cost, which is what PGLE is "
        "for; collect the profile again from a run of this exact program"]
    # The log alone cannot tell.
    (row,) = pa.judge(LogScanner().scan_file(log), renamed=True).modules
    assert (row["rule"], row["async_unknown"]) == ("async_unknown", ["fusion-start", "fusion-done"])


def test_a_job_whose_ranks_differ_on_a_module():
    # Rank 0 read the whole profile, rank 1 a partial one (jax 0.10.2): two statuses a module.
    good = pa.judge(_log("0.10.2/good-pb.log"))
    part = pa.judge(_log("0.10.2/partial-warn.log"))
    status, _, reasons = judge_job({0: good.modules, 1: part.modules},
                                   {0: good.status, 1: part.status},
                                   {0: good.reasons, 1: part.reasons})
    assert (status, reasons) == ("partial", [
        "0 of 5 modules applied the profile on every rank that reported (ranks 0-1), 5 partially "
        "(5 on some ranks only).",
        "jit_prog_a_collectives: applied on rank 0; partial on rank 1 (coverage 10%, 9 missing).",
        "jit_prog_b_cond: applied on rank 0; not_applied on rank 1 (coverage 0%, 6 missing).",
        "jit_prog_c_scan: applied on rank 0; not_applied on rank 1 (coverage 0%, 9 missing).",
        "jit_prog_d_train: applied on rank 0; not_applied on rank 1 (coverage 0%, 10 missing).",
        "jit_prog_d_eval: applied on rank 0; not_applied on rank 1 (coverage 0%, 5 missing)."])
