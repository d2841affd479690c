"""The harness's marked steps on disk: `steps.bin` beside the events file, its one layout, what
its writer needs (pgle.launch.harness `Events`) and its one reader, `StepFile` (the whole run:
pgle.evidence.events; while the workload writes: pgle.evidence.event_tail).

Why a side file: a run of a million steps made two million JSON lines; formatting them cost the
training loop's process and parsing them took seconds after the run (issue 25). The harness
holds each step edge as int64 numbers already; it writes them as they are and numpy reads them
back without parsing text (issue 35).

Layout, version 1: a HEADER of 16 bytes (MAGIC, then the version and the record's size as
little-endian uint32), then one record per step edge in the order the harness wrote them, four
little-endian int64 each (RECORD):
- t_ns: time.time_ns() as the step was entered; negated for its exit;
- index: the step's index (the marked steps pgle counted, from 0);
- step_num: the script's step_num; NULL_STEP_NUM for None (a step_num of another type, a string
  say, goes as a `step_enter` line of events.jsonl instead);
- name: the step name's id, which a `step_name` event of events.jsonl defines.
Every other event line carries `edges`: the records written before it, so a reader can place
it among the steps. A record cut short (a process killed mid-write) is not read. A run folder
is untrusted input: a file that is not this layout gives no steps and one line (`error`).
This module imports only the standard library at import: the harness runs it in the workload.
"""

from __future__ import annotations

import array
import errno
import os
import stat
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

NAME = "steps.bin"
MAGIC = b"PGLESTEP"
VERSION = 1
FIELDS = 4  # int64 numbers a record takes (the harness buffers its edges so)
RECORD_BYTES = 8 * FIELDS
HEADER = MAGIC + struct.pack("<II", VERSION, RECORD_BYTES)
NULL_STEP_NUM = -(2**63)  # step_num=None


def beside(events: str | Path) -> Path:
    """The step file of an events file (the same folder)."""
    return Path(events).with_name(NAME)


def open_for_append(path: str) -> int:
    """The harness's descriptor of a new step file, its header written (one write: a reader
    sees all of it or none)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    if os.fstat(fd).st_size == 0:
        os.write(fd, HEADER)
    return fd


def encode(block: array.array[int]) -> bytes:
    """The bytes of an array.array("q") of whole records, little-endian on any host."""
    if sys.byteorder != "little":
        block = array.array("q", block)
        block.byteswap()
    return block.tobytes()


def record_dtype() -> np.dtype[np.void]:
    import numpy as np

    return np.dtype([("t_ns", "<i8"), ("index", "<i8"), ("step_num", "<i8"), ("name", "<i8")])


class StepFile:
    """Reads a step file as it grows: each `read` returns the whole records added since the last
    (a record still being written waits for the next read). A missing file is an empty one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0  # the end of the last whole record read (0: the header is not read yet)
        self.records = 0  # records read
        self.error: str | None = None  # the file is not a step file this pgle reads

    def read(self, limit: int | None = None) -> np.ndarray:
        """The records added since the last read (at most `limit`), as RECORD rows."""
        import numpy as np

        dtype = record_dtype()
        empty = np.zeros(0, dtype)
        if self.error is not None:
            return empty
        try:
            # A run folder is untrusted: a link is not followed, and a FIFO or a device never
            # blocks nor streams for ever (O_NONBLOCK; only a regular file is read).
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.ELOOP:
                self.error = f"{self.path} is a symbolic link; its steps are not read"
            return empty  # missing (not written yet) or unreadable: no steps
        try:
            with open(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    self.error = f"{self.path} is not a regular file; its steps are not read"
                    return empty
                if self.offset == 0:
                    head = f.read(len(HEADER))
                    if len(head) < len(HEADER):
                        return empty  # not written yet
                    if not self._header_ok(head):
                        return empty
                    self.offset = len(HEADER)
                f.seek(self.offset)
                data = f.read(-1 if limit is None else limit * RECORD_BYTES)
        except OSError:
            return empty
        whole = len(data) - len(data) % RECORD_BYTES
        records = np.frombuffer(data, dtype, whole // RECORD_BYTES)
        self.offset += whole
        self.records += records.size
        return records

    def _header_ok(self, head: bytes) -> bool:
        version, size = struct.unpack("<II", head[len(MAGIC) :])
        if head[: len(MAGIC)] != MAGIC:
            self.error = f"{self.path} is not a pgle step file; its steps are not read"
        elif version != VERSION or size != RECORD_BYTES:
            self.error = (
                f"{self.path} is a step file of version {version} (this pgle reads version "
                f"{VERSION}: a newer pgle wrote it?); its steps are not read"
            )
        return self.error is None


def seconds(t_ns: np.ndarray) -> np.ndarray:
    """time.time_ns() values as float seconds, within one rounding of the exact quotient."""
    whole, frac = divmod(t_ns, 1_000_000_000)
    out: np.ndarray = whole.astype("f8") + frac.astype("f8") / 1e9
    return out
