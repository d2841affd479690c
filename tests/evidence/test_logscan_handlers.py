"""Every kind of line a handler of the log scanner reads passes the pre-filter and reaches that
handler, in every prefix style the jax versions print (issue 35).

The pre-filter (pgle/evidence/logscan.py `line_starts`, with xla_log's `_KEPT_MESSAGE_BYTES`)
keeps a line of the XLA:GPU scheduler or checker only where its message starts as one a
handler reads; everything else in those files (the profile dump's `Profile:`, the parse
attempts) is dropped in C. Each line below is written to a real file between lines that hold
the same literals but say nothing, scanned with `scan_file`, and must reach the handler the
table in `LogScanner._message` gives its kind (or, for the checker's missing names, the
module's list), with the evidence the same as feeding every line.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pgle.evidence.xla_log import Evidence, LogScanner

S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
FLAGS, PAIRS = "parse_flags_from_env.cc", "convert_async_collectives_to_sync.cc"
FP = "0123456789abcdef0123456789abcdef"


# The prefix styles: tsl before jax 0.7.2 (with and without TF_CPP_LOG_THREAD_ID), absl from
# 0.7.2 (and the 0.4.x checker block), absl before absl is initialised (zero date, epoch time;
# jax >= 0.4.36), an `srun --label` rank in front, and a line glued after a progress bar.
def tsl(sev: str, file: str, msg: str) -> str:
    return f"2023-07-21 16:09:43.551741: {sev} external/xla/xla/service/gpu/{file}:573] {msg}"


def tsl_thread(sev: str, file: str, msg: str) -> str:
    return f"2023-07-21 16:09:43.551741: {sev}   12345 external/xla/xla/service/gpu/{file}:573] {msg}"


def absl(sev: str, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  4242 {file}:538] {msg}"


def absl_uninitialised(sev: str, file: str, msg: str) -> str:
    return f"{sev}0000 00:00:1732377600.123456  4242 {file}:1] {msg}"


def srun_label(sev: str, file: str, msg: str) -> str:
    return "3: " + absl(sev, file, msg)


def after_progress_bar(sev: str, file: str, msg: str) -> str:
    return "step 3/10 [###       ]\r" + absl(sev, file, msg)


ERAS: dict[str, Callable[[str, str, str], str]] = {
    "tsl": tsl,
    "tsl-thread": tsl_thread,
    "absl": absl,
    "absl-uninitialised": absl_uninitialised,
    "srun-label": srun_label,
    "progress-bar": after_progress_bar,
}

USING = ("I", S, f"Using PGLE profile from /p/{FP}.pb")
FOUND = ("I", S, "Found profile for module jit_m, using profile guided latency estimator")
# handler -> (the lines before it, the line it reads), as (severity, file, message)
KINDS: dict[str, tuple[list[tuple[str, str, str]], tuple[str, str, str]]] = {
    "_on_fingerprint": ([], ("I", S, f"Fingerprint before LHS for module jit_m(12) = {FP}")),
    "_on_using_fdo": ([], ("I", S, "Using PGLE profile from fdo_profile (binary)")),
    "_on_using_profile": ([], USING),
    "_on_found_profile": ([USING], FOUND),
    "_on_check_found": ([USING, FOUND], ("W", P, "Found 3 instructions from the profile.")),
    "_on_check_missing": ([USING, FOUND], ("W", P, "Missing 2 instructions from the profile.")),
    "_on_file_missing": ([], ("I", S, f"PGLE profile file does not exist: /p/{FP}.pb")),
    "_on_parse_failed": (
        [],
        (
            "W",
            S,
            f"Tried but failed to parse PGLE proto from text file '/p/{FP}.pbtxt'. "
            "Error message: 1:1: Expected identifier",
        ),
    ),
    "_on_fdo_unparsable": (
        [],
        ("E", S, "Unable to parse fdo_profile: not a valid text or binary ProfiledInstructionsProto"),
    ),
    "_on_may_not_apply": (
        [USING, FOUND],
        (
            "I",
            S,
            "PGLE profile may not applicable to the module, but will still be used : "
            "cost name all-gather-start not in module jit_m",
        ),
    ),
    "_on_unknown_flags": ([], ("F", FLAGS, "Unknown flag in XLA_FLAGS: --xla_bogus=1")),
    "_on_sol_fallback": ([], ("I", S, "PGLE fallback: using SolLatencyEstimator")),
    "_on_missed_cost": ([USING, FOUND], ("I", P, "PGLE missed cost for: fusion.3")),
    "_on_lhs_unset": (
        [],
        (
            "I",
            S,
            "Profile data detected but `xla_gpu_enable_latency_hiding_scheduler` unset. "
            "To use it compiler will run Latency Hiding Scheduler anyway.",
        ),
    ),
    "_on_checker_without_path": (
        [],
        (
            "W",
            S,
            "xla_gpu_pgle_accuracy_checker is set to WARN, but no profile path specified in "
            "xla_gpu_pgle_profile_file_or_directory_path",
        ),
    ),
    "_on_unified_estimator": ([], ("I", S, "Using unified latency estimator")),
    "_on_pair_or_start": ([], ("I", PAIRS, "Added pair: {all-reduce-start, all-reduce-done")),
}
# Kinds that share a handler with one above: the older or other wording of the same event.
MORE = {
    "parse_failed_old": (
        "_on_parse_failed",
        [],
        (
            "W",
            S,
            f"Unable to read PGLE text proto from /p/{FP}.pbtxt: Can't parse /p/{FP}.pbtxt "
            "as text proto",
        ),
    ),
    "using_fdo_for_module": (
        "_on_using_fdo",
        [],
        ("I", S, "Using PGLE profile for module from fdo_profile (text)"),
    ),
    "found_profile_unnamed": (
        "_on_found_profile",
        [USING],
        ("I", S, "Found profile, using profile guided latency estimator"),
    ),
    "async_start_seen": (
        "_on_pair_or_start",
        [],
        ("I", PAIRS, "Found async start %all-gather-start = (f32[64,512]{1,0}) all-gather-start(%p)"),
    ),
}
CASES = {**{h: (h, *KINDS[h]) for h in KINDS}, **MORE}
# Lines that hold the pre-filter's literals but that no handler reads (real wordings of
# jax 0.7.0-0.10.2): the pre-filter drops them now.
SAID_NOTHING = [
    ("I", S, "Profile:"),
    ("I", S, "Attempting to parse as a binary proto."),
    ("I", P, "PGLE found a latency the handlers do not read"),
]


class Recording(LogScanner):
    """The scanner, noting which handler each message reached (the real ones run)."""

    def __init__(self) -> None:
        super().__init__()
        self.handled: list[str] = []


def _recording(name: str) -> Callable[..., None]:
    real = getattr(LogScanner, name)

    def handle(self: Recording, *args: Any) -> None:
        self.handled.append(name)
        real(self, *args)

    return handle


HANDLERS = set(re.findall(r"self\.(_on_\w+)\)", inspect.getsource(LogScanner._message)))
for _name in HANDLERS:
    setattr(Recording, _name, _recording(_name))


def comparable(ev: Evidence) -> dict[str, Any]:
    # INFO lines are counted among the lines the pre-filter keeps; feed_lines counts no bytes.
    data = dataclasses.asdict(ev)
    return {k: v for k, v in data.items() if k not in ("info_lines", "bytes_scanned")}


def scan(path: Path, lines: list[str]) -> tuple[Recording, Evidence]:
    path.write_text("\n".join(lines) + "\n")
    scanner = Recording()
    return scanner, scanner.scan_file(path)


def test_every_handler_has_a_line_here():
    assert HANDLERS and HANDLERS == set(KINDS)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", CASES)
def test_each_kind_of_line_reaches_its_handler(tmp_path, kind, era):
    handler, before, line = CASES[kind]
    style = ERAS[era]
    noise = [style(*said) for said in SAID_NOTHING] * 20
    context = [style(*ln) for ln in before]
    base, _ = scan(tmp_path / "without.log", noise + context + noise)
    scanner, ev = scan(tmp_path / "with.log", noise + context + [style(*line)] + noise)
    assert scanner.handled.count(handler) == base.handled.count(handler) + 1, (kind, era)
    every = Recording()
    reference = every.feed_lines((tmp_path / "with.log").read_bytes().split(b"\n"))
    assert comparable(ev) == comparable(reference)
    assert scanner.handled == every.handled


@pytest.mark.parametrize("era", ERAS)
def test_the_checkers_missing_names_reach_the_module(tmp_path, era):
    style = ERAS[era]
    noise = [style(*said) for said in SAID_NOTHING] * 20
    lines = [style(*ln) for ln in (USING, FOUND, KINDS["_on_check_missing"][1])]
    names = [style("W", P, f"  fusion.{i}") for i in (1, 2)]
    _, ev = scan(tmp_path / "names.log", noise + lines + names + noise)
    assert [m.missing_names for m in ev.modules] == [["fusion.1", "fusion.2"]], era


def test_lines_that_say_nothing_do_not_reach_python(tmp_path):
    # The dropped lines never reach feed(): no handler runs, no thread is noted.
    scanner, ev = scan(tmp_path / "quiet.log", [absl(*said) for said in SAID_NOTHING] * 50)
    assert scanner.handled == [] and ev.thread_ids == [] and ev.info_lines == 0
