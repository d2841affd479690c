"""The pure parts of fleet forensics (issue 36): which ranks diverge, the first difference,
the first stopped rank, foreign fleet files, and the phases a real faulthandler dump names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pgle.evidence import stacks
from pgle.jobs import divergence, first_stopped, fleet
from pgle.jobs.divergence import ModuleId
from pgle.jobs.first_stopped import RankProgress


def _ids(*fps: str, name: str = "jit_step") -> list[ModuleId]:
    return divergence.indexed([(name, fp, None) for fp in fps])


def test_the_minority_is_named_per_compile_of_a_name():
    a, b = "a" * 32, "b" * 32
    found = divergence.compare({0: _ids(a, a), 1: _ids(a, b), 2: _ids(a, a)})
    (d,) = found
    assert (d.module, d.index, d.ranks) == ("jit_step", 1, [1])
    assert d.fingerprints == {a: [0, 2], b: [1]}
    assert d.to_dict()["compile"] == 1
    assert "rank 1 differs" in d.line()


def test_a_tie_names_the_ranks_outside_the_lowest_ranks_group():
    a, b = "a" * 32, "b" * 32
    (d,) = divergence.compare({0: _ids(b), 1: _ids(a)})
    assert d.ranks == [1]


def test_agreeing_or_unshared_modules_are_no_divergence():
    a, b = "a" * 32, "b" * 32
    assert divergence.compare({0: _ids(a), 1: _ids(a)}) == []
    # Rank 1 has not compiled its second module yet: nothing to compare.
    assert divergence.compare({0: _ids(a, b), 1: _ids(a)}) == []


def test_first_difference_from_both_texts(tmp_path):
    one, two = tmp_path / "a.mlir", tmp_path / "b.mlir"
    one.write_text("module {\n  %0 = constant 2.0\n  return\n}\n")
    two.write_text("module {\n  %0 = constant 3.0\n  return\n}\n")
    assert divergence.first_difference(str(one), str(two), 0, 1) == {
        "line": 2, "ranks": {"0": "%0 = constant 2.0", "1": "%0 = constant 3.0"}}
    link = tmp_path / "link.mlir"
    link.symlink_to(two)
    assert divergence.first_difference(str(one), str(link), 0, 1) is None


def test_a_foreign_fleet_file_is_checked(tmp_path):
    job = tmp_path / "job"
    (job / "fleet").mkdir(parents=True)
    (job / "rank-1").mkdir()
    text = job / "rank-1" / "m.mlir"
    text.write_text("x\n")
    rows = {
        0: {"modules": [["jit_step", "a" * 32, "rank-1/m.mlir"]]},
        1: {"modules": [["jit_step", "b" * 32, "../../etc/passwd"], ["bad", "not hex", None],
                        "junk"]},
    }
    for rank, data in rows.items():
        (job / "fleet" / f"rank-{rank}.json").write_text(json.dumps(data))
    (job / "fleet" / "rank-7.json").write_text(json.dumps(rows[0]))  # not a rank of this job
    (job / "fleet" / "rank-2.json").write_text("[1, 2]")
    watch = fleet.Fleet(job, 0, 3)
    mods = watch.modules()
    assert sorted(mods) == [0, 1]
    assert mods[0][0].text_file == str(text)
    assert [m.text_file for m in mods[1]] == [None]  # outside the job folder: dropped
    (d,) = watch.compare()
    assert d.ranks == [1] and d.first_difference is None
    assert json.loads((job / "fleet" / "divergence.json").read_text())["divergence"][0][
        "module"] == "jit_step"


def test_the_first_stopped_rank_is_not_one_waiting_for_it():
    ranks = {
        0: RankProgress(146, 100.0, "collective", "waiting"),
        1: RankProgress(145, 101.0, "user_code", "in the user's code"),
        2: RankProgress(146, 99.0, "collective", "waiting"),
    }
    found = first_stopped.first_stopped(ranks)
    assert found["first_rank"] == 1 and found["waiting"] == [0, 2]
    assert "rank 1 stopped progressing first (after 145 steps)" in first_stopped.line(found)


def test_when_every_rank_waits_the_fewest_steps_then_the_earliest_is_first():
    ranks = {
        0: RankProgress(10, 100.0, "collective", None),
        1: RankProgress(10, 90.0, "collective", None),
        2: RankProgress(11, 80.0, "collective", None),
    }
    assert first_stopped.first_stopped(ranks)["first_rank"] == 1
    assert first_stopped.first_stopped({}) is None


def _dump_of(tmp_path: Path, body: str, jax_file: str | None = None) -> list[stacks.Thread]:
    """A real faulthandler dump of a process blocked where `body` blocks."""
    if jax_file is not None:
        target = tmp_path / jax_file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("import threading\n\ndef stop_trace():\n    threading.Event().wait()\n")
        for package in (target.parent, target.parent.parent):
            (package / "__init__.py").touch()
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(body))
    out = tmp_path / "stacks.txt"
    code = (f"import faulthandler, signal, sys; sys.path.insert(0, {str(tmp_path)!r}); "
            f"f = open({str(out)!r}, 'w'); faulthandler.register(signal.SIGUSR1, f, "
            "all_threads=True); import runpy; runpy.run_path(" + repr(str(script)) + ")")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, 10)  # SIGUSR1
        while out.stat().st_size == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    return stacks.parse(out.read_text())


def test_a_stack_in_the_profilers_stop_is_exporting_the_trace(tmp_path):
    threads = _dump_of(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(tmp_path / "site")!r})
        from jax._src import profiler
        open({str(tmp_path / "ready")!r}, "w").close()
        profiler.stop_trace()
        """, jax_file="site/jax/_src/profiler.py")
    found = stacks.phase(threads)
    assert found.name == "exporting_trace", found
    assert "user.py" in found.text


def test_a_line_that_waits_for_an_array_is_waiting_for_the_device(tmp_path):
    threads = _dump_of(tmp_path, f"""
        import threading

        class Array:
            def block_until_ready(self):
                threading.Event().wait()

        x = Array()
        open({str(tmp_path / "ready")!r}, "w").close()
        x.block_until_ready()
        """)
    # The user's method stands in for jaxlib's C++ one: the dump's innermost frame is the
    # user's class; one frame down is the waiting line.
    def below(frames):
        i = next(i for i, f in enumerate(frames) if f.function == "block_until_ready")
        return frames[i + 1:]

    main = next(t for t in threads if t.current)
    found = stacks.phase([stacks.Thread(main.ident, True, below(main.frames))])
    assert found.name == "collective", found
    assert "waiting for the device / a collective" in found.text


def test_the_fleet_file_is_written_again_only_when_what_it_says_changed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "progress").write_text("3\n")
    f = fleet.Fleet(tmp_path / "job", 1, 2)
    f.attach(run)
    feed = f.feed
    assert feed is not None
    # Read incrementally: the progress file once, and then only when it changes.
    assert feed.read() is True and feed.executions == 3
    assert feed.read() is False
    f.publish()
    path = tmp_path / "job" / fleet.FLEET_DIR / "rank-1.json"
    written = path.stat().st_ino
    f.publish()  # nothing new: the file stays the one written (each write replaces it)
    assert path.stat().st_ino == written
    before = (run / "progress").stat()
    (run / "progress").write_text("4\n")
    # A new mtime, even within the file system's timestamp granularity.
    os.utime(run / "progress", ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert feed.read() is True and feed.executions == 4
    f.publish()
    assert path.stat().st_ino != written
    assert json.loads(path.read_text())["executions"] == 4
