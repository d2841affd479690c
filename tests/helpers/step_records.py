"""steps.bin decoded without pgle's reader (struct, the layout pgle/evidence/step_file.py
documents), for tests: a run's marked steps as the JSON lines pgle wrote before issue 35."""

from __future__ import annotations

import json
import struct
from pathlib import Path

HEADER = b"PGLESTEP" + struct.pack("<II", 1, 32)
NULL = -(2**63)


def records(steps_bin: Path) -> list[tuple[int, int, int, int]]:
    """(t_ns, index, step_num, name id) of each whole record."""
    data = Path(steps_bin).read_bytes()
    assert data[: len(HEADER)] == HEADER, data[:16]
    body = data[len(HEADER):]
    return list(struct.iter_unpack("<4q", body[: len(body) - len(body) % 32]))


def seconds(t_ns: int) -> float:
    """The documented float: whole seconds plus the nanoseconds / 1e9 (IEEE, as numpy does)."""
    return t_ns // 10**9 + (t_ns % 10**9) / 1e9


def old_lines(events: Path) -> list[dict]:
    """events.jsonl with steps.bin beside it as the records of one events.jsonl of pgle before
    issue 35: each edge a step_enter/step_exit record at its place (the lines' `edges`), step
    names from the step_name lines (which go)."""
    lines = []
    for line in Path(events).read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    side = Path(events).with_name("steps.bin")
    recs = records(side) if side.exists() else []
    names = {r["id"]: r["name"] for r in lines if r.get("kind") == "step_name"}
    out: list[dict] = []
    done = 0

    def upto(n: int) -> None:
        nonlocal done
        for t, index, num, name in recs[done:n]:
            if t > 0:
                out.append({"kind": "step_enter", "t": seconds(t), "name": names.get(name, ""),
                            "step_num": None if num == NULL else num, "index": index})
            else:
                out.append({"kind": "step_exit", "t": seconds(-t), "index": index})
        done = max(done, n)

    for r in lines:
        if isinstance(r, dict) and isinstance(r.get("edges"), int):
            upto(r["edges"])
        if not (isinstance(r, dict) and r.get("kind") == "step_name"):
            out.append(r)
    upto(len(recs))
    return out


def old_file(events: Path, out: Path) -> Path:
    """old_lines written as an events.jsonl of pgle before issue 35 (no steps.bin beside it)."""
    out.write_text("".join(json.dumps(r) + "\n" for r in old_lines(events)))
    return out
