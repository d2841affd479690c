"""The `step_enter` lines of an events file (pgle before issue 35, and step_nums steps.bin does
not hold) as `read_events` keeps them (issue 37's survivors of pgle/evidence/events.py): the
int64 bounds of the index and the step_num, a time that is no number, a missing or non-string
name, and `Steps` indexed from the end and past it. Real events files, read by the real reader.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pgle.evidence import step_file
from pgle.evidence.events import Step, read_events

I64_MIN, I64_END = -(1 << 63), 1 << 63


def steps_of(tmp_path: Path, records: list[dict[str, Any]]) -> list[Step]:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"kind": "step_enter", **r}) + "\n" for r in records))
    return list(read_events(path).steps)


def test_an_index_outside_int64_is_no_step(tmp_path):
    got = steps_of(tmp_path, [
        {"t": 1.0, "index": I64_MIN - 1, "name": "s", "step_num": 0},
        {"t": 2.0, "index": I64_MIN, "name": "s", "step_num": 1},
        {"t": 3.0, "index": -1, "name": "s", "step_num": 2},
        {"t": 4.0, "index": 0, "name": "s", "step_num": 3},
        {"t": 5.0, "index": I64_END - 1, "name": "s", "step_num": 4},
        {"t": 6.0, "index": I64_END, "name": "s", "step_num": 5},
        {"t": 7.0, "index": 2 * I64_END, "name": "s", "step_num": 6},
    ])
    assert [(s.index, s.step_num) for s in got] == [
        (I64_MIN, 1), (-1, 2), (0, 3), (I64_END - 1, 4)]


def test_a_time_that_is_no_number_is_no_step(tmp_path):
    got = steps_of(tmp_path, [
        {"t": True, "index": 0, "name": "s"},
        {"t": "1.5", "index": 1, "name": "s"},
        {"t": None, "index": 2, "name": "s"},
        {"index": 3, "name": "s"},
        {"t": 5, "index": 4, "name": "s"},
        {"t": 6.5, "index": 5.0, "name": "s"},
    ])
    assert [(s.index, s.t_enter) for s in got] == [(4, 5.0)]


def test_names_missing_or_not_strings(tmp_path):
    got = steps_of(tmp_path, [
        {"t": 1.0, "index": 0},
        {"t": 2.0, "index": 1, "name": 7},
        {"t": 3.0, "index": 2, "name": None},
        {"t": 4.0, "index": 3, "name": "train"},
    ])
    assert [s.name for s in got] == ["", "7", "None", "train"]


def test_step_nums_outside_the_column_are_kept_as_written(tmp_path):
    # steps.bin's int64 column holds NULL_STEP_NUM for None: an int step_num equal to it, or
    # beyond int64, or of another type, is kept aside and read back as written.
    nums = [step_file.NULL_STEP_NUM, step_file.NULL_STEP_NUM + 1, -1, 0, I64_END - 1, I64_END,
            2 * I64_END, None, "epoch-3", 2.5, True]
    got = steps_of(tmp_path, [{"t": float(k), "index": k, "name": "s", "step_num": n}
                              for k, n in enumerate(nums)])
    assert [s.step_num for s in got] == nums
    assert [type(s.step_num) for s in got] == [type(n) for n in nums]


def test_steps_index_from_the_end_and_refuse_past_it(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(
        json.dumps({"kind": "step_enter", "t": 1.0 + k, "index": k, "name": "s", "step_num": k})
        + "\n" for k in range(3)))
    steps = read_events(path).steps
    assert [steps[-1].index, steps[-2].index, steps[-3].index] == [2, 1, 0]
    assert steps[1:].__len__() == 2 and [s.index for s in steps[-2:]] == [1, 2]
    for k in (3, 10):
        with pytest.raises(IndexError, match=f"^{k}$"):
            steps[k]
    with pytest.raises(IndexError):
        steps[-4]


def _run(tmp_path: Path, indices: list[int], lines: list[dict[str, Any]] | None = None) -> Path:
    """A run folder whose steps.bin enters a step of each index in turn (1 ms apart, step_num
    the index + 100, name id k % 2) and whose events.jsonl holds `lines` and the two names."""
    from array import array

    t0 = 1_764_000_000_000_000_000
    rows = array("q")
    for k, i in enumerate(indices):
        rows.extend((t0 + k * 1_000_000, i, i + 100, k % 2))
    (tmp_path / "steps.bin").write_bytes(step_file.HEADER + step_file.encode(rows))
    events = tmp_path / "events.jsonl"
    names = [{"kind": "step_name", "t": 1.0, "id": n, "name": f"s{n}", "edges": 0} for n in (0, 1)]
    events.write_text("".join(json.dumps(r) + "\n" for r in [*names, *(lines or [])]))
    return events


def _expected(indices: list[int]) -> list[tuple[int, str, int, float]]:
    """Index order, the last record of an index winning: computed here without the reader."""
    from helpers.step_records import seconds

    last = {i: k for k, i in enumerate(indices)}
    t0 = 1_764_000_000_000_000_000
    return [(i, f"s{k % 2}", i + 100, seconds(t0 + k * 1_000_000)) for i, k in sorted(last.items())]


def _got(events: Path) -> list[tuple[int, str, int, float]]:
    return [(s.index, s.name, s.step_num, s.t_enter) for s in read_events(events).steps]


@pytest.mark.parametrize("n", [5, 70_000])  # below and above the cut where numpy orders them
def test_steps_in_order_out_of_order_and_repeated(tmp_path, n):
    for indices in (list(range(n)),                               # in order
                    list(range(-3, n - 3)),                       # in order, from below 0
                    list(range(n - 2, -1, -1)) + [n],             # descending, then the largest
                    list(range(n - 2)) + [n - 1, n - 2],          # the last two swapped
                    list(range(n // 2)) + [n // 2 - 1] + list(range(n // 2, n)),  # one repeated
                    list(range(n // 2)) * 2,                      # every index entered twice
                    random.Random(7).choices(range(n // 3), k=n)):  # shuffled, repeated
        events = _run(tmp_path, indices)
        assert _got(events) == _expected(indices), indices[:8]


def test_a_large_run_keeps_the_step_nums_of_its_step_lines(tmp_path):
    # 70,000 steps out of order in steps.bin and two step_enter lines whose step_num steps.bin
    # cannot hold (older pgle, a string): reordered, each keeps its own step_num.
    n = 70_000
    indices = list(range(2, n))[::-1]
    lines = [{"kind": "step_enter", "t": 5.0, "index": 1, "name": "s1", "step_num": "warm-up"},
             {"kind": "step_enter", "t": 4.0, "index": 0, "name": "s0", "step_num": None}]
    steps = read_events(_run(tmp_path, indices, lines)).steps
    assert len(steps) == n
    assert [(s.index, s.step_num) for s in steps[:3]] == [(0, None), (1, "warm-up"), (2, 102)]
    assert steps[-1].index == n - 1 and steps[-1].step_num == n + 99


def test_a_large_run_in_order_keeps_the_step_num_of_its_step_line(tmp_path):
    n = 70_000
    lines = [{"kind": "step_enter", "t": 4.0, "index": 0, "name": "s0", "step_num": "warm-up"}]
    steps = read_events(_run(tmp_path, list(range(1, n)), lines)).steps
    assert [(s.index, s.step_num) for s in steps[:2]] == [(0, "warm-up"), (1, 101)]
    assert len(steps) == n
