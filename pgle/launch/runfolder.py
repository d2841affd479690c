"""The run folder: everything one pgle invocation leaves behind.

`.pgle/runs/<YYYYmmdd-HHMMSS>-<command>-<pid>/` under the current directory
(or `--run-dir`): `workload.log` (stdout and stderr, line by line),
`events.jsonl` (from the harness), `spec.json` (pgle.launch.schema), `trace/`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from pgle.errors import BadInput

DEFAULT_ROOT = ".pgle"


def ignore_pgle_folder(root: Path) -> None:
    """`.pgle/` holds logs and traces (gigabytes): keep it out of the user's git."""
    marker = root / ".gitignore"
    if not marker.exists():
        try:
            marker.write_text("# written by pgle: run folders and traces are not source\n*\n")
        except OSError:
            pass  # a read-only tree: the run folder itself was created; nothing else matters


@dataclasses.dataclass(frozen=True)
class RunFolder:
    path: Path

    @classmethod
    def create(cls, command: str, run_dir: str | None = None, *, suffix: str = "") -> "RunFolder":
        if run_dir:
            path = Path(run_dir)
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = Path(DEFAULT_ROOT) / "runs" / f"{stamp}-{command}{suffix}-{os.getpid()}"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"cannot create run folder {path}: {e.strerror}.") from None
        if not run_dir:
            ignore_pgle_folder(Path(DEFAULT_ROOT))
        if any(path.iterdir()) and run_dir:
            # Never mix two runs' logs in one folder.
            if (path / "workload.log").exists() or (path / "events.jsonl").exists():
                raise BadInput(f"run folder {path} already holds a run.",
                               hint="Pick an empty --run-dir.")
        return cls(path.resolve())

    @property
    def log(self) -> Path:
        return self.path / "workload.log"

    @property
    def events(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def spec(self) -> Path:
        return self.path / "spec.json"

    @property
    def trace(self) -> Path:
        return self.path / "trace"
