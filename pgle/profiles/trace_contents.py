"""What a written trace holds, read without its events: did the profiler record what it was
asked to (issue 36)?

jax.profiler takes its options without a word when one does nothing: `device_tracer_level`
is no setting of jax's ProfileOptions binding at all (jax #39938), and a tool that meant to
pass `python_tracer_level=0` may not have (sglang-jax #1510). So after the stop pgle reads the
trace itself: the names of the host planes' kinds of events (each plane's `event_metadata`,
read without walking its events: the lines, nearly all of the bytes, are skipped) say whether
the Python tracer ran (its events are named `$file.py:LINE function`, tsl's python hooks,
jax 0.6 .. 0.12) and whether the host tracer did; the planes' names say whether a device
tracer did.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from pgle.profiles.proto import WireError, _skip, _varint, xplane_class
from pgle.profiles.xspace_file import XSpaceFile

HOST_PREFIX = "/host:"
METADATA_PLANE = "/host:metadata"
DEVICE_PREFIX = "/device:"
PYTHON_EVENT_PREFIX = "$"  # tsl's python hooks name a Python call's event "$file.py:LINE name"
_LINES_FIELD = 3  # XPlane.lines: skipped (the events)
_LEN = 2


@dataclasses.dataclass
class TraceContents:
    """The planes of a trace's `*.xplane.pb` files and the kinds of their host events."""

    files: int = 0
    bytes: int = 0
    empty_files: int = 0  # a 0-byte xplane.pb: an XSpace over protobuf's 2 GiB is written so
    device_planes: int = 0
    host_event_kinds: int = 0  # distinct host event names, the metadata plane's aside
    python_event_kinds: int = 0  # ... of which the Python tracer's
    unreadable: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def read_contents(files: list[str]) -> TraceContents:
    """The contents of these `*.xplane.pb` files (a trace's run folder)."""
    out = TraceContents()
    for path in files:
        out.files += 1
        try:
            size = os.path.getsize(path)
        except OSError:
            out.unreadable.append(path)
            continue
        out.bytes += size
        if size == 0:
            out.empty_files += 1
            continue
        try:
            space = XSpaceFile(path)
            for index, ref in enumerate(space.planes):
                if ref.name.startswith(DEVICE_PREFIX):
                    out.device_planes += 1
                elif ref.name.startswith(HOST_PREFIX) and ref.name != METADATA_PLANE:
                    names = _event_names(space.read(index))
                    out.host_event_kinds += len(names)
                    out.python_event_kinds += sum(
                        1 for n in names if n.startswith(PYTHON_EVENT_PREFIX)
                    )
        except (OSError, WireError, ValueError):
            out.unreadable.append(path)
    return out


def _event_names(plane: bytes) -> list[str]:
    """The names of a plane's kinds of events: the plane parsed without its lines."""
    view = memoryview(plane)
    data: Any = view  # proto's walkers index and slice it as they do bytes
    kept: list[bytes] = []
    pos, end = 0, len(view)
    while pos < end:
        tag_pos = pos
        key, pos = _varint(data, pos, end)
        field, wtype = key >> 3, key & 7
        if field == 0:
            raise WireError(tag_pos, "field number 0 in a plane")
        pos = _skip(data, pos, end, wtype, field, tag_pos, 0)
        if not (field == _LINES_FIELD and wtype == _LEN):
            kept.append(bytes(view[tag_pos:pos]))
    try:
        skeleton = xplane_class().FromString(b"".join(kept))
    except Exception as e:  # protobuf's DecodeError: a corrupt plane
        raise ValueError(str(e)) from None
    return [str(md.name) for md in skeleton.event_metadata.values()]
