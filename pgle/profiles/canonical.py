"""The profile message (pgle/profiles/proto.py) read and written without protobuf, for the
layouts protobuf itself writes.

Why by hand: importing protobuf and building the message class costs about half of a bare
interpreter's start-up (python -X importtime, issue 16), more than `pgle inspect`, `diff` or
`convert` of a 2,000-entry profile spends on everything else. Each function here handles only
input whose meaning is beyond doubt and returns None for anything else; the caller then takes
protobuf's path, so results and error messages are protobuf's in every other case
(tests/profiles/test_profile_fastpaths.py compares both on many inputs).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import TypeAlias

from pgle.profiles.proto import WireError, _varint

Costs: TypeAlias = list[tuple[str, float]]
Latencies: TypeAlias = list[tuple[str, str, float]]

_DOUBLE = struct.Struct("<d")
# Wire keys (field number << 3 | wire type) in the one-byte form protobuf writes.
_COSTS, _LATENCIES = 0x0A, 0x12  # top level: fields 1 and 2, length-delimited
_STR1, _STR2, _F64_2, _F64_3 = 0x0A, 0x12, 0x11, 0x19


def _string(data: bytes, pos: int, stop: int) -> tuple[str, int]:
    n, body = _varint(data, pos, stop)
    if body + n > stop:
        raise WireError(pos, "string runs past its message")
    return data[body : body + n].decode("utf-8"), body + n


def binary_entries(data: bytes) -> tuple[Costs, Latencies] | None:
    """`(costs, latencies)` of a binary profile that holds only known fields, each entry's
    fields once and in field order (as protobuf, XLA and jaxlib write them); None for anything
    else (unknown fields, repeated or reordered fields, other key encodings, invalid UTF-8,
    truncation), which protobuf then parses or rejects."""
    costs: list[tuple[str, float]] = []
    latencies: list[tuple[str, str, float]] = []
    unpack = _DOUBLE.unpack_from
    end = len(data)
    pos = 0
    try:
        while pos < end:
            key = data[pos]
            n = data[pos + 1]
            if n < 0x80:
                body = pos + 2
            else:
                n, body = _varint(data, pos + 1, end)
            stop = body + n
            if stop > end:
                return None
            if key == _COSTS:
                name, cost = "", 0.0
                if body < stop and data[body] == _STR1:
                    n = data[body + 1]
                    if n < 0x80:  # the usual one-byte length, without a call
                        name = data[body + 2 : body + 2 + n].decode("utf-8")
                        body += 2 + n
                    else:
                        name, body = _string(data, body + 1, stop)
                if body < stop and data[body] == _F64_2 and body + 9 <= stop:
                    cost = unpack(data, body + 1)[0]
                    body += 9
                costs.append((name, cost))
            elif key == _LATENCIES:
                source = target = ""
                latency = 0.0
                if body < stop and data[body] == _STR1:
                    source, body = _string(data, body + 1, stop)
                if body < stop and data[body] == _STR2:
                    target, body = _string(data, body + 1, stop)
                if body < stop and data[body] == _F64_3 and body + 9 <= stop:
                    latency = unpack(data, body + 1)[0]
                    body += 9
                latencies.append((source, target, latency))
            else:
                return None
            if body != stop:
                return None
            pos = stop
    except (WireError, UnicodeDecodeError, IndexError):  # IndexError: cut inside a key or length
        return None
    return costs, latencies


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


_TEXT_ENTRY: re.Pattern[str] | None = None


def text_entries(text: str) -> tuple[Costs, Latencies] | None:
    """`(costs, latencies)` for a text profile in the layout `text_format.MessageToString`
    writes (two-space indent, plain quoted names, decimal numbers); None for anything else
    (comments, escapes, other spacing or field order), which text_format then parses."""
    global _TEXT_ENTRY
    if _TEXT_ENTRY is None:
        # Only what repr(float) writes (text_format prints doubles with str()): no leading zeros,
        # a lowercase signed exponent; anything else is text_format's to read.
        num = r"(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:e[+-]\d+)?|-?inf|nan)"
        name = r'"([^"\\\n]*)"'
        _TEXT_ENTRY = re.compile(
            r"costs \{\n(?:  name: " + name + r"\n)?(?:  cost_us: " + num + r"\n)?\}\n"
            r"|latencies \{\n(?:  source: " + name + r"\n)?(?:  target: " + name + r"\n)?"
            r"(?:  latency_us: " + num + r"\n)?\}\n"
        )
    costs, latencies = [], []
    pos = 0
    for m in _TEXT_ENTRY.finditer(text):
        if m.start() != pos:
            return None
        pos = m.end()
        name, cost, src, dst, lat = m.groups()
        if text[m.start()] == "c":
            costs.append((name or "", float(cost) if cost else 0.0))
        else:
            latencies.append((src or "", dst or "", float(lat) if lat else 0.0))
    if pos != len(text):
        return None
    return costs, latencies
