"""What the XLA log scanner counts and records from the lines that only warn (issue 37): a
profile that may not apply (the cost name not in the module, or another reason, in XLA's
words), the costs the estimator missed, the LHS flag unset, the accuracy checker without a
profile path; each counted once per line, each kind's first source line kept as the log's
wording (what tells the jax version). The lines are XLA:GPU's own (absl prefix, jax >= 0.7.2;
the wordings of pgle.evidence.logscan), scanned from a real file. And the literal start of
each message pattern, which the scanner's pre-check is built from at import."""

from __future__ import annotations

import re
from pathlib import Path

from pgle.evidence import logscan, xla_log
from pgle.evidence.xla_log import LogScanner

S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
FP = "0123456789abcdef0123456789abcdef"
MAY_NOT = "PGLE profile may not applicable to the module, but will still be used : "
NO_PATH = ("but no profile path specified in xla_gpu_pgle_profile_file_or_directory_path")


def absl(sev: str, file: str, line: int, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  4242 {file}:{line}] {msg}"


def test_the_lines_that_only_warn_are_counted_and_worded(tmp_path: Path):
    log = tmp_path / "xla.log"
    log.write_text("\n".join([
        absl("W", S, 570, f"xla_gpu_pgle_accuracy_checker is set to WARN, {NO_PATH}"),
        absl("I", P, 120, "PGLE missed cost for: fusion.1"),  # no module yet: not counted
        absl("I", S, 538, f"Using PGLE profile from /p/{FP}.pb"),
        absl("I", S, 540, "Found profile for module jit_m, using profile guided latency "
                          "estimator"),
        absl("I", S, 545, MAY_NOT + "cost name all-gather-start not in module jit_m"),
        absl("I", S, 546, MAY_NOT + "the profile is old"),
        absl("I", P, 120, "PGLE missed cost for: fusion.3"),
        absl("I", P, 121, "PGLE missed cost for: fusion.4"),
        absl("I", S, 560, "Profile data detected but `xla_gpu_enable_latency_hiding_scheduler` "
                          "unset. To use it compiler will run Latency Hiding Scheduler anyway."),
        absl("I", S, 561, "Profile data detected but xla_gpu_enable_latency_hiding_scheduler "
                          "unset."),
        absl("W", S, 571, f"xla_gpu_pgle_accuracy_checker is set to ERROR, {NO_PATH}"),
    ]) + "\n")
    ev = LogScanner().scan_file(log)
    [module] = ev.modules
    assert (module.module, module.not_in_module, module.note, module.missed_costs) == (
        "jit_m", ["all-gather-start"], "XLA: profile may not apply: the profile is old", 2)
    assert (ev.lhs_unset_warnings, ev.checker_without_path, ev.pgle_lines) == (2, 2, 4)
    assert ev.wording == {"checker_without_path": 570, "prefix": "absl", "using": 538,
                          "found_profile_named": 540, "may_not_apply": 545, "lhs_unset": 560}


def test_a_message_pattern_s_literal_start():
    start = xla_log._literal_start
    assert start(re.compile(r"^Using PGLE profile from (?P<p>.+)")) == "Using PGLE profile from "
    assert start(re.compile(r"^Found profile(?: for module)?")) == "Found profile"
    # an optional or repeated character is not part of it
    assert start(re.compile(r"^Missing instructions?")) == "Missing instruction"
    assert start(re.compile(r"^abc*d")) == "ab" and start(re.compile(r"^ab{2}")) == "a"
    assert start(re.compile(r"^x+y")) == "x" and start(re.compile(r"^a.b")) == "a"
    assert start(re.compile(r"no anchor^")) == "no anchor"
    assert start(re.compile(r"^plain text")) == "plain text"
    assert start(re.compile(r"^\d")) == "" and start(re.compile("^XX")) == "XX"
    # the scanner's pre-check, built at import: the start of each message it reads
    assert xla_log._MESSAGE_STARTS == (
        "Fingerprint before LHS for module ", "Using PGLE profile ", "Using PGLE profile from ",
        "Found profile", "Found ", "Missing ", "PGLE profile file does not exist: ",
        "Tried but failed to parse PGLE proto from ", "Unable to read PGLE ", "Unable to ",
        MAY_NOT, "Unknown flag", "PGLE fallback: using SolLatencyEstimator",
        "PGLE missed cost for: ", "Profile data detected but ",
        "xla_gpu_pgle_accuracy_checker is set to ", "Using unified latency estimator",
        "Added pair: ", "Found async start ")
    assert [start(logscan.MAY_NOT_APPLY), start(logscan.UNKNOWN_FLAGS),
            start(logscan.LHS_UNSET)] == [MAY_NOT, "Unknown flag", "Profile data detected but "]


def test_a_verifier_failure_fails_the_module_that_began_last_in_its_rank_and_thread(
    tmp_path: Path,
):
    # `srun --label` ranks 0 and 1, each with a compiling thread: rank 1's jit_b (thread 4343)
    # logged only its fingerprint, the newest module; then jax's exception line (no prefix,
    # no module), twice: the second finds no module begun since
    why = ("FAILED_PRECONDITION: during context [hlo verifier]: Expected instruction name to "
           "remain the same. Was 'all-gather-start' is 'all_gather.3.2'.")
    log = tmp_path / "xla.log"
    log.write_text("\n".join([
        "0: " + absl("I", S, 538, f"Fingerprint before LHS for module jit_a(1) = {FP}"),
        "0: " + absl("I", S, 538, f"Using PGLE profile from /p/{FP}.pb"),
        "0: " + absl("I", S, 540, "Found profile for module jit_a, using profile guided latency "
                                  "estimator"),
        "1: " + absl("I", S, 538, f"Fingerprint before LHS for module jit_b(2) = {FP}")
        .replace("  4242 ", "  4343 "),
        f"1: jax.errors.JaxRuntimeError: {why}",
        f"1: jax.errors.JaxRuntimeError: {why}",
    ]) + "\n")
    ev = LogScanner().scan_file(log)
    assert [(m.module, m.rank, m.thread, m.fingerprint_only, m.compile_failed)
            for m in ev.modules] == [("jit_a", 0, "4242", False, None),
                                     ("jit_b", 1, "4343", True, why)]
    assert ev.verifier_failures == [why, why]
