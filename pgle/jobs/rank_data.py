"""What other ranks send rank 0 is foreign data: bounded, typed, and bytes, never paths.

A rank's report in a shared job folder (or through `--gather kv`) is written by a process
rank 0 does not control, in a folder other accounts may be able to write. So (issue 31):

- a rank contributes bytes, never paths: rank 0 reads a rank's profile at the one place it
  derives itself from the rank number, `<job>/profiles/rank-<r>.pb|.pbtxt` (or the folder
  `rank-<r>/`), whatever path the rank's report names;
- each file is opened component by component under the job folder without following links
  (`O_NOFOLLOW`), and must be a regular file owned by this account with one link (a hard link
  to another account's file has two): anything else is refused with one line;
- reads are bounded at receipt: a report at most MAX_REPORT_BYTES, a rank's profile (a file,
  or all of a folder's files) at most MAX_PROFILE_BYTES, JSON nested at most MAX_JSON_DEPTH;
- a report is checked against a typed schema (`check_report`) before any workflow's combine
  step looks at it: a malformed one makes its rank "unreadable", named in the job report, never
  a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pgle.errors import BadInput, PgleError
from pgle.shared_folders import CLOEXEC, DIRECTORY, NOFOLLOW, NONBLOCK

MAX_REPORT_BYTES = 16 << 20  # a rank's report, start or exit file: real ones are a few KB
MAX_PROFILE_BYTES = 1 << 30  # one rank's profile, all of a per-module folder's files together
MAX_PROFILE_FILES = 10_000  # files in one rank's per-module folder
MAX_JSON_DEPTH = 64  # nesting of a rank's JSON (a report nests 5 deep)


class RankDataError(PgleError):
    """A rank's file or bundle that rank 0 refuses; the message names the rank."""

    def __init__(self, rank: int, why: str):
        super().__init__(f"rank {rank}: {why}")
        self.rank = rank
        self.why = why


# -- JSON ----------------------------------------------------------------------------------------


def json_depth_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests at most `limit` deep (iteratively: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return True


def loads(data: bytes | str, what: str = "JSON") -> Any:
    """json.loads for foreign bytes: ValueError (one phrase) for what does not parse, nests
    deeper than MAX_JSON_DEPTH, or nests past json's own recursion limit."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"{what} nests too deep") from None
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text") from None
    except ValueError as e:
        raise ValueError(f"{what} is not JSON ({e})") from None
    if not json_depth_ok(value):
        raise ValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    return value


# -- the typed schema of a rank's report ----------------------------------------------------------

_NUMBER = (int, float)
_OPT_STR = (str, type(None))
_OPT_INT = (int, type(None))
_OPT_NUM = (int, float, type(None))
_OPT_DICT = (dict, type(None))
_OPT_LIST = (list, type(None))

# Top-level fields that rank 0 (the driver and every combine step) reads, and their types.
_REPORT_FIELDS: dict[str, tuple[type, ...]] = {
    "command": _OPT_STR,
    "status": (str,),
    "exit_code": (int,),
    "workload_exit_code": _OPT_INT,
    "exit_code_from": _OPT_STR,
    "profile": _OPT_DICT,
    "log_path": _OPT_STR,
    "trace_dir": _OPT_STR,
    "run_dir": _OPT_STR,
    "modules": _OPT_LIST,
    "reasons": _OPT_LIST,
    "warnings": _OPT_LIST,
    "summary": _OPT_LIST,
    "notices": _OPT_LIST,
    "window": _OPT_DICT,
    "rank": (dict, int, type(None)),  # the driver's {rank, host, ...}; a bare number elsewhere
    "stopped_for": _OPT_DICT,
    "pgle_error": _OPT_STR,
    "step_times": (dict, list, type(None)),
    "nsys": _OPT_DICT,
    "profiled": (bool, type(None)),
}
_STRING_LISTS = ("reasons", "warnings", "summary", "notices")
_PROFILE_FIELDS: dict[str, tuple[type, ...]] = {
    "path": _OPT_STR,
    "kind": _OPT_STR,
    "sha256": _OPT_STR,
    "instructions": _OPT_INT,
    "instruction_count": _OPT_INT,
    "latencies": _OPT_INT,
    "latency_count": _OPT_INT,
}
_WINDOW_FIELDS: dict[str, tuple[type, ...]] = {"first_step": _OPT_INT, "steps": _OPT_INT}
_STOPPED_FIELDS: dict[str, tuple[type, ...]] = {"rank": (int,), "exit_code": _OPT_INT}
_RANK_FIELDS: dict[str, tuple[type, ...]] = {"host": _OPT_STR, "rank": _OPT_INT}
# What the verdicts read of a module row (pgle.verdicts.rows, across_ranks).
_MODULE_FIELDS: dict[str, tuple[type, ...]] = {
    "module": _OPT_STR,
    "fingerprint": _OPT_STR,
    "status": _OPT_STR,
    "reason": _OPT_STR,
    "fix": _OPT_STR,
    "rank": _OPT_INT,
    "ordinal": _OPT_INT,
    "coverage": _OPT_NUM,
    "instructions_missing": _OPT_INT,
    "collectives_missing": (int, list, type(None)),
    "collectives_total": _OPT_INT,
    "collectives_converted": _OPT_LIST,
    "collectives_unresolved": (int, list, type(None)),
    "executions_seen": _OPT_INT,
    "profiled_executions": _OPT_INT,
    "profile_bytes": _OPT_INT,
    "notes": _OPT_LIST,
}


def _names(types: tuple[type, ...]) -> str:
    words = {str: "text", int: "a whole number", float: "a number", dict: "an object"}
    words.update({list: "a list", bool: "true or false", type(None): "null"})
    return " or ".join(dict.fromkeys(words.get(t, t.__name__) for t in types))


def _check_fields(
    where: str, data: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]]
) -> None:
    for key, types in fields.items():
        if key not in data:
            continue
        value = data[key]
        # bool is an int to Python, never to a report
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise ValueError(f"{where}{key} is {type(value).__name__}, not {_names(types)}")


def check_report(data: Any) -> dict[str, Any]:
    """`data` when it is a report rank 0 can use; ValueError (one phrase) otherwise."""
    if not isinstance(data, dict):
        raise ValueError(f"the report is {type(data).__name__}, not a JSON object")
    _check_fields("", data, _REPORT_FIELDS)
    for key in ("exit_code", "workload_exit_code"):
        code = data.get(key)
        if code is not None and not -255 <= code <= 255:
            raise ValueError(f"{key} {code} is not an exit code")
    for key in _STRING_LISTS:
        for item in data.get(key) or []:
            if not isinstance(item, str):
                raise ValueError(f"{key} holds {type(item).__name__}, not text")
    for key, fields in (
        ("profile", _PROFILE_FIELDS),
        ("window", _WINDOW_FIELDS),
        ("stopped_for", _STOPPED_FIELDS),
        ("rank", _RANK_FIELDS),
    ):
        if isinstance(data.get(key), dict):
            _check_fields(f"{key}.", data[key], fields)
    for i, row in enumerate(data.get("modules") or []):
        if not isinstance(row, dict):
            raise ValueError(f"modules[{i}] is {type(row).__name__}, not an object")
        _check_fields(f"modules[{i}].", row, _MODULE_FIELDS)
    return data


def parse_report(data: bytes) -> dict[str, Any]:
    """A rank's report from its bytes: bounded, parsed, typed; ValueError otherwise."""
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError(f"the report is larger than {MAX_REPORT_BYTES >> 20} MiB")
    return check_report(loads(data, "the report"))


# -- files under the job folder, opened without following links ------------------------------------


def _refuse(rel: str, why: str) -> OSError:
    return OSError(errno.EPERM, f"{rel} {why}")


def _check_opened(fd: int, rel: str, *, directory: bool = False) -> os.stat_result:
    """What was opened must be this account's own: a regular file with one link (or a folder)."""
    st = os.fstat(fd)
    if directory:
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(rel, "is not a folder")
    elif not stat.S_ISREG(st.st_mode):
        raise _refuse(rel, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refuse(rel, f"belongs to another account (uid {st.st_uid}), not this one")
    if not directory and st.st_nlink != 1:
        # A hard link to another file (another account's, where protected_hardlinks is off).
        raise _refuse(rel, f"has {st.st_nlink} hard links; pgle wrote it with one")
    return st


def _open_under(root: Path, rel: str, *, directory: bool = False) -> int:
    """An fd for `root/rel`, each component of `rel` opened without following a link; OSError
    (ELOOP for a link, EPERM for a refused file) otherwise."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise _refuse(rel, "is not a name inside the job folder")
    fd = os.open(root, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | NOFOLLOW | CLOEXEC
            flags |= NONBLOCK if last and not directory else DIRECTORY
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and not (last and not directory):
                    raise _refuse("/".join(parts[: i + 1]), "is a link or not a folder") from None
                if e.errno == errno.ELOOP:
                    raise _refuse(rel, "is a symbolic link") from None
                raise
            os.close(fd)
            fd = nxt
            if not last:
                _check_opened(fd, "/".join(parts[: i + 1]), directory=True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_under(root: Path, rel: str, limit: int) -> bytes:
    """The bytes of `root/rel`, this account's own regular file of at most `limit` bytes,
    opened without following links. OSError (one phrase) otherwise; FileNotFoundError when it
    is not there."""
    fd = _open_under(root, rel)
    try:
        st = _check_opened(fd, rel)
        if st.st_size > limit:
            raise _refuse(rel, f"is {st.st_size:,} bytes, over the {limit:,} pgle reads")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:  # it grew after the fstat
                raise _refuse(rel, f"is over the {limit:,} bytes pgle reads")
            chunks.append(chunk)
    finally:
        os.close(fd)


def list_under(root: Path, rel: str) -> list[tuple[str, bool]]:
    """(name, is_folder) of the entries of `root/rel`, a folder of this account's opened
    without following links; links are listed as files (reading one is refused)."""
    fd = _open_under(root, rel, directory=True)
    try:
        _check_opened(fd, rel, directory=True)
        out = []
        with os.scandir(fd) as it:
            for entry in it:
                out.append((entry.name, entry.is_dir(follow_symlinks=False)))
        return sorted(out)
    finally:
        os.close(fd)


def read_report(job_dir: Path, rel: str) -> dict[str, Any]:
    """A JSON object written by a rank (`rank-<r>.json|.start|.exit`, `failed/rank-<r>`):
    bounded, without following links, typed when it is a report. OSError or ValueError."""
    data = read_under(job_dir, rel, MAX_REPORT_BYTES)
    if rel.endswith(".json"):
        return parse_report(data)
    value = loads(data, rel)
    if not isinstance(value, dict):
        raise ValueError(f"{rel} is not a JSON object")
    return value


# -- a rank's profile ------------------------------------------------------------------------


def profile_rel(rank: int, suffix: str) -> str:
    """Where rank `rank` writes its profile for rank 0 to merge (pgle.jobs.layout): the only
    place rank 0 reads it from, whatever the rank's report says."""
    return f"profiles/rank-{rank}" if suffix == "" else f"profiles/rank-{rank}{suffix}"


def load_rank_profile(job_dir: Path, rank: int, suffix: str) -> Any:
    """Rank `rank`'s profile (a pgle.profiles.files.ProfileSource) from the bytes at the place
    rank 0 derives (`profile_rel`), within MAX_PROFILE_BYTES. RankDataError (one line) for
    what is missing, a link, another account's, too large, or no profile."""
    from pgle.profiles import files

    rel = profile_rel(rank, suffix)
    path = job_dir / rel
    budget = [MAX_PROFILE_BYTES]

    def read(name: str) -> bytes:
        data = read_under(job_dir, f"{rel}/{name}" if suffix == "" else rel, budget[0])
        budget[0] -= len(data)
        return data

    try:
        if suffix == "":
            listing = list_under(job_dir, rel)
            if len(listing) > MAX_PROFILE_FILES:
                raise _refuse(rel, f"holds {len(listing):,} entries, over {MAX_PROFILE_FILES:,}")
            return files.source_from_reader(path, listing, read)
        return files.source_from_reader(path, None, lambda _: read(""))
    except FileNotFoundError:
        raise RankDataError(rank, f"its profile {path} does not exist") from None
    except OSError as e:
        raise RankDataError(rank, f"its profile {path} is refused: {e.strerror or e}") from None
    except BadInput as e:
        raise RankDataError(rank, e.message.rstrip(".")) from None


def narrowest_mode(paths: Iterable[Path]) -> int:
    """The permission bits every one of `paths` grants (an output made from them gets no
    more: a merge of 0600 profiles is 0600)."""
    mode = 0o777
    for p in paths:
        try:
            mode &= stat.S_IMODE(os.lstat(p).st_mode)
        except OSError:
            continue
    return mode


def restrict(path: Path | str, mode: int) -> None:
    """Take away from `path` (a file or folder pgle just wrote, and its files) what `mode` does
    not grant."""
    p = Path(path)
    targets = [p]
    if p.is_dir() and not p.is_symlink():
        targets += [q for q in p.iterdir() if q.is_file() and not q.is_symlink()]
    for q in targets:
        try:
            now = stat.S_IMODE(os.lstat(q).st_mode)
            # a folder may be entered by whom it may be read by
            keep = mode | ((mode & 0o444) >> 2 | 0o100 if q.is_dir() else 0)
            if now & ~keep:
                os.chmod(q, now & keep)
        except OSError:
            continue
