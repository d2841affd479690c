"""What each kind of XLA:GPU line leaves in the scanner's Evidence (issue 37's survivors of
pgle/evidence/xla_log.py): the wording record (kind, source line, prefix style) that dates a
log, the count of the scheduler's lines about the profile, the reads and parse errors, the
`Added pair` counts, and which module a failed compile is laid on.

The wording of every lane version's real logs (tests/data/xla_gpu/<jax>/) must be exactly the
grid pgle.evidence.log_version holds for that version; the other lines are generated in the
real wordings of those logs (test_logscan_handlers.py's prefix styles)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO
from pgle.evidence import log_version
from pgle.evidence.xla_log import Evidence, LogScanner

DATA = REPO / "tests" / "data" / "xla_gpu"
S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
PAIRS = "convert_async_collectives_to_sync.cc"
FP = "0123456789abcdef0123456789abcdef"


def absl(sev: str, tid: int, file: str, lineno: int, msg: str) -> str:
    return f"{sev}1125 15:53:48.916756   {tid} {file}:{lineno}] {msg}"


def tsl(sev: str, file: str, lineno: int, msg: str) -> str:
    return f"2026-11-23 15:57:43.849216: {sev} external/xla/xla/service/gpu/{file}:{lineno}] {msg}"


def scan(tmp_path: Path, lines: list[str], name: str = "xla.log") -> Evidence:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return LogScanner().scan_file(path)


# The prefix styles the lane's jax versions print: the scheduler's lines, then the checker's
# (jax 0.4.34/0.4.35 print the checker block in absl style; 0.4.38/0.5.0 print none).
PREFIXES = {
    "0.4.34": ("tsl", "absl"), "0.4.35": ("tsl", "absl"), "0.4.38": ("tsl", None),
    "0.5.0": ("tsl", None), "0.5.1": ("tsl", "tsl"), "0.5.3": ("tsl", "tsl"),
    "0.6.2": ("tsl", "tsl"), "0.7.0": ("tsl", "tsl"), "0.7.2": ("absl", "absl"),
    "0.8.3": ("absl", "absl"), "0.9.2": ("absl", "absl"), "0.10.2": ("absl", "absl"),
    "0.11.2": ("absl", "absl"), "0.12.0.1": ("absl", "absl"),
}


def test_the_prefix_table_covers_the_lane():
    assert set(PREFIXES) == set(log_version.LINES)


@pytest.mark.parametrize("version", sorted(PREFIXES))
def test_each_lane_version_s_logs_give_its_grid_of_wordings(version):
    # Every kind of line the grid gives the version is recorded under its own name, at a
    # source line the grid lists, and no other kind: what log_version dates a log by.
    lines: dict[str, set[object]] = {}
    for log in sorted((DATA / version).glob("*.log")):
        for kind, value in LogScanner().scan_file(log).wording.items():
            lines.setdefault(kind, set()).add(value)
    prefix, checker_prefix = PREFIXES[version]
    assert lines.pop("prefix") == {prefix}
    assert lines.pop("checker_prefix", {None}) == {checker_prefix}
    grid = log_version.LINES[version]
    assert set(lines) == set(grid)
    for kind, seen in lines.items():
        assert seen <= set(grid[kind]), (kind, seen, grid[kind])


def test_the_first_source_line_and_prefix_of_a_kind_are_kept(tmp_path):
    ev = scan(tmp_path, [
        absl("F", 7, "parse_flags_from_env.cc", 234, "Unknown flag in XLA_FLAGS: --xla_x=1"),
        tsl("W", P, 191, "Found 3 instructions from the profile."),
        tsl("I", S, 394, f"Using PGLE profile from /p/{FP}.pb"),
        absl("I", 7, S, 393, f"Using PGLE profile from /p/{FP}.pb"),
        absl("W", 7, P, 192, "Found 3 instructions from the profile."),
    ])
    # The scheduler's prefix style comes from the scheduler's own lines (not the flag
    # parser's), the checker's from the checker's lines; each kind keeps its first line.
    assert ev.wording == {"unknown_flag": 234, "checker_found": 191, "checker_prefix": "tsl",
                          "using": 394, "prefix": "tsl"}


# Each kind of line, in a real wording, with the lines before it that it needs, and whether it
# counts among the scheduler's lines about the profile (Evidence.pgle_lines).
USING = absl("I", 7, S, 393, f"Using PGLE profile from /p/{FP}.pb")
FOUND = absl("I", 7, S, 538, "Found profile for module jit_m, using profile guided latency estimator")
COUNTED: dict[str, tuple[list[str], str, int]] = {
    "fingerprint": ([], absl("I", 7, S, 482, f"Fingerprint before LHS for module jit_m(12) = {FP}"), 1),
    "using_fdo": ([], absl("I", 7, S, 367, "Using PGLE profile from fdo_profile (binary)"), 1),
    "using": ([], USING, 1),
    "found_profile_named": ([USING], FOUND, 1),
    "found_profile": ([USING], tsl("I", S, 504, "Found profile, using profile guided latency estimator"), 1),
    "checker_found": ([USING, FOUND], absl("W", 7, P, 192, "Found 3 instructions from the profile."), 1),
    "checker_missing": ([USING, FOUND], absl("W", 7, P, 194, "Missing 0 instructions from the profile."), 1),
    "file_missing": ([], absl("I", 7, S, 400, f"PGLE profile file does not exist: /p/{FP}.pb"), 1),
    "parse_failed": ([], absl("W", 7, S, 396, f"Tried but failed to parse PGLE proto from text file "
                                             f"'/p/{FP}.pbtxt'. Error message: 1:1: Expected identifier"), 1),
    "parse_failed_old": ([], tsl("W", S, 374, f"Unable to read PGLE text proto from /p/{FP}.pbtxt: "
                                             f"Can't parse /p/{FP}.pbtxt as text proto"), 1),
    "fdo_unparsable": ([], absl("E", 7, S, 379, "Unable to parse fdo_profile: not a valid text or binary "
                                               "ProfiledInstructionsProto"), 1),
    "fdo_unparsable_old": ([], tsl("E", S, 352, "Unable to prase FDO profile: not a valid text or binary "
                                               "ProfiledInstructionsProto"), 1),
    "unknown_flag": ([], absl("F", 7, "parse_flags_from_env.cc", 234, "Unknown flag in XLA_FLAGS: --xla_x=1"), 1),
    "sol_fallback": ([], absl("I", 7, S, 522, "PGLE fallback: using SolLatencyEstimator"), 0),
    "missed_cost": ([USING, FOUND], absl("I", 7, P, 250, "PGLE missed cost for: fusion.3"), 0),
    "lhs_unset": ([], tsl("I", S, 672, "Profile data detected but `xla_gpu_enable_latency_hiding_scheduler` "
                                       "unset. To use it compiler will run Latency Hiding Scheduler anyway."), 0),
    "unified_estimator": ([], absl("I", 7, S, 552, "Using unified latency estimator"), 0),
    "added_pair": ([], absl("I", 7, PAIRS, 252, "Added pair: {all-reduce-start, all-reduce-done"), 0),
    # The compile failures Python's exception line tells (no log prefix).
    "discard": ([USING, FOUND], "jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: Found 7 missing "
                                "instructions. Discarding the profile.", 1),
    "verifier": ([], "jax.errors.JaxRuntimeError: FAILED_PRECONDITION: during context [hlo verifier]: "
                     "Expected instruction name to remain the same.", 1),
}


@pytest.mark.parametrize("kind", COUNTED)
def test_each_line_about_the_profile_is_counted_once(tmp_path, kind):
    before, line, counted = COUNTED[kind]
    base = scan(tmp_path, before, "before.log") if before else Evidence()
    ev = scan(tmp_path, before + [line, line])
    assert ev.pgle_lines == base.pgle_lines + 2 * counted
    if kind in log_version.LINES["0.11.2"] or kind in log_version.LINES["0.4.34"]:
        assert kind in ev.wording


def test_fdo_profile_reads_and_parse_errors_as_said(tmp_path):
    ev = scan(tmp_path, [COUNTED["using_fdo"][1],
                         absl("I", 7, S, 367, "Using PGLE profile from fdo_profile (text)")])
    assert ev.reads == ["fdo_profile (binary)", "fdo_profile (text)"]
    for kind in ("fdo_unparsable", "fdo_unparsable_old"):
        ev = scan(tmp_path, [COUNTED[kind][1]])
        assert ev.parse_errors == ["fdo_profile: not a valid ProfiledInstructionsProto"]
        assert set(ev.wording) == {kind, "prefix"}


@pytest.mark.parametrize("version", ["0.4.34", "0.5.3", "0.11.2"])
def test_a_real_fdo_garbage_log_gives_one_parse_error_per_line(version):
    log = DATA / version / "fdo-garbage.log"
    said = [ln for ln in log.read_text().splitlines()
            if "Unable to parse fdo_profile" in ln or "Unable to prase FDO profile" in ln]
    ev = LogScanner().scan_file(log)
    assert said and ev.parse_errors == ["fdo_profile: not a valid ProfiledInstructionsProto"] * len(said)
    assert ev.pgle_lines >= len(said)


def pair(tid: int, start: str) -> str:
    return absl("I", tid, PAIRS, 252, f"Added pair: {{{start}, {start.replace('start', 'done')}")


def seen(tid: int, start: str) -> str:
    return absl("I", tid, PAIRS, 233, f"Found async start %{start} = f32[8]{{0}} {start}(%p)")


def test_added_pairs_are_counted_and_those_no_module_owns_are_said(tmp_path):
    # No fingerprint line (VLOG of gpu_hlo_schedule off): nothing tells whose pairs they are.
    ev = scan(tmp_path, [USING, FOUND, seen(7, "all-reduce-start"), pair(7, "all-reduce-start"),
                         pair(7, "all-gather-start"), pair(7, "collective-permute-start")])
    assert (ev.added_pairs, ev.unattributed_pairs) == (3, 3)
    assert ev.modules[0].converted_pairs == [] and ev.modules[0].async_starts_seen == []
    assert {"added_pair", "async_start_seen"} <= set(ev.wording)
    # A module that began with its fingerprint line and read no profile: its pairs are its own
    # (no row for it), not unattributed.
    fingerprint = COUNTED["fingerprint"][1]
    ev = scan(tmp_path, [fingerprint, seen(7, "all-reduce-start"), pair(7, "all-reduce-start"),
                         pair(7, "all-gather-start")])
    assert (ev.added_pairs, ev.unattributed_pairs) == (2, 0)
    # With the fingerprint line and a profile read: the module's own.
    ev = scan(tmp_path, [fingerprint, USING, FOUND, seen(7, "all-reduce-start"),
                         pair(7, "all-reduce-start"), pair(7, "all-gather-start")])
    (m,) = ev.modules
    assert m.async_starts_seen == ["all-reduce-start"]
    assert m.converted_pairs == ["all-reduce-start", "all-gather-start"]
    assert (ev.added_pairs, ev.unattributed_pairs) == (2, 0)


VERIFIER = ("jax.errors.JaxRuntimeError: FAILED_PRECONDITION: during context [hlo verifier]: "
            "Expected instruction name to remain the same. Was 'all-gather-start.1' is 'all-gather.4'.")


def test_a_verifier_failure_lands_on_the_module_that_began_last_in_its_thread(tmp_path):
    # Thread 7 schedules jit_a; thread 9 then reports a missing profile file (a row, but no
    # module beginning): the failed compile is jit_a's.
    ev = scan(tmp_path, [
        absl("I", 7, S, 482, f"Fingerprint before LHS for module jit_a(3) = {FP}"),
        USING.replace("jit_m", "jit_a"),
        FOUND.replace("jit_m", "jit_a"),
        absl("I", 9, S, 400, "PGLE profile file does not exist: /p/ffffffffffffffffffffffffffffffff.pb"),
        VERIFIER,
    ])
    failed = {m.module or m.fingerprint: m.compile_failed for m in ev.modules}
    assert failed == {"jit_a": VERIFIER.split(": ", 1)[1], "ffffffffffffffffffffffffffffffff": None}
    assert ev.verifier_failures == [VERIFIER.split(": ", 1)[1]]


def test_a_compile_that_failed_already_keeps_its_first_reason(tmp_path):
    # The ERROR checker failed jit_m's compile; the verifier line after it is a later failure
    # and must not replace the checker's reason.
    discard = ("jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Found 1 missing instructions. "
               "Discarding the profile.")
    ev = scan(tmp_path, [
        USING, FOUND,
        absl("W", 7, P, 192, "Found 3 instructions from the profile."),
        absl("W", 7, P, 194, "Missing 1 instructions from the profile."),
        absl("W", 7, P, 197, "  fusion.1"),
        discard,
        VERIFIER,
    ])
    (m,) = ev.modules
    assert m.discarded
    assert m.compile_failed == "INVALID_ARGUMENT: Found 1 missing instructions. Discarding the profile."
    assert len(ev.verifier_failures) == 1


def test_a_missing_profile_file_is_named(tmp_path):
    # A file the user named: said as missing. A directory's <fp>.pb (after <fp>.pbtxt): the
    # module's row, with the path XLA looked at.
    ev = scan(tmp_path, [
        absl("I", 7, S, 400, "PGLE profile file does not exist: /p/profile.pb"),
        COUNTED["fingerprint"][1],
        absl("I", 7, S, 400, f"PGLE profile file does not exist: /p/{FP}.pbtxt"),
        absl("I", 7, S, 400, f"PGLE profile file does not exist: /p/{FP}.pb"),
    ])
    assert ev.missing_files == ["/p/profile.pb"]
    (m,) = ev.modules
    assert (m.module, m.fingerprint, m.profile_path, m.no_profile_file) == (
        "jit_m", FP, f"/p/{FP}.pb", True)


def test_the_sol_fallback_is_the_next_found_module_s(tmp_path):
    ev = scan(tmp_path, [
        COUNTED["sol_fallback"][1], USING, FOUND,
        USING, FOUND.replace("jit_m", "jit_n"),
    ])
    assert [(m.module, m.sol_fallback) for m in ev.modules] == [("jit_m", True), ("jit_n", False)]
    assert ev.info_lines == 5  # every line here is an INFO line


def test_a_clone_scheduled_inside_its_module_s_compile_is_a_clone(tmp_path):
    # jax 0.7.2-0.8.3: the combiner's <M>-clone (a larger module id) is scheduled before M.
    def module(name: str, module_id: int) -> list[str]:
        return [absl("I", 7, S, 454, f"Fingerprint before LHS for module {name}({module_id}) = {FP}"),
                USING, FOUND.replace("jit_m", name)]

    ev = scan(tmp_path, module("jit_f-clone", 13) + module("jit_f", 12))
    assert [(m.module, m.sub_compile, m.parent, m.by) for m in ev.modules] == [
        ("jit_f-clone", "clone", "jit_f", "module id"), ("jit_f", None, None, None)]
    assert ev.sub_compiles == []


DISCARD = "Found 7 missing instructions. Discarding the profile."


@pytest.mark.parametrize(("line", "said"), [
    # The lane's own line (tests/data/xla_gpu/*/scenarios.json) and Python's traceback line.
    (f"LANE-COMPILE-FAILED jit_m: JaxRuntimeError: INVALID_ARGUMENT: {DISCARD}", f"INVALID_ARGUMENT: {DISCARD}"),
    (f"jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: {DISCARD}", f"INVALID_ARGUMENT: {DISCARD}"),
    (f"INVALID_ARGUMENT: {DISCARD}", f"INVALID_ARGUMENT: {DISCARD}"),
    # XLA's status code is an upper-case word of letters and `_` before a colon; nothing else.
    (DISCARD, DISCARD),
    (f"XlaRuntimeError: {DISCARD}", DISCARD),
    (f"jax.errors.JaxRuntimeError: {DISCARD}", DISCARD),
    (f"status INVALID_ARGUMENT {DISCARD}", DISCARD),
    (f"failed with INTERNAL2: {DISCARD}", DISCARD),
    (f"failed with E: {DISCARD}", f"E: {DISCARD}"),
])
def test_a_discarded_compile_keeps_xla_s_status_and_message(tmp_path, line, said):
    ev = scan(tmp_path, [USING, FOUND, absl("W", 7, P, 194, "Missing 7 instructions from the profile."),
                         line])
    (m,) = ev.modules
    assert m.discarded and m.compile_failed == said
    assert ev.discards == [DISCARD]


def test_each_discard_lands_on_the_module_it_failed(tmp_path):
    def module(tid: int, name: str, missing: int | None) -> list[str]:
        lines = [absl("I", tid, S, 393, f"Using PGLE profile from /p/{FP}.pb"),
                 absl("I", tid, S, 538, f"Found profile for module {name}, using profile guided "
                                        "latency estimator")]
        if missing is not None:
            lines.append(absl("W", tid, P, 194, f"Missing {missing} instructions from the profile."))
        return lines

    discard = f"jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: {DISCARD}"
    # jit_a's block says what is missing; jit_b, read in another thread after it, printed no
    # block: the failure is jit_a's.
    ev = scan(tmp_path, module(7, "jit_a", 7) + module(9, "jit_b", None) + [discard])
    assert [(m.module, m.discarded) for m in ev.modules] == [("jit_a", True), ("jit_b", False)]
    # After jit_a's failure, a module with no block (jax 0.4.38/0.5.0 print none) fails next:
    # the second failure is its own, not jit_a's again.
    ev = scan(tmp_path, module(7, "jit_a", 7) + [discard] + module(7, "jit_b", None) + [discard])
    assert [(m.module, m.discarded) for m in ev.modules] == [("jit_a", True), ("jit_b", True)]


def test_fingerprint_lines_with_and_without_a_module_id(tmp_path):
    ev = scan(tmp_path, [
        absl("I", 7, S, 454, f"Fingerprint before LHS for module jit_a = {FP}"),
        USING, FOUND.replace("jit_m", "jit_a"),
        absl("I", 7, S, 454, f"Fingerprint before LHS for module jit_b(4) = {FP}"),
        USING, FOUND.replace("jit_m", "jit_b"),
    ])
    assert [(m.module, m.module_id) for m in ev.modules] == [("jit_a", None), ("jit_b", 4)]
    assert ev.fingerprint_lines == 2


def test_every_unknown_flag_is_listed_and_the_wording_told(tmp_path):
    # jax 0.4.34's wording lists every XLA_FLAGS entry after two spaces (a flag's value may hold
    # ": "); jax >= 0.5.1 names the one flag. Two processes abort: both flags are said.
    flags = "parse_flags_from_env.cc"
    ev = scan(tmp_path, [
        tsl("F", flags, 224, "Unknown flags in XLA_FLAGS: --xla_x=1  --xla_x=1 --xla_dump_to=/a: b"),
    ])
    assert ev.unknown_flags == ["--xla_x=1"] and "unknown_flags_listed" in ev.wording
    ev = scan(tmp_path, [
        absl("F", 7, flags, 234, "Unknown flag in XLA_FLAGS: --xla_x=1"),
        absl("F", 9, flags, 234, "Unknown flag in XLA_FLAGS: --xla_y=a: b"),
    ])
    assert ev.unknown_flags == ["--xla_x=1", "--xla_y=a:", "b"]
    assert set(ev.wording) == {"unknown_flag"}


def test_a_checker_block_without_found_profile_is_its_rank_s_module(tmp_path):
    # INFO hidden (TF_CPP_MIN_LOG_LEVEL=1): the checker's WARNING lines alone, under
    # `srun --label`; each block is a module of its rank, read with a profile.
    def block(rank: int, found: int, missing: list[str]) -> list[str]:
        lines = [absl("W", 7, P, 192, f"Found {found} instructions from the profile."),
                 absl("W", 7, P, 194, f"Missing {len(missing)} instructions from the profile.")]
        lines += [absl("W", 7, P, 197, f"  {name}") for name in missing]
        return [f"{rank}: {line}" for line in lines]

    ev = scan(tmp_path, block(3, 5, ["fusion.1"]) + block(12, 4, ["fusion.2", "fusion.3"]))
    assert [(m.module, m.rank, m.found_profile, m.checker_found, m.checker_missing, m.missing_names)
            for m in ev.modules] == [(None, 3, True, 5, 1, ["fusion.1"]),
                                     (None, 12, True, 4, 2, ["fusion.2", "fusion.3"])]
    assert (ev.checker_lines, ev.info_lines) == (4, 0)
    # A block that begins with `Missing` (no `Found N` before it) is its rank's module too.
    ev = scan(tmp_path, ["5: " + absl("W", 7, P, 194, "Missing 1 instructions from the profile."),
                         "5: " + absl("W", 7, P, 197, "  fusion.9")])
    assert [(m.rank, m.found_profile, m.missing_names) for m in ev.modules] == [(5, True, ["fusion.9"])]
    assert ev.checker_lines == 1


def test_without_the_fingerprint_line_the_profile_file_names_the_fingerprint(tmp_path):
    ev = scan(tmp_path, [absl("I", 7, S, 393, f"Using PGLE profile from /p/dir/{FP}.pbtxt"), FOUND,
                         absl("I", 7, S, 393, "Using PGLE profile from /p/profile.pb"),
                         FOUND.replace("jit_m", "jit_n")])
    assert [(m.module, m.fingerprint) for m in ev.modules] == [("jit_m", FP), ("jit_n", None)]


@pytest.mark.parametrize("version", ["0.4.35", "0.11.2"])
def test_a_pbtxt_xla_could_not_parse_before_its_pb_is_a_fallback(version):
    # tests/data/xla_gpu/<jax>/dir-pbtxt-fallback.log: XLA read <fp>.pb after failing on
    # <fp>.pbtxt; the pbtxt each module fell back from is its own, and no parse error is said.
    import re

    log = DATA / version / "dir-pbtxt-fallback.log"
    unreadable = re.findall(r"(?:from text file '|Unable to read PGLE text proto from )(/\S+?\.pbtxt)",
                            log.read_text())
    ev = LogScanner().scan_file(log)
    assert unreadable and ev.fallbacks == unreadable and ev.parse_errors == []
    assert sorted(m.fallback_from for m in ev.modules if m.fallback_from) == sorted(unreadable)


def test_scanning_a_file_warns_of_nothing(tmp_path):
    import warnings

    path = tmp_path / "xla.log"
    path.write_text("\n".join([USING, FOUND]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(LogScanner().scan_file(path).modules) == 1


def test_prefix_fields_that_are_not_utf8_or_look_like_a_prefix():
    from pgle.evidence import logscan

    # A source path in another encoding: read with U+FFFD, not an error.
    got = logscan.parse_prefix(b"I1125 15:53:48.916756   7 /src/caf\xe9/gpu_hlo_schedule.cc:538] msg")
    assert got is not None and (got.file, got.message) == ("gpu_hlo_schedule.cc", "msg")
    got = logscan.parse_prefix(b"I1125 15:53:48.916756   7 caf\xe9.cc:538] msg")
    assert got is not None and got.file == "caf\ufffd.cc"
    got = logscan.parse_prefix(b"I1125 15:53:48.916756   7 gpu_hlo_schedule.cc:538] caf\xe9 \xff")
    assert got is not None and got.message == "caf\ufffd \ufffd"
    # A line that starts like a tsl prefix but is none (two spaces, no thread id) does not hide
    # the real prefix printed after it on the same line.
    line = (b"2023-07-21 16:09:43.551741: I  junk.cc:1] progress\r"
            + absl("I", 7, S, 393, "Using PGLE profile from /p.pb").encode())
    got = logscan.parse_prefix(line)
    assert got is not None and (got.file, got.message) == (S, "Using PGLE profile from /p.pb")


def test_each_line_longer_than_the_buffer_is_counted(tmp_path):
    from pgle.evidence import xla_log

    bar = "#" * (xla_log.LONG_LINE + 10)
    ev = scan(tmp_path, [bar + "\r" + USING, FOUND, bar, "done"])
    assert ev.long_lines == 2
    assert ev.reads == ["/p/" + FP + ".pb"] and len(ev.modules) == 1


def test_a_failure_line_before_any_module_and_one_not_in_utf8(tmp_path):
    # The verifier's exception line with no module begun (its compile logged nothing): said,
    # laid on no module. A discard line holding bytes that are not UTF-8: read with U+FFFD.
    ev = scan(tmp_path, [VERIFIER])
    assert ev.verifier_failures == [VERIFIER.split(": ", 1)[1]] and ev.modules == []
    path = tmp_path / "bytes.log"
    path.write_bytes(b"\n".join([USING.encode(), FOUND.encode(),
                                 b"caf\xe9: INVALID_ARGUMENT: " + DISCARD.encode(), b""]))
    ev = LogScanner().scan_file(path)
    assert ev.discards == [DISCARD]
    assert ev.modules[0].compile_failed == f"INVALID_ARGUMENT: {DISCARD}"


def test_thread_ids_are_the_scheduler_s_and_checker_s_once_each_up_to_256(tmp_path):
    ev = scan(tmp_path, [
        absl("F", 9, "parse_flags_from_env.cc", 234, "Unknown flag in XLA_FLAGS: --xla_x=1"),
        USING, FOUND, absl("W", 7, P, 192, "Found 3 instructions from the profile."),
        absl("I", 8, S, 393, "Using PGLE profile from /p.pb"),
        tsl("I", S, 394, "Using PGLE profile from /q.pb"),  # tsl without a thread id
    ])
    assert ev.thread_ids == ["7", "8"]
    ev = scan(tmp_path, [absl("I", tid, S, 393, "Using PGLE profile from /p.pb") for tid in range(1, 301)])
    assert ev.thread_ids == [str(tid) for tid in range(1, 257)]


def test_a_module_that_logged_only_its_fingerprint_is_a_row(tmp_path):
    # VLOG on, the module read no profile: its fingerprint line is its row, flushed by the
    # thread's next module and at the end.
    ev = scan(tmp_path, [
        absl("I", 7, S, 482, f"Fingerprint before LHS for module jit_a(3) = {FP}"),
        absl("I", 7, S, 482, f"Fingerprint before LHS for module jit_b(4) = {'f' * 32}"),
    ])
    assert [(m.module, m.fingerprint, m.module_id, m.thread, m.profile_path, m.fingerprint_only)
            for m in ev.modules] == [("jit_a", FP, 3, "7", None, True),
                                     ("jit_b", "f" * 32, 4, "7", None, True)]


def test_autotuner_candidates_are_set_apart_and_finish_is_idempotent():
    # jax 0.11.2's real log: the autotuner's candidate modules (larger module ids than the
    # module scheduled after them in their thread) are sub-compiles, not the workload's modules;
    # calling finish() again changes nothing.
    scanner = LogScanner()
    ev = scanner.scan_file(DATA / "0.11.2" / "checker-no-path.log")
    assert len(ev.sub_compiles) == 6 and len(ev.modules) == 1
    assert {(m.sub_compile, m.by) for m in ev.sub_compiles} == {("candidate", "module id")}
    assert ev.modules[0].module and ev.modules[0].module.startswith("jit_")
    before = dataclasses.asdict(ev)
    assert dataclasses.asdict(scanner.finish()) == before


def _module(name: str, module_id: int | None) -> list[str]:
    fingerprint = [] if module_id is None else [
        absl("I", 7, S, 482, f"Fingerprint before LHS for module {name}({module_id}) = {FP}")]
    return fingerprint + [USING, FOUND.replace("jit_m", name)]


def test_sub_compiles_by_module_id_past_a_module_without_one(tmp_path):
    # The autotuner's candidate (id 9) was created during jit_f's compile (id 3, scheduled
    # after it); a later module with no fingerprint line (no id) does not stop the telling.
    ev = scan(tmp_path, _module("gemm_fusion_dot.1", 9) + _module("jit_f", 3) + _module("jit_g", None))
    assert [(m.module, m.parent) for m in ev.sub_compiles] == [("gemm_fusion_dot.1", "jit_f")]
    assert [m.module for m in ev.modules] == ["jit_f", "jit_g"]


def test_a_module_compiled_twice_under_one_id_is_no_sub_compile(tmp_path):
    ev = scan(tmp_path, _module("jit_f", 5) + _module("jit_f", 5))
    assert [(m.module, m.module_id, m.sub_compile) for m in ev.modules] == [
        ("jit_f", 5, None), ("jit_f", 5, None)]
    assert ev.sub_compiles == []


def test_a_clone_is_told_by_its_name_without_module_ids(tmp_path):
    # VLOG off (no module ids): a checker block of thread 9 with no `Found profile` (a row
    # without a name) comes first; jit_f-clone is still the combiner's copy of jit_f, and a
    # module JAX did not name (jax names its own `jit_...`) is XLA's candidate.
    ev = scan(tmp_path, [absl("W", 9, P, 192, "Found 3 instructions from the profile."),
                         *_module("jit_f-clone", None), *_module("jit_f", None),
                         *_module("loop_add_fusion", None)])
    assert [(m.module, m.sub_compile, m.parent, m.by) for m in ev.modules] == [
        (None, None, None, None), ("jit_f-clone", "clone", "jit_f", "name"), ("jit_f", None, None, None)]
    assert [(m.module, m.sub_compile, m.by) for m in ev.sub_compiles] == [
        ("loop_add_fusion", "candidate", "name")]


def test_the_checker_s_names_end_where_its_count_says(tmp_path):
    # `Missing 2`: the next two indented lines are its names; an indented line after them is not.
    ev = scan(tmp_path, [USING, FOUND, absl("W", 7, P, 194, "Missing 2 instructions from the profile."),
                         absl("W", 7, P, 197, "  fusion.1"), absl("W", 7, P, 197, "  fusion.2"),
                         absl("W", 7, P, 197, "  fusion.3")])
    assert ev.modules[0].missing_names == ["fusion.1", "fusion.2"]


@pytest.mark.parametrize("version", ["0.4.35", "0.11.2"])  # both wordings of the parse failure
def test_a_fallback_from_a_folder_whose_name_holds_a_colon_keeps_its_whole_path(tmp_path, version):
    # XLA's parse error repeats the path ("Can't parse P as text proto"): the pbtxt a module
    # fell back from is the path of the parse-failure line, not its text split at a ": ".
    import re

    text = (DATA / version / "dir-pbtxt-fallback.log").read_text().replace("/tmp/pgle-lane/", "/tmp/pgle: lane/")
    log = tmp_path / "xla.log"
    log.write_text(text)
    unreadable = re.findall(r"(?:from text file '|Unable to read PGLE text proto from )(/.+?\.pbtxt)", text)
    ev = LogScanner().scan_file(log)
    assert unreadable and all(": lane/" in p for p in unreadable)
    assert ev.fallbacks == unreadable and ev.parse_errors == []
    assert sorted(m.fallback_from for m in ev.modules if m.fallback_from) == sorted(unreadable)
