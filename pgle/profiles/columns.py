"""Profiles as numpy columns (names, costs), read in bulk: the input side of `pgle merge`.

Why: merging hundreds of ranks' profiles through Python tuples cost ~9x the input in memory
and 4x jaxlib's time once the fast path (binary files of identical names) did not apply:
names differing by a few per rank, text profiles, per-module folders (issue 25). Here each
file becomes two arrays, whatever its format:

- binary: protobuf (upb) parses the bytes first (what it rejects is an error, with protobuf's
  words); `proto.binary_columns` then reads the canonical layout as columns;
- text: `text_columns` reads the layout `text_format.MessageToString` writes (what
  `canonical.text_entries` reads, entry by entry, in Python) with numpy, all entries at once:
  first `canonical_text_columns`, for files whose every entry has a name and a cost (what
  `pgle collect --per-module` writes), in a handful of passes over the file; then the general
  numpy reader (entries without a name or a cost line).

Anything else (latencies, escapes, comments, other spacing) returns None and the caller takes
the general path, whose results and errors are protobuf's.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from typing import Any, Literal, overload

import numpy as np

from pgle.errors import ProfileError
from pgle.profiles.files import (
    BINARY,
    TEXT,
    _absolute,
    _epath,
    _is_remote,
    _name_of,
    _parse_binary,
    _read_bytes,
    fingerprint_file_name,
    profile_format,
)
from pgle.profiles.proto import binary_columns

_NAME_WIDTH = 512  # longer names take the general path
_NUM_WIDTH = 32  # repr of a double is at most 24 characters


@dataclasses.dataclass
class FileColumns:
    path: Any  # absolute
    names: np.ndarray  # bytes (S<w>), UTF-8, no NUL
    costs: np.ndarray  # float64
    layout: Any = None  # proto.ColumnLayout of a binary file: the next rank's may reuse it
    size: int = 0  # the file's bytes


def _number_dfa() -> np.ndarray:
    """Transitions for what repr(float) writes and text_format reads back
    (`-?(0|[1-9][0-9]*)(.[0-9]+)?(e[+-][0-9]+)?`, canonical.text_entries); 9 rejects;
    NUL (padding) keeps the state. Accepting: 2, 3, 5, 8."""
    t = np.full((10, 256), 9, np.int8)
    digits, nonzero = list(b"0123456789"), list(b"123456789")
    t[0, ord("-")] = 1
    for s in (0, 1):
        t[s, ord("0")] = 2
        t[s, nonzero] = 3
    t[3, digits] = 3
    for s in (2, 3):
        t[s, ord(".")] = 4
    t[4, digits] = 5
    t[5, digits] = 5
    for s in (2, 3, 5):
        t[s, ord("e")] = 6
    t[6, [ord("+"), ord("-")]] = 7
    t[7, digits] = 8
    t[8, digits] = 8
    t[:, 0] = np.arange(10)
    return t


_DFA = _number_dfa()
_ACCEPT = np.zeros(10, bool)
_ACCEPT[[2, 3, 5, 8]] = True
_SPECIAL = (b"inf", b"-inf", b"nan")
# Bytes a plain text profile holds: printable ASCII but the backslash, and newlines.
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b != ord("\\")) + b"\n"


def _words(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes at each position as one little-endian uint64 (zeros past the end)."""
    padded = np.concatenate((buf, np.zeros(16, np.uint8)))
    return np.ndarray((buf.size + 8,), "<u8", padded, 0, (1,))


def _at(words: np.ndarray, pos: np.ndarray, literal: bytes) -> np.ndarray:
    """Whether `literal` (at most 16 bytes) sits at each position; positions in [0, size]."""
    ok = np.ones(pos.size, bool)
    for k in range(0, len(literal), 8):
        piece = literal[k : k + 8]
        value = np.uint64(int.from_bytes(piece.ljust(8, b"\0"), "little"))
        mask = np.uint64((1 << (8 * len(piece))) - 1)
        ok &= (words[np.minimum(pos + k, words.size - 1)] & mask) == value
    return ok


def _next(positions: np.ndarray, at: np.ndarray, limit: int) -> np.ndarray:
    """The first of `positions` (sorted) at or after each `at`; `limit` where there is none."""
    if not positions.size:
        return np.full(at.size, limit, np.int64)
    k = np.searchsorted(positions, at)
    return np.where(k < positions.size, positions[np.minimum(k, positions.size - 1)], limit)


# --- the canonical layout, every entry with a name and a cost ------------------------------------

_FIELD = 24  # a number's bytes at most (repr of a double: 24); longer: the general reader
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


def canonical_text_columns(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """(names, costs) of a text profile whose every entry is exactly

        costs {
          name: "fusion.3"
          cost_us: 12.5
        }

    (text_format's layout, with a name and a cost in each entry: what `pgle collect` writes),
    names of printable ASCII without quotes or backslashes, costs in repr's grammar; None for
    anything else. Why not the general reader: this one locates everything from the newlines
    alone (four a entry), checks each fixed part with one 8-byte comparison per entry, and
    converts numbers from their digits (8 at a time in a 64-bit word) instead of numpy's
    string-to-double cast: 3-4x faster, most of `pgle merge`'s time on text folders (issue 25).
    Every byte is accounted for: the fixed parts compared, the names' bytes checked over the
    whole file at once, the numbers' digits checked where they are converted."""
    n = len(data)
    if n == 0:
        return np.zeros(0, "S1"), np.zeros(0, np.float64)
    if data[-1] != 10:
        return None
    buf = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(buf == 10)
    if newlines.size % 4:
        return None
    k = newlines.size // 4
    # Outside the fixed parts checked below only names and numbers remain: printable ASCII
    # but backslashes, and exactly two quotes an entry (the name's own, checked in place).
    rest = data.translate(None, _NOT_QUOTE)
    if len(rest) != 2 * k or rest.strip(b'"'):
        return None
    f = _FIELD  # front padding: a number's field is gathered as the bytes ending at its line's end
    pad = np.zeros(n + 2 * f + _NAME_WIDTH + 8, np.uint8)
    pad[f : f + n] = buf
    words = np.ndarray((n + f + 8,), "<u8", pad, 0, (1,))  # the 8 bytes at padded offset p
    e0, e1, e2, e3 = newlines.reshape(k, 4).T  # each entry's four line ends
    s0 = np.empty(k, np.int64)
    s0[0] = 0
    s0[1:] = e3[:-1] + 1
    ok = (e0 - s0 == 7) & (words[s0 + f] == _COSTS_LINE)
    ok &= (words[e0 + 1 + f] == _NAME_KEY) & (pad[e0 + 9 + f] == ord('"'))
    name0 = e0 + 10
    name_len = e1 - 1 - name0
    ok &= (name_len >= 0) & (pad[e1 - 1 + f] == ord('"'))
    ok &= (words[e1 + 1 + f] == _COST_KEY) & (
        (words[e1 + 9 + f] & np.uint64(0xFFFFFF)) == _COST_KEY_END
    )
    num_len = e2 - (e1 + 12)
    ok &= (num_len >= 1) & (num_len <= f)
    ok &= (e3 - e2 == 2) & (pad[e2 + 1 + f] == ord("}"))
    if not ok.all():
        return None
    width = int(name_len.max())
    if width > _NAME_WIDTH:
        return None
    width = max(8, (width + 7) // 8 * 8)
    # Row i of `rows` is the bytes from padded offset i on: a fancy index copies whole rows.
    rows = np.lib.stride_tricks.as_strided(pad, (n + f + 1, max(width, f)), (1, 1))
    names = rows[:, :width][name0 + f]
    names.view("<u8")[:] &= _KEEP_FIRST[:, : width // 8][name_len]
    costs = _canonical_numbers(rows[:, :f], e1 + 12, e2, num_len, data)
    if costs is None:
        return None
    return names.view(f"S{width}").ravel(), costs


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


def text_columns(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """(names, costs) of a text profile in text_format's own layout, costs only:

        costs {
          name: "fusion.3"
          cost_us: 12.5
        }

    (proto3 leaves out an empty name and a zero cost: entries may lack either line); names of
    printable ASCII without quotes or backslashes; None for anything else. Files whose every
    entry has both lines take `canonical_text_columns`, several times faster."""
    got = canonical_text_columns(data)
    if got is not None:
        return got
    n = len(data)
    if n == 0:
        return np.zeros(0, "S1"), np.zeros(0, np.float64)
    buf = np.frombuffer(data, np.uint8)
    words = _words(buf)
    c = np.flatnonzero(buf == ord("c"))
    start = c[words[c] == np.uint64(int.from_bytes(b"costs {\n", "little"))]
    # The entries must tile the file: a name holds no newline, so no `costs {` hides in one.
    if not start.size or start[0] != 0:
        return None
    end = np.append(start[1:], n)
    newlines = np.flatnonzero(buf == 10)
    quotes = np.flatnonzero(buf == ord('"'))
    p = start + 8
    has_name = _at(words, p, b'  name: "')
    name0 = p + 9
    name1 = _next(quotes, name0, n)
    ok = ~has_name | ((name1 < end) & _at(words, name1, b'"\n'))
    p = np.where(has_name, name1 + 2, p)
    has_cost = _at(words, p, b"  cost_us: ")
    num0 = p + 11
    num1 = _next(newlines, num0, n)
    ok &= ~has_cost | ((num1 < end) & (num1 - num0 <= _NUM_WIDTH) & (num1 > num0))
    p = np.where(has_cost, num1 + 1, p)
    ok &= _at(words, p, b"}\n") & (p + 2 == end)
    if not ok.all():
        return None
    # Names: printable ASCII without backslashes (no quote by construction): one check of the
    # whole file (cost lines hold only such bytes too), else text_format's escapes and UTF-8.
    if data.translate(None, _PLAIN):
        return None
    name_len = np.where(has_name, name1 - name0, 0)
    width = int(name_len.max()) if name_len.size else 0
    if width > _NAME_WIDTH:
        return None
    names = _gather(buf, name0, name_len, max(width, 1))
    num_len = np.where(has_cost, num1 - num0, 0)
    num_width = max(int(num_len.max()) if num_len.size else 0, 1)
    text = _gather(buf, num0, num_len, num_width)
    state = np.zeros(start.size, np.int8)
    for column in np.ascontiguousarray(text.T):
        state = _DFA[state, column]
    numbers = text.view(f"S{num_width}").ravel()
    if (
        not (_ACCEPT[state] | ~has_cost).all()
        and not (_ACCEPT[state] | ~has_cost | np.isin(numbers, _SPECIAL)).all()
    ):
        return None
    # numpy's string-to-double cast rounds as float() does (text_format's parser); a missing
    # cost is proto3's 0.0.
    if has_cost.all():
        return names.view(f"S{max(width, 1)}").ravel(), numbers.astype(np.float64)
    costs = np.where(has_cost, numbers, b"0").astype(np.float64)
    return names.view(f"S{max(width, 1)}").ravel(), costs


def _gather(buf: np.ndarray, start: np.ndarray, length: np.ndarray, width: int) -> np.ndarray:
    """`buf[start:start + length]` of each row, NUL-padded to `width` bytes (rows x width).
    int32 indices and `take(mode="clip")`: several times faster than int64 fancy indexing."""
    cols = np.arange(width, dtype=np.int32)
    out = np.take(buf, start.astype(np.int32)[:, None] + cols, mode="clip")
    out[cols >= length.astype(np.int32)[:, None]] = 0
    return out


def _ascii(names: np.ndarray) -> bool:
    return not names.size or bool((names.view(np.uint8) < 0x80).all())


def read_file_columns(path: Any, like: Any = None) -> FileColumns | None:
    """A profile file as columns; None when it holds latencies (or a name with a NUL byte,
    which numpy's bytes type cannot hold): the general path reads those. Errors (missing,
    unreadable, corrupt) are load_profile_source's, word for word."""
    fmt = profile_format(path)
    data = _read_bytes(path)
    layout = None
    got: tuple[np.ndarray, np.ndarray] | None = None
    if fmt == BINARY and data:
        cols = binary_columns(data, like)
        # The column reader accounts for every byte of the canonical layout (entries back to
        # back, tags, lengths); with ASCII names there is nothing left for protobuf to reject.
        # Anything else is parsed by protobuf first: what it rejects is an error, in its words.
        if cols is None or not _ascii(cols[0]):
            _parse_binary(data, _name_of(path))
        if cols is not None:
            got, layout = (cols[0], cols[1]), cols[2]
    elif fmt == TEXT:
        got = text_columns(data)
    if got is None:
        # Another layout (zero costs, empty names, escapes, ...): protobuf's reading, then
        # columns of it.
        from pgle.profiles.files import parse_profile

        profile = parse_profile(data, fmt, _name_of(path))
        if profile.latencies or any("\0" in name for name, _ in profile.costs):
            return None
        encoded = [name.encode("utf-8") for name, _ in profile.costs]
        width = max((len(b) for b in encoded), default=1) or 1
        got = (np.array(encoded, f"S{width}"), np.array([c for _, c in profile.costs], np.float64))
    return FileColumns(_absolute(path), got[0], got[1], layout, len(data))


@dataclasses.dataclass
class DirectoryColumns:
    """A per-module folder: the files XLA reads, as columns, by fingerprint."""

    path: Any
    modules: dict[str, FileColumns]
    shadowed: list[str]
    ignored: list[str]
    size: int  # bytes of the files read


def read_directory_columns(
    path: Any, likes: dict[str, Any] | None = None
) -> DirectoryColumns | None:
    """Every `<fp>.pbtxt|.pb` XLA would read in the folder (`.pbtxt` wins), as columns; None
    when one of them needs the general path. `likes`: fingerprint -> a previous folder's
    binary layout of that module (ranks of one program share it)."""
    if _is_remote(path):
        entries = sorted((e.name, e.is_dir()) for e in _epath(path).iterdir())
    else:
        try:
            with os.scandir(os.fspath(path)) as it:
                entries = sorted((e.name, e.is_dir()) for e in it)
        except PermissionError:
            raise ProfileError(
                f"profile directory {_name_of(path)} is not readable (permission denied).",
                hint="Fix its permissions.",
            ) from None
    by_fp: dict[str, dict[str, str]] = {}
    ignored = []
    for name, is_dir in entries:
        parsed = fingerprint_file_name(name)
        if parsed is None or is_dir:
            ignored.append(name + ("/" if is_dir else ""))
            continue
        by_fp.setdefault(parsed[0], {})[parsed[1]] = name
    if not by_fp:
        return None  # load_profile_source says what is wrong
    root = _absolute(path)
    modules, shadowed, size = {}, [], 0
    for fp in sorted(by_fp):
        forms = by_fp[fp]
        fmt = TEXT if TEXT in forms else BINARY
        try:
            for other_fmt, name in forms.items():
                if other_fmt != fmt:
                    shadowed.append(name)
                    read_file_columns(root / name)
            cols = read_file_columns(root / forms[fmt], (likes or {}).get(fp))
        except ProfileError:
            if len(forms) == 1:
                raise
            # XLA reads <fp>.pb when <fp>.pbtxt does not parse, and never reads a shadowed
            # .pb: the general path (files._load_directory) says which file it used and why.
            return None
        if cols is None:
            return None
        modules[fp] = cols
        size += cols.size
    return DirectoryColumns(root, modules, shadowed, ignored, size)


# --- many inputs: read in worker processes ----------------------------------------------------

_LIKES: dict[str, Any] = {}  # per process: the last binary layout of each module ("" for files)


def _read_file(path: Any) -> FileColumns | None:
    cols = read_file_columns(path, _LIKES.get(""))
    if cols is not None and cols.layout is not None:
        _LIKES[""] = cols.layout
        cols.layout = None  # stays in this process (a worker's result crosses a pipe)
    return cols


def _read_directory(path: Any) -> DirectoryColumns | None:
    folder = read_directory_columns(path, _LIKES)
    if folder is not None:
        for fp, c in folder.modules.items():
            if c.layout is not None:
                _LIKES[fp] = c.layout
                c.layout = None
    return folder


# What crosses the pipe from a worker: a rank's names are mostly those of the ranks before it
# (the same program), so a worker sends a module's names whole once, then the positions where
# they differ from the names it last sent whole (issue 25: the names were four fifths of the
# bytes pickled, and the pipe's copies a third of the time of a 800-rank merge on 2 cores).
_SENT: dict[str, np.ndarray] = {}  # per worker: module ("" for files) -> names last sent whole


@dataclasses.dataclass
class _NamesDelta:
    key: str
    at: np.ndarray  # positions whose name differs from the names last sent whole
    names: np.ndarray  # their names


def _compact(key: str, cols: FileColumns) -> None:
    """In a worker: `cols.names` as a _NamesDelta when few differ from the last sent whole."""
    ref = _SENT.get(key)
    if ref is not None and ref.size == cols.names.size:
        wrong = np.flatnonzero(cols.names != ref)
        if wrong.size * 20 <= ref.size:
            cols.names = _NamesDelta(key, wrong, cols.names[wrong])  # type: ignore[assignment]
            return
    _SENT[key] = cols.names


def _expand(worker: int, cols: FileColumns, sent: dict[tuple[int, str], np.ndarray]) -> None:
    """In the caller: the names a worker sent, whole again (the other half of _compact)."""
    delta = cols.names
    if not isinstance(delta, _NamesDelta):
        return
    ref = sent[(worker, delta.key)]
    # A wider name than the reference holds: widen first (assigning would cut it short).
    names = ref.astype(delta.names.dtype) if delta.names.itemsize > ref.itemsize else ref.copy()
    names[delta.at] = delta.names
    cols.names = names


def _start_worker() -> None:
    _SENT.clear()
    # glibc gives blocks of 128 KiB and more back to the kernel as soon as they are freed
    # (mmap, heap trimming): each file's temporaries (a few MB) then fault their pages in
    # again, one at a time: 400,000 faults, a third of the workers' time on 800 ranks (issue
    # 25). A worker keeps them instead; its memory stays about the largest file's temporaries
    # and goes back when it exits. Elsewhere than glibc there is no mallopt: nothing to do.
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (its largest value on 64-bit glibc)
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD


def _read_file_in_worker(path: Any) -> tuple[int, FileColumns | None]:
    cols = _read_file(path)
    if cols is not None:
        _compact("", cols)
    return os.getpid(), cols


def _read_directory_in_worker(path: Any) -> tuple[int, DirectoryColumns | None]:
    folder = _read_directory(path)
    if folder is not None:
        for fp, c in folder.modules.items():
            _compact(fp, c)
    return os.getpid(), folder


def _whole(worker: int, result: Any, sent: dict[tuple[int, str], np.ndarray]) -> Any:
    if result is None:
        return None
    pairs = result.modules.items() if isinstance(result, DirectoryColumns) else [("", result)]
    for key, cols in pairs:
        if isinstance(cols.names, _NamesDelta):
            _expand(worker, cols, sent)
        else:
            sent[(worker, key)] = cols.names
    return result


def _fork_is_safe() -> bool:
    """fork() only from a single-threaded process that has not loaded jax (jaxlib's threads
    are invisible to `threading`; a forked copy of a multithreaded process can deadlock). The
    CLI never imports jax; a notebook calling pgle's API may have. (The same rule as
    pgle.evidence.events, which does not import this module.)"""
    import sys
    import threading

    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and not any(name in sys.modules for name in ("jax", "jaxlib"))
    )


@overload
def read_all(paths: list[Any], directories: Literal[False]) -> Iterator[FileColumns | None]: ...
@overload
def read_all(paths: list[Any], directories: Literal[True]) -> Iterator[DirectoryColumns | None]: ...
def read_all(
    paths: list[Any], directories: bool
) -> Iterator[FileColumns | DirectoryColumns | None]:
    """The inputs' columns, in order (None where one needs the general path). With many inputs
    and several cores, files are read and parsed in worker processes, a few inputs ahead of the
    caller (reading is most of a large merge; jaxlib's runs on one thread). Errors are the
    reader's, raised here in input order."""
    import collections

    read = _read_directory if directories else _read_file
    workers = min(os.cpu_count() or 1, 8)
    if len(paths) < 16 or workers < 2 or not _fork_is_safe():
        _LIKES.clear()
        yield from (read(p) for p in paths)
        return
    import concurrent.futures
    import multiprocessing

    in_worker = _read_directory_in_worker if directories else _read_file_in_worker
    ahead = 4 * workers  # results waiting at most: memory stays a few inputs
    sent: dict[tuple[int, str], np.ndarray] = {}
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker
    ) as pool:
        pending: collections.deque[Any] = collections.deque()
        queued = iter(paths)
        for p in queued:
            pending.append(pool.submit(in_worker, p))
            if len(pending) >= ahead:
                break
        while pending:
            # In input order: a worker's names sent whole come before its deltas on them.
            worker, result = pending.popleft().result()
            nxt = next(queued, None)
            if nxt is not None:
                pending.append(pool.submit(in_worker, nxt))
            yield _whole(worker, result, sent)
