"""nsys-jax archives (the `.zip` that `nsys-jax` writes, or its extracted folder) -> projected ranges.

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

from pgle.errors import BadInput, ProfileError
from pgle.profiles.nsys import LAUNCHER_RE, DumpIndex, Range

TRACE = "nvtx_gpu_proj_trace/trace.parquet"
THREADS = "thread-metadata.parquet"
PUSHPOP = ("report_nvtx_pushpop_trace.parquet", "report_nvtx_pushpop_trace.csv.xz")
BACKEND_RE = re.compile(r"^TSL:XlaCompileBackend:#module=(.*?),program_id=(\d+)#$")


def is_archive(path) -> bool:
    p = pathlib.Path(path)
    if p.is_dir():
        return (p / TRACE).exists()
    return p.suffix == ".zip"


@contextlib.contextmanager
def opened_archive(path):
    """Yield the archive's folder: the folder itself, or a private extraction of the zip."""
    p = pathlib.Path(path)
    if p.is_dir():
        yield p
        return
    try:
        zf = zipfile.ZipFile(p)
    except FileNotFoundError:
        raise BadInput(f"{p} does not exist.") from None
    except zipfile.BadZipFile:
        raise ProfileError(f"{p} is not a zip file (an nsys-jax archive is one).") from None
    with zf, tempfile.TemporaryDirectory(prefix="pgle-nsys-") as tmp:
        wanted = [m for m in zf.infolist()
                  if m.filename in (TRACE, THREADS, *PUSHPOP) or
                  (m.filename.startswith("dump/") and "after_optimizations.hlo.pb" in m.filename)]
        for m in wanted:
            # zipfile.extract sanitizes names (no absolute paths or ..): safe for foreign archives.
            zf.extract(m, tmp)
        yield pathlib.Path(tmp)


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput("reading an nsys-jax archive needs pyarrow (its traces are Parquet).",
                       hint="pip install 'pgle[nsys]' (or pip install pyarrow).") from None
    return pq


def read_ranges(folder: pathlib.Path) -> list[Range]:
    trace = folder / TRACE
    if trace.is_dir():
        raise BadInput(f"{folder} is an nsys-jax-combine archive (one trace per process).",
                       hint="Convert each process's own nsys-jax archive, then `pgle merge` the results.")
    if not trace.exists():
        raise ProfileError(f"{folder} has no {TRACE}: not an nsys-jax archive, or one made with "
                           "nsys-jax's post-processing off.")
    cols = _pyarrow().read_table(trace).to_pydict()
    names = set(cols)
    out: list[Range] = []
    if "Projected Start" in names:  # nsys 2024.x recipe output
        starts, durs = cols["Projected Start"], cols["Projected Duration"]
        rids, parents = cols["RangeId"], cols["ParentId"]
        gpu_ops = cols.get("NumGPUOps")
        for i, name in enumerate(cols["Name"]):
            if rids[i] is None or (isinstance(rids[i], float) and math.isnan(rids[i])) or name is None:
                continue
            parent = parents[i]
            out.append(Range(rid=int(rids[i]), name=name, start=int(starts[i]), duration=int(durs[i]),
                             pid=int(cols["PID"][i]), tid=int(cols["TID"][i]),
                             parent=None if parent is None or (isinstance(parent, float) and math.isnan(parent))
                             else int(parent),
                             gpu_ops=None if gpu_ops is None else int(gpu_ops[i])))
    elif {"Text", "Start", "End", "Range ID", "Parent ID"} <= names:  # newer recipe output
        domains = cols.get("Domain")
        for i, text in enumerate(cols["Text"]):
            name = f"{domains[i]}:{text}" if domains is not None else text
            parent = cols["Parent ID"][i]
            out.append(Range(rid=int(cols["Range ID"][i]), name=name, start=int(cols["Start"][i]),
                             duration=int(cols["End"][i]) - int(cols["Start"][i]),
                             pid=int(cols["PID"][i]), tid=int(cols["TID"][i]),
                             parent=None if parent is None or (isinstance(parent, float) and math.isnan(parent))
                             else int(parent)))
    else:
        raise ProfileError(f"{trace} has columns pgle does not know ({', '.join(sorted(names))}).",
                           hint="Report the nsys and nsys-jax versions that made it.")
    return out


def read_devices(folder: pathlib.Path) -> dict[tuple[int, int], int]:
    path = folder / THREADS
    if not path.exists():
        return {}
    t = _pyarrow().read_table(path).to_pydict()
    devices = {}
    for name, pid, tid in zip(t["Name"], t["PID"], t["TID"]):
        m = LAUNCHER_RE.match(name or "")
        if m:
            devices[(int(pid), int(tid))] = int(m.group(1))
    return devices


def compiled_programs(folder: pathlib.Path) -> list[tuple[int, str]]:
    """(program id, module name) of every XlaCompileBackend range: modules compiled while profiling."""
    parquet, legacy = (folder / p for p in PUSHPOP)
    if parquet.exists():
        names = _pyarrow().read_table(parquet, columns=["Name"]).column("Name").to_pylist()
    elif legacy.exists():
        with lzma.open(legacy, "rt", newline="") as f:
            names = [row["Name"] for row in csv.DictReader(f)]
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

