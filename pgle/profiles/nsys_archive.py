"""nsys-jax archives (the `.zip` that `nsys-jax` writes, or its extracted folder) -> projected
ranges.

What a real archive holds (JAX-Toolbox test archives, 2024): `nvtx_gpu_proj_trace/trace.parquet`
(nsys's `nvtx_gpu_proj_trace` recipe output: one row per NVTX range with its projected GPU span),
`thread-metadata.parquet` (thread names: `XlaLauncher:#global=<device>,...#` threads launch for
one device each), `report_nvtx_pushpop_trace.csv.xz` (or `.parquet`, newer nsys-jax: CPU-side
NVTX ranges, read here only for `XlaCompileBackend` ranges, i.e. which modules were compiled while
profiling) and `dump/module_*.hlo.pb.xz` (XLA dumps, for fingerprints and instruction kinds).
Parquet needs `pyarrow` (extra `pgle[nsys]`); the rest is the standard library.

Archives from `nsys-jax-combine` (one folder per process inside) are not read: convert each
process's own archive and merge the results with `pgle merge`.
"""

from __future__ import annotations

import contextlib
import csv
import lzma
import math
import pathlib
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

from pgle.errors import BadInput, ProfileError
from pgle.profiles.bounded import (
    PARQUET_BATCH_ROWS,
    allowed_rows,
    check_regular_file,
    check_zip_members,
    open_xz_text,
)
from pgle.profiles.nsys import LAUNCHER_RE, DumpIndex, Range

TRACE = "nvtx_gpu_proj_trace/trace.parquet"
THREADS = "thread-metadata.parquet"
PUSHPOP = ("report_nvtx_pushpop_trace.parquet", "report_nvtx_pushpop_trace.csv.xz")
BACKEND_RE = re.compile(r"^TSL:XlaCompileBackend:#module=(.*?),program_id=(\d+)#$")


def is_archive(path: Any) -> bool:
    p = pathlib.Path(path)
    if p.is_dir():
        return (p / TRACE).exists()
    return p.suffix == ".zip"


@contextlib.contextmanager
def opened_archive(path: Any) -> Iterator[pathlib.Path]:
    """Yield the archive's folder: the folder itself, or a private extraction of the zip."""
    p = pathlib.Path(path)
    if p.is_dir():
        yield p
        return
    if not p.exists():
        raise BadInput(f"{p} does not exist.")
    check_regular_file(p, "nsys-jax archive")
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, EOFError):
        raise ProfileError(f"{p} is not a zip file (an nsys-jax archive is one).") from None
    except OSError as e:
        raise ProfileError(f"cannot read nsys-jax archive {p}: {e.strerror or e}.") from None
    with zf, tempfile.TemporaryDirectory(prefix="pgle-nsys-") as tmp:
        wanted = [
            m
            for m in zf.infolist()
            if not m.is_dir()
            and (
                m.filename in (TRACE, THREADS, *PUSHPOP)
                or (m.filename.startswith("dump/") and "after_optimizations.hlo.pb" in m.filename)
            )
        ]
        check_zip_members(p, wanted)  # before a byte is written (bounded.py)
        for m in wanted:
            # zipfile.extract sanitizes names (no absolute paths or ..): safe for foreign archives;
            # it stops each member at its declared size, which check_zip_members bounded.
            try:
                zf.extract(m, tmp)
            except (
                zipfile.BadZipFile,
                zlib.error,
                EOFError,
                lzma.LZMAError,
                NotImplementedError,
            ) as e:
                raise ProfileError(f"member {m.filename} of {p} is damaged ({e}).") from None
            except OSError as e:
                raise ProfileError(
                    f"cannot extract {m.filename} of {p} into {tmp}: {e.strerror or e}.",
                    hint="Free space in TMPDIR.",
                ) from None
        yield pathlib.Path(tmp)


def _pyarrow() -> Any:  # the pyarrow.parquet module (optional, untyped)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput(
            "reading an nsys-jax archive needs pyarrow (its traces are Parquet).",
            hint="pip install 'pgle[nsys]' (or pip install pyarrow).",
        ) from None
    return pq


def _read_parquet(path: pathlib.Path, columns: list[str] | None = None) -> dict[str, list[Any]]:
    """A Parquet table's columns as lists, read a batch of rows at a time within
    bounded.allowed_rows (declared by its metadata, and as read); one ProfileError line for a
    file that is not one (damaged, truncated, a FIFO, a device) or one past the bound."""
    pq = _pyarrow()
    import pyarrow

    check_regular_file(path, "Parquet file")
    limit = allowed_rows(path.stat().st_size)

    def too_many(rows: int) -> ProfileError:
        return ProfileError(
            f"{path} holds {rows:,} rows or more; pgle reads at most {limit:,} from a Parquet "
            f"file of {path.stat().st_size:,} bytes.",
            hint="It is damaged or not what it claims to be (a decompression bomb); regenerate it.",
        )

    try:
        with pq.ParquetFile(path) as f:
            if f.metadata.num_rows > limit:
                raise too_many(f.metadata.num_rows)
            out: dict[str, list[Any]] = {name: [] for name in (columns or f.schema_arrow.names)}
            rows = 0
            for batch in f.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
                rows += batch.num_rows
                if rows > limit:
                    raise too_many(rows)
                for name, values in batch.to_pydict().items():
                    out.setdefault(name, []).extend(values)
            return out
    except (pyarrow.ArrowException, OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ProfileError(
            f"{path} is not a readable Parquet file ({first}).",
            hint="Regenerate the nsys-jax archive, or check that the copy is complete.",
        ) from None


def _id(value: Any) -> int | None:
    """An id column's value; None where it is missing (None, or NaN in a float column)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def read_ranges(folder: pathlib.Path) -> list[Range]:
    trace = folder / TRACE
    if trace.is_dir():
        raise BadInput(
            f"{folder} is an nsys-jax-combine archive (one trace per process).",
            hint="Convert each process's own nsys-jax archive, then `pgle merge` the results.",
        )
    if not trace.exists():
        raise ProfileError(
            f"{folder} has no {TRACE}: not an nsys-jax archive, or one made with "
            "nsys-jax's post-processing off."
        )
    cols = _read_parquet(trace)
    names = set(cols)
    out: list[Range] = []
    if "Projected Start" in names:  # nsys 2024.x recipe output
        starts, durs = cols["Projected Start"], cols["Projected Duration"]
        rids, parents = cols["RangeId"], cols["ParentId"]
        gpu_ops = cols.get("NumGPUOps")
        for i, name in enumerate(cols["Name"]):
            rid = _id(rids[i])
            if rid is None or name is None:
                continue
            out.append(
                Range(
                    rid=rid,
                    name=name,
                    start=int(starts[i]),
                    duration=int(durs[i]),
                    pid=int(cols["PID"][i]),
                    tid=int(cols["TID"][i]),
                    parent=_id(parents[i]),
                    gpu_ops=None if gpu_ops is None else int(gpu_ops[i]),
                )
            )
    elif {"Text", "Start", "End", "Range ID", "Parent ID"} <= names:  # newer recipe output
        domains = cols.get("Domain")
        for i, text in enumerate(cols["Text"]):
            name = f"{domains[i]}:{text}" if domains is not None else text
            out.append(
                Range(
                    rid=int(cols["Range ID"][i]),
                    name=name,
                    start=int(cols["Start"][i]),
                    duration=int(cols["End"][i]) - int(cols["Start"][i]),
                    pid=int(cols["PID"][i]),
                    tid=int(cols["TID"][i]),
                    parent=_id(cols["Parent ID"][i]),
                )
            )
    else:
        raise ProfileError(
            f"{trace} has columns pgle does not know ({', '.join(sorted(names))}).",
            hint="Report the nsys and nsys-jax versions that made it.",
        )
    return out


def read_devices(folder: pathlib.Path) -> dict[tuple[int, int], int]:
    path = folder / THREADS
    if not path.exists():
        return {}
    t = _read_parquet(path)
    devices = {}
    for name, pid, tid in zip(t["Name"], t["PID"], t["TID"], strict=False):
        m = LAUNCHER_RE.match(name or "")
        if m:
            devices[(int(pid), int(tid))] = int(m.group(1))
    return devices


def compiled_programs(folder: pathlib.Path) -> list[tuple[int, str]]:
    """(program id, module name) of every XlaCompileBackend range: modules compiled while
    profiling."""
    parquet, legacy = (folder / p for p in PUSHPOP)
    if parquet.exists():
        names = _read_parquet(parquet, columns=["Name"]).get("Name", [])
    elif legacy.exists():
        with open_xz_text(legacy, "NVTX CSV") as f:
            try:
                names = [row.get("Name") for row in csv.DictReader(f)]
            except csv.Error as e:
                raise ProfileError(f"{legacy} is not a readable CSV file ({e}).") from None
    else:
        return []
    out = []
    for n in names:
        m = BACKEND_RE.match(n or "")
        if m:
            out.append((int(m.group(2)), m.group(1)))
    return out


def dump_index(folder: pathlib.Path) -> DumpIndex:
    dump = folder / "dump"
    return DumpIndex(sorted(dump.iterdir()) if dump.is_dir() else [])
