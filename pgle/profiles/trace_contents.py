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

from pgle.errors import ProfileError
from pgle.profiles.xspace_file import TraceFile

DEVICE_PREFIX = "/device:"
PYTHON_EVENT_PREFIX = "$"  # tsl's python hooks name a Python call's event "$file.py:LINE name"


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
            trace = TraceFile(path)
            out.device_planes += sum(1 for p in trace.planes if p.name.startswith(DEVICE_PREFIX))
            for index in trace.host_plane_indices():
                names = [str(md.name) for md in trace.metadata(index).event_metadata.values()]
                out.host_event_kinds += len(names)
                out.python_event_kinds += sum(1 for n in names if n.startswith(PYTHON_EVENT_PREFIX))
        except ProfileError:
            out.unreadable.append(path)
    return out
