"""The pre-filter's contract (pgle/evidence/logscan.py `line_starts`, issue 37's survivors): the
start of each line of data[:end], once, in order, that holds a RARE literal, or where a MAIN file
name ends a log prefix (`file.cc:NNN] `) whose message starts with one of `messages` (None: every
line holding a MAIN literal), against a reference written here line by line with `in` and a
regex. The scanner hands it one reused buffer whose bytes past `end` are an earlier block's, so
the bytes past `end` hold literals too; and its memchr bytes (X O D [ { %) are made common, where
it searches for the literals themselves."""

from __future__ import annotations

import random
import re

import pytest

from pgle.evidence import logscan
from pgle.evidence.xla_log import _KEPT_MESSAGE_BYTES

RARE = [lit for _, lits in logscan.RARE for lit in lits]


def reference(data: bytes, end: int, messages: tuple[bytes, ...] | None) -> list[int]:
    out, start = [], 0
    logged = None
    if messages:
        logged = re.compile(b"(?:" + b"|".join(map(re.escape, logscan.MAIN)) + rb"):\d+\] (?:"
                            + b"|".join(map(re.escape, messages)) + b")")
    for line in data[:end].split(b"\n"):
        if (any(lit in line for lit in RARE)
                or (messages is None and any(lit in line for lit in logscan.MAIN))
                or (logged is not None and logged.search(line))):
            out.append(start)
        start += len(line) + 1
    return out


PIECES = [
    *RARE, *logscan.MAIN, b"gpu_hlo_schedule.cc:538] ", b"profile_guided_latency_estimator.cc:192] ",
    b"gpu_hlo_schedule.cc:12]", b"gpu_hlo_schedule.cc:x] ", b"Found profile for module jit_m",
    b"Using PGLE profile from /p.pb", b"  fusion.1", b"Profile:", b"Missing 2 instructions",
    b"I0822 12:34:56.789012  7 ", b"\n", b"\n", b"\n", b"\r", b" ", b"x", b"y" * 40,
    b"X", b"O", b"D", b"[", b"{", b"%", b"XOD[{%" * 4, b"] Added pair", b"] Found async",
    b"in XLA_FLAGS", b"CUPTI_ERROR_", b"Discarding the profile.", b"[hlo", b"verifier]",
]


def random_log(rng: random.Random, pieces: int) -> bytes:
    return b"".join(rng.choice(PIECES) for _ in range(pieces))


@pytest.mark.parametrize("seed", range(40))
def test_line_starts_is_the_lines_that_hold_a_literal(seed):
    rng = random.Random(seed)
    data = bytearray(random_log(rng, rng.choice([20, 200, 2000])))
    for end in sorted({0, len(data), rng.randrange(len(data) + 1), rng.randrange(len(data) + 1)}):
        for messages in (_KEPT_MESSAGE_BYTES, None):
            want = reference(bytes(data), end, messages)
            assert logscan.line_starts(data, end, messages) == want, (seed, end, messages is None)


def test_bytes_past_the_end_are_not_read():
    # The reused buffer: a last line without a newline, then an earlier block's bytes that
    # hold every literal (and the memchr bytes, made common).
    line = b"I0822 12:34:56.789012  7 other.cc:1] nothing to see"
    stale = b"".join(RARE) + b" gpu_hlo_schedule.cc:538] Found profile" + b"XOD[{%" * 5000
    for tail in (stale, b"\n" + stale):
        data = bytearray(line + tail)
        for messages in (_KEPT_MESSAGE_BYTES, None):
            assert logscan.line_starts(data, len(line), messages) == []
        with_literal = bytearray(b"x\n" + line + b" [hlo verifier]" + tail)
        assert logscan.line_starts(with_literal, len(with_literal) - len(tail)) == [2]


def test_a_common_memchr_byte_still_finds_every_literal():
    # More hits of each memchr byte than the budget allows (16 + one per RARE_BUDGET bytes):
    # from there the literals themselves are searched, from just before the hit that tipped it.
    for byte, lits in logscan.RARE:
        for lit in lits:
            dense = (byte * 7 + b"\n") * 40
            for at in (0, 3, 16, 17, 18, 39):  # the literal's line among the dense ones
                lines = dense.split(b"\n")[:-1]
                lines.insert(at, b"z" + lit + b"z")
                data = bytearray(b"\n".join(lines) + b"\n")
                got = logscan.line_starts(data, len(data), ())
                assert got == reference(bytes(data), len(data), ()), (lit, at)
                assert got, (lit, at)


@pytest.mark.parametrize("data", [
    b"[hlo verifier] at the very start\n",                     # a memchr byte at offset 0
    b"[[hlo verifier] after its own memchr byte\n",            # two memchr hits side by side
    b"\nI0822 12:34:56.789012  7 gpu_hlo_schedule.cc:538] Found profile for module m\n",  # after
    b"\n" + b"x" * 50 + b" in XLA_FLAGS\n",                   # an empty first line
])
def test_lines_at_the_edges_of_the_data(data):
    for messages in (_KEPT_MESSAGE_BYTES, None):
        want = reference(data, len(data), messages)
        assert want and logscan.line_starts(bytearray(data), len(data), messages) == want


def test_a_literal_or_message_cut_by_the_end_is_not_read_across_it():
    # The last line, without its newline, ends inside a literal or a kept message; the buffer's
    # next bytes (an earlier block's) happen to complete it.
    head = b"I0822 12:34:56.789012  7 "
    for line, rest in [
        (head + b"gpu_hlo_schedule.cc:538] Using PGLE prof", b"ile from /p.pb\n"),
        (head + b"other.cc:1] during context [hlo verif", b"ier]: bad\n"),
        (head + b"parse_flags_from_env.cc:234] Unknown flag in XLA_FL", b"AGS: --x=1\n"),
    ]:
        data = bytearray(b"x\n" + line + rest)
        assert logscan.line_starts(data, 2 + len(line), _KEPT_MESSAGE_BYTES) == []
        assert logscan.line_starts(data, len(data), _KEPT_MESSAGE_BYTES) == [2]
