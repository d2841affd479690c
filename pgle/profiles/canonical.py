"""The text layout pgle writes, written and read: `text_format.MessageToString`'s layout of a
profile (pgle/profiles/proto.py), the default output of `pgle collect`, `convert` and `merge`.

`text_bytes` writes it as protobuf's text_format does, byte for byte (a profile of 100,000
names in a fraction of text_format's time); `text_columns` reads it back as numpy columns, all
entries at once (most of `pgle merge`'s time on text folders, issue 25). Both handle only what
is beyond doubt (ASCII names, the exact layout) and return None for anything else: the caller
then takes protobuf's path, so results and error messages are protobuf's in every other case
(tests/profiles/test_profile_fastpaths.py compares both on many inputs). This is the one fast
text reader: anything else (latencies, escapes, comments, other spacing) is protobuf's to read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_NAME_WIDTH = 512  # longer names: protobuf

_FIELD = 24  # a number's bytes at most (repr of a double: 24); longer: protobuf
_NOT_QUOTE = bytes(b for b in range(0x20, 0x7F) if b not in b'\\"') + b"\n"
# Masks as tables, one row per length (a row gather, not arithmetic on every byte):
# _KEEP_FIRST[t]: the first t bytes of _NAME_WIDTH; _KEEP_LAST[t]: the last t of _FIELD.
_KEEP_FIRST = np.frombuffer(
    b"".join(b"\xff" * t + b"\0" * (_NAME_WIDTH - t) for t in range(_NAME_WIDTH + 1)), "<u8"
).reshape(_NAME_WIDTH + 1, -1)
_KEEP_LAST = np.frombuffer(
    b"".join(b"\0" * (_FIELD - t) + b"\xff" * t for t in range(_FIELD + 1)), "<u8"
).reshape(_FIELD + 1, -1)
_ASCII_ZEROS = np.uint64(0x3030303030303030)
_LO_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
_PLUS_118 = np.uint64(0x7676767676767676)
_TOP_BITS = np.uint64(0x8080808080808080)
_POW10 = np.array([10.0**k for k in range(23)])  # exact doubles
# x86-64's long double holds 64 bits of mantissa (aarch64's 113): u64 / 10**k (k <= 27: 5**k
# fits 64 bits, so 10**k is exact) is then rounded once. Where long double is a double
# (macOS, Windows), those values take Python's float().
_WIDE = np.finfo(np.longdouble).nmant >= 63
_POW10_WIDE = np.array([10**k for k in range(28)], np.longdouble)  # exact where _WIDE
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[+-][0-9]+)?|-?inf|nan")


def _u64(literal: bytes) -> np.uint64:
    return np.uint64(int.from_bytes(literal.ljust(8, b"\0"), "little"))


_COSTS_LINE, _NAME_KEY = _u64(b"costs {\n"), _u64(b"  name: ")
_COST_KEY, _COST_KEY_END = _u64(b"  cost_u"), _u64(b"s: ")
# Line kinds: `costs {`, `  name: "..."`, `  cost_us: ...`, `}`, anything else; which kind may
# follow which: entries are `costs {`, an optional name, an optional cost (proto3 leaves out an
# empty name and a zero cost), `}`.
_OPEN, _NAME, _COST, _CLOSE, _OTHER = range(5)
_FOLLOWS = np.zeros((5, 5), bool)
for _a, _b in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (3, 0)):
    _FOLLOWS[_a, _b] = True


def text_columns(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """(names, costs) of a text profile in text_format's layout, costs only:

        costs {
          name: "fusion.3"
          cost_us: 12.5
        }

    (an entry may lack its name or cost line: proto3's empty name and 0.0), names of printable
    ASCII without quotes or backslashes, costs in repr's grammar; None for anything else.
    Entries of four lines each are found from the newlines alone (`_four_line_entries`), any
    other file's lines classified (`_classified_lines`); numbers are converted from their
    digits (8 at a time in a 64-bit word) instead of numpy's string-to-double cast. Every byte
    is accounted for: the fixed parts compared, the names' bytes checked over the whole file at
    once, the numbers' digits checked where they are converted."""
    n = len(data)
    if n == 0:
        return np.zeros(0, "S1"), np.zeros(0, np.float64)
    if data[-1] != 10:
        return None
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10)
    f = _FIELD  # front padding: a number's field is gathered as the bytes ending at its line's end
    pad = np.zeros(n + 2 * f + _NAME_WIDTH + 8, np.uint8)
    pad[f : f + n] = buf
    words = np.ndarray((n + f + 8,), "<u8", pad, 0, (1,))  # the 8 bytes at padded offset p
    lines = _four_line_entries(ends, pad, words)
    if lines is None:
        lines = _classified_lines(ends, pad, words)
    if lines is None:
        return None
    name_start, name_end, cost_start, cost_end, k, name_entry, cost_entry = lines
    # Outside the fixed parts only names and numbers remain: printable ASCII but backslashes,
    # and exactly two quotes a name line (the name's own, checked in place).
    rest = data.translate(None, _NOT_QUOTE)
    if len(rest) != 2 * name_start.size or rest.strip(b'"'):
        return None
    name0 = name_start + 9
    name_len = name_end - 1 - name0
    if not (
        (name_len >= 0).all()
        and (pad[name0 - 1 + f] == ord('"')).all()
        and (pad[name_end - 1 + f] == ord('"')).all()
    ):
        return None
    num0, num1 = cost_start + 11, cost_end
    num_len = num1 - num0
    if not ((num_len >= 1) & (num_len <= f)).all():
        return None
    width = int(name_len.max()) if name_len.size else 0
    if width > _NAME_WIDTH:
        return None
    width = max(8, (width + 7) // 8 * 8)
    # Row i of `rows` is the bytes from padded offset i on: a fancy index copies whole rows.
    rows = np.lib.stride_tricks.as_strided(pad, (n + f + 1, max(width, f)), (1, 1))
    if name_entry is None:
        names = rows[:, :width][name0 + f]
    else:
        names = np.zeros((k, width), np.uint8)
        names[name_entry] = rows[:, :width][name0 + f]
        name_len_all = np.zeros(k, np.int64)
        name_len_all[name_entry] = name_len
        name_len = name_len_all
    names.view("<u8")[:] &= _KEEP_FIRST[:, : width // 8][name_len]
    numbers = _canonical_numbers(rows[:, :f], num0, num1, num_len, data)
    if numbers is None:
        return None
    if cost_entry is None:
        costs = numbers
    else:
        costs = np.zeros(k, np.float64)
        costs[cost_entry] = numbers
    return names.view(f"S{width}").ravel(), costs


# Where the name and cost lines are: (name line starts, ends, cost line starts, ends, the
# number of entries, each name's entry, each cost's entry); an entry index is None where every
# entry has that line.
_Lines = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None, np.ndarray | None
]


def _four_line_entries(ends: np.ndarray, pad: np.ndarray, words: np.ndarray) -> _Lines | None:
    """The lines of a file whose every entry has a name and a cost (four lines each: what
    `pgle collect` writes but for zero costs), found from the newlines alone with one 8-byte
    comparison per fixed part; None otherwise. About 10% of `text_columns`' time less than
    classifying every line (issue 35)."""
    if ends.size % 4:
        return None
    f = _FIELD
    e0, e1, e2, e3 = ends.reshape(-1, 4).T  # each entry's four line ends
    s0 = np.empty(e0.size, np.int64)
    s0[0] = 0
    s0[1:] = e3[:-1] + 1
    ok = (e0 - s0 == 7) & (words[s0 + f] == _COSTS_LINE)
    ok &= words[e0 + 1 + f] == _NAME_KEY
    ok &= (words[e1 + 1 + f] == _COST_KEY) & (
        (words[e1 + 9 + f] & np.uint64(0xFFFFFF)) == _COST_KEY_END
    )
    ok &= (e3 - e2 == 2) & (pad[e2 + 1 + f] == ord("}"))
    if not ok.all():
        return None
    return e0 + 1, e1, e1 + 1, e2, e0.size, None, None


def _classified_lines(ends: np.ndarray, pad: np.ndarray, words: np.ndarray) -> _Lines | None:
    """The lines of any file in the layout: each line classified by one 8-byte comparison of
    its start, the sequence of kinds checked against the grammar (_FOLLOWS); None otherwise."""
    f = _FIELD
    starts = np.empty(ends.size, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    head = words[starts + f]
    size = ends - starts
    kind = np.full(ends.size, _OTHER, np.int8)
    kind[(head == _COSTS_LINE) & (size == 7)] = _OPEN
    kind[head == _NAME_KEY] = _NAME
    kind[(head == _COST_KEY) & ((words[starts + 8 + f] & np.uint64(0xFFFFFF)) == _COST_KEY_END)] = (
        _COST
    )
    kind[(size == 1) & (pad[starts + f] == ord("}"))] = _CLOSE
    if kind[0] != _OPEN or kind[-1] != _CLOSE or not _FOLLOWS[kind[:-1], kind[1:]].all():
        return None
    name_lines = np.flatnonzero(kind == _NAME)
    cost_lines = np.flatnonzero(kind == _COST)
    # Each line's entry: the number of `costs {` lines up to it, less one.
    entry = np.cumsum(kind == _OPEN) - 1
    k = int(entry[-1]) + 1
    return (
        starts[name_lines],
        ends[name_lines],
        starts[cost_lines],
        ends[cost_lines],
        k,
        None if name_lines.size == k else entry[name_lines],
        None if cost_lines.size == k else entry[cost_lines],
    )


def _canonical_numbers(
    rows: np.ndarray, start: np.ndarray, end: np.ndarray, length: np.ndarray, data: bytes
) -> np.ndarray | None:
    """The doubles at data[start:end] (at most _FIELD bytes each), as float() reads them;
    None where one is outside repr's grammar. `-?\\d+(\\.\\d+)?` with at most 19 digits is
    converted here: the digits, the dot taken out, as 24 ASCII bytes in three 64-bit words,
    to an integer m (8 digits a word in three multiplications), then m / 10**k, exact when m
    < 2**53 and k <= 22 (both exact doubles, one rounding), else in long double with a check
    that the one rounding left does not fall on a tie; the rest (signs, exponents, ties, inf,
    nan) through the grammar and float()."""
    f = _FIELD
    count = length.size
    right = rows[end]  # the f bytes ending at `end`: the number right-aligned
    shifted = rows[end - 1]  # the same, one byte further left (skips the dot)
    after = np.argmax(right[:, ::-1] == ord("."), 1)  # digits after the last dot
    at = np.arange(count)
    dot = (after < length) & (right[at, f - 1 - after] == ord("."))
    tail = np.where(dot, after, length)  # right-aligned bytes kept as they are
    digits = np.where(dot, length - 1, length)
    # The last `tail` bytes from `right`, the `digits - tail` before them from `shifted`, each
    # byte minus "0" (a digit's byte then holds its value; any other byte is >= 10), zeros
    # before the digits.
    z = right.view("<u8") ^ shifted.view("<u8")
    z &= _KEEP_LAST[tail]
    z ^= shifted.view("<u8")
    z ^= _ASCII_ZEROS
    z &= _KEEP_LAST[digits]
    # The file's bytes are ASCII (checked above), so each byte of z is below 0x80 and adding
    # 0x76 sets its top bit exactly when it is 10 or more, without a carry into the next.
    over = (z + _PLUS_118) & _TOP_BITS
    other = (over[:, 0] | over[:, 1] | over[:, 2]) != 0
    scale = np.where(dot, after, 0)
    whole = digits - scale
    first = right[at, f - length]
    simple = ~other & (whole >= 1) & (~dot | (after >= 1)) & ((whole == 1) | (first != ord("0")))
    z = ((z & _LO_NIBBLES) * np.uint64(1 + (10 << 8))) >> np.uint64(8)
    z = ((z & np.uint64(0x00FF00FF00FF00FF)) * np.uint64(1 + (100 << 16))) >> np.uint64(16)
    z = ((z & np.uint64(0x0000FFFF0000FFFF)) * np.uint64(1 + (10000 << 32))) >> np.uint64(32)
    simple &= z[:, 0] < 1800  # m < 2**64
    m = z[:, 0] * np.uint64(10**16) + z[:, 1] * np.uint64(10**8) + z[:, 2]
    out: np.ndarray = m.astype(np.float64)
    out /= _POW10[np.minimum(scale, 22)]
    slow = ~(simple & (m < np.uint64(1 << 53)) & (scale <= 22))
    if _WIDE and slow.any():
        wide = slow & simple & (scale <= 27)
        i = np.flatnonzero(wide)
        x = m[i].astype(np.longdouble) / _POW10_WIDE[scale[i]]
        d = x.astype(np.float64)
        # A tie between two doubles after the first rounding: the second may round wrongly.
        twice = 2 * (x - d.astype(np.longdouble))
        tie = (twice == (np.nextafter(d, np.inf) - d)) | (twice == (np.nextafter(d, -np.inf) - d))
        out[i] = d
        slow &= ~wide
        slow[i[tie]] = True
    for j in np.flatnonzero(slow).tolist():
        text = data[start[j] : end[j]]
        if not _NUMBER.fullmatch(text):
            return None
        out[j] = float(text)
    return out


# text_format's escapes for ASCII (google/protobuf/text_encoding.py, the same in protobuf 4.21
# to 7.x): octal for control characters, C escapes for these six.
_ESCAPES = {i: f"\\{i:03o}" for i in (*range(32), 127)}
_ESCAPES.update({9: "\\t", 10: "\\n", 13: "\\r", 34: '\\"', 39: "\\'", 92: "\\\\"})
_NEEDS_ESCAPE = re.compile("[\\x00-\\x1f\\x7f\"'\\\\]")


def text_bytes(
    costs: Sequence[tuple[str, float]], latencies: Sequence[tuple[str, str, float]]
) -> bytes | None:
    """What `text_format.MessageToString` writes for these entries, for ASCII names and float
    values; None otherwise (non-ASCII names are escaped differently across protobuf versions,
    and other value types are protobuf's to convert or reject)."""
    strings = [n for n, _ in costs]
    strings += [s for s, _, _ in latencies]
    strings += [t for _, t, _ in latencies]
    if not all(type(x) is str for x in strings):
        return None
    if not all(type(c) is float for _, c in costs) or not all(
        type(v) is float for _, _, v in latencies
    ):
        return None
    joined = "".join(strings)
    if not joined.isascii():
        return None
    if _NEEDS_ESCAPE.search(joined):

        def q(x: str) -> str:
            return x.translate(_ESCAPES)
    else:

        def q(x: str) -> str:
            return x

    out: list[str] = []
    add = out.append
    for name, cost in costs:
        value = repr(cost)
        # proto3 leaves out an empty name and +0.0 (-0.0 has other bits, and is written).
        if name and value != "0.0":
            add(f'costs {{\n  name: "{q(name)}"\n  cost_us: {value}\n}}\n')
        else:
            add(
                "costs {\n"
                + (f'  name: "{q(name)}"\n' if name else "")
                + (f"  cost_us: {value}\n" if value != "0.0" else "")
                + "}\n"
            )
    for source, target, latency in latencies:
        value = repr(latency)
        add(
            "latencies {\n"
            + (f'  source: "{q(source)}"\n' if source else "")
            + (f'  target: "{q(target)}"\n' if target else "")
            + (f"  latency_us: {value}\n" if value != "0.0" else "")
            + "}\n"
        )
    return "".join(out).encode("ascii")
