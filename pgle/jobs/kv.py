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
rank's pgle asks. A bundle is one key, `pgle/<scope>/rank-<r>` or `pgle/<scope>/job`: JSON
with the sender's job folder and its files (base64). What arrives is foreign data, as a shared
job folder is: names are checked against the patterns above, written only inside this rank's
job folder (or its own -o), and paths inside reports are mapped from the sender's job folder
to this rank's.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pgle.atomic import write_bytes_atomic
from pgle.errors import PgleError
from pgle.evidence import schema

MAX_BUNDLE_BYTES = 1 << 30  # a profile directory of a huge model is tens of MB
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


def rank_files(job_dir: Path, rank: int) -> dict[str, bytes]:
    """What rank `rank` sends rank 0: its files in its job folder."""
    out: dict[str, bytes] = {}
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
                out[rel] = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
    return out


def bundle(job_dir: Path, files: dict[str, bytes], extra: dict[str, Any] | None = None) -> bytes:
    data = {
        "job_dir": str(job_dir),
        "files": {k: base64.b64encode(v).decode("ascii") for k, v in files.items()},
        **(extra or {}),
    }
    out = json.dumps(data).encode()
    if len(out) > MAX_BUNDLE_BYTES:
        raise PgleError(
            f"--gather kv: this rank's files are {len(out) >> 20} MiB, over the "
            f"{MAX_BUNDLE_BYTES >> 20} MiB a key may carry; use a shared --job-dir."
        )
    return out


def unbundle(raw: bytes) -> tuple[str, dict[str, bytes], dict[str, Any]]:
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ValueError("not a pgle bundle")
    files = {str(k): base64.b64decode(v) for k, v in data["files"].items()}
    return str(data.get("job_dir") or ""), files, data


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


def write_rank_files(job_dir: Path, rank: int, raw: bytes) -> list[str]:
    """Rank 0 keeps what rank `rank` sent; returns the files written. Foreign data: a name
    that is not one of that rank's files is skipped."""
    sender_dir, files, _ = unbundle(raw)
    kept = {
        rel: data
        for rel, data in files.items()
        if _rank_of(rel) == rank and ".." not in rel.split("/")
    }
    paths = {os.path.join(sender_dir, rel): str(job_dir / rel) for rel in kept}
    for rel in [r for r in kept if r.startswith(f"profiles/rank-{rank}/")]:
        folder = os.path.dirname(rel)
        paths[os.path.join(sender_dir, folder)] = str(job_dir / folder)
    for rel, data in kept.items():
        if rel.endswith(".json") or rel.startswith(("failed/", f"rank-{rank}.")):
            data = _remap_json(data, paths)
        target = job_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, data)
    return list(kept)


def _remap_json(data: bytes, paths: dict[str, str]) -> bytes:
    try:
        value = json.loads(data)
    except ValueError:
        return data
    return (json.dumps(_mapped(value, paths), sort_keys=True, default=str) + "\n").encode()


def job_files(job_dir: Path, job_report: dict) -> tuple[dict[str, bytes], dict[str, Any]]:
    """What rank 0 sends every rank: job.json and the job's profile (a file and its manifest,
    or a directory's files), named relative to the job folder or, for a profile outside it,
    as `profile/<name>`."""
    files: dict[str, bytes] = {}
    with open(job_dir / "job.json", "rb") as f:
        files["job.json"] = f.read()
    profile = (job_report.get("profile") or {}).get("path")
    extra: dict[str, Any] = {"profile": profile}
    if profile and os.path.exists(profile):
        p = Path(profile)
        members = (
            [q for q in sorted(p.iterdir()) if q.is_file()] if p.is_dir() else [p, _manifest_of(p)]
        )
        for q in members:
            if not q.is_file():
                continue
            rel = os.path.relpath(q, p if p.is_dir() else p.parent)
            files[f"profile/{rel}"] = q.read_bytes()
        extra["profile_kind"] = "directory" if p.is_dir() else "file"
    return files, extra


def _manifest_of(path: Path) -> Path:
    from pgle.profiles import manifest

    return Path(manifest.manifest_path(str(path)))


def write_job_files(job_dir: Path, raw: bytes, own_profile: str | None) -> dict | None:
    """A rank keeps what rank 0 sent: the job's profile at `own_profile` (this rank's path for
    it: its own -o) or at the same place in its own job folder, and job.json with the paths of
    what came along mapped to this rank's. Returns the job report."""
    sender_dir, files, extra = unbundle(raw)
    sent_profile = str(extra.get("profile") or "")
    paths: dict[str, str] = {os.path.join(sender_dir, "job.json"): str(job_dir / "job.json")}
    target = None
    if sent_profile:
        if own_profile is not None:
            target = os.path.abspath(own_profile)
        elif os.path.abspath(sent_profile).startswith(sender_dir.rstrip("/") + "/"):
            target = str(job_dir / os.path.relpath(sent_profile, sender_dir))
    if target and any(k.startswith("profile/") for k in files):
        base = Path(target)
        sent = Path(sent_profile)
        directory = extra.get("profile_kind") == "directory"
        paths[str(sent)] = str(base)
        for rel, data in files.items():
            name = rel[len("profile/") :] if rel.startswith("profile/") else ""
            if not name or "/" in name or name in (".", ".."):
                continue
            if directory:
                dest = base / name
                paths[str(sent / name)] = str(dest)
            elif name.startswith(sent.name):  # the profile, or its `.manifest.json`
                dest = base.with_name(base.name + name[len(sent.name) :])
                paths[str(sent.with_name(name))] = str(dest)
            else:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(dest, data)
    report = _mapped(json.loads(files.get("job.json", b"{}") or b"{}"), paths)
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
    ) -> tuple[dict[str, bytes], list[str]]:
        if self.done:
            return {}, ["the workload was already released"]
        out = self.folder / "pgle"
        out.mkdir(exist_ok=True)
        request: dict[str, Any] = {
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
        fetched = {}
        for key, path in (answer.get("fetched") or {}).items():
            try:
                fetched[key] = Path(path).read_bytes()
            except OSError as e:
                answer.setdefault("errors", []).append(f"fetch {key}: {e}")
        return fetched, list(answer.get("errors") or [])

    def _answer(self, path: Path, wait_s: float) -> dict | None:
        deadline = time.monotonic() + wait_s
        pending = self.execution.result.pending
        while time.monotonic() < deadline:
            try:
                data = json.loads(path.read_bytes())
                return data if isinstance(data, dict) else None
            except (FileNotFoundError, ValueError):
                pass
            if pending is not None and pending.child.poll() is not None:
                try:
                    data = json.loads(path.read_bytes())
                    return data if isinstance(data, dict) else None
                except (FileNotFoundError, ValueError):
                    return None
            time.sleep(0.02)
        return None

    def release(self) -> None:
        """Let the workload end (a final round with nothing to do), if not done yet."""
        if not self.done:
            self.round({}, [], final=True, timeout_s=1.0)
