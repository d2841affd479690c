"""A serialized XPlane's device events as numpy columns, read straight from the wire format.

Why not through protobuf's message objects: protobuf (upb) parses a 200 MB trace in well under
a second, but reading millions of events back through Python objects (an event, its stats,
each stat's oneof) cost about 8 µs an event, more than jaxlib's whole C++ conversion
(issue 16). Here Python only finds where each event's bytes start (one cheap loop over the
line, `pgle.profiles.xspace_file.PlaneBytes`); every field of every event is then decoded by
numpy, all events of a plane at once, one field per pass ("lockstep"), in protobuf's own rules:
varints up to 10 bytes, the last occurrence of a field wins, the last value of a oneof wins.

Only what the converter reads is decoded: XEvent metadata_id / offset_ps / duration_ps and
the XStats whose metadata id is one of `codes` (the others are skipped whatever they hold).
Anything outside the layout this reads exactly returns None so the caller takes the
protobuf path: `num_occurrences` events, an unknown event field, a string-valued op/module
stat (str_value instead of a ref_value), an op/module stat holding a number, a program or
scope id that is not an integer. The caller has parsed the plane with protobuf first, so the
bytes are known to be a valid XPlane (a corrupt trace is reported there, not here).

Schema (tsl/profiler/protobuf/xplane.proto): XPlane.lines = 3; XLine.events = 4;
XEvent {metadata_id = 1, offset_ps = 2, duration_ps = 3, stats = 4, num_occurrences = 5};
XStat {metadata_id = 1, double = 2, uint64 = 3, int64 = 4, str = 5, bytes = 6, ref = 7}.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from pgle.profiles.proto import WireError

if TYPE_CHECKING:
    from pgle.profiles.xspace_file import PlaneBytes

Array: TypeAlias = "np.ndarray[Any, Any]"

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# Stat kinds in the columns (0: not set on the event).
REF, INT64, UINT64 = 1, 2, 3
_OTHER = 4  # a value the fast path cannot represent -> fall back


class _Fallback(Exception):
    """The bytes are valid protobuf but outside what this reader decodes exactly."""


@dataclasses.dataclass
class EventColumns:
    """One row per event of the selected lines, in plane order."""

    line: np.ndarray  # index into the `lines` argument's order (int64)
    metadata_id: np.ndarray  # int64
    offset_ps: np.ndarray  # int64
    duration_ps: np.ndarray  # int64
    # per stat code: (kind, value); kind 0 where the event has no stat of that code with a
    # value, REF (value = ref id), INT64 (value as int64), UINT64 (value's bits as int64).
    stats: dict[int, tuple[np.ndarray, np.ndarray]]


def _varints(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position; (values as uint64, positions after them)."""
    b = buf[p]
    val = (b & 0x7F).astype(np.uint64)
    p = p + 1
    more = np.flatnonzero(b & 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise _Fallback("varint longer than 10 bytes")
        q = p[more]
        bb = buf[q]
        val[more] |= (bb & 0x7F).astype(np.uint64) << np.uint64(shift)
        p[more] = q + 1
        more = more[(bb & 0x80) != 0]
        shift += 7
    return val, p


def _fields(
    buf: Array, start: Array, end: Array
) -> Iterator[tuple[Array, Array, Array, Array, Array]]:
    """Yield, pass by pass, (rows, field, wire type, value or length, body position) for the next
    field of every message [start, end) not yet finished; `rows` index the messages."""
    pos = start.copy()
    rows = np.flatnonzero(pos < end)
    while rows.size:
        p = pos[rows]
        tag, p = _varints(buf, p)
        field = (tag >> np.uint64(3)).astype(np.int64)
        wtype = (tag & np.uint64(7)).astype(np.int64)
        if np.any((wtype == 3) | (wtype == 4) | (wtype > 5)):
            raise _Fallback("group fields")
        # A varint's value and a length are both one varint after the tag: decoded together
        # (usually every row), the length then skips the body.
        is_len = wtype == _LEN
        has_varint = (wtype == _VARINT) | is_len
        if has_varint.all():
            value, after = _varints(buf, p)
        else:
            value = np.zeros(rows.size, np.uint64)
            after = p.copy()
            v = np.flatnonzero(has_varint)
            if v.size:
                value[v], after[v] = _varints(buf, p[v])
            after[wtype == _I64] += 8
            after[wtype == _I32] += 4
        ln = np.flatnonzero(is_len)
        if ln.size:
            p[ln] = after[ln]
            after[ln] += value[ln].astype(np.int64)
        yield rows, field, wtype, value, p
        if np.any(after > end[rows]):
            raise _Fallback("field past the end of its message")
        pos[rows] = after
        rows = rows[after < end[rows]]


def event_columns(
    layout: PlaneBytes, lines: list[int], codes: dict[int, int]
) -> EventColumns | None:
    """The events of the XLines at positions `lines` (indices into the plane's lines, in the
    order given) as columns, with the stats of `codes` (stat metadata id -> code); None where
    the layout is outside what this reads exactly (see the module docstring). `layout` is the
    plane walked once by `pgle.profiles.xspace_file.PlaneBytes` (where each event starts)."""
    try:
        return _event_columns(layout, lines, codes)
    except (_Fallback, WireError, IndexError):
        return None


def _event_columns(layout: PlaneBytes, lines: list[int], codes: dict[int, int]) -> EventColumns:
    all_start, all_end = layout.event_bounds()
    first = np.concatenate(([0], np.cumsum(np.array(layout.line_events, np.int64))))
    counts = [int(first[i + 1] - first[i]) for i in lines]
    if list(lines) == list(range(len(layout.line_events))):
        start, end = all_start, all_end
    else:
        pick = (
            np.concatenate([np.arange(first[i], first[i + 1]) for i in lines])
            if lines
            else np.zeros(0, np.int64)
        )
        start, end = all_start[pick], all_end[pick]
    buf = np.frombuffer(layout.data, np.uint8)
    n = start.size
    cols = EventColumns(
        line=np.repeat(np.arange(len(lines), dtype=np.int64), counts),
        metadata_id=np.zeros(n, np.int64),
        offset_ps=np.zeros(n, np.int64),
        duration_ps=np.zeros(n, np.int64),
        stats={code: (np.zeros(n, np.int8), np.zeros(n, np.int64)) for code in set(codes.values())},
    )
    # In batches: the temporaries of one batch, not of the whole plane (memory, issue 16).
    for a in range(0, n, _BATCH):
        b = min(a + _BATCH, n)
        _decode_events(buf, start[a:b], end[a:b], a, cols, codes)
    return cols


_BATCH = 1 << 14  # events decoded per batch: their temporaries are ~200 bytes an event


def _decode_events(
    buf: Array, start: Array, end: Array, first: int, cols: EventColumns, codes: dict[int, int]
) -> None:
    """Decode events [first, first + len(start)) into `cols`."""
    columns = ((1, cols.metadata_id), (2, cols.offset_ps), (3, cols.duration_ps))
    for rows, field, wtype, value, body in _fields(buf, start, end):
        signed = value.view(np.int64)
        is_varint = wtype == _VARINT
        for number, column in columns:
            hit = (field == number) & is_varint
            column[rows[hit] + first] = signed[hit]
        st = (field == 4) & (wtype == _LEN)
        if not (((field <= 3) & is_varint) | st).all():
            raise _Fallback("num_occurrences or an unknown event field")
        if st.any():
            # Each event appears once per pass, and passes follow the stats' order in their
            # events: assigning pass after pass lets the last stat of a code win.
            _decode_stats(
                buf, rows[st] + first, body[st], body[st] + value[st].astype(np.int64), cols, codes
            )


def small_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ids, index of each id among them), by a lookup table when the ids are small
    non-negative integers (metadata ids: no sort needed), else by np.unique."""
    if ids.size and ids.min() >= 0 and ids.max() < max(1 << 16, 4 * ids.size):
        seen = np.zeros(int(ids.max()) + 1, bool)
        seen[ids] = True
        distinct = np.flatnonzero(seen)
        where = np.zeros(seen.size, np.int64)
        where[distinct] = np.arange(distinct.size)
        return distinct, where[ids]
    return np.unique(ids, return_inverse=True)


def _decode_stats(
    buf: Array, owner: Array, start: Array, end: Array, cols: EventColumns, codes: dict[int, int]
) -> None:
    """Stats [start, end) of the events `owner` (each at most once): those of a known code
    with a value set override the event's column."""
    n = start.size
    mid = np.zeros(n, np.int64)
    kind = np.zeros(n, np.int8)
    value = np.zeros(n, np.int64)
    for rows, field, wtype, val, _ in _fields(buf, start, end):
        signed = val.view(np.int64)
        hit = (field == 1) & (wtype == _VARINT)
        mid[rows[hit]] = signed[hit]
        # A oneof: the last value field wins, whatever it is.
        is_value = (field >= 2) & (field <= 7)
        k = np.full(rows.size, _OTHER, np.int8)
        k[(field == 7) & (wtype == _VARINT)] = REF
        k[(field == 4) & (wtype == _VARINT)] = INT64
        k[(field == 3) & (wtype == _VARINT)] = UINT64
        kind[rows[is_value]] = k[is_value]
        value[rows[is_value]] = signed[is_value]
    ids, inverse = small_ids(mid)
    code_of = np.array([codes.get(int(i), -1) for i in ids], np.int64)[inverse]
    code_of[kind == 0] = -1  # a stat without a value overrides nothing
    for code, (k_col, v_col) in cols.stats.items():
        sel = np.flatnonzero(code_of == code)
        if sel.size:
            k_col[owner[sel]] = kind[sel]
            v_col[owner[sel]] = value[sel]
