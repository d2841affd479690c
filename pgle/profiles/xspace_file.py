"""The one reader of XSpace traces (`<host>.xplane.pb`): the run folder's files
(`find_xplane_files`) and each file read plane by plane (`TraceFile`), for the converter
(`pgle.profiles.convert`), the report (`pgle.analysis.timeline`) and the trace's contents
(`pgle.profiles.trace_contents`). Memory follows the largest plane.

Why not `f.read()` and protobuf: a trace of 8 GPUs is 8 device planes plus host planes in one
file, and reading the file whole, then parsing a plane into protobuf (upb) objects of about
8 times its bytes, made `pgle convert` peak at ~2.1x and `pgle report` at ~2.8x the trace
(issue 25). Here:

- `TraceFile` walks the file's top-level framing through a small window (planes, and each
  plane's name) and keeps only where each plane lies; `read(i)` reads one plane's bytes,
  `layout(i, data)` walks them (below), `parse` and `metadata` hand them to protobuf.
- `PlaneBytes` splits one plane's bytes into a *skeleton* (the plane with its lines' events
  left out: metadata, stat metadata, line names and timestamps, parsed by protobuf, small) and
  the position of every event, which `pgle.profiles.xplane_columns` decodes into numpy
  columns. `validate()` parses the events with protobuf too, in slices of whole events, so a
  corrupt trace is still refused exactly where protobuf refuses it, without ever holding the
  plane as objects.

Schema (tsl/profiler/protobuf/xplane.proto): XSpace.planes = 1; XPlane.name = 2,
XPlane.lines = 3; XLine.events = 4.
"""

from __future__ import annotations

import dataclasses
import os
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from pgle.errors import ProfileError
from pgle.profiles.proto import WireError, _skip, _varint, xline_class, xplane_class

if TYPE_CHECKING:
    import numpy as np

_VARINT, _I64, _LEN, _SGROUP, _I32 = 0, 1, 2, 3, 5
# tsl/profiler/utils/xplane_schema.h
DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:", "/device:CUSTOM:")
HOST_PREFIX = "/host:"
METADATA_PLANE = "/host:metadata"
# Protobuf parses events in slices of about this many bytes (upb objects are ~8x their bytes).
VALIDATE_SLICE = 1 << 19


@dataclasses.dataclass(frozen=True)
class PlaneRef:
    name: str
    offset: int  # of the plane's bytes (after its tag and length) in the file
    size: int


class _Window:
    """Reads a file through a small moving window: the top-level framing of a trace is a few
    bytes every few megabytes, so only those bytes are read."""

    SIZE = 1 << 16

    def __init__(self, f: BinaryIO, size: int):
        self.f, self.size = f, size
        self.at, self.buf = 0, b""

    def bytes_at(self, pos: int, n: int) -> tuple[bytes, int]:
        """(buffer, index of `pos` in it) with at least `n` bytes from pos, or up to the end."""
        want = min(pos + n, self.size)
        if not (self.at <= pos and want <= self.at + len(self.buf)):
            self.f.seek(pos)
            self.buf = self.f.read(max(n, self.SIZE))
            self.at = pos
        return self.buf, pos - self.at

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        buf, i = self.bytes_at(pos, 10)
        try:
            value, j = _varint(buf, i, min(len(buf), i + end - pos))
        except WireError as e:
            raise WireError(e.offset - i + pos, e.what) from None
        return value, pos + (j - i)

    def tag(self, pos: int, end: int, where: str) -> tuple[int, int, int]:
        """(field, wire type, position after the tag) of the tag at `pos`."""
        key, after = self.varint(pos, end)
        if key >> 3 == 0:
            raise WireError(pos, f"field number 0 {where}")
        return key >> 3, key & 7, after

    def skip(self, pos: int, end: int, wtype: int, field: int, tag_pos: int) -> int:
        """`proto._skip` on the file: past a field's value (its framing checked)."""
        if wtype == _LEN:
            n, body = self.varint(pos, end)
            if body + n > end:
                raise WireError(
                    tag_pos, f"field {field} claims {n} bytes but only {end - body} remain"
                )
            return body + n
        # Groups are never written in a trace: for one, the rest of the message is read.
        buf, i = self.bytes_at(pos, end - pos if wtype == _SGROUP else 10)
        try:
            return (
                pos
                + _skip(buf, i, min(len(buf), i + end - pos), wtype, field, i - (pos - tag_pos), 0)
                - i
            )
        except WireError as e:
            raise WireError(e.offset - i + pos, e.what) from None


def find_xplane_files(run_dir: Any) -> list[str]:
    """The `*.xplane.pb` files directly in a trace run folder (`<dir>/plugins/profile/<stamp>/`:
    `pgle.profiles.jaxlib.newest_run_folder` finds it), as jaxlib's reader takes them: not
    recursive, in directory order (jaxlib reads hosts in this order, and the order of a
    floating-point sum decides its last bits). ProfileError when there is none."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise ProfileError(f"trace folder {run_dir} does not exist or is not a directory.")
    try:
        names = os.listdir(run_dir)
    except PermissionError:
        raise ProfileError(f"trace folder {run_dir} is not readable (permission denied).") from None
    files = [os.path.join(run_dir, n) for n in names if n.endswith("xplane.pb")]
    if not files:
        hint = "Pass the run folder <log_dir>/plugins/profile/<timestamp>/."
        nested = os.path.join(run_dir, "plugins", "profile")
        if os.path.isdir(nested):
            runs = sorted(os.listdir(nested))
            if runs:
                hint = f"Pass the run folder itself, for example {os.path.join(nested, runs[-1])}."
        raise ProfileError(f"trace folder {run_dir} holds no .xplane.pb file.", hint=hint)
    return files


class TraceFile:
    """One `<host>.xplane.pb`: where its planes lie, each plane read from the file only when
    asked for, so memory follows the largest plane, not the file (issue 25). Every reader of a
    trace (the converter, the report, the trace's contents) goes through it; a file it cannot
    read, or bytes that are no XSpace, are a ProfileError naming the file."""

    def __init__(self, path: str):
        self.path = path
        self.host = os.path.basename(path).removesuffix(".xplane.pb")
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self.planes = _index(_Window(f, size), size)
        except OSError as e:
            raise ProfileError(f"cannot read trace {path}: {e.strerror or e}.") from None
        except WireError as e:
            raise self._corrupt(f"at byte {e.offset} ({e.what})") from None

    def _corrupt(self, where: str) -> ProfileError:
        return ProfileError(
            f"trace {self.path} is not a valid XSpace protobuf: parsing failed {where}.",
            hint="Capture the trace again; make sure the profiler was stopped cleanly.",
        )

    def read(self, index: int) -> bytes:
        """The plane's bytes."""
        ref = self.planes[index]
        try:
            with open(self.path, "rb") as f:
                f.seek(ref.offset)
                data = f.read(ref.size)
        except OSError as e:
            raise ProfileError(f"cannot read trace {self.path}: {e.strerror or e}.") from None
        if len(data) != ref.size:
            raise self._corrupt(
                f"at byte {ref.offset + len(data)} (the file ended inside a plane: was it cut "
                "short?)"
            )
        return data

    def parse(self, index: int, data: bytes | None = None) -> Any:
        """The whole plane as a protobuf message (small planes, and the fallback paths)."""
        from google.protobuf.message import DecodeError

        try:
            return xplane_class().FromString(self.read(index) if data is None else data)
        except DecodeError:
            raise self._corrupt(f"in plane {self.planes[index].name!r}") from None

    def layout(self, index: int, data: bytes) -> tuple[PlaneBytes, Any]:
        """(the plane's events walked once, its skeleton parsed: metadata and lines without
        events), every event checked by protobuf in slices; corrupt bytes are an error here."""
        from google.protobuf.message import DecodeError

        try:
            layout = PlaneBytes(data)
            skeleton = xplane_class().FromString(layout.skeleton)
            layout.validate(xline_class)
        except (WireError, DecodeError):
            raise self._corrupt(f"in plane {self.planes[index].name!r}") from None
        return layout, skeleton

    def metadata(self, index: int) -> Any:
        """The plane without its lines (nearly all of its bytes, skipped unread), parsed."""
        from google.protobuf.message import DecodeError

        try:
            return xplane_class().FromString(PlaneBytes(self.read(index), events=False).skeleton)
        except (WireError, DecodeError):
            raise self._corrupt(f"in plane {self.planes[index].name!r}") from None

    def first(self, name: str) -> Any | None:
        """The first plane with this name (tsl FindPlaneWithName), parsed, or None."""
        for i, ref in enumerate(self.planes):
            if ref.name == name:
                return self.parse(i)
        return None

    def device_plane_indices(self) -> list[int]:
        """GPU planes, else TPU, else CUSTOM (jaxlib's converter does not expect a mix)."""
        for prefix in DEVICE_PREFIXES:
            found = [i for i, ref in enumerate(self.planes) if ref.name.startswith(prefix)]
            if found:
                return found
        return []

    def host_plane_indices(self) -> list[int]:
        """The host planes but the metadata plane (the HLO protos): where TraceMe events are."""
        return [
            i
            for i, ref in enumerate(self.planes)
            if ref.name.startswith(HOST_PREFIX) and ref.name != METADATA_PLANE
        ]


def _index(w: _Window, end: int) -> list[PlaneRef]:
    """(name, offset, size) of each plane (XSpace field 1), from the file's top-level framing."""
    planes = []
    pos = 0
    while pos < end:
        tag_pos = pos
        field, wtype, pos = w.tag(pos, end, "(not a protobuf message)")
        if field != 1 or wtype != _LEN:
            pos = w.skip(pos, end, wtype, field, tag_pos)
            continue
        n, body = w.varint(pos, end)
        if body + n > end:
            raise WireError(tag_pos, f"plane claims {n} bytes but only {end - body} remain")
        planes.append(PlaneRef(_plane_name(w, body, body + n), body, n))
        pos = body + n
    return planes


def _plane_name(w: _Window, pos: int, end: int) -> str:
    name = ""
    while pos < end:
        tag_pos = pos
        field, wtype, pos = w.tag(pos, end, "in a plane")
        if field == 2 and wtype == _LEN:
            n, body = w.varint(pos, end)
            if body + n > end:
                raise WireError(tag_pos, "plane name runs past the plane")
            buf, i = w.bytes_at(body, n)
            name = bytes(buf[i : i + n]).decode("utf-8", errors="replace")  # last one wins
            pos = body + n
            continue
        pos = w.skip(pos, end, wtype, field, tag_pos)
    return name


class PlaneBytes:
    """One serialized XPlane, walked once: its skeleton (everything but the lines' events) and
    where each event starts; with `events=False`, the skeleton leaves the lines out whole and
    no event is looked at (the trace's contents: only the plane's metadata). Raises WireError
    where the framing is broken."""

    def __init__(self, data: bytes | memoryview, *, events: bool = True):
        self.data = data
        view = memoryview(data)
        self.line_ranges: list[tuple[int, int]] = []
        # Events of all lines, in plane order: where each event's bytes start; `line_events[k]`
        # is the number of events of line k; `long` lists (index, length) of events of 128
        # bytes or more (the others' one-byte length sits just before their start).
        self.starts: array[int] = array("q")
        self.line_events: list[int] = []
        self.long: list[tuple[int, int]] = []
        try:
            self.skeleton = self._walk(view, events)
        except IndexError:  # a length or tag cut by the end of the plane
            raise WireError(len(view), "the plane ends inside a field") from None

    def _walk(self, mv: memoryview, events: bool) -> bytes:
        view = cast(bytes, mv)  # proto's walkers index and slice it as they do bytes
        pieces: list[Any] = []
        pos, end = 0, len(view)
        while pos < end:
            tag_pos = pos
            field, wtype, pos = _tag(view, pos, end, "in a plane")
            if field == 3 and wtype == _LEN and events:
                n, body = _varint(view, pos, end)
                if body + n > end:
                    raise WireError(tag_pos, f"line claims {n} bytes but only {end - body} remain")
                header = self._walk_line(view, body, body + n)
                pieces.append(b"\x1a" + _encode_varint(len(header)) + header)
                self.line_ranges.append((body, body + n))
                pos = body + n
            else:
                pos = _skip(view, pos, end, wtype, field, tag_pos, 0)
                if not (field == 3 and wtype == _LEN):
                    pieces.append(view[tag_pos:pos])
        return b"".join(pieces)

    def _walk_line(self, data: bytes, pos: int, end: int) -> bytes:
        """Record the line's events; return its other fields (name, timestamp, ...)."""
        starts, add = self.starts, self.starts.append
        before = len(starts)
        header: list[Any] = []
        while pos < end:
            if data[pos] == 0x22:  # the usual `22 LL` header of an event under 128 bytes
                n = data[pos + 1]
                if n < 0x80:
                    pos += 2
                    add(pos)
                    pos += n
                    continue
            tag_pos = pos
            field, wtype, pos = _tag(data, pos, end, "in a line")
            if field == 4 and wtype == _LEN:
                n, pos = _varint(data, pos, end)
                self.long.append((len(starts), n))
                add(pos)
                pos += n
            else:
                pos = _skip(data, pos, end, wtype, field, tag_pos, 0)
                header.append(data[tag_pos:pos])
        if pos > end:
            raise WireError(end, "an event runs past its line")
        self.line_events.append(len(starts) - before)
        return b"".join(header)

    def event_bounds(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(start, end) of every event's bytes as numpy int64 arrays, in plane order."""
        import numpy as np

        buf = np.frombuffer(self.data, np.uint8)
        start = np.frombuffer(self.starts, np.int64) if self.starts else np.zeros(0, np.int64)
        length = buf[start - 1].astype(np.int64)
        for index, n in self.long:
            length[index] = n
        return start, start + length

    def validate(self, xline_class: Callable[[], Any]) -> None:
        """Parse every event with protobuf, in slices of whole events (DecodeError where
        protobuf refuses the bytes); nothing is kept."""
        import numpy as np

        if not self.starts:
            return
        start, end = self.event_bounds()
        # Each event's tag: 0x22 and its length's varint just before the start.
        head = np.full(start.size, 2, np.int64)
        for index, n in self.long:
            head[index] = 1 + len(_encode_varint(n))
        tag = start - head
        counts = np.array(self.line_events, np.int64)
        first = np.concatenate(([0], np.cumsum(counts)))
        view = memoryview(self.data)
        parse = xline_class().FromString
        for k in range(len(counts)):
            a, b = int(first[k]), int(first[k + 1])
            while a < b:
                # As many whole events as fit in one slice (at least one).
                limit = tag[a] + VALIDATE_SLICE
                c = max(a + 1, a + int(np.searchsorted(end[a:b], limit, side="right")))
                parse(view[int(tag[a]) : int(end[c - 1])])
                a = c


def _tag(data: bytes, pos: int, end: int, where: str) -> tuple[int, int, int]:
    """(field, wire type, position after the tag) of the tag at `pos`."""
    key, after = _varint(data, pos, end)
    if key >> 3 == 0:
        raise WireError(pos, f"field number 0 {where}")
    return key >> 3, key & 7, after


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
