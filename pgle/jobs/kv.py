"""`--gather kv`: a job's files travel through jax.distributed's key-value store instead of a
shared folder.

Every rank keeps its job folder (pgle.jobs.folder) in storage of its own; the files other
ranks need are mirrored into theirs, so the rest of the driver reads the same files as with
a shared folder:

- each rank -> rank 0: `rank-<r>.start|.exit|.json`, `failed/rank-<r>` and its profile
  (`profiles/rank-<r>.pb|.pbtxt`, or the directory `profiles/rank-<r>/`);
- rank 0 -> every rank: `job.json` and the job's profile (collect's merge, which tune's later
  phases run with).

They travel while the workload's processes are still up: the harness holds each process at
its very end, before jax's teardown (pgle.launch.handoff), and publishes or fetches what this
rank's pgle asks. A bundle is one key, `pgle/<scope>/rank-<r>` or `pgle/<scope>/job`: a JSON
header (the sender's job folder, each file's name, size and mode) and the files' raw bytes
(`bundle`). What arrives is foreign data, as a shared job folder is (pgle.jobs.rank_data):
sizes are checked against their bounds before a byte is read, files are streamed to disk,
names are checked against the patterns above, written only inside this rank's job folder (or
its own -o) with no wider permissions than the sender's, and paths inside reports are mapped
from the sender's job folder to this rank's (rank 0 never reads a path a report names).
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pgle.atomic import write_bytes_atomic, write_stream_atomic
from pgle.errors import PgleError
from pgle.evidence import schema
from pgle.jobs import rank_data
from pgle.launch import handoff

# A profile directory of a huge model is tens of MB; one rank's profile may be at most
# rank_data.MAX_PROFILE_BYTES, and a bundle a little more (its reports).
MAX_BUNDLE_BYTES = rank_data.MAX_PROFILE_BYTES + (64 << 20)
MAX_HEADER_BYTES = 4 << 20
MAGIC = b"PGLEKV2\n"
_RANK_FILE = re.compile(
    r"^(?:rank-(\d+)\.(?:start|exit|json)|failed/rank-(\d+)|"
    r"profiles/rank-(\d+)(?:\.pbtxt|\.pb)(?:\.manifest\.json)?|"
    r"profiles/rank-(\d+)/(?:[0-9a-f]{32}\.pbtxt|[0-9a-f]{32}\.pb|"
    r"manifest\.json))$"
)


def _rank_of(relpath: str) -> int | None:
    m = _RANK_FILE.match(relpath)
    if not m:
        return None
    return int(next(g for g in m.groups() if g is not None))


def rank_files_with_modes(job_dir: Path, rank: int) -> dict[str, tuple[bytes, int]]:
    """Every file a rank published, each with its permission bits (a copy gets no more)."""
    out: dict[str, tuple[bytes, int]] = {}
    candidates = [
        f"rank-{rank}.start",
        f"rank-{rank}.exit",
        f"rank-{rank}.json",
        f"failed/rank-{rank}",
    ]
    profiles = job_dir / "profiles"
    if profiles.is_dir():
        for p in sorted(profiles.iterdir()):
            if p.name.startswith(f"rank-{rank}.") or p.name == f"rank-{rank}":
                if p.is_dir():
                    candidates += [
                        f"profiles/{p.name}/{q.name}" for q in sorted(p.iterdir()) if q.is_file()
                    ]
                else:
                    candidates.append(f"profiles/{p.name}")
    for rel in candidates:
        if _rank_of(rel) != rank:
            continue
        try:
            with open(job_dir / rel, "rb") as f:
                out[rel] = (f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
    return out


def bundle(
    job_dir: Path,
    files: dict[str, bytes],
    extra: dict[str, Any] | None = None,
    modes: dict[str, int] | None = None,
) -> bytes:
    """One key's value: MAGIC, the length of a JSON header (8 bytes, big-endian), the header
    (the sender's job folder, [name, size, mode] of each file, `extra`), then the files' bytes
    in that order. Raw bytes, no base64 in JSON: the receiver streams each file to disk within
    its bound instead of holding the whole bundle several times over (issue 31: a 300 MB bundle
    took rank 0 to 3.5 GB)."""
    modes = modes or {}
    header = {
        **(extra or {}),
        "job_dir": str(job_dir),
        "files": [[k, len(v), modes.get(k, 0o644)] for k, v in files.items()],
    }
    head = json.dumps(header).encode()
    size = len(MAGIC) + 8 + len(head) + sum(len(v) for v in files.values())
    if size > MAX_BUNDLE_BYTES or len(head) > MAX_HEADER_BYTES:
        raise PgleError(
            f"--gather kv: this rank's files are {size >> 20} MiB, over the "
            f"{MAX_BUNDLE_BYTES >> 20} MiB a key may carry; use a shared --job-dir."
        )
    return b"".join([MAGIC, len(head).to_bytes(8, "big"), head, *files.values()])


class Bundle:
    """A received bundle, read from its file (or bytes) a member at a time, every size checked
    against its bound before it is read. ValueError (one phrase) for anything malformed."""

    def __init__(self, source: bytes | os.PathLike[str] | str):
        if isinstance(source, (bytes, bytearray)):
            self.f: BinaryIO = io.BytesIO(bytes(source))
            total = len(source)
        else:
            self.f = open(source, "rb")  # noqa: SIM115 (closed by close())
            total = os.fstat(self.f.fileno()).st_size
        try:
            self._read_header(total)
        except BaseException:
            self.close()
            raise

    def _read_header(self, total: int) -> None:
        if total > MAX_BUNDLE_BYTES:
            raise ValueError(f"it is {total:,} bytes, over the {MAX_BUNDLE_BYTES:,} pgle takes")
        if self.f.read(len(MAGIC)) != MAGIC:
            raise ValueError("not a pgle bundle")
        n = int.from_bytes(self.f.read(8), "big")
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"its header is {n:,} bytes, over {MAX_HEADER_BYTES:,}")
        header = rank_data.loads(self.f.read(n), "its header")
        if not isinstance(header, dict) or not isinstance(header.get("files"), list):
            raise ValueError("its header is not a pgle bundle's")
        members: list[tuple[str, int, int]] = []
        for item in header["files"]:
            if (
                not isinstance(item, list)
                or len(item) != 3
                or not isinstance(item[0], str)
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in item[1:])
                or item[1] < 0
            ):
                raise ValueError("its header lists a file malformed")
            members.append((item[0], item[1], item[2] & 0o777))
        if len(MAGIC) + 8 + n + sum(size for _, size, _ in members) != total:
            raise ValueError("its files do not add up to its size (cut short, or padded)")
        job_dir = header.get("job_dir")
        self.job_dir = job_dir if isinstance(job_dir, str) else ""
        self.extra = header
        self.members = members

    def items(self) -> Iterator[tuple[str, int, int]]:
        """(name, size, mode) of each member, in order; read (or skip) each with `read` or
        `copy_to` before the next."""
        for name, size, mode in self.members:
            self._left = size
            yield name, size, mode
            if self._left:
                self.f.seek(self._left, io.SEEK_CUR)
            self._left = 0

    def read(self, limit: int) -> bytes:
        """The current member's bytes, refused above `limit`."""
        if self._left > limit:
            raise ValueError(f"a file of {self._left:,} bytes, over the {limit:,} pgle takes")
        data = self.f.read(self._left)
        self._left = 0
        return data

    def copy_to(self, out: BinaryIO, limit: int) -> None:
        """The current member streamed into `out`, refused above `limit`."""
        if self._left > limit:
            raise ValueError(f"a file of {self._left:,} bytes, over the {limit:,} pgle takes")
        while self._left:
            chunk = self.f.read(min(self._left, 1 << 20))
            if not chunk:
                raise ValueError("cut short")
            out.write(chunk)
            self._left -= len(chunk)

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _mapped(value: Any, paths: dict[str, str]) -> Any:
    """A report's JSON with the sender's paths of the files that came along replaced by this
    rank's (every other path stays the sender's: it names the sender's storage)."""
    if isinstance(value, str):
        return paths.get(value, value)
    if isinstance(value, list):
        return [_mapped(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: _mapped(v, paths) for k, v in value.items()}
    return value


def _limit(rel: str) -> int:
    return (
        rank_data.MAX_PROFILE_BYTES if rel.startswith("profiles/") else rank_data.MAX_REPORT_BYTES
    )


def write_rank_files(job_dir: Path, rank: int, raw: bytes | os.PathLike[str] | str) -> list[str]:
    """Rank 0 keeps what rank `rank` sent (bytes, or the file they arrived in); returns the
    files written. Foreign data: a name that is not one of that rank's files is skipped, each
    file is bounded (rank_data) and streamed to disk with at most the mode it had, a report is
    parsed within its bounds. ValueError for a malformed bundle."""
    with Bundle(raw) as b:
        sender_dir = b.job_dir
        kept = [
            rel for rel, _, _ in b.members if _rank_of(rel) == rank and ".." not in rel.split("/")
        ]
        paths = {os.path.join(sender_dir, rel): str(job_dir / rel) for rel in kept}
        for rel in [r for r in kept if r.startswith(f"profiles/rank-{rank}/")]:
            folder = os.path.dirname(rel)
            paths[os.path.join(sender_dir, folder)] = str(job_dir / folder)
        written = []
        for rel, _, mode in b.items():
            if rel not in kept or rel in written:
                continue
            target = job_dir / rel
            if rel.startswith("profiles/"):
                write_stream_atomic(
                    target, functools.partial(b.copy_to, limit=_limit(rel)), mode=mode
                )
            else:
                data = b.read(_limit(rel))
                write_bytes_atomic(target, _remap_json(data, paths), mode=mode)
            written.append(rel)
        return written


def _remap_json(data: bytes, paths: dict[str, str]) -> bytes:
    try:
        value = rank_data.loads(data)
    except ValueError:
        return data  # kept as sent: the gather names it unreadable, and why
    return (json.dumps(_mapped(value, paths), sort_keys=True, default=str) + "\n").encode()


def job_files(
    job_dir: Path, profile: str | None
) -> tuple[dict[str, bytes], dict[str, Any], dict[str, int]]:
    """What rank 0 sends every rank: job.json and the profile rank 0 itself wrote (`profile`:
    a file and its manifest, or a directory's files; never a path a rank's report names),
    named relative to the job folder or, for a profile outside it, as `profile/<name>`; and
    each file's permission bits."""
    files: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    with open(job_dir / "job.json", "rb") as f:
        files["job.json"] = f.read()
    extra: dict[str, Any] = {"profile": profile}
    if profile and os.path.exists(profile):
        p = Path(profile)
        members = (
            [q for q in sorted(p.iterdir()) if q.is_file()] if p.is_dir() else [p, _manifest_of(p)]
        )
        for q in members:
            if not q.is_file():
                continue
            rel = f"profile/{os.path.relpath(q, p if p.is_dir() else p.parent)}"
            with open(q, "rb") as f:
                files[rel] = f.read()
                modes[rel] = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        extra["profile_kind"] = "directory" if p.is_dir() else "file"
    return files, extra, modes


def _manifest_of(path: Path) -> Path:
    from pgle.profiles import manifest

    return Path(manifest.manifest_path(str(path)))


def write_job_files(
    job_dir: Path, raw: bytes | os.PathLike[str] | str, own_profile: str | None
) -> dict[str, Any] | None:
    """A rank keeps what rank 0 sent: the job's profile at `own_profile` (this rank's path for
    it: its own -o) or at the same place in its own job folder, and job.json with the paths of
    what came along mapped to this rank's. Returns the job report. ValueError for a malformed
    bundle."""
    with Bundle(raw) as b:
        sender_dir, extra = b.job_dir, b.extra
        sent_profile = extra.get("profile")
        sent_profile = sent_profile if isinstance(sent_profile, str) else ""
        paths: dict[str, str] = {os.path.join(sender_dir, "job.json"): str(job_dir / "job.json")}
        target = None
        if sent_profile:
            if own_profile is not None:
                target = os.path.abspath(own_profile)
            elif os.path.abspath(sent_profile).startswith(sender_dir.rstrip("/") + "/"):
                target = str(job_dir / os.path.relpath(sent_profile, sender_dir))
        base = Path(target) if target else None
        sent = Path(sent_profile)
        directory = extra.get("profile_kind") == "directory"
        job_json = b"{}"
        for rel, _, mode in b.items():
            if rel == "job.json":
                job_json = b.read(rank_data.MAX_REPORT_BYTES)
                continue
            name = rel[len("profile/") :] if rel.startswith("profile/") else ""
            if base is None or not name or "/" in name or name in (".", ".."):
                continue
            if directory:
                dest = base / name
                paths[str(sent / name)] = str(dest)
            elif name.startswith(sent.name):  # the profile, or its `.manifest.json`
                dest = base.with_name(base.name + name[len(sent.name) :])
                paths[str(sent.with_name(name))] = str(dest)
            else:
                continue
            paths[str(sent)] = str(base)
            fill = functools.partial(b.copy_to, limit=rank_data.MAX_PROFILE_BYTES)
            write_stream_atomic(dest, fill, mode=mode)
    report = _mapped(rank_data.loads(job_json or b"{}", "rank 0's job report"), paths)
    write_bytes_atomic(
        job_dir / "job.json", (json.dumps(report, indent=2, default=str) + "\n").encode()
    )
    return report if isinstance(report, dict) else None


class HeldExchange:
    """This rank's end of the handoff (pgle.launch.handoff): rounds of publish and fetch, done
    by the held workload process."""

    def __init__(self, execution: Any):
        self.execution = execution
        self.folder = Path(execution.run.path) / schema.HANDOFF_DIR
        self.n = 0
        self.done = False

    def round(
        self, publish: dict[str, bytes], fetch: list[str], *, final: bool, timeout_s: float
    ) -> tuple[dict[str, Path], list[str]]:
        """Publish `publish`, fetch `fetch`: the fetched values as the files they arrived in
        (read them with Bundle: bounded, streamed), and the errors."""
        if self.done:
            return {}, ["the workload was already released"]
        out = self.folder / "pgle"
        out.mkdir(exist_ok=True)
        request: handoff.Request = {
            "publish": {},
            "fetch": [],
            "timeout_s": timeout_s,
            "final": final,
        }
        for i, (key, data) in enumerate(publish.items()):
            path = out / f"{self.n}-{i}.out"
            write_bytes_atomic(path, data)
            request["publish"][key] = str(path)
        for i, key in enumerate(fetch):
            request["fetch"].append({"key": key, "to": str(out / f"{self.n}-{i}.in")})
        write_bytes_atomic(self.folder / f"request-{self.n}.json", json.dumps(request).encode())
        answer = self._answer(self.folder / f"answer-{self.n}.json", timeout_s + 30.0)
        self.n += 1
        if final:
            self.done = True
        if answer is None:
            return {}, [
                (
                    "the workload's process ended before answering (it crashed, or "
                    "jax.distributed stopped it)"
                )
            ]
        fetched: dict[str, Path] = {}
        errors = answer["errors"]
        # Only where this round asked the workload to put it.
        wanted = {item["key"]: item["to"] for item in request["fetch"]}
        for key, arrived in answer["fetched"].items():
            if key in wanted and arrived == wanted[key] and os.path.isfile(arrived):
                fetched[key] = Path(arrived)
            else:
                errors.append(f"fetch {key}: nothing arrived")
        return fetched, errors

    def _answer(self, path: Path, wait_s: float) -> handoff.Answer | None:
        deadline = time.monotonic() + wait_s
        pending = self.execution.result.pending
        while time.monotonic() < deadline:
            try:
                return handoff.read_answer(path.read_bytes())
            except (FileNotFoundError, ValueError):
                pass
            if pending is not None and pending.child.poll() is not None:
                try:
                    return handoff.read_answer(path.read_bytes())
                except (FileNotFoundError, ValueError):
                    return None
            time.sleep(0.02)
        return None

    def release(self) -> None:
        """Let the workload end (a final round with nothing to do), if not done yet."""
        if not self.done:
            self.round({}, [], final=True, timeout_s=1.0)
