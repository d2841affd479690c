"""The harness's step lines of `events.jsonl`, parsed in bulk with numpy.

Why: a run of a million steps leaves two million JSON lines; `json.loads` per line took
seconds after the workload had exited and kept ~1.3 KB per step (issue 25). Nearly every
line is a step line in the one layout `json.dumps` gives the harness's record
(pgle/launch/harness.py `Events.write`: `{"kind": ..., "t": ..., **fields}`, fields in
the order of its call's keywords):

    {"kind": "step_enter", "t": 1764000000.000106, "name": "train", "step_num": 0, "index": 0}
    {"kind": "step_exit", "t": 1764000000.0001562, "index": 0}

`parse_chunk` checks every line of a block against that layout at once (numpy over the
block's bytes) and decodes the step_enter lines that follow it exactly: `t` by JSON's
number grammar (a per-character state machine) and numpy's string-to-double cast (the same
correctly rounded value as `float()`, hence as `json.loads`), `index` and `step_num` as
integers without leading zeros (JSON's rule), `name` when it is plain printable ASCII
without escapes. Every other line comes back for `json.loads`, in file order with the steps
(a line cut short, an escaped name, a string step number, another kind). step_exit lines are
dropped: nothing reads when a step ended.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from pgle.evidence import schema

ENTER = schema.STEP_ENTER_BYTES  # the harness's own line starts (pgle.evidence.schema)
EXIT = schema.STEP_EXIT_LINE.encode()
NAME_KEY = b', "name": "'
NUM_KEY = b'", "step_num": '
INDEX_KEY = b', "index": '
NULL = b"null"
_T_WIDTH = 26  # a float's repr is at most 24 characters, then the comma
_NAME_WIDTH = 128  # longer names take json.loads
_DIGITS = 18  # integers of up to 18 digits fit int64 without a check


@dataclasses.dataclass
class StepRows:
    """Decoded step_enter lines of one block, in block order."""

    line: np.ndarray  # line number in the block
    index: np.ndarray  # int64
    t: np.ndarray  # float64
    name: np.ndarray  # int64: index into `names`
    names: list[str]
    step_num: np.ndarray  # int64 (meaningless where num_null)
    num_null: np.ndarray  # bool: step_num was null


def _number_dfa() -> np.ndarray:
    """Transitions of JSON's number grammar, `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?`
    (Python's json.scanner NUMBER_RE); state 9 rejects. Accepting: 2, 3, 5, 8."""
    t = np.full((10, 256), 9, np.int8)
    digits, nonzero = b"0123456789", b"123456789"
    t[0, ord("-")] = 1
    for s in (0, 1):
        t[s, ord("0")] = 2
        t[s, list(nonzero)] = 3
    t[3, list(digits)] = 3
    for s in (2, 3):
        t[s, ord(".")] = 4
    t[4, list(digits)] = 5
    t[5, list(digits)] = 5
    for s in (2, 3, 5):
        t[s, [ord("e"), ord("E")]] = 6
    t[6, [ord("+"), ord("-")]] = 7
    t[6, list(digits)] = 8
    t[7, list(digits)] = 8
    t[8, list(digits)] = 8
    t[:, 0] = np.arange(10)  # NUL pads the text: the state stays
    return t


_DFA = _number_dfa()
_ACCEPT = np.zeros(10, bool)
_ACCEPT[[2, 3, 5, 8]] = True


_PAD = 32


def _words(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes starting at each position of `buf` as one uint64 (little-endian), for
    positions up to `_PAD` - 8 past its end (zeros there): one gather compares 8 bytes of a
    literal. An unaligned strided view of the block padded once; no copy per position."""
    padded = np.concatenate((buf, np.zeros(_PAD, np.uint8)))
    return np.ndarray((buf.size + _PAD - 8,), "<u8", padded, 0, (1,))


@functools.cache
def _literal_words(literal: bytes) -> tuple[tuple[int, np.uint64, np.uint64], ...]:
    """(offset, value, mask) of each 8-byte piece of `literal`, little-endian."""
    out = []
    for k in range(0, len(literal), 8):
        piece = literal[k : k + 8]
        out.append(
            (
                k,
                np.uint64(int.from_bytes(piece.ljust(8, b"\0"), "little")),
                np.uint64((1 << (8 * len(piece))) - 1),
            )
        )
    return tuple(out)


def _matches(words: np.ndarray, at: np.ndarray, literal: bytes, size: int) -> np.ndarray:
    """Whether `literal` sits at each position of a block of `size` bytes (a position before
    0, or a literal running past the block's end: False)."""
    ok = (at >= 0) & (at + len(literal) <= size)
    where = np.where(ok, at, 0)
    for k, value, mask in _literal_words(literal):
        ok &= (words[where + k] & mask) == value
    return ok


def _prefixed(
    words: np.ndarray, starts: np.ndarray, literals: tuple[bytes, ...], size: int
) -> list[np.ndarray]:
    """For each literal, whether each line starts with it; the words at the lines' starts are
    gathered once for all literals (lines start inside the block, the view reaches past it)."""
    longest = max(len(x) for x in literals)
    gathered = [words[starts + k] for k in range(0, longest, 8)]
    out = []
    for literal in literals:
        ok = starts + len(literal) <= size
        for k, value, mask in _literal_words(literal):
            ok &= (gathered[k // 8] & mask) == value
        out.append(ok)
    return out


def _trailing_digits(buf: np.ndarray, end: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """How many digits end just before `end` (not reaching below `lo`), up to _DIGITS + 1."""
    count = np.zeros(end.size, np.int64)
    going = np.ones(end.size, bool)
    for k in range(1, _DIGITS + 2):
        p = end - k
        c = buf[np.maximum(p, 0)]
        going &= (p >= lo) & (c >= 48) & (c <= 57)
        if not going.any():
            break
        count += going
    return count


def _integers(buf: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    value = np.zeros(start.size, np.int64)
    for k in range(int(count.max()) if count.size else 0):
        on = k < count
        value = np.where(
            on, value * 10 + (buf[np.minimum(start + k, buf.size - 1)].astype(np.int64) - 48), value
        )
    return value


def _json_int(buf: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Digit runs JSON accepts as integers: 1.._DIGITS digits, no leading zero."""
    first = buf[np.minimum(start, buf.size - 1)]
    ok: np.ndarray = (count >= 1) & (count <= _DIGITS) & ((count == 1) | (first != 48))
    return ok


def parse_chunk(block: bytes) -> tuple[StepRows, list[tuple[int, bytes]], int]:
    """(the step_enter lines decoded here, [(line number, line)] of every other line but
    step_exit lines, how many step_exit lines were dropped) for a block of whole lines
    (ending in a newline)."""
    buf = np.frombuffer(block, np.uint8)
    words = _words(buf)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], ends[:-1] + 1))
    n_lines = ends.size
    size = buf.size
    is_exit, is_enter = _prefixed(words, starts, (EXIT, ENTER), size)
    enter = np.flatnonzero(is_enter)
    s, e = starts[enter], ends[enter]
    ok = np.ones(enter.size, bool)

    # t: up to the first comma, by JSON's number grammar.
    t0 = s + len(ENTER)
    window = buf[
        np.minimum(t0.astype(np.int32)[:, None] + np.arange(_T_WIDTH, dtype=np.int32), buf.size - 1)
    ]
    is_comma = window == 44
    t_len = np.where(is_comma.any(axis=1), is_comma.argmax(axis=1), 0)
    ok &= (t_len > 0) & (t0 + t_len < e)
    # The number's characters only (NULs after it), a column at a time for the state machine.
    text = np.where(np.arange(_T_WIDTH)[None, :] < t_len[:, None], window, 0).astype(np.uint8)
    state = np.zeros(enter.size, np.int8)
    for column in np.ascontiguousarray(text.T)[: int(t_len.max()) if t_len.size else 0]:
        state = _DFA[state, column]  # NUL keeps the state
    ok &= _ACCEPT[state]
    name0 = t0 + t_len + len(NAME_KEY)
    ok &= _matches(words, t0 + t_len, NAME_KEY, size)

    # From the end: `, "index": <digits>}`, then `", "step_num": <int | null>` before it.
    ok &= buf[np.maximum(e - 1, 0)] == ord("}")
    i_count = _trailing_digits(buf, e - 1, name0)
    i_start = e - 1 - i_count
    ok &= _json_int(buf, i_start, i_count) & _matches(
        words, i_start - len(INDEX_KEY), INDEX_KEY, size
    )
    num_end = i_start - len(INDEX_KEY)
    num_null = _matches(words, num_end - len(NULL), NULL, size)
    n_count = _trailing_digits(buf, num_end, name0)
    negative = ~num_null & _matches(words, num_end - n_count - 1, b"-", size)
    num_start = np.where(num_null, num_end - len(NULL), num_end - n_count - negative)
    ok &= num_null | _json_int(buf, num_end - n_count, n_count)
    ok &= _matches(words, num_start - len(NUM_KEY), NUM_KEY, size)

    # The name: printable ASCII without quotes or backslashes (json.dumps escapes the rest).
    name_end = num_start - len(NUM_KEY)
    name_len = name_end - name0
    ok &= (name_len >= 0) & (name_len <= _NAME_WIDTH)
    width = max(int(name_len[ok].max()), 1) if ok.any() else 1
    cols = np.minimum(
        name0.astype(np.int32)[:, None] + np.arange(width, dtype=np.int32), buf.size - 1
    )
    inside = np.arange(width)[None, :] < name_len[:, None]
    raw = np.where(inside, buf[cols], 0).astype(np.uint8)
    plain = (raw >= 0x20) & (raw < 0x7F) & (raw != ord('"')) & (raw != ord("\\"))
    ok &= (plain | ~inside).all(axis=1)

    good = np.flatnonzero(ok)
    rows = _decode(
        buf,
        enter[good],
        text[good],
        raw[good],
        i_start[good],
        i_count[good],
        num_null[good],
        num_end[good] - n_count[good],
        n_count[good],
        negative[good],
    )
    taken = np.zeros(n_lines, bool)
    taken[enter[good]] = True
    taken |= is_exit
    others = [(k, block[starts[k] : ends[k]]) for k in np.flatnonzero(~taken).tolist()]
    return rows, others, int(is_exit.sum())


def _decode(
    buf: np.ndarray,
    line: np.ndarray,
    text: np.ndarray,
    raw: np.ndarray,
    i_start: np.ndarray,
    i_count: np.ndarray,
    num_null: np.ndarray,
    num_start: np.ndarray,
    n_count: np.ndarray,
    negative: np.ndarray,
) -> StepRows:
    # numpy's string-to-double cast rounds correctly, as float() does (checked on millions of
    # reprs, numpy 2.4): the same double json.loads gives.
    t = (
        np.ascontiguousarray(text).view(f"S{_T_WIDTH}").ravel().astype(np.float64)
        if line.size
        else np.zeros(0, np.float64)
    )
    index = _integers(buf, i_start, i_count)
    step_num = _integers(buf, num_start, np.where(num_null, 0, n_count))
    step_num = np.where(negative, -step_num, step_num)
    names: list[str] = []
    name = np.zeros(line.size, np.int64)
    if line.size:
        # numpy's S type drops trailing NULs: the padding, never a name's (printable ASCII).
        texts = np.ascontiguousarray(raw).view(f"S{raw.shape[1]}").ravel()
        if (texts == texts[0]).all():  # the usual case: one step name (no sort)
            distinct = texts[:1]
        else:
            distinct, name = np.unique(texts, return_inverse=True)
        names = [d.decode("ascii") for d in distinct.tolist()]
    return StepRows(
        line=line,
        index=index,
        t=t,
        name=name.astype(np.int64),
        names=names,
        step_num=step_num,
        num_null=num_null,
    )
