"""Job-level bookkeeping of a multi-process run, through the shared filesystem.

Every rank's pgle writes small files into one job folder that all ranks see
(the default is under the working directory, which `srun` keeps on every
node); rank 0 reads them. No sockets, no home-made protocol: the filesystem
the job already shares is the only channel, so nothing here can deadlock
against the workload's own collectives.

    <job_dir>/rank-<r>.start    pgle of rank r launched its workload (host, pid)
    <job_dir>/rank-<r>.exit     its workload exited (exit code), written at once
    <job_dir>/rank-<r>.json     its report (whatever dict the workflow produced)
    <job_dir>/failed/rank-<r>   only for a workload that failed on its own

Every file is written atomically (temp file + rename in the same folder), so a
reader sees a whole file or none: never half a JSON document, on NFS included.

`failed/` holds only the failures, so that `peer_failure` (polled by every
rank about twice a second) lists a folder that is empty or absent in a healthy
job: 512 ranks polling cost one small directory read each, not a scan of 1,500
files. A rank whose workload pgle stopped *because* a peer failed records
`stopped_for` and stays out of `failed/`, so every rank names the rank that
failed first, not one of the ranks that were stopped after it.

On NFS a new file can take up to the client's attribute-cache time (acdirmax,
60 s by default) to appear on other nodes; Lustre and GPFS show it at once.
Gathering timeouts should allow for that.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pgle.atomic import write_text_atomic
from pgle.errors import BadInput
from pgle.jobs.ranks import RankInfo, expand_path, fields_in
from pgle.phrases import plural, ranks_phrase

log = logging.getLogger(__name__)

DEFAULT_ROOT = ".pgle/jobs"
FAILED = "failed"

_RANK_FILE = re.compile(r"^rank-(\d+)\.(start|exit|json)$")
_FAILED_FILE = re.compile(r"^rank-(\d+)$")


class PeerFailure(NamedTuple):
    """A rank whose workload exited non-zero on its own; unpacks as (rank, exit_code)."""

    rank: int
    exit_code: int


class Gathered(NamedTuple):
    """What rank 0 collected; unpacks as (reports_by_rank, missing_ranks)."""

    reports: dict[int, dict[str, Any]]
    missing: list[int]


def start_path(job_dir: os.PathLike[str] | str, rank: int) -> Path:
    return Path(job_dir) / f"rank-{rank}.start"


def exit_path(job_dir: os.PathLike[str] | str, rank: int) -> Path:
    return Path(job_dir) / f"rank-{rank}.exit"


def report_path(job_dir: os.PathLike[str] | str, rank: int) -> Path:
    return Path(job_dir) / f"rank-{rank}.json"


def failed_path(job_dir: os.PathLike[str] | str, rank: int) -> Path:
    return Path(job_dir) / FAILED / f"rank-{rank}"


def job_dir_for(
    info: RankInfo,
    *,
    explicit: os.PathLike[str] | str | None = None,
    root: os.PathLike[str] | str = DEFAULT_ROOT,
) -> Path:
    """The job folder every rank of this launch agrees on, as an absolute path.

    `explicit` (a `--job-dir` option) may use %j / %n but not %r / %l, which
    differ between ranks. Otherwise `<root>/<job id>.<step id>`: SLURM gives
    every `srun` its own step id, so two pgle steps of one sbatch script never
    share a folder.
    """
    if explicit is not None:
        template = os.fspath(explicit)
        per_rank = fields_in(template) & {"rank", "local_rank"}
        if per_rank:
            raise BadInput(
                f"job folder {template!r} uses the {' and '.join(sorted(per_rank))}, which differ "
                "between ranks; all ranks must share one job folder."
            )
        return Path(expand_path(template, info)).absolute()
    key = info.job_key
    if key is None:
        if info.is_multiprocess:
            raise BadInput(
                f"cannot name a job folder shared by the {info.world_size} ranks: "
                f"no job id is known (ranks detected from {info.source}).",
                hint="Set PGLE_JOB_ID to the same value on every rank, or pass a job folder.",
            )
        key = f"local-{os.getpid()}"
    return (Path(root) / key).absolute()


def _stamp() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}


def _write_json(path: Path, data: Mapping[str, Any]) -> Path:
    from pgle.redact import redact_json

    text = json.dumps(redact_json(data), sort_keys=True, default=str)
    return write_text_atomic(path, text + "\n")


def _read_json(path: Path) -> dict[str, Any]:
    """A rank's file in the job folder: foreign data (pgle.jobs.rank_data), read bounded and
    without following links, a report checked against its schema. OSError or ValueError."""
    from pgle.jobs import rank_data

    rel = path.name if path.parent.name != FAILED else f"{FAILED}/{path.name}"
    return rank_data.read_report(path.parent if rel == path.name else path.parent.parent, rel)


def claim_rank(job_dir: os.PathLike[str] | str, info: RankInfo) -> Path:
    """Claim this rank of the job: its start record, created only where none exists (before
    the rank's run folder is made, so that two processes given one rank meet here first).

    Refuses (RankTaken) a folder that already holds this rank's files: another process was
    given the same rank, or they are from an earlier launch, and mixing the two would gather
    stale reports.
    """
    job_dir = Path(job_dir)
    path = start_path(job_dir, info.rank)
    stale = [
        p.name
        for p in (
            path,
            exit_path(job_dir, info.rank),
            report_path(job_dir, info.rank),
            failed_path(job_dir, info.rank),
        )
        if os.path.lexists(p)
    ]
    taken = RankTaken(
        f"job folder {job_dir} already holds {', '.join(stale) or path.name}: another process "
        f"was given rank {info.rank} too, or the files are from an earlier launch.",
        hint="Give each process of the job its own rank (PGLE_RANK, SLURM_PROCID, ...); "
        "use a new job folder (the default one is per SLURM job step) or remove it.",
    )
    if stale:
        raise taken
    job_dir.mkdir(parents=True, exist_ok=True)
    if not _claim_json(path, _start_record(info)):
        raise taken
    return path


def mark_started(job_dir: os.PathLike[str] | str, info: RankInfo, *, claimed: bool = False) -> Path:
    """Record that this rank is about to launch its workload: its start record, claimed first
    (claim_rank) unless this process `claimed` it already."""
    if not claimed:
        return claim_rank(job_dir, info)
    return _write_json(start_path(job_dir, info.rank), _start_record(info))


def _start_record(info: RankInfo) -> dict[str, Any]:
    names = ("rank", "local_rank", "node_id", "world_size")
    return {name: getattr(info, name) for name in names} | {"job": info.job_key, **_stamp()}


class RankTaken(BadInput):
    """Another process claimed this rank's start record first: this one writes none of the
    rank's files (they are the other process's)."""


def _claim_json(path: Path, data: Mapping[str, Any]) -> bool:
    """Write `path` only where no file of that name exists, atomically: complete under a
    private name first, then linked into place (a link never replaces). False where another
    process's file is there: two ranks' claims race on a shared folder, and only one wins."""
    from pgle.redact import redact_json

    text = json.dumps(redact_json(data), sort_keys=True, default=str) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    write_text_atomic(tmp, text)
    try:
        os.link(tmp, path, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
            raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    # A file system without hard links: an exclusive create, written whole in one call.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except FileExistsError:
        return False
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    return True


def mark_exit(
    job_dir: os.PathLike[str] | str,
    rank: int,
    exit_code: int,
    *,
    stopped_for: int | None = None,
) -> Path:
    """Record this rank's workload exit code; call it as soon as the workload exits.

    `stopped_for`: the peer rank whose failure made pgle stop this workload.
    A non-zero exit of its own also lands in `failed/`, where peers look.
    """
    data = {"rank": rank, "exit_code": int(exit_code), "stopped_for": stopped_for, **_stamp()}
    if exit_code != 0 and stopped_for is None:
        # failed/ first: it is what the other ranks are waiting on.
        _write_json(failed_path(job_dir, rank), data)
    return _write_json(exit_path(job_dir, rank), data)


def write_report(job_dir: os.PathLike[str] | str, rank: int, report: Any) -> Path:
    """Write this rank's report: a JSON-able dict, or an object with to_dict()
    (pgle.report.Report)."""
    data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    return _write_json(report_path(job_dir, rank), data)


def peer_failure(job_dir: os.PathLike[str] | str, my_rank: int) -> PeerFailure | None:
    """The first peer whose workload failed on its own, or None.

    Cheap enough to call twice a second on every rank: one listing of
    `failed/`, which is absent or empty unless something failed. With several
    failures, the earliest (by the failing rank's clock, then rank) wins: it is
    the most likely cause; the others often crashed on its collectives.
    """
    try:
        entries = list(os.scandir(Path(job_dir) / FAILED))
    except (FileNotFoundError, NotADirectoryError):
        return None
    found: list[tuple[float, int, int]] = []
    for entry in entries:
        match = _FAILED_FILE.match(entry.name)  # skips the writers' .tmp files
        if not match or int(match.group(1)) == my_rank:
            continue
        rank = int(match.group(1))
        try:
            data = _read_json(Path(entry.path))
            code = int(data["exit_code"])
            if code == 0 or not -255 <= code <= 255:
                raise ValueError(f"exit code {code}")
            found.append((float(data.get("time", 0.0)), rank, code))
        except (OSError, ValueError, KeyError, TypeError):
            # Written atomically, so only a foreign file lands here; its name
            # alone still says that rank failed.
            found.append((float("inf"), rank, 1))
    if not found:
        return None
    _, rank, code = min(found)
    return PeerFailure(rank, code)


def watchdog(
    job_dir: os.PathLike[str] | str, my_rank: int, *, min_interval_s: float = 0.0
) -> Callable[[], PeerFailure | None]:
    """A no-argument callable for the launcher's poll loop, wrapping peer_failure.

    Once a failure is seen it keeps returning it without touching the disk;
    `min_interval_s` bounds how often the filesystem is asked (big jobs on a
    busy metadata server), returning None in between.
    """
    last = float("-inf")
    failure: PeerFailure | None = None

    def check() -> PeerFailure | None:
        nonlocal last, failure
        if failure is not None:
            return failure
        now = time.monotonic()
        if now - last < min_interval_s:
            return None
        last = now
        failure = peer_failure(job_dir, my_rank)
        return failure

    return check


def _listing(job_dir: Path) -> dict[str, set[int]]:
    """{"start"|"exit"|"json": ranks} from one directory listing."""
    kinds: dict[str, set[int]] = {"start": set(), "exit": set(), "json": set()}
    try:
        with os.scandir(job_dir) as it:
            for entry in it:
                match = _RANK_FILE.match(entry.name)
                if match:
                    kinds[match.group(2)].add(int(match.group(1)))
    except FileNotFoundError:
        pass
    return kinds


def gather(
    job_dir: os.PathLike[str] | str,
    world_size: int,
    timeout_s: float,
    *,
    progress_every_s: float = 10.0,
) -> Gathered:
    """Collect `rank-<r>.json` of ranks 0..world_size-1, waiting up to `timeout_s`.

    Polls with a growing interval (0.05 s, x1.5, capped at 0.5 s)
    and returns as soon as every rank has reported (or left a report it cannot read: written
    atomically, it will not change), or at the timeout with the ranks that never did (sorted).
    A report that is not a JSON object counts as missing; `describe_missing` says why each
    rank is missing. While ranks are still missing, a line every `progress_every_s` goes to
    the log (INFO).
    """
    if world_size < 1:
        raise BadInput(f"world size must be at least 1, not {world_size}.")
    if timeout_s < 0:
        raise BadInput(f"gathering timeout must not be negative, not {timeout_s} s.")
    job_dir = Path(job_dir)
    deadline = time.monotonic() + timeout_s
    reports: dict[int, dict[str, Any]] = {}
    unreadable: set[int] = set()
    interval = 0.05
    started = time.monotonic()
    next_line = started + progress_every_s
    while True:
        present = _listing(job_dir)["json"]
        for rank in sorted(present - reports.keys() - unreadable):
            if rank >= world_size:
                continue
            try:
                reports[rank] = _read_json(report_path(job_dir, rank))
            except (OSError, ValueError):
                unreadable.add(rank)  # describe_missing says why
        if len(reports) + len(unreadable) == world_size:
            break  # an unreadable report is not read again: waiting on for it gains nothing
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            break
        if now >= next_line:
            next_line = now + progress_every_s
            waiting = [r for r in range(world_size) if r not in reports]
            log.info(
                f"waiting for {len(waiting)} of {plural(world_size, 'rank report')} "
                f"({ranks_phrase(waiting[:8])}{', ...' if len(waiting) > 8 else ''}); "
                f"{now - started:.0f} s of the {timeout_s:.0f} s gather timeout"
            )
        time.sleep(min(interval, left))
        interval = min(interval * 1.5, 0.5)
    missing = [r for r in range(world_size) if r not in reports]
    return Gathered(dict(sorted(reports.items())), missing)


def describe_missing(job_dir: os.PathLike[str] | str, ranks: list[int]) -> dict[int, str]:
    """For each rank that never reported, what its files say, in a phrase.

    "never started", "started on host h (pid p); its workload has not exited",
    "workload exited with code c on host h; no report", or "report unreadable: ...".
    """
    job_dir = Path(job_dir)
    listing = _listing(job_dir)
    out: dict[int, str] = {}
    for rank in ranks:
        if rank in listing["json"]:
            try:
                _read_json(report_path(job_dir, rank))
                out[rank] = "report appeared after the timeout"
            except (OSError, ValueError) as err:
                why = err.strerror if isinstance(err, OSError) and err.strerror else err
                out[rank] = f"report unreadable: {why}"
        elif rank in listing["exit"]:
            try:
                data = _read_json(exit_path(job_dir, rank))
                why = (
                    f" (stopped because rank {data['stopped_for']} failed)"
                    if data.get("stopped_for") is not None
                    else ""
                )
                out[rank] = (
                    f"workload exited with code {data.get('exit_code')} on {data.get('host')}"
                    f"{why}; no report"
                )
            except (OSError, ValueError):
                out[rank] = "workload exited; no report"
        elif rank in listing["start"]:
            try:
                data = _read_json(start_path(job_dir, rank))
                out[rank] = (
                    f"started on {data.get('host')} (pid {data.get('pid')}); "
                    "its workload has not exited"
                )
            except (OSError, ValueError):
                out[rank] = "started; its workload has not exited"
        else:
            out[rank] = "never started"
    return out
