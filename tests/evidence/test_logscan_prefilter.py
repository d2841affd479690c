"""The scanner's pre-filter (pgle/evidence/logscan.py, `MAIN`/`RARE`) drops no line that matters.

On every real XLA:GPU log in tests/data/xla_gpu (jax 0.4.34-0.10.2 and the public ones), the
evidence from `scan_file` (pre-filtered, blocks read into one reused buffer) equals the evidence
from feeding every line; then the shapes a pre-filter can get wrong, written to real files:
lines across the read-block boundary, a last line without a newline, CRLF and `\\r` progress
bars, lines that hold a pre-filter literal but say nothing, logs where the rare literals' memchr
byte is common, and a line longer than the read buffer.
"""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO
from pgle.evidence import xla_log
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.pgle_applied import judge

FIXTURES = sorted((REPO / "tests" / "data" / "xla_gpu").rglob("*.log"))
S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
# What only the pre-filter changes: INFO lines are counted among the lines it keeps
# (verdicts use info_lines only as "none at all"), and feed_lines counts no bytes.
ONLY_PREFILTERED = {"info_lines", "bytes_scanned"}


def absl(sev: str, tid: int, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  {tid} {file}:538] {msg}"


APPLIED = [
    absl("I", 7, S, "Using PGLE profile from /p/profile.pb"),
    absl("I", 7, S, "Found profile for module jit_m, using profile guided latency estimator"),
    absl("W", 7, P, "Found 3 instructions from the profile."),
    absl("W", 7, P, "Missing 2 instructions from the profile."),
    absl("W", 7, P, "  fusion.1"),
    absl("W", 7, P, "  fusion.2"),
]
RARE_LINES = [
    absl("F", 9, "parse_flags_from_env.cc", "Unknown flag in XLA_FLAGS: --xla_bogus=1"),
    absl("E", 9, "cupti_tracer.cc", "failed with error CUPTI_ERROR_NOT_INITIALIZED"),
    "jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Found 2 missing instructions. "
    "Discarding the profile.",
]


def every_line(path: Path) -> xla_log.Evidence:
    return LogScanner().feed_lines(path.read_bytes().split(b"\n"))


def assert_same(scanned: xla_log.Evidence, reference: xla_log.Evidence) -> None:
    a, b = dataclasses.asdict(scanned), dataclasses.asdict(reference)
    assert {k: v for k, v in a.items() if k not in ONLY_PREFILTERED} == \
        {k: v for k, v in b.items() if k not in ONLY_PREFILTERED}
    va, vb = judge(scanned), judge(reference)
    assert (va.status, va.modules, va.reasons) == (vb.status, vb.modules, vb.reasons)


def test_the_fixtures_are_there():
    assert len(FIXTURES) >= 6 * 23


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}-{p.stem}" for p in FIXTURES])
def test_prefilter_keeps_every_line_that_matters(path):
    scanned = LogScanner().scan_file(path)
    assert scanned.bytes_scanned == path.stat().st_size
    assert_same(scanned, every_line(path))


def test_lhs_unset_warning_is_read():
    # The six words used before missed it ("Profile data detected" has no lower-case "profile").
    path = REPO / "tests" / "data" / "xla_gpu" / "0.5.3" / "no-lhs-flag.log"
    assert LogScanner().scan_file(path).lhs_unset_warnings > 0


def noise(n: int) -> list[str]:
    """Lines that hold a pre-filter literal or its memchr byte but matter to no pattern."""
    lines = [
        absl("I", 3, S, "Latency hiding scheduler did not change the schedule"),
        absl("I", 3, "profiler_session.cc", "Profiler session collecting data"),
        "workload: see profile_guided_latency_estimator.cc for the XOD of it",
        absl("I", 3, "pjrt_client.cc", "XLA backend: CUDA DEVICE OK"),
    ]
    return [lines[i % len(lines)] for i in range(n)]


def test_lines_that_hold_a_literal_but_say_nothing_change_nothing(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("\n".join(noise(400) + APPLIED + noise(400)) + "\n")
    ev = LogScanner().scan_file(log)
    assert ev.pgle_lines == 4 and len(ev.modules) == 1
    assert ev.modules[0].missing_names == ["fusion.1", "fusion.2"]
    assert_same(ev, every_line(log))


def test_needed_lines_across_the_read_block_boundary(tmp_path):
    # Each evidence line in turn straddles the first CHUNK boundary of a real file.
    for k, line in enumerate(APPLIED + RARE_LINES):
        log = tmp_path / f"split{k}.log"
        before = APPLIED[:k] if k < len(APPLIED) else APPLIED
        head = ("\n".join(before) + "\n").encode() if before else b""
        pad = xla_log.CHUNK - len(head) - len(line) // 2
        filler = b"".join(b"x" * 99 + b"\n" for _ in range(pad // 100)) + b"y" * (pad % 100 - 1) + b"\n"
        rest = APPLIED[k + 1:] if k < len(APPLIED) else RARE_LINES[k - len(APPLIED) + 1:]
        log.write_bytes(head + filler + ("\n".join([line] + rest) + "\n").encode())
        assert len(head + filler) < xla_log.CHUNK < len(head + filler) + len(line)
        ev = LogScanner().scan_file(log)
        assert ev.modules and ev.modules[0].missing_names == ["fusion.1", "fusion.2"], k
        assert_same(ev, every_line(log))


def test_last_line_without_newline(tmp_path):
    for last in (APPLIED[-1], RARE_LINES[0]):
        log = tmp_path / "cut.log"
        lines = APPLIED if last is APPLIED[-1] else APPLIED + [last]
        log.write_text("\n".join(lines))
        ev = LogScanner().scan_file(log)
        assert ev.modules[0].missing_names == ["fusion.1", "fusion.2"]
        assert ev.unknown_flags == ([] if last is APPLIED[-1] else ["--xla_bogus=1"])
        assert_same(ev, every_line(log))


def test_crlf_and_progress_bars(tmp_path):
    bar = "".join(f"step {i}/100 [{'#' * (i // 10)}]\r" for i in range(100))
    lines = [bar + APPLIED[0], APPLIED[1] + "\r", bar + APPLIED[2], APPLIED[3] + "\r"] + \
        [line + "\r" for line in APPLIED[4:]] + [bar + RARE_LINES[1] + "\r", bar]
    log = tmp_path / "bars.log"
    log.write_bytes(("\n".join(lines) + "\n").encode())
    ev = LogScanner().scan_file(log)
    assert ev.reads == ["/p/profile.pb"] and ev.cupti_contention
    assert ev.modules[0].checker_found == 3 and ev.modules[0].missing_names == ["fusion.1", "fusion.2"]
    assert_same(ev, every_line(log))


def test_rare_literals_where_their_memchr_byte_is_common(tmp_path):
    # X, O and D on every line (upper-case hex, shouting workloads): the scanner falls back to
    # searching for the literals themselves and still finds each, wherever it is.
    dense = ["0XDEADBEEF OOD XOD DOX " * 3] * 3000
    log = tmp_path / "dense.log"
    log.write_text("\n".join(dense[:1000] + [RARE_LINES[0]] + dense[1000:2000] + [RARE_LINES[1]]
                             + dense[2000:] + APPLIED + [RARE_LINES[2]]) + "\n")
    ev = LogScanner().scan_file(log)
    assert ev.unknown_flags == ["--xla_bogus=1"] and ev.cupti_contention
    assert len(ev.discards) == 1 and ev.modules[0].discarded
    assert_same(ev, every_line(log))


def test_a_line_longer_than_the_read_buffer(tmp_path):
    log = tmp_path / "long.log"
    long_line = "z" * (xla_log.CHUNK + 1000) + "\r" + APPLIED[1]
    log.write_text("\n".join([APPLIED[0], long_line] + APPLIED[2:]) + "\n")
    ev = LogScanner().scan_file(log)
    assert ev.modules[0].module == "jit_m" and ev.modules[0].missing_names == ["fusion.1", "fusion.2"]


def test_a_line_with_two_literals_is_read_once(tmp_path):
    log = tmp_path / "twice.log"
    log.write_text(absl("I", 7, S, f"Using PGLE profile from /{P}/CUPTI_ERROR_NOT_INITIALIZED") + "\n")
    ev = LogScanner().scan_file(log)
    assert ev.reads == [f"/{P}/CUPTI_ERROR_NOT_INITIALIZED"] and ev.pgle_lines == 1


def test_stream_and_file_agree(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("\n".join(noise(50) + APPLIED + RARE_LINES) + "\n")
    from_stream = LogScanner().scan_stream(io.BytesIO(log.read_bytes()))
    assert dataclasses.asdict(from_stream) == dataclasses.asdict(LogScanner().scan_file(log))


def test_message_starts_cover_every_pattern_the_state_machine_reads():
    # _message skips messages that start with none of _MESSAGE_STARTS: every pattern it tries
    # must be among those the starts were taken from, and each start must begin real messages.
    import inspect
    import re

    tried = set(re.findall(r"logscan\.([A-Z_]+)\.match", inspect.getsource(LogScanner._message)))
    source = inspect.getsource(xla_log)
    listed = set(re.findall(r"logscan\.([A-Z_]+)", source[source.index("_MESSAGE_STARTS = "):]
                            .split("\n\n")[0]))
    assert tried and tried <= listed
    for msg in ["Fingerprint before LHS for module jit_m = 0123456789abcdef0123456789abcdef",
                "Using PGLE profile from /p.pb", "Using PGLE profile from fdo_profile (binary)",
                "Found profile, using profile guided latency estimator",
                "Found 3 instructions from the profile.", "Missing 2 instructions from the profile.",
                "PGLE profile file does not exist: /p.pb",
                "Unknown flags in XLA_FLAGS: --x=1", "Unknown flag in XLA_FLAGS: --x=1",
                "Profile data detected but xla_gpu_enable_latency_hiding_scheduler unset",
                "Unable to prase FDO profile: not a valid text or binary ProfiledInstructionsProto"]:
        assert msg.startswith(xla_log._MESSAGE_STARTS), msg


def test_a_pipe_that_gives_a_few_bytes_a_read():
    # stdin (`pgle verify -`): reads return what the writer has written so far.
    import os
    import threading

    data = ("\n".join(noise(200) + APPLIED + RARE_LINES) + "\n").encode()
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb", buffering=0) as out:
            for i in range(0, len(data), 777):
                out.write(data[i:i + 777])

    writer = threading.Thread(target=write)
    writer.start()
    with os.fdopen(r, "rb") as stream:
        ev = LogScanner().scan_stream(stream)
    writer.join()
    reference = LogScanner().feed_lines(data.split(b"\n"))
    assert ev.bytes_scanned == len(data) and ev.unknown_flags == ["--xla_bogus=1"]
    assert_same(ev, reference)
