"""`pgle convert REPORT.nsys-rep|EXPORT.sqlite|ARCHIVE.zip OUT`: Nsight data -> profiles.

Dispatch by input: an nsys-jax archive (`.zip` or its extracted folder) is read directly; a SQLite
export (`nsys export --type sqlite`) is projected by pgle (`nsys_sqlite`), with the XLA dump
folder given by `dump`; a `.nsys-rep` is first exported with the `nsys` on PATH.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any

from pgle.errors import BadInput, PgleError, ProfileError
from pgle.profiles.nsys import DumpIndex, NsysConversion, per_module_costs

REPORT_SUFFIX = ".nsys-rep"
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def nsight_kind(path: Any) -> str | None:
    """What Nsight input `path` is: "archive" (an nsys-jax .zip or its extracted folder),
    "report" (.nsys-rep), "sqlite" (its SQLite export); None: none of them."""
    from pgle.profiles.nsys_archive import is_archive

    name = os.fspath(path)
    if name.endswith(REPORT_SUFFIX):
        return "report"
    if name.endswith(SQLITE_SUFFIXES):
        return "sqlite"
    return "archive" if is_archive(name) else None


def _export_sqlite(report: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    nsys = shutil.which("nsys")
    if nsys is None:
        raise BadInput(
            f"{report} is an Nsight Systems report and no `nsys` is on PATH to export it.",
            hint=f"Run `nsys export --type sqlite --output {report.with_suffix('.sqlite')} "
            f"{report}` where nsys is installed, then convert the .sqlite file.",
        )
    out = tmp / (report.stem + ".sqlite")
    proc = subprocess.run(
        [
            nsys,
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
            str(out),
            str(report),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not out.exists():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PgleError(
            f"`nsys export --type sqlite {report}` failed (exit {proc.returncode}): {last[0]}"
        )
    return out


def convert_nsys(
    src: Any,
    *,
    kind: str | None = None,
    stat: str | None = None,
    skip: int | None = None,
    dump: Any = None,
) -> NsysConversion:
    """Any Nsight input -> per-module profiles keyed by fingerprint. `kind`: what
    `nsight_kind(src)` said, when the caller already asked."""
    from pgle.profiles import nsys_archive

    path = pathlib.Path(src)
    if not path.exists():
        raise BadInput(f"{path} does not exist.")
    if not path.is_dir():
        from pgle.profiles.bounded import check_regular_file

        check_regular_file(path, "Nsight input")  # a FIFO or a device would hang the read
    kind = kind or nsight_kind(path)
    if kind == "archive":
        with nsys_archive.opened_archive(path) as folder:
            ranges = nsys_archive.read_ranges(folder)
            devices = nsys_archive.read_devices(folder)
            index = dump_folder_index(dump) if dump is not None else nsys_archive.dump_index(folder)
            compiled = {
                fp
                for pid, name in nsys_archive.compiled_programs(folder)
                if (fp := index.fingerprint(pid, name))
            }
            return per_module_costs(
                ranges,
                devices=devices,
                module_lookup=index.lookup,
                compiled=compiled,
                stat=stat,
                skip=skip,
            )
    with tempfile.TemporaryDirectory(prefix="pgle-nsys-") as tmp:
        if kind == "report":
            path = _export_sqlite(path, pathlib.Path(tmp))
        elif kind != "sqlite":
            raise BadInput(
                f"{path} is not an Nsight input pgle reads.",
                hint="Give a .nsys-rep report, its SQLite export (.sqlite) or an nsys-jax .zip "
                "archive.",
            )
        if dump is None:
            raise BadInput(
                "a SQLite export holds no HLO, so pgle cannot tell modules' fingerprints.",
                hint="Pass --dump DIR: the folder XLA dumped to (XLA_FLAGS='--xla_dump_to=DIR "
                "--xla_dump_hlo_as_proto') in the profiled run.",
            )
        from pgle.profiles import nsys_sqlite

        index = dump_folder_index(dump)  # the cheap check first
        export = nsys_sqlite.read_export(path)
        compiled = {fp for pid, name in export.compiled if (fp := index.fingerprint(pid, name))}
        return per_module_costs(
            export.ranges,
            devices=export.devices,
            module_lookup=index.lookup,
            compiled=compiled,
            stat=stat,
            skip=skip,
        )


def dump_folder_index(dump: Any) -> DumpIndex:
    d = pathlib.Path(dump)
    if not d.is_dir():
        raise BadInput(f"XLA dump folder {d} does not exist.")
    index = DumpIndex(sorted(d.iterdir()))
    if not len(index):
        raise ProfileError(
            f"{d} holds no after-optimizations HLO protos (module_*.hlo.pb).",
            hint="Dump with XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_proto'.",
        )
    return index
