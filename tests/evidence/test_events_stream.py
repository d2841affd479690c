"""A run's events read streamed and summarised (issue 25): the same steps, records and summaries
as the reader that kept every record (tests/helpers/reference_events.py), on real runs (their
steps.bin decoded apart: tests/helpers/step_records.py) and on every odd line an events file of
pgle before issue 35 may hold; and memory that does not follow the number of steps."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from helpers import reference_events as ref
from helpers import step_records
from helpers.pgle_testing import WORKLOADS, pgle_env, run_pgle
from pgle.evidence.event_kinds import Event, parse
from pgle.evidence.events import read_events
from pgle.evidence.steps import step_times, summarize


def _record(r):
    """A record as written: the old reader kept dicts, the new one typed events (which keep the
    record they were read from)."""
    return r.to_dict() if isinstance(r, Event) else r


def _records(records) -> list:
    """The old reader kept every object; the typed one only what the harness could have
    written (pgle.evidence.event_kinds.parse): the old one's records, filtered the same way."""
    return [_record(r) for r in records if isinstance(r, Event) or (
        r.get("kind") not in ("step_enter", "step_exit", "step_name") and parse(r) is not None)]


def as_old(events) -> dict:
    """What a reader found, in the old reader's terms (its records without step events)."""
    def one(r):
        return None if r is None else _record(r)

    return {
        # repr: NaN (json.loads reads the harness's NaN) equals itself only as text.
        "steps": [(s.index, s.name, s.step_num, repr(float(s.t_enter))) for s in events.steps],
        "records": _records(events.records),
        "backend": one(events.backend), "trace": one(events.trace),
        "errors": events.trace_errors, "compiles": _records(events.compiles),
        "exit": one(events.exit), "modules": _records(events.modules),
        "flags": one(events.xla_flags_seen), "script_traces": _records(events.script_traces),
        "jax_imported": events.jax_imported,
    }


def assert_same_as_old(path, exclude=frozenset({3})) -> None:
    """`path`: an events file of pgle before issue 35, or one with its steps.bin."""
    if path.with_name("steps.bin").exists():
        old = ref.read_events(step_records.old_file(path, path.with_name("old.jsonl")))
    else:
        old = ref.read_events(path)
    new = read_events(path)
    assert as_old(new) == as_old(old)
    # Types too: a step number stays an int, None, a string...
    assert [type(s.step_num) for s in new.steps] == [type(s.step_num) for s in old.steps]
    times = step_times(new.steps, exclude)
    assert repr(times) == repr(step_times_old(old.steps, exclude))
    assert repr(summarize(times)) == repr(summarize_old(times))


def step_times_old(steps, exclude):
    return [b.t_enter - a.t_enter for a, b in zip(steps, steps[1:])
            if a.index != 0 and a.index not in exclude]


def summarize_old(times):
    import statistics

    if not times:
        return None
    ordered = sorted(times)

    def pct(p):
        k = (len(ordered) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    return {"count": len(times), "median_s": statistics.median(times), "p25_s": pct(0.25),
            "p75_s": pct(0.75), "min_s": ordered[0], "max_s": ordered[-1]}


def harness_line(record: dict) -> str:
    """A line exactly as the harness writes it (pgle/launch/harness.py Events.write)."""
    return json.dumps(record, default=str) + "\n"


ODD_LINES = [
    '{"kind": "step_enter", "t": 12.5, "name": "caf\\u00e9 \\"q\\"", "step_num": 7, "index": 7}\n',
    '{"kind": "step_enter", "t": 13, "name": "train", "step_num": "seven", "index": 8}\n',
    '{"kind": "step_enter", "t": 14.25, "name": "train", "step_num": 1.5, "index": 9}\n',
    '{"kind": "step_enter", "t": 15.0, "name": "train", "step_num": true, "index": 10}\n',
    '{"kind": "step_enter", "t": 16.0, "name": "train", "step_num": -12, "index": 11}\n',
    '{"kind": "step_enter", "t": 17.0, "name": "train", "step_num": 123456789012345678901, "index": 12}\n',
    '{"kind":"step_enter","t":18.0,"name":"train","step_num":13,"index":13}\n',  # other spacing
    '{"kind": "step_enter", "t": 19.0e0, "name": "train", "step_num": 014, "index": 14}\n',  # not JSON
    '{"kind": "step_enter", "t": 1.9E+1, "name": "", "step_num": null, "index": 15}\n',
    '{"kind": "step_enter", "t": -0.0, "name": "a\\\\b", "step_num": 0, "index": 16}\n',
    '{"kind": "step_enter", "t": NaN, "name": "train", "step_num": 17, "index": 17}\n',
    '{"kind": "step_enter", "t": 21.0, "name": "train", "step_num": 5, "index": 5}\r\n',  # repeat, CRLF
    '{"kind": "step_enter", "t": 22.0, "name": "' + "n" * 300 + '", "step_num": 18, "index": 18}\n',
    '{"kind": "step_enter", "t": 23.0, "name": "train", "step_num": 2, "index": 2}\n',  # out of order
    '{"kind": "step_exit", "t": 23.5, "index": 2}\n',
    '{"kind": "step_exit", "t": 23.5, "ind\n',  # cut short
    '\n',
    '{"kind": "log", "t": 24.0, "logger": "jax", "level": "DEBUG", "message": "{\\"kind\\": \\"step_enter\\"}"}\n',
    '{"kind": "warning", "t": 25.0, "category": "UserWarning", "message": "x", "filename": "f", "lineno": 1}\n',
    '{"kind": "step_enter", "t": 1.7e9, "name": "train", "step_num": 19, "index": 19}\n',
    '{"kind": "step_enter", "t": 26.0, "name": "train", "step_num": 20, "index": 0020}\n',  # not JSON
]


def odd_file(path, seed: int, steps: int = 3000) -> None:
    """Harness lines with the odd ones scattered in, and a last line cut short."""
    rng = random.Random(seed)
    lines = [harness_line({"kind": "start", "t": 1.0, "pid": 1, "argv": ["a"], "python": "3"}),
             harness_line({"kind": "jax_imported", "t": 1.1, "version": "0.10.2"}),
             harness_line({"kind": "backend", "t": 1.2, "platform": "cpu", "device_count": 8,
                           "device_kind": "cpu", "process_count": 1, "process_index": 0})]
    t = 1_764_000_000.0
    odd = list(ODD_LINES)
    rng.shuffle(odd)
    for i in range(steps):
        t += rng.choice([1e-4, 2.5e-5, rng.random() * 1e-3])
        lines.append(harness_line({"kind": "step_enter", "t": t, "name": rng.choice(["train", "train", "eval"]),
                                   "step_num": rng.choice([i, i, None]), "index": i + 100}))
        lines.append(harness_line({"kind": "step_exit", "t": t + 1e-5, "index": i + 100}))
        if odd and rng.random() < 0.01:
            lines.append(odd.pop())
        if rng.random() < 0.002:
            lines.append(harness_line({"kind": "compile", "t": t, "fun_name": "jit(f)", "seconds": 0.1}))
    lines += odd
    lines.append(harness_line({"kind": "exit", "t": t, "code": 0, "error": None, "interrupted": False}))
    lines.append('{"kind": "step_enter", "t": 9.0, "name": "train", "step_n')
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("seed", range(6))
def test_same_events_as_the_reader_that_kept_every_record(tmp_path, seed):
    path = tmp_path / "events.jsonl"
    odd_file(path, seed)
    assert_same_as_old(path, exclude={105, 106, 107})


def test_blocks_split_anywhere(tmp_path, monkeypatch):
    """Lines cut by the block boundary, and blocks holding only odd lines."""
    from pgle.evidence import events

    path = tmp_path / "events.jsonl"
    odd_file(path, 1, steps=400)
    sizes = (64, 100, 997, 4096)
    for size in sizes:
        monkeypatch.setattr(events, "BLOCK_BYTES", size)
        assert_same_as_old(path)


def _many_steps(folder, steps: int, *json_out: str):
    """`pgle run` of many_steps.py: `steps` marked steps, its run folder in folder/run<steps>."""
    profile = folder / "p.pbtxt"
    profile.write_text('costs {\n  name: "fusion.1"\n  cost_us: 1.0\n}\n')
    run = folder / f"run{steps}"
    p = run_pgle("run", "--profile", str(profile), str(WORKLOADS / "many_steps.py"), *json_out,
                 "--run-dir", str(run), "--", str(steps), cwd=folder, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p, run


@pytest.fixture(scope="module")
def run_20k(tmp_path_factory):
    """One real run of 20,000 marked steps, read by the two tests below."""
    return _many_steps(tmp_path_factory.mktemp("steps"), 20_000, "--json")


def test_real_run_events(run_20k):
    """The events of a real run (20,000 marked steps under `pgle run`), and pgle run's own
    step summary against one recomputed from the raw files."""
    p, run = run_20k
    path = run / "events.jsonl"
    assert_same_as_old(path)
    enters = {index: step_records.seconds(t) for t, index, _, _
              in step_records.records(run / "steps.bin") if t > 0}
    mine = [enters[i + 1] - enters[i] for i in sorted(enters)[:-1] if i != 0]
    assert json.loads(p.stdout)["step_times"] == summarize_old(mine)
    assert len(mine) == 19998


MEASURE = """
import resource, sys
from pgle.evidence.events import read_events
from pgle.evidence.steps import step_times, summarize
import numpy  # both runs pay for the import, whatever their size
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
events = read_events(sys.argv[1])
s = summarize(step_times(events.steps))
print(s["count"], (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""


def test_memory_does_not_follow_the_steps(tmp_path, run_20k):
    """A real run of 200,000 marked steps and one of 20,000 (the run above): reading the
    events, the step times and their summary (what `pgle run` does at the end) costs a few MB
    more for ten times the steps; the old reader kept ~1.3 KB a step (about 230 MB more here)."""
    grew = {}
    for steps in (20_000, 200_000):
        run = run_20k[1] if steps == 20_000 else _many_steps(tmp_path, steps)[1]
        out = subprocess.run([sys.executable, "-c", MEASURE, str(run / "events.jsonl")],
                             capture_output=True, text=True, check=True, env=pgle_env()).stdout.split()
        assert int(out[0]) == steps - 2
        grew[steps] = float(out[1])
    # The step times themselves (a float each, twice while sorting) and the columns: ~60 bytes
    # a step; far below what a record per step costs.
    assert grew[200_000] - grew[20_000] < 180_000 * 150 / 2**20, grew


def test_a_line_that_is_not_an_object_is_skipped(tmp_path):
    """The old reader crashed on it (AttributeError: a list has no .get); a line that is not
    a JSON object is not an event."""
    path = tmp_path / "events.jsonl"
    path.write_text(harness_line({"kind": "step_enter", "t": 1.0, "name": "s", "step_num": 0, "index": 0})
                    + "[1, 2, 3]\n" + "5\n"
                    + harness_line({"kind": "exit", "t": 2.0, "code": 0, "error": None, "interrupted": False}))
    with pytest.raises(AttributeError):
        ref.read_events(path)
    events = read_events(path)
    assert [s.index for s in events.steps] == [0] and events.exit.code == 0


def test_lines_written_after_the_size_was_taken_are_left_out(tmp_path, monkeypatch):
    """A live run's events file grows while `pgle report` reads it: the reader stops at the
    size it took at the start, however many blocks that takes."""
    from pgle.evidence import events

    path = tmp_path / "events.jsonl"
    first = b"".join(b'{"kind": "k%d"}\n' % i for i in range(300))
    path.write_bytes(first + b'{"kind": "later"}\n' * 50)
    monkeypatch.setattr(events, "BLOCK_BYTES", 997)
    assert b"".join(events._blocks(path, 0, len(first))) == first
    assert b"".join(events._blocks(path, 0, len(first) - 5)) == first[:-5]  # its cut line last
