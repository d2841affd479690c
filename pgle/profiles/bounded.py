"""Reading archives and compressed files from other people with bounded cost.

An nsys-jax zip, an `.xz` HLO dump or an `.xz` CSV may come from anywhere; a 10 MB zip that
expands to 2 GiB, or a 156 KB xz that expands to 2 GB in memory, is refused (exit 2) before
it fills the disk or the memory, with the limit it broke in the message. The limits are far
above what real archives need: their Parquet traces hardly compress further, and XLA's HLO
protos compress 5-20x (JAX-Toolbox's test archives, nsys-jax 2024).
"""

from __future__ import annotations

import io
import lzma
import os
import stat
from typing import Any

from pgle.errors import ProfileError

MAX_RATIO = 100  # expanded bytes per compressed byte, above FLOOR_BYTES
FLOOR_BYTES = 64 << 20  # what any member may expand to whatever its ratio (small files)
MAX_TOTAL_BYTES = 16 << 30  # everything one archive or file may expand to
MAX_MEMBERS = 100_000  # members pgle extracts from one archive
# A plain profile (.pb/.pbtxt) is parsed whole: one larger is refused before it is read (a
# 10 GB file took 10.5 GB of memory). XLA's own protobuf parser refuses a binary message over
# 2 GiB; real profiles of large models are tens of MB.
MAX_PROFILE_BYTES = 2 << 30
# A Parquet table of an nsys-jax archive becomes Python lists row by row: its rows are bounded
# (declared and as read) by FLOOR_ROWS, or ROWS_PER_BYTE per byte of the file, and it is read
# a batch at a time (a 3 KB zip whose Parquet declared millions of RLE rows took 4.3 GB).
FLOOR_ROWS = 4_000_000
ROWS_PER_BYTE = 4
PARQUET_BATCH_ROWS = 65_536


def allowed_rows(file_bytes: int) -> int:
    """How many rows a Parquet file of `file_bytes` may hold."""
    return max(FLOOR_ROWS, ROWS_PER_BYTE * file_bytes)


def check_profile_size(path: Any, size: int, what: str = "profile") -> None:
    """Refuse a profile file past MAX_PROFILE_BYTES before a byte of it is read."""
    if size > MAX_PROFILE_BYTES:
        raise ProfileError(
            f"{what} {os.fspath(path)} is {size:,} bytes; pgle reads profiles of at most "
            f"{MAX_PROFILE_BYTES:,} bytes (XLA's parser refuses a binary profile over 2 GiB).",
            hint="It is not a PGLE profile, or it is damaged.",
        )


def allowed_bytes(compressed: int) -> int:
    """How far `compressed` bytes may expand."""
    return min(MAX_TOTAL_BYTES, max(FLOOR_BYTES, MAX_RATIO * compressed))


def _refuse(what: str, path: Any, expanded: int, compressed: int) -> ProfileError:
    return ProfileError(
        f"{what} {os.fspath(path)} would expand to more than {expanded:,} bytes from "
        f"{compressed:,}; pgle reads at most {MAX_RATIO}x (or {FLOOR_BYTES >> 20} MiB for small "
        f"files) and {MAX_TOTAL_BYTES >> 30} GiB in all, at most {MAX_MEMBERS:,} members.",
        hint="It is damaged or not what it claims to be (a decompression bomb); regenerate it.",
    )


def check_regular_file(path: Any, what: str) -> None:
    """A FIFO would block the read, a device never end it: refuse anything but a file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ProfileError(f"{what} {os.fspath(path)} does not exist.") from None
    except OSError as e:
        raise ProfileError(f"cannot read {what} {os.fspath(path)}: {e.strerror or e}.") from None
    if not stat.S_ISREG(st.st_mode):
        raise ProfileError(
            f"{what} {os.fspath(path)} is not a regular file ({describe_mode(st.st_mode)})."
        )


def describe_mode(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def check_zip_members(path: Any, members: list[Any]) -> None:
    """Refuse to extract `members` (zipfile.ZipInfo) of the zip at `path` past the limits. The
    declared sizes bound the extraction: zipfile stops a member at its declared size."""
    if len(members) > MAX_MEMBERS:
        raise ProfileError(
            f"zip archive {os.fspath(path)} has {len(members):,} members to extract; "
            f"pgle extracts at most {MAX_MEMBERS:,}."
        )
    total = 0
    for m in members:
        if m.file_size > allowed_bytes(m.compress_size):
            raise _refuse(
                f"member {m.filename} of zip archive",
                path,
                allowed_bytes(m.compress_size),
                m.compress_size,
            )
        total += m.file_size
    archive = os.path.getsize(path)
    if total > allowed_bytes(archive):
        raise _refuse("zip archive", path, allowed_bytes(archive), archive)


def xz_bytes(data: bytes, path: Any, what: str = "xz file") -> bytes:
    """`data` decompressed, refusing (before holding more) what expands past allowed_bytes."""
    limit = allowed_bytes(len(data))
    decompressor = lzma.LZMADecompressor()
    try:
        out = decompressor.decompress(data, max_length=limit + 1)
    except lzma.LZMAError as e:
        raise ProfileError(f"{what} {os.fspath(path)} is not valid xz data ({e}).") from None
    if len(out) > limit:
        raise _refuse(what, path, limit, len(data))
    if not decompressor.eof:
        raise ProfileError(f"{what} {os.fspath(path)} is cut short (the xz stream does not end).")
    return out


class _Capped(io.RawIOBase):
    """A decompressing stream that raises once it has given more than `limit` bytes."""

    def __init__(self, raw: lzma.LZMAFile, limit: int, path: Any, compressed: int, what: str):
        self.raw, self.limit, self.total = raw, limit, 0
        self.path, self.compressed, self.what = path, compressed, what

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            n = self.raw.readinto(b)
        except (lzma.LZMAError, EOFError) as e:
            raise ProfileError(
                f"{self.what} {os.fspath(self.path)} is not valid xz data ({e})."
            ) from None
        self.total += n or 0
        if self.total > self.limit:
            raise _refuse(self.what, self.path, self.limit, self.compressed)
        return n or 0

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_xz_text(path: Any, what: str = "xz file") -> io.TextIOWrapper:
    """An `.xz` text file (a CSV) streamed, decompressed within allowed_bytes."""
    check_regular_file(path, what)
    size = os.path.getsize(path)
    # The wrapper owns the LZMAFile and closes it with itself: no context manager here.
    raw = _Capped(lzma.open(path, "rb"), allowed_bytes(size), path, size, what)  # noqa: SIM115
    return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace", newline="")
