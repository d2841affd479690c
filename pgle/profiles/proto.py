"""The protobuf messages pgle reads and writes, declared here, and its readers of their bytes.

Why declared and not imported: the schemas live in tsl and xla
(`tsl/profiler/protobuf/profiled_instructions.proto`, `.../xplane.proto`,
`xla/service/hlo.proto`), which no pip package ships as Python modules, and the CLI must not
import jax. Declared from FileDescriptorProtos, in pools of their own:
- `message_class()`: `tensorflow.profiler.ProfiledInstructionsProto`, the PGLE profile
  (docs/xla-facts.md section 2), proto3:

    message ProfiledInstructionsProto {
      message InstructionCost { string name = 1; double cost_us = 2; }
      message Latency { string source = 1; string target = 2; double latency_us = 3; }
      repeated InstructionCost costs = 1;
      repeated Latency latencies = 2;
    }

  used for encoding, decoding and the text format (`text_format`);
- `xspace_class()`, `xplane_class()`, `xline_class()`: the XSpace of a trace
  (`<host>.xplane.pb`), and `hlo_proto_class()`: `xla.HloProto` reduced to names, ids and
  frontend attributes; only the fields pgle reads are declared.

Readers of a profile's bytes besides protobuf's own:
- `binary_columns(data)`: names and costs as numpy columns for the one layout XLA, jaxlib and
  pgle write (costs only, one-byte lengths), None for any other; `ColumnLayout` reads a
  file with the same names in the same places (the ranks of one program) by its costs only;
- `locate_corruption(data)`: a hand-written wire decoder that walks the bytes as protobuf
  does and returns the offset of the first thing protobuf would reject, so a corrupt-file
  error says *where* it broke; run only after protobuf has failed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# protobuf ships no type information: its descriptors and generated classes are Any here.
Descriptor: TypeAlias = Any
MessageClass: TypeAlias = Any

# protobuf is imported inside the functions that build messages: importing it costs about
# as much as the interpreter's own start-up, and `pgle --help` or a text-only path never
# needs it (issue 16).

PACKAGE = "tensorflow.profiler"
FULL_NAME = f"{PACKAGE}.ProfiledInstructionsProto"
# Own file name so the declaration cannot collide with a real tsl proto that
# another library might register in the default pool.
_FILE_NAME = "pgle/profiled_instructions.proto"


def _message(parent: Any, name: str, *fields: tuple[Any, ...], map_entry: bool = False) -> Any:
    """Add message `name` to a FileDescriptorProto (or nested in a DescriptorProto), its fields
    given as (name, number, type, label[, type_name[, oneof_index]])."""
    added = parent.message_type if hasattr(parent, "message_type") else parent.nested_type
    m = added.add(name=name)
    for fname, number, ftype, label, *rest in fields:
        f = m.field.add(name=fname, number=number, type=ftype, label=label)
        if rest and rest[0]:
            f.type_name = rest[0]
        if len(rest) > 1:
            f.oneof_index = rest[1]
    if map_entry:
        m.options.map_entry = True
    return m


def _file_descriptor() -> Descriptor:
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    S, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED  # single, repeated
    fdp = descriptor_pb2.FileDescriptorProto(name=_FILE_NAME, package=PACKAGE, syntax="proto3")
    top = _message(
        fdp,
        "ProfiledInstructionsProto",
        ("costs", 1, F.TYPE_MESSAGE, R, f".{FULL_NAME}.InstructionCost"),
        ("latencies", 2, F.TYPE_MESSAGE, R, f".{FULL_NAME}.Latency"),
    )
    _message(
        top, "InstructionCost", ("name", 1, F.TYPE_STRING, S), ("cost_us", 2, F.TYPE_DOUBLE, S)
    )
    _message(
        top,
        "Latency",
        ("source", 1, F.TYPE_STRING, S),
        ("target", 2, F.TYPE_STRING, S),
        ("latency_us", 3, F.TYPE_DOUBLE, S),
    )
    return fdp


@functools.cache
def message_class() -> MessageClass:
    """The generated message class (a private pool: never clashes with tsl's own)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(FULL_NAME))


# --- hand-written wire walker, for error offsets --------------------------------

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5


class WireError(Exception):
    def __init__(self, offset: int, what: str):
        super().__init__(f"{what} at byte {offset}")
        self.offset = offset
        self.what = what


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    start = pos
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError(start, "truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(start, "varint longer than 10 bytes")


def _skip(data: bytes, pos: int, end: int, wtype: int, field: int, tag_pos: int, depth: int) -> int:
    """Skip an unknown field the way protobuf does (unknown fields are legal)."""
    if wtype == _VARINT:
        return _varint(data, pos, end)[1]
    if wtype == _I64:
        if pos + 8 > end:
            raise WireError(tag_pos, f"truncated 8-byte value of field {field}")
        return pos + 8
    if wtype == _I32:
        if pos + 4 > end:
            raise WireError(tag_pos, f"truncated 4-byte value of field {field}")
        return pos + 4
    if wtype == _LEN:
        n, pos = _varint(data, pos, end)
        if pos + n > end:
            raise WireError(tag_pos, f"field {field} claims {n} bytes but only {end - pos} remain")
        return pos + n
    if wtype == _SGROUP:
        if depth > 100:
            raise WireError(tag_pos, "groups nested too deeply")
        while True:
            if pos >= end:
                raise WireError(tag_pos, f"unterminated group {field}")
            t_pos = pos
            key, pos = _varint(data, pos, end)
            f, w = key >> 3, key & 7
            if f == 0:
                raise WireError(t_pos, "field number 0")
            if w == _EGROUP:
                if f != field:
                    raise WireError(t_pos, f"group {field} closed by end-group {f}")
                return pos
            pos = _skip(data, pos, end, w, f, t_pos, depth + 1)
    raise WireError(tag_pos, f"invalid wire type {wtype} for field {field}")


def _walk(data: bytes, pos: int, end: int, schema: Schema, depth: int) -> None:
    """Walk one message: schema maps field number -> (expected wire type, sub-schema or kind)."""
    while pos < end:
        tag_pos = pos
        key, pos = _varint(data, pos, end)
        field, wtype = key >> 3, key & 7
        if field == 0:
            raise WireError(tag_pos, "field number 0 (not a protobuf message)")
        if wtype == _EGROUP:
            raise WireError(tag_pos, f"unexpected end-group tag for field {field}")
        expected = schema.get(field)
        if expected is None or expected[0] != wtype:
            # Unknown field, or a known number with another wire type: protobuf
            # keeps both as unknown fields, so only their framing must be valid.
            pos = _skip(data, pos, end, wtype, field, tag_pos, depth)
            continue
        kind = expected[1]
        if wtype == _I64:
            if pos + 8 > end:
                raise WireError(tag_pos, f"truncated double in field {field}")
            pos += 8
            continue
        n, body = _varint(data, pos, end)
        if body + n > end:
            raise WireError(tag_pos, f"field {field} claims {n} bytes but only {end - body} remain")
        if kind == "string":
            try:
                data[body : body + n].decode("utf-8")
            except UnicodeDecodeError as e:
                raise WireError(body + e.start, f"invalid UTF-8 in string field {field}") from None
        else:
            assert not isinstance(kind, str)  # only "string" and "double" are leaves
            _walk(data, body, body + n, kind, depth + 1)
        pos = body + n


# field number -> (wire type, "string" | "double" | the sub-message's schema)
Schema: TypeAlias = Mapping[int, tuple[int, "str | Schema"]]
_COST: Schema = {1: (_LEN, "string"), 2: (_I64, "double")}
_LATENCY: Schema = {1: (_LEN, "string"), 2: (_LEN, "string"), 3: (_I64, "double")}
_TOP: Schema = {1: (_LEN, _COST), 2: (_LEN, _LATENCY)}


def locate_corruption(data: bytes) -> WireError | None:
    """The first wire-format error in `data`, or None if the walker finds none."""
    try:
        _walk(data, 0, len(data), _TOP, 0)
    except WireError as e:
        return e
    return None


# --- fast paths for large profiles --------------------------------------------------
#
# Why not protobuf alone: upb parses a 20,000-entry profile in about a millisecond, but turning
# its message objects into Python (name, cost) pairs costs ~0.5 us an entry (a merge of 256 x
# 20k spent 2.9 s there, cProfile, issue 16), and text_format is pure Python (~100 us an
# entry). The column reader reads only the canonical layout that XLA, jaxlib and pgle write,
# runs after protobuf has accepted the bytes, and returns None for anything else: the caller
# then takes the library's path. Small profiles are read without protobuf (canonical.py).


def _at_offsets(
    data: bytes | bytearray, dtype: str, offsets: npt.NDArray[np.int64]
) -> npt.NDArray[Any]:
    """The 8-byte values (`dtype`: '<f8' or '<u8') starting at byte `offsets` of `data`: an
    unaligned strided view (one gather, no per-byte index)."""
    import numpy as np

    return np.ndarray((len(data) - 7,), dtype, data, 0, (1,))[offsets]


class ColumnLayout:
    """Where one binary profile keeps its costs, and its bytes with the costs zeroed: a file
    with the same zeroed bytes has the same names in the same places (ranks of one program
    usually do), so only its costs need reading."""

    def __init__(
        self,
        size: int,
        cost_at: npt.NDArray[np.int64],
        zeroed: bytes,
        names: npt.NDArray[np.bytes_],
    ) -> None:
        self.size, self.cost_at, self.zeroed, self.names = size, cost_at, zeroed, names

    @staticmethod
    def zeroed_bytes(data: bytes, cost_at: npt.NDArray[np.int64]) -> bytearray:
        import numpy as np

        work = bytearray(data)
        np.ndarray((len(work) - 7,), "<u8", work, 0, (1,))[cost_at] = 0
        return work

    def read(self, data: bytes) -> tuple[npt.NDArray[np.bytes_], npt.NDArray[Any]] | None:
        if len(data) != self.size or self.zeroed_bytes(data, self.cost_at) != self.zeroed:
            return None
        return self.names, _at_offsets(data, "<f8", self.cost_at)


BinaryColumns: TypeAlias = "tuple[npt.NDArray[np.bytes_], npt.NDArray[Any], ColumnLayout]"


def binary_columns(data: bytes, like: ColumnLayout | None = None) -> BinaryColumns | None:
    """`(names, costs, layout)` as numpy arrays (bytes `S<w>`, float64) for a binary profile
    that holds costs only, every entry `0a L 0a N <name> 11 <double>` with one-byte lengths
    (names under 117 bytes, no NUL, cost present); None for any other layout. `like`: the
    layout of a previous file, tried first. Call it on bytes protobuf parsed (UTF-8 and
    framing are protobuf's to check)."""
    import numpy as np

    if like is not None:
        got = like.read(data)
        if got is not None:
            return got[0], got[1], like
    data = bytes(data)
    buf = np.frombuffer(data, np.uint8)
    n = len(buf)
    if n < 13:
        return None
    # Every entry start p has buf[p] = buf[p+2] = 0x0a, L = N + 11, and the 0x11 tag after
    # the name. Candidates are found for all p at once; the chain check below proves that the
    # candidates are exactly the entries, back to back, from byte 0 to the end.
    p = np.flatnonzero((buf[: n - 3] == 0x0A) & (buf[2 : n - 1] == 0x0A))
    length = buf[p + 1].astype(np.int64)
    name_len = buf[p + 3].astype(np.int64)
    ok = (length == name_len + 11) & (length < 128) & (p + 2 + length <= n)
    p, length, name_len = p[ok], length[ok], name_len[ok]
    ok = buf[p + 4 + name_len] == 0x11
    p, length, name_len = p[ok], length[ok], name_len[ok]
    ends = p + 2 + length
    if not len(p) or p[0] != 0 or ends[-1] != n or not np.array_equal(ends[:-1], p[1:]):
        return None
    width = max(int(name_len.max()), 1)
    cols = np.arange(width, dtype=np.int32)
    raw = np.take(buf, (p + 4).astype(np.int32)[:, None] + cols, mode="clip")
    raw[cols >= name_len.astype(np.int32)[:, None]] = 0
    if np.count_nonzero(raw) != int(name_len.sum()):  # a NUL in a name: numpy's S type drops it
        return None
    names = raw.view(f"S{width}").ravel()
    cost_at = p + 5 + name_len
    costs = _at_offsets(data, "<f8", cost_at)
    return (
        names,
        costs,
        ColumnLayout(n, cost_at, bytes(ColumnLayout.zeroed_bytes(data, cost_at)), names),
    )


# --- the XSpace trace format, and the slice of HLO that carries fingerprints -------------
#
# Why declared here: the schemas live in tsl (`tsl/profiler/protobuf/xplane.proto`) and
# xla (`xla/service/hlo.proto`, `xla/xla_data.proto`); no installed package ships them as
# Python modules (jaxlib parses them in C++, xprof only through its C++ extension). Only
# the fields pgle reads are declared; protobuf keeps the others as unknown fields.

XSPACE_PACKAGE = "tensorflow.profiler"
_XPLANE_FILE = "pgle/xplane.proto"
_HLO_FILE = "pgle/hlo_subset.proto"


def _xplane_file_descriptor() -> Descriptor:
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    S, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED  # single, repeated
    I64, STR, MSG = F.TYPE_INT64, F.TYPE_STRING, F.TYPE_MESSAGE
    fdp = descriptor_pb2.FileDescriptorProto(
        name=_XPLANE_FILE, package=XSPACE_PACKAGE, syntax="proto3"
    )
    P = f".{XSPACE_PACKAGE}."
    _message(
        fdp,
        "XSpace",
        ("planes", 1, MSG, R, P + "XPlane"),
        ("errors", 2, STR, R),
        ("warnings", 3, STR, R),
        ("hostnames", 4, STR, R),
    )
    plane = _message(
        fdp,
        "XPlane",
        ("id", 1, I64, S),
        ("name", 2, STR, S),
        ("lines", 3, MSG, R, P + "XLine"),
        ("event_metadata", 4, MSG, R, P + "XPlane.EventMetadataEntry"),
        ("stat_metadata", 5, MSG, R, P + "XPlane.StatMetadataEntry"),
        ("stats", 6, MSG, R, P + "XStat"),
    )
    for entry, value in (
        ("EventMetadataEntry", "XEventMetadata"),
        ("StatMetadataEntry", "XStatMetadata"),
    ):
        _message(plane, entry, ("key", 1, I64, S), ("value", 2, MSG, S, P + value), map_entry=True)
    _message(
        fdp,
        "XLine",
        ("id", 1, I64, S),
        ("name", 2, STR, S),
        ("timestamp_ns", 3, I64, S),
        ("events", 4, MSG, R, P + "XEvent"),
        ("duration_ps", 9, I64, S),
        ("display_id", 10, I64, S),
        ("display_name", 11, STR, S),
    )
    _message(
        fdp,
        "XEvent",
        ("metadata_id", 1, I64, S),
        ("offset_ps", 2, I64, S, None, 0),
        ("duration_ps", 3, I64, S),
        ("stats", 4, MSG, R, P + "XStat"),
        ("num_occurrences", 5, I64, S, None, 0),
    ).oneof_decl.add(name="data")
    _message(
        fdp,
        "XStat",
        ("metadata_id", 1, I64, S),
        ("double_value", 2, F.TYPE_DOUBLE, S, None, 0),
        ("uint64_value", 3, F.TYPE_UINT64, S, None, 0),
        ("int64_value", 4, I64, S, None, 0),
        ("str_value", 5, STR, S, None, 0),
        ("bytes_value", 6, F.TYPE_BYTES, S, None, 0),
        ("ref_value", 7, F.TYPE_UINT64, S, None, 0),
    ).oneof_decl.add(name="value")
    _message(
        fdp,
        "XEventMetadata",
        ("id", 1, I64, S),
        ("name", 2, STR, S),
        ("metadata", 3, F.TYPE_BYTES, S),
        ("display_name", 4, STR, S),
        ("stats", 5, MSG, R, P + "XStat"),
        ("child_id", 6, I64, R),
    )
    _message(
        fdp, "XStatMetadata", ("id", 1, I64, S), ("name", 2, STR, S), ("description", 3, STR, S)
    )
    return fdp


def _hlo_file_descriptor() -> Descriptor:
    """HloProto -> HloModuleProto -> computations -> instructions, frontend attributes only."""
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    S, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED  # single, repeated
    I64, STR, MSG = F.TYPE_INT64, F.TYPE_STRING, F.TYPE_MESSAGE
    fdp = descriptor_pb2.FileDescriptorProto(name=_HLO_FILE, package="xla", syntax="proto3")
    fa = _message(fdp, "FrontendAttributes", ("map", 1, MSG, R, ".xla.FrontendAttributes.MapEntry"))
    _message(fa, "MapEntry", ("key", 1, STR, S), ("value", 2, STR, S), map_entry=True)
    # Layout memory space, OpMetadata.scheduling_name (xla_data.proto; added to XLA in 2025),
    # operands and called computations: what the Nsight converter needs (pgle/profiles/nsys*.py).
    _message(fdp, "LayoutProto", ("memory_space", 8, I64, S))
    _message(fdp, "ShapeProto", ("layout", 5, MSG, S, ".xla.LayoutProto"))
    _message(fdp, "OpMetadata", ("scheduling_name", 16, STR, S))
    _message(
        fdp,
        "HloInstructionProto",
        ("name", 1, STR, S),
        ("opcode", 2, STR, S),
        ("shape", 3, MSG, S, ".xla.ShapeProto"),
        ("metadata", 7, MSG, S, ".xla.OpMetadata"),
        ("id", 35, I64, S),
        ("operand_ids", 36, I64, R),
        ("called_computation_ids", 38, I64, R),
        ("frontend_attributes", 68, MSG, S, ".xla.FrontendAttributes"),
    )
    _message(
        fdp,
        "HloComputationProto",
        ("name", 1, STR, S),
        ("instructions", 2, MSG, R, ".xla.HloInstructionProto"),
        ("id", 5, I64, S),
        ("root_id", 6, I64, S),
    )
    _message(
        fdp,
        "HloModuleProto",
        ("name", 1, STR, S),
        ("entry_computation_name", 2, STR, S),
        ("computations", 3, MSG, R, ".xla.HloComputationProto"),
        ("id", 5, I64, S),
        ("entry_computation_id", 6, I64, S),
        ("frontend_attributes", 19, MSG, S, ".xla.FrontendAttributes"),
    )
    _message(fdp, "HloProto", ("hlo_module", 1, MSG, S, ".xla.HloModuleProto"))
    return fdp


@functools.cache
def _trace_pool() -> Any:
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_xplane_file_descriptor())
    pool.Add(_hlo_file_descriptor())
    return pool


def _trace_class(name: str) -> MessageClass:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_trace_pool().FindMessageTypeByName(name))


def xspace_class() -> MessageClass:
    """`tensorflow.profiler.XSpace` (the `<host>.xplane.pb` of a trace run folder)."""
    return _trace_class(f"{XSPACE_PACKAGE}.XSpace")


def hlo_proto_class() -> MessageClass:
    """`xla.HloProto`, reduced to names, ids and frontend attributes."""
    return _trace_class("xla.HloProto")


def xplane_class() -> MessageClass:
    """`tensorflow.profiler.XPlane`: device planes are parsed one at a time to bound memory."""
    return _trace_class(f"{XSPACE_PACKAGE}.XPlane")


def xline_class() -> MessageClass:
    """`tensorflow.profiler.XLine`: a plane's events are checked by protobuf a slice at a time."""
    return _trace_class(f"{XSPACE_PACKAGE}.XLine")
