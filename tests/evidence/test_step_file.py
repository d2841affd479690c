"""steps.bin (pgle.evidence.step_file, issue 35): an old run folder (its steps as JSON lines, no
steps.bin) reads as it did; a step file cut short, or not one this pgle reads, is no crash."""

from __future__ import annotations

import array
import json
import os
from pathlib import Path

from pgle.evidence import step_file
from pgle.evidence.events import read_events

DATA = Path(__file__).resolve().parent.parent / "data" / "old_events"


def test_an_old_run_folder_reads_as_it_did():
    """tests/data/old_events: an events.jsonl that pgle wrote before steps.bin; what that
    pgle's read_events gave for it is expected.json."""
    want = json.loads((DATA / "expected.json").read_text())
    ev = read_events(DATA / "events.jsonl")
    assert not (DATA / "steps.bin").exists()
    assert [[s.index, s.name, s.step_num, s.t_enter] for s in ev.steps] == want["steps"]
    assert [r.kind for r in ev.records] == want["kinds"]
    assert ev.lines == want["lines"] and ev.rejected == want["rejected"] == 0
    assert ev.steps_error is None


def a_run(folder: Path, records: bytes, header: bytes = step_file.HEADER) -> Path:
    events = folder / "events.jsonl"
    events.write_text(json.dumps({"kind": "step_name", "t": 1.0, "id": 0, "name": "train",
                                  "edges": 0}) + "\n"
                      + json.dumps({"kind": "exit", "t": 2.0, "code": 0, "edges": 4}) + "\n")
    (folder / "steps.bin").write_bytes(header + records)
    return events


def edges(*rows: tuple[int, int, int, int]) -> bytes:
    return step_file.encode(array.array("q", [x for row in rows for x in row]))


T = 1_764_000_000_123_456_789
TWO_STEPS = edges((T, 0, 10, 0), (-(T + 5), 0, 0, 0), (T + 1_000_000_000, 1,
                  step_file.NULL_STEP_NUM, 0), (-(T + 1_000_000_010), 1, 0, 0))


def test_steps_from_the_records(tmp_path: Path):
    ev = read_events(a_run(tmp_path, TWO_STEPS))
    assert [(s.index, s.name, s.step_num) for s in ev.steps] == [(0, "train", 10), (1, "train", None)]
    assert [s.t_enter for s in ev.steps] == [1_764_000_000.1234567, 1_764_000_001.1234567]
    assert ev.exit is not None and ev.exit.edges == 4 and ev.lines == 2 + 4


def test_a_record_cut_short_is_not_read_until_it_is_whole(tmp_path: Path):
    """A process killed mid-write leaves part of a record: the steps before it are read."""
    events = a_run(tmp_path, TWO_STEPS[:-5])
    ev = read_events(events)
    assert [s.index for s in ev.steps] == [0, 1] and ev.steps_error is None
    reader = step_file.StepFile(tmp_path / "steps.bin")
    assert reader.read().size == 3 and reader.read().size == 0
    with open(tmp_path / "steps.bin", "ab") as f:
        f.write(TWO_STEPS[-5:])
    assert reader.read()["t_ns"].tolist() == [-(T + 1_000_000_010)] and reader.records == 4


def test_a_file_that_is_no_step_file_is_one_line_and_no_steps(tmp_path: Path):
    """A run folder is untrusted input: the events are read, the steps are not, and why is
    one line."""
    ev = read_events(a_run(tmp_path, TWO_STEPS, header=b"GARBAGE!" + bytes(8)))
    assert len(ev.steps) == 0 and ev.exit is not None
    assert ev.steps_error == f"{tmp_path / 'steps.bin'} is not a pgle step file; its steps are not read"
    newer = step_file.MAGIC + (2).to_bytes(4, "little") + (32).to_bytes(4, "little")
    ev = read_events(a_run(tmp_path, TWO_STEPS, header=newer))
    assert len(ev.steps) == 0 and "\n" not in (ev.steps_error or "")
    assert "of version 2 (this pgle reads version 1" in (ev.steps_error or "")
    # a header cut short: no steps yet, no error (the harness writes it in one write)
    ev = read_events(a_run(tmp_path, b"", header=step_file.HEADER[:5]))
    assert len(ev.steps) == 0 and ev.steps_error is None


def test_a_link_or_a_fifo_in_place_of_the_step_file_is_not_read(tmp_path: Path):
    """Another user's run folder: a steps.bin that is a link (to a file of theirs or ours) is
    not followed, and a FIFO does not hang the reader; each is one line and no steps."""
    events = a_run(tmp_path, TWO_STEPS)
    real = tmp_path / "real.bin"
    (tmp_path / "steps.bin").rename(real)
    (tmp_path / "steps.bin").symlink_to(real)
    ev = read_events(events)
    assert len(ev.steps) == 0 and ev.exit is not None
    assert ev.steps_error == f"{tmp_path / 'steps.bin'} is a symbolic link; its steps are not read"
    (tmp_path / "steps.bin").unlink()
    os.mkfifo(tmp_path / "steps.bin")
    ev = read_events(events)  # returns: a FIFO with no writer would block a plain open()
    assert len(ev.steps) == 0
    assert ev.steps_error == f"{tmp_path / 'steps.bin'} is not a regular file; its steps are not read"


def test_a_header_s_version_is_said_as_written(tmp_path: Path):
    # The header's numbers are unsigned: a version with its top bit set is said as written.
    huge = step_file.MAGIC + (0xFFFFFFFF).to_bytes(4, "little") + (32).to_bytes(4, "little")
    ev = read_events(a_run(tmp_path, TWO_STEPS, header=huge))
    assert len(ev.steps) == 0
    assert "of version 4294967295 (this pgle reads version 1" in (ev.steps_error or "")
