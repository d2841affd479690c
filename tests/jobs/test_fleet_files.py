"""Fleet forensics (issue 36) on real job folders, in process (issue 37).

A rank's fleet file as its pgle publishes it from the run folder's events, rank 0's reading of
every rank's (the modules, the stall phases), which rank the job report names as stopped
first, the divergence lines and `--require-same-program`'s exit 3.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from helpers.deadline import returns_within

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence import schema
from pgle.jobs import fleet
from pgle.report import Report

A, B = "a" * 32, "b" * 32


def _events(run: Path, *lines: dict) -> None:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "events.jsonl", "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def _module(name: str, fp: str, t: float, text_file: str | None = None) -> dict:
    return {"kind": schema.MODULE_IDENTITY, "t": t, "module": name, "fingerprint": fp,
            "text_file": text_file}


def _fleet_file(jd: Path, rank: int, **data) -> None:
    (jd / "fleet").mkdir(parents=True, exist_ok=True)
    (jd / "fleet" / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, **data}))


def _stall_file(jd: Path, rank: int, phase, what, own=False) -> None:
    (jd / "fleet").mkdir(parents=True, exist_ok=True)
    (jd / "fleet" / f"rank-{rank}.stall.json").write_text(
        json.dumps({"rank": rank, "phase": phase, "what": what, "own": own}))


def test_a_rank_publishes_its_modules_steps_and_executions(tmp_path):
    jd = tmp_path / "job"
    run = jd / "rank-1" / "run"
    _events(run, _module("jit_step", A, 5.0, str(jd / "rank-1" / "m.mlir")),
            _module("jit_init", "XYZ", 6.0),  # not a fingerprint: dropped
            {"kind": schema.MODULE_IDENTITY, "t": 7.0, "fingerprint": B},  # no name: dropped
            _module("jit_other", B, 8.0, "/elsewhere/m.mlir"),
            # marked steps whose step_num steps.bin cannot hold (strings) stay event lines
            {"kind": "step_enter", "t": 4e9, "index": 0, "step_num": "s0"},
            {"kind": "step_enter", "t": 4e9 + 1, "index": 1, "step_num": "s1"})
    (run / schema.PROGRESS_NAME).write_text("42 \n")
    f = fleet.Fleet(jd, 1, 2)
    f.attach(run)
    assert f.poll() is None
    data = json.loads((jd / "fleet" / "rank-1.json").read_text())
    assert data["modules"] == [["jit_step", A, "rank-1/m.mlir"], ["jit_other", B, None]]
    assert (data["rank"], data["steps"], data["executions"], data["pid"]) == (1, 2, 42,
                                                                             os.getpid())
    assert data["last_progress"] == 4e9 + 1  # the last step, later than any other sign
    text = (jd / "fleet" / "rank-1.json").read_text()
    assert text == json.dumps(data, sort_keys=True) + "\n"  # sorted: the same state, one text
    before = (jd / "fleet" / "rank-1.json").stat().st_mtime_ns
    # Nothing new: the next poll (POLL_S later) rewrites nothing.
    f.next_poll = 0.0
    assert f.poll() is None
    assert (jd / "fleet" / "rank-1.json").stat().st_mtime_ns == before
    # Polls closer than POLL_S do not read.
    _events(run, _module("jit_late", A, 9.0))
    assert f.poll() is None and f.poll() is None
    assert len(json.loads((jd / "fleet" / "rank-1.json").read_text())["modules"]) == 2
    f.flush()  # after the workload: its last events
    assert json.loads((jd / "fleet" / "rank-1.json").read_text())["modules"][-1] == \
        ["jit_late", A, None]


def test_executions_keep_their_count_when_the_progress_file_is_empty(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    feed = fleet._Feed(run)
    assert feed.read() is False and feed.executions == 0
    (run / schema.PROGRESS_NAME).write_text("7")
    assert feed.read() is True and feed.executions == 7
    assert feed.last_progress >= (run / schema.PROGRESS_NAME).stat().st_mtime
    os.utime(run / schema.PROGRESS_NAME, ns=(1, 1))
    (run / schema.PROGRESS_NAME).write_text("")
    os.utime(run / schema.PROGRESS_NAME, ns=(2, 2))
    assert feed.read() is True and feed.executions == 7
    (run / schema.PROGRESS_NAME).write_text("junk")
    assert feed.read() is False and feed.executions == 7
    (run / schema.PROGRESS_NAME).write_text("1" * 100)  # a foreign file: its first 64 bytes
    assert feed.read() is True and feed.executions == int("1" * 64)


def test_rank_0_says_a_divergence_once_and_require_same_program_stops(tmp_path, caplog):
    jd = tmp_path / "job"
    _fleet_file(jd, 1, modules=[["jit_step", B, None]])
    run = jd / "rank-0" / "run"
    _events(run, _module("jit_step", A, 1.0))
    f = fleet.Fleet(jd, 0, 2, require_same_program=True)
    f.attach(run)
    with caplog.at_level(logging.WARNING, logger="pgle"):
        assert f.poll() == EXIT_NOT_VERIFIED
        f.next_poll = 0.0
        assert f.poll() == EXIT_NOT_VERIFIED
    assert f.stopped_for_divergence
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"ranks compiled different programs for jit_step: rank 0 {A[:12]}; rank 1 "
                     f"{B[:12]}; rank 1 differs; --require-same-program: stopping the job"]
    assert json.loads((jd / "fleet" / "divergence.json").read_text()) == {"divergence": [
        {"module": "jit_step", "ranks": [1], "fingerprints": {A: [0], B: [1]}}]}
    # Another rank stops once rank 0's divergence.json is there.
    other = fleet.Fleet(jd, 1, 2, require_same_program=True)
    other.attach(jd / "rank-1" / "run")
    assert other.poll() == EXIT_NOT_VERIFIED
    # Without the option the job goes on, and says so.
    caplog.clear()
    plain = fleet.Fleet(jd, 0, 2)
    with caplog.at_level(logging.WARNING, logger="pgle"):
        plain.compare()
    assert caplog.records[0].getMessage().endswith(
        " (the job goes on; its collectives may hang: --require-same-program stops it)")
    assert fleet.Fleet(jd, 1, 2).poll() is None  # not attached to a run: nothing to do
    # Without the option a rank goes on past rank 0's divergence.json.
    going = fleet.Fleet(jd, 1, 2)
    going.attach(jd / "rank-1" / "run")
    assert going.poll() is None and not going.stopped_for_divergence


def test_an_unusable_fleet_folder_is_said_once(tmp_path, caplog):
    jd = tmp_path / "job"
    jd.mkdir()
    (jd / "fleet").write_text("a file where the folder goes")
    run = tmp_path / "run"
    _events(run, _module("jit_step", A, 1.0))
    f = fleet.Fleet(jd, 1, 2)
    f.attach(run)
    with caplog.at_level(logging.WARNING, logger="pgle"):
        assert f.poll() is None
        _events(run, _module("jit_more", A, 2.0))
        f.next_poll = 0.0
        assert f.poll() is None
    assert [r.getMessage() for r in caplog.records] == [f"fleet: cannot use {jd / 'fleet'}: "
                                                        "File exists"]
    caplog.clear()
    _events(run, _module("jit_last", A, 3.0))
    with caplog.at_level(logging.WARNING, logger="pgle"):
        f.flush()  # after the workload: said again, once
    assert [r.getMessage() for r in caplog.records] == [f"fleet: cannot use {jd / 'fleet'}: "
                                                        "File exists"]
    f.publish_stall("user_code", "x", own=True)  # nowhere to publish it: no error either


def test_the_stall_summary_names_the_rank_that_stopped_first(tmp_path):
    jd = tmp_path / "job"
    _fleet_file(jd, 0, steps=12, executions=99, last_progress=100.0)
    _fleet_file(jd, 1, steps=0, executions=11, last_progress=90.0)  # no steps: its executions
    _fleet_file(jd, 2, steps=12, executions=5, last_progress=80.0)
    _fleet_file(jd, 3, steps=1, last_progress=True)  # not a time: left out
    _fleet_file(jd, 4, steps=1, last_progress=1.0)  # not a rank of a 4-rank job
    _fleet_file(jd, 5, steps="x", executions=None, last_progress=5)
    _stall_file(jd, 0, "collective", "in an all-reduce", own=True)
    _stall_file(jd, 1, "compile", "x" * 600)
    _stall_file(jd, 2, 7, None)
    f = fleet.Fleet(jd, 0, 4)
    found = f.stall_summary(wait_s=0.0)
    assert found["first_rank"] == 1 and found["steps"] == 11
    assert found["phase"] == "compile" and found["what"] == "x" * 500
    assert found["waiting"] == [0]
    assert found["ranks"] == [
        {"rank": 0, "steps": 12, "last_progress": 100.0, "phase": "collective"},
        {"rank": 1, "steps": 11, "last_progress": 90.0, "phase": "compile"},
        {"rank": 2, "steps": 12, "last_progress": 80.0, "phase": None}]
    six = fleet.Fleet(jd, 0, 6).stall_summary(wait_s=0.0)
    assert [r["rank"] for r in six["ranks"]] == [0, 1, 2, 4, 5]
    assert six["first_rank"] == 5 and six["steps"] == 0
    # No rank published a stall: no summary.
    assert fleet.Fleet(tmp_path / "none", 0, 2).stall_summary(wait_s=0.0) is None


def test_a_ranks_stall_phase_is_published_with_its_feed(tmp_path):
    jd = tmp_path / "job"
    run = tmp_path / "run"
    _events(run, {"kind": "step_enter", "t": 3.0, "index": 0, "step_num": "s0"})
    f = fleet.Fleet(jd, 2, 3)
    f.attach(run)
    f.publish_stall("user_code", "in train.py:12", own=True)  # the job folder made on the way
    assert (jd / "fleet" / "rank-2.stall.json").read_text() == json.dumps(
        {"own": True, "phase": "user_code", "rank": 2, "what": "in train.py:12"}) + "\n"
    assert json.loads((jd / "fleet" / "rank-2.json").read_text())["steps"] == 1
    assert f.wait_for_phases(0.0) == {2: {"rank": 2, "phase": "user_code",
                                          "what": "in train.py:12", "own": True}}


def test_the_job_report_carries_the_divergence_and_the_stall(tmp_path):
    jd = tmp_path / "job"
    _fleet_file(jd, 0, modules=[["jit_step", A, None]], steps=3, last_progress=5.0)
    _fleet_file(jd, 1, modules=[["jit_step", B, None]], steps=2, last_progress=4.0)
    _stall_file(jd, 0, "collective", "in an all-reduce")
    _stall_file(jd, 1, "user_code", "in train.py:3", own=True)
    report = Report("run", "partial")
    f = fleet.Fleet(jd, 0, 2, require_same_program=True)
    with returns_within(10):  # every rank's phase is there: no wait for them
        f.annotate(report, stalled=True)
    line = (f"ranks compiled different programs for jit_step: rank 0 {A[:12]}; rank 1 "
            f"{B[:12]}; rank 1 differs")
    assert report.details["divergence"] == [
        {"module": "jit_step", "ranks": [1], "fingerprints": {A: [0], B: [1]}}]
    assert report.summary == [line, "rank 1 stopped progressing first (after 2 steps): in "
                                    "train.py:3; rank 0 waited for it in a collective"]
    assert report.reasons == ["--require-same-program: the ranks compiled different programs "
                              "(jit_step); pgle stopped the job."]
    assert report.exit_code == EXIT_NOT_VERIFIED
    assert report.details["stall"]["first_rank"] == 1
    # Annotated again (a second phase): no line twice; no stall, no stall section.
    again = Report("run", "partial", summary=[line])
    fleet.Fleet(jd, 0, 2).annotate(again, stalled=False)
    assert again.summary == [line] and "stall" not in again.details
    assert again.exit_code == 0 and again.reasons == []
    # Another rank reports only what it found itself.
    quiet = Report("run", "partial")
    fleet.Fleet(jd, 1, 2).annotate(quiet, stalled=False)
    assert "divergence" not in quiet.details


@pytest.mark.parametrize("content", [b"[1]", b"{bad", b"\xff\xfe", b"[" * 100000])
def test_a_foreign_fleet_file_that_is_not_an_object_is_ignored(tmp_path, content):
    jd = tmp_path / "job"
    (jd / "fleet").mkdir(parents=True)
    (jd / "fleet" / "rank-1.json").write_bytes(content)
    _fleet_file(jd, 0, modules=[["jit_step", A, None]])
    assert sorted(fleet.Fleet(jd, 0, 2).modules()) == [0]


def test_a_fleet_file_past_its_bound_is_ignored(tmp_path):
    jd = tmp_path / "job"
    _fleet_file(jd, 0, modules=[["jit_step", A, None]])
    _fleet_file(jd, 1, modules=[["jit_step", B, None]], pad="x" * fleet.MAX_FILE_BYTES)
    assert fleet.Fleet(jd, 0, 2).compare() == []
    _fleet_file(jd, 1, modules=[["jit_step", B, None]])
    assert len(fleet.Fleet(jd, 0, 2).compare()) == 1


def test_a_linked_fleet_file_is_not_followed(tmp_path):
    jd = tmp_path / "job"
    _fleet_file(jd, 0, modules=[["jit_step", A, None]])
    (tmp_path / "planted.json").write_text(json.dumps({"modules": [["jit_step", B, None]]}))
    (jd / "fleet" / "rank-1.json").symlink_to(tmp_path / "planted.json")
    assert fleet.Fleet(jd, 0, 2).compare() == []


def test_module_rows_are_bounded_and_checked(tmp_path):
    jd = tmp_path / "job"
    long_name = "n" * 300
    _fleet_file(jd, 0, modules=[[long_name, A, None], ["x", A], ["y", 5, None], [1, A, None],
                                ["z", A.upper(), None], ["short", "abcdef12", None]])
    (mods,) = fleet.Fleet(jd, 0, 1).modules().values()
    assert [(m.name, m.fingerprint) for m in mods] == [("n" * 200, A), ("short", "abcdef12")]


def test_no_dumped_stacks_is_no_phase(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert fleet.dumped_phase(run) is None
    (run / schema.STACKS_NAME).write_text("nothing a faulthandler wrote\n")
    assert fleet.dumped_phase(run) is None


def _real_dump(run: Path) -> None:
    """A real faulthandler dump (twice) of a process whose main thread waits in `main_wait` and
    whose worker thread waits in `worker_wait`, into the run folder's stacks file."""
    import signal
    import subprocess
    import sys
    import time

    ready = run / "ready"
    code = (
        "import faulthandler, signal, threading, sys, time\n"
        f"f = open({str(run / schema.STACKS_NAME)!r}, 'w')\n"
        "faulthandler.register(signal.SIGUSR1, f, all_threads=True)\n"
        "def worker_wait():\n"
        "    while True: time.sleep(1)\n"
        "def main_wait():\n"
        f"    open({str(ready)!r}, 'w').close()\n"
        "    while True: time.sleep(1)\n"
        "threading.Thread(target=worker_wait, daemon=True).start()\n"
        "main_wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        # faulthandler writes a dump a piece at a time and in no promised thread order: a dump
        # is whole once each thread's outermost frame line has ended (the worker's `_bootstrap`,
        # the main thread's `<module>`). Waiting on one function name alone let the process be
        # killed between the worker's stack and the main thread's.
        for n in (1, 2):
            os.kill(proc.pid, signal.SIGUSR1)
            while time.monotonic() < deadline:
                text = (run / schema.STACKS_NAME).read_text()
                if text.count("in _bootstrap\n") >= n and text.count("in <module>\n") >= n:
                    break
                time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()


def test_a_dumped_phase_is_the_main_threads_from_the_last_dump(tmp_path):
    from pgle.evidence import stacks

    run = tmp_path / "run"
    run.mkdir()
    _real_dump(run)
    threads = stacks.parse((run / schema.STACKS_NAME).read_text())
    assert len(threads) == 4  # two dumps of two threads
    worker = next(t for t in threads if any(f.function == "worker_wait" for f in t.frames))
    # No stacks event: the thread that took the signal (the main one) names the phase.
    found = fleet.dumped_phase(run)
    assert found.name == "user_code" and "main_wait" in found.text, found
    # The harness's stacks events name the main thread; the last one counts.
    _events(run, {"kind": schema.STACKS, "t": 1.0, "file": "x", "main_thread": "0x1"},
            {"kind": schema.STACKS, "t": 2.0, "file": "x", "main_thread": worker.ident})
    found = fleet.dumped_phase(run)
    assert found.name == "user_code" and "worker_wait" in found.text, found


def test_the_first_difference_of_two_module_texts(tmp_path):
    from pgle.jobs import divergence

    def texts(a: bytes, b: bytes):
        (tmp_path / "a").write_bytes(a)
        (tmp_path / "b").write_bytes(b)
        return divergence.first_difference(str(tmp_path / "a"), str(tmp_path / "b"), 3, 7)

    assert texts(b"x\ny\n", b"x\ny\n") is None
    assert texts(b"x\ny", b"x\ny\n") is None  # the same lines
    assert texts(b"x\n  a  \n", b"x\n\tb\n") == {"line": 2, "ranks": {"3": "a", "7": "b"}}
    # One text goes on past the other's end: the first line only one has.
    assert texts(b"x\n", b"x\n  more\n") == {"line": 2, "ranks": {"3": "", "7": "more"}}
    assert texts(b"x\nmore\n", b"x\n") == {"line": 2, "ranks": {"3": "more", "7": ""}}
    assert texts(b"", b"a") == {"line": 1, "ranks": {"3": "", "7": "a"}}
    long_a, long_b = b"p" * 300 + b"A", b"p" * 300 + b"B"
    got = texts(long_a, long_b)
    assert got == {"line": 1, "ranks": {"3": "p" * 240, "7": "p" * 240}}
    assert texts(b"\xff\n", b"\xfe\n") is None  # both undecodable the same way: no difference
    assert texts(b"ok\n\xff", b"ok\nz")["ranks"]["3"] == "\ufffd"
    # A text past the bound, or one that is not there, gives no difference.
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(divergence.TEXT_MAX_BYTES + 1)
    (tmp_path / "a").write_text("x\n")
    assert divergence.first_difference(str(big), str(tmp_path / "a"), 0, 1) is None
    assert divergence.first_difference(str(tmp_path / "a"), str(big), 0, 1) is None
    assert divergence.first_difference(str(tmp_path / "gone"), str(tmp_path / "a"), 0, 1) is None
    with open(big, "r+b") as f:
        f.truncate(divergence.TEXT_MAX_BYTES)
    assert divergence.first_difference(str(big), str(tmp_path / "a"), 0, 1)["line"] == 1


def test_a_divergence_in_its_report_and_its_line():
    from pgle.jobs import divergence

    d = divergence.Divergence("jit_step", 0, [2], {A: [0, 1], B: [2]})
    assert d.to_dict() == {"module": "jit_step", "ranks": [2], "fingerprints": {A: [0, 1], B: [2]}}
    assert d.line() == (f"ranks compiled different programs for jit_step: ranks 0-1 {A[:12]}; "
                        f"rank 2 {B[:12]}; rank 2 differs")
    d = divergence.Divergence("jit_step", 2, [1, 2], {A: [0, 3], B: [1], "c" * 32: [2]},
                              {"line": 4, "ranks": {"0": "x", "1": "y"}})
    assert d.to_dict()["compile"] == 2 and d.to_dict()["first_difference"]["line"] == 4
    assert d.line() == (f"ranks compiled different programs for jit_step (its compile #3): "
                        f"ranks 0, 3 {A[:12]}; rank 1 {B[:12]}; rank 2 {'c' * 12}; ranks 1-2 "
                        "differ; first difference at line 4")
    # The largest group first whatever its fingerprint; a tie, the lowest rank's first.
    d = divergence.Divergence("f", 0, [2, 3], {B: [0, 1], "c" * 32: [3], A: [2]})
    assert d.line() == (f"ranks compiled different programs for f: ranks 0-1 {B[:12]}; rank 2 "
                        f"{A[:12]}; rank 3 {'c' * 12}; ranks 2-3 differ")
    assert [(m.name, m.index) for m in divergence.indexed(
        [("f", A, None), ("g", A, None), ("f", B, "t")])] == [("f", 0), ("g", 0), ("f", 1)]
    assert divergence.inside("rank-1/m.mlir", Path("/job")) == "/job/rank-1/m.mlir"
    for bad in ("../x", "/etc/passwd", "", None, ".", "rank-1/../../x"):
        assert divergence.inside(bad, Path("/job")) is None, bad
    assert divergence.inside("/job/rank-1/m", Path("/job")) == "/job/rank-1/m"
    assert divergence.inside("/jobx/m", Path("/job")) is None
    assert divergence.inside(5, Path("/job")) is None  # foreign JSON: not even text


def test_rank_0_waits_for_the_peers_stall_phases(tmp_path):
    import subprocess
    import sys
    import time

    jd = tmp_path / "job"
    _stall_file(jd, 0, "collective", "waiting", own=False)
    f = fleet.Fleet(jd, 0, 2)
    # Rank 1 publishes its phase a moment later (a real process): the wait returns with both.
    late = jd / "fleet" / "rank-1.stall.json"
    writer = subprocess.Popen([sys.executable, "-c",
                               "import json, os, sys, time; time.sleep(0.3); "
                               "open(sys.argv[1] + '.t', 'w').write(json.dumps({'phase': 'x'})); "
                               "os.replace(sys.argv[1] + '.t', sys.argv[1])", str(late)])
    try:
        began = time.monotonic()
        with returns_within(15):  # ends when both are there, long before its bound
            phases = f.wait_for_phases(60.0)
        assert sorted(phases) == [0, 1] and phases[1] == {"phase": "x"}
        assert time.monotonic() - began < 50
    finally:
        writer.wait(timeout=60)
    # One that never comes: the wait ends at its bound with what there is.
    alone = fleet.Fleet(jd, 0, 3)
    assert sorted(alone.wait_for_phases(0.3)) == [0, 1]


def test_divergences_come_in_compile_order_with_their_first_difference(tmp_path):
    from pgle.jobs import divergence

    for name, text in (("m0", "module {\n  x = 1\n}\n"), ("m1", "module {\n  x = 2\n}\n")):
        (tmp_path / name).write_text(text)
    mods = {
        0: divergence.indexed([("z_late", A, str(tmp_path / "m0")), ("a_first", A, None)]),
        1: divergence.indexed([("z_late", A, str(tmp_path / "m0")), ("a_first", A, None)]),
        2: divergence.indexed([("z_late", B, str(tmp_path / "m1")), ("a_first", B, None)]),
        3: divergence.indexed([("z_late", B, str(tmp_path / "m1")), ("a_first", A, None)]),
    }
    z, a = divergence.compare(mods)
    assert (z.module, a.module) == ("z_late", "a_first")  # rank 0's compile order
    assert (z.ranks, z.fingerprints) == ([2, 3], {A: [0, 1], B: [2, 3]})
    assert z.first_difference == {"line": 2, "ranks": {"0": "x = 1", "2": "x = 2"}}
    assert (a.ranks, a.first_difference) == ([2], None)


def test_a_dump_naming_a_file_in_another_encoding_still_gives_the_phase(tmp_path):
    # faulthandler writes a file name's bytes as the file system gave them: a latin-1 name
    # is not UTF-8, and the phase must still be read (issue 37).
    run = tmp_path / "run"
    run.mkdir()
    (run / schema.STACKS_NAME).write_bytes(
        b"Current thread 0x00007f0000000001 (most recent call first):\n"
        b'  File "/home/u/caf\xe9.py", line 3 in main_wait\n'
        b'  File "/home/u/caf\xe9.py", line 9 in <module>\n')
    found = fleet.dumped_phase(run)
    assert (found.name, found.text) == ("user_code", "in the user's code at caf\ufffd.py:3 (main_wait)")


def test_two_divergent_modules_their_file_and_a_stall_section_kept(tmp_path):
    """Two modules differ: the reason names both, in order; divergence.json is written with
    its keys sorted (one byte-stable file whichever rank's dicts came first); a report that
    already holds a stall section keeps what the summary does not replace; and a rank other
    than 0 that compared reports what it found."""
    jd = tmp_path / "job"
    _fleet_file(jd, 0, modules=[["jit_step", A, None], ["jit_init", A, None]], steps=3,
                last_progress=5.0)
    _fleet_file(jd, 1, modules=[["jit_step", B, None], ["jit_init", B, None]], steps=2,
                last_progress=4.0)
    _stall_file(jd, 0, "collective", "in an all-reduce")
    _stall_file(jd, 1, "user_code", "in train.py:3", own=True)
    report = Report("run", "partial")
    report.details["stall"] = {"timeout_s": 60.0}
    f = fleet.Fleet(jd, 0, 2, require_same_program=True)
    with returns_within(10):  # every rank's phase is there: no wait for them
        f.annotate(report, stalled=True)
    assert report.reasons == ["--require-same-program: the ranks compiled different programs "
                              "(jit_init, jit_step); pgle stopped the job."]
    assert report.details["stall"]["timeout_s"] == 60.0
    assert report.details["stall"]["first_rank"] == 1
    text = (jd / "fleet" / "divergence.json").read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True) + "\n"
    assert text.index('"fingerprints"') < text.index('"module"') < text.index('"ranks"')
    other = fleet.Fleet(jd, 1, 2)
    assert [d.module for d in other.compare()] == [d["module"] for d in
                                                   report.details["divergence"]]
    quiet = Report("run", "partial")
    other.annotate(quiet, stalled=False)
    assert quiet.details["divergence"] == report.details["divergence"]
