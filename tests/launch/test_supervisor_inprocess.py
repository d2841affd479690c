"""The supervisor's rules a user sees, called in pgle's own process on real child processes,
pipes and files (the mutation run maps a mutant only to tests that reach its function in the
test process; tests/launch/test_streams.py and test_stall_progress.py check the same through
`python -m pgle`): a printing workload is making progress, a quiet one is stopped with its
exit code, time the workload spent stopped is not a stall, the last line without a newline
reaches the log, the two streams' lines reach the log whole and in order, and a standard fd
closed when pgle started reaches the workload as /dev/null (issue 37)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from pgle.errors import EXIT_STALLED
from helpers.deadline import returns_within
from pgle.launch import launcher, streams
from pgle.launch.stall import StallPolicy, StallWatch

import pytest
from helpers.signals import IN_PROCESS, recorded_lines

pytestmark = IN_PROCESS


def _launch(tmp_path: Path, code: str, **kw) -> launcher.LaunchResult:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    # A wall-clock bound: a launcher that never notices the exit fails here, not at the
    # mutation run's CPU limit (a timeout, not a failure).
    with returns_within(30):
        return launcher.launch([sys.executable, "-c", code], env, tmp_path / "w.log",
                               poll_s=0.05, **kw)


def _watch(tmp_path: Path, policy: float | StallPolicy, said: list[str]) -> StallWatch:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    return StallWatch(run, policy, said.append)


# Prints every 50 ms for 4 s: far more often than the 2 s bound, for twice as long.
PRINTER = """
import time
t = time.monotonic()
while time.monotonic() - t < 4:
    print("working", flush=True)
    time.sleep(0.05)
"""


def test_a_printing_workload_is_progress_and_a_quiet_one_is_stopped(tmp_path, capfd):
    said: list[str] = []
    res = _launch(tmp_path, PRINTER, stall=_watch(tmp_path, 2.0, said))
    assert res.exit_code == 0 and not res.stopped_by_watchdog, said
    assert said == []
    assert res.duration_s >= 4
    assert "working" in capfd.readouterr().out

    quiet = tmp_path / "quiet"
    quiet.mkdir()
    t0 = time.monotonic()
    res = _launch(quiet, "import time; time.sleep(15)", stall=_watch(quiet, 1.0, said))
    assert res.exit_code == EXIT_STALLED and res.stopped_by_watchdog
    assert res.signal == signal.SIGTERM  # pgle's SIGTERM ended it; the code is pgle's, not 143
    assert time.monotonic() - t0 < 12  # stopped at the bound, not at the workload's end
    (line,) = said
    assert line.startswith("pgle: the workload made no progress for 1 s (--stall-timeout 1 s)")


def test_report_only_says_so_and_never_stops(tmp_path):
    said: list[str] = []
    watch = _watch(tmp_path, StallPolicy(None, 0.5, rhythm_stop=False), said)
    res = _launch(tmp_path, "import time; time.sleep(2.5)", stall=watch)
    assert res.exit_code == 0 and not res.stopped_by_watchdog
    assert len(watch.notes) == 1 and "pgle lets it run" in watch.notes[0]
    assert said == [f"pgle: {watch.notes[0]}"]


def test_time_the_workload_spent_stopped_is_no_stall(tmp_path):
    """SIGSTOP for 3 s under a 1 s bound, then SIGCONT: the workload finishes normally (the
    monotonic clock runs on while it is stopped: the launcher must see the stop)."""
    pid_file = tmp_path / "pid"
    code = (f"import os, time; open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid())); "
            f"os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); "
            "time.sleep(0.5); print('resumed', flush=True)")
    stopped_for = []

    def stop_then_continue() -> None:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGSTOP)
        t = time.monotonic()
        time.sleep(3)
        stopped_for.append(time.monotonic() - t)
        os.kill(pid, signal.SIGCONT)

    said: list[str] = []
    helper = threading.Thread(target=stop_then_continue, daemon=True)
    helper.start()
    res = _launch(tmp_path, code, stall=_watch(tmp_path, 1.0, said))
    helper.join(timeout=60)
    assert stopped_for and stopped_for[0] >= 3
    assert res.exit_code == 0 and not res.stopped_by_watchdog, said
    assert "resumed" in (tmp_path / "w.log").read_text()


def test_the_last_line_without_a_newline_reaches_the_log(tmp_path, capfd):
    code = "import sys; sys.stdout.write('first\\nlast words'); sys.stderr.write('err tail')"
    res = _launch(tmp_path, code)
    assert res.exit_code == 0
    log = (tmp_path / "w.log").read_text()
    assert sorted(log.splitlines(keepends=True)) == ["err tail\n", "first\n", "last words\n"]
    out, err = capfd.readouterr()
    assert out == "first\nlast words" and err == "err tail"  # the terminal gets what it wrote


def test_both_streams_reach_the_log_in_whole_lines_in_order(tmp_path, capfd):
    """Lines written to the two streams at once, in pieces (a line's end in a later write):
    each is one whole line of the log, and each stream's lines keep their order."""
    code = """
import os, sys
for i in range(3000):
    os.write(1, b"out %05d " % i)
    os.write(2, b"err %05d part " % i)
    os.write(1, b"end\\n")
    os.write(2, b"end\\n")
"""
    res = _launch(tmp_path, code)
    assert res.exit_code == 0
    lines = (tmp_path / "w.log").read_text().splitlines()
    assert [x for x in lines if x.startswith("out")] == [f"out {i:05d} end" for i in range(3000)]
    assert [x for x in lines if x.startswith("err")] == [
        f"err {i:05d} part end" for i in range(3000)]
    assert len(lines) == 6000
    out, err = capfd.readouterr()
    assert out.count("\n") == 3000 and err.count("\n") == 3000


def test_a_closed_stdin_reaches_the_workload_as_dev_null(tmp_path, capfd):
    """pgle started with fd 0 closed (`pgle run ... <&-`): the workload gets /dev/null there,
    never a file pgle opened later (the next open would take fd 0)."""
    saved = os.dup(0)
    try:
        os.close(0)
        streams.closed_at_start.discard(0)
        assert 0 in streams.reserve_standard_fds()
        assert os.get_inheritable(0)
        res = _launch(tmp_path, "import os; print(os.readlink('/proc/self/fd/0'))")
        assert res.exit_code == 0
        assert capfd.readouterr().out.strip() == os.devnull
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        streams.closed_at_start.discard(0)


# A harnessed process as pgle's harness makes it (pgle/launch/harness.py): its start and where
# faulthandler writes its stacks on pgle's dump signal, in the run folder's events file; then
# it blocks in the user's own code.
HUNG = """
import faulthandler, json, os, signal, sys, threading, time
run = sys.argv[1]
stacks = open(os.path.join(run, "stacks.txt"), "a")
faulthandler.register(signal.SIGURG, file=stacks, all_threads=True)
with open(os.path.join(run, "events.jsonl"), "a") as f:
    for r in ({"kind": "start", "t": time.time(), "pid": os.getpid()},
              {"kind": "stacks", "t": time.time(), "file": stacks.name,
               "main_thread": hex(threading.main_thread().ident)}):
        f.write(json.dumps(r) + "\\n")

def wait_for_the_peer():
    time.sleep(15)

wait_for_the_peer()
"""


def test_a_stall_writes_the_stacks_and_names_where_the_workload_waits(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    script = tmp_path / "hung.py"
    script.write_text(HUNG)
    said: list[str] = []
    watch = StallWatch(run, 1.0, said.append)
    t0 = time.monotonic()
    res = launcher.launch([sys.executable, str(script), str(run)], dict(os.environ),
                          tmp_path / "w.log", poll_s=0.05, stall=watch)
    assert time.monotonic() - t0 < 12 and res.exit_code == EXIT_STALLED
    report = watch.report
    assert report is not None
    (pid,) = report.phases  # the one harnessed process
    stacks_file = str(run / "stacks.txt")
    assert report.stacks == {pid: stacks_file}
    assert report.phase_names[pid] == "user_code"
    assert report.phases[pid] == (
        "in the user's code at hung.py:13 (wait_for_the_peer): `time.sleep(15)`")
    assert 'hung.py", line 13 in wait_for_the_peer' in (run / "stacks.txt").read_text()
    message = report.message()
    assert message.startswith("the workload made no progress for 1 s (--stall-timeout 1 s): ")
    assert f"its Python stacks are in {stacks_file}" in message
    assert message.endswith("pgle stopped it (exit 124; --stall-timeout sets the bound)")
    d = report.to_dict()
    assert d["bound_s"] == 1.0 and d["bound_rule"] == "--stall-timeout 1 s"
    assert d["processes"] == [{"pid": pid, "phase": "user_code",
                               "what": report.phases[pid], "stacks": stacks_file}]
    assert said[0].startswith("pgle: the workload made no progress for 1 s (--stall-timeout 1 s)"
                              ": writing its Python stacks, then stopping it")


# The workload starts a process of its own session (a daemon: no signal to the workload's
# group reaches it), says its pid, then waits.
WITH_DAEMON = """
import os, subprocess, sys, time
d = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                     start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(d.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(float(sys.argv[2]))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def _daemon_launch(tmp_path: Path, sleep: float, watchdog=None) -> tuple[launcher.LaunchResult, int]:
    pid_file = tmp_path / "daemon.pid"
    script = tmp_path / "daemon.py"
    script.write_text(WITH_DAEMON)
    res = launcher.launch([sys.executable, str(script), str(pid_file), str(sleep)],
                          dict(os.environ), tmp_path / "w.log", poll_s=0.05,
                          watchdog=watchdog and (lambda: watchdog(pid_file)))
    return res, int(pid_file.read_text())


def test_a_daemon_of_a_stopped_workload_is_stopped_with_it(tmp_path):
    """A stop (here a peer's failure, as the stall watchdog's) reaches the process that left
    the workload's group too; it is gone when pgle returns."""
    res, daemon = _daemon_launch(tmp_path, 20, watchdog=lambda f: 3 if f.exists() else None)
    assert res.exit_code == 3 and res.stopped_by_watchdog
    # SIGTERM reached it with the workload's group; SIGKILL would wait for the 5 s grace.
    assert res.duration_s < 4
    # pgle returns once no process carries its mark: an exiting process drops its memory (and
    # with it the environment the mark is read from) before the kernel makes it a zombie, so
    # it may still be in its exit for a moment (seen once in a full run, 2026-11-29).
    deadline = time.monotonic() + 1.0
    while _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(daemon)


def test_a_daemon_of_a_workload_that_ended_by_itself_is_left_alone(tmp_path):
    res, daemon = _daemon_launch(tmp_path, 0)
    try:
        assert res.exit_code == 0 and not res.stopped_by_watchdog
        assert _alive(daemon)  # as without pgle: a daemon is meant to outlive its starter
    finally:
        os.kill(daemon, signal.SIGKILL)


def test_a_stopped_workload_gets_sigterm_once(tmp_path):
    """A workload that checkpoints on SIGTERM gets it once from a stop, not once from its
    group and again as a process of the launch (escapees are only those outside the group)."""
    ready, got = tmp_path / "ready", tmp_path / "got"
    code = f"""
import os, signal, sys, time
def on_term(signum, frame):
    with open({str(got)!r}, "a") as f:
        f.write("term\\n")
    time.sleep(0.5)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open({str(ready)!r} + ".tmp", "w").close()
os.rename({str(ready)!r} + ".tmp", {str(ready)!r})
time.sleep(20)
"""
    res = launcher.launch([sys.executable, "-c", code], dict(os.environ), tmp_path / "w.log",
                          poll_s=0.05, watchdog=lambda: 5 if ready.exists() else None)
    assert res.exit_code == 5 and res.stopped_by_watchdog and not res.killed
    assert got.read_text() == "term\n"


def test_a_stopped_workload_that_ignores_sigterm_is_killed_after_the_peer_grace(tmp_path):
    """A rank stopped because its peer failed is probably stuck in a collective: SIGKILL
    follows PEER_STOP_GRACE_S after the SIGTERM it ignores, not the 30 s grace of a user's
    SIGTERM; the exit code stays the one pgle stopped it with."""
    ready = tmp_path / "ready"
    code = (f"import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            f"open({str(ready)!r} + '.tmp', 'w').close()\n"
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\ntime.sleep(25)\n")
    res = launcher.launch([sys.executable, "-c", code], dict(os.environ), tmp_path / "w.log",
                          poll_s=0.05, watchdog=lambda: 7 if ready.exists() else None)
    assert res.exit_code == 7 and res.stopped_by_watchdog and res.killed
    assert res.signal == signal.SIGKILL
    assert launcher.PEER_STOP_GRACE_S <= res.duration_s < launcher.PEER_STOP_GRACE_S + 10


RECORDER = """
import os, signal, sys, time
got = sys.argv[1]
def record(signum, frame):
    with open(got, "a") as f:
        f.write(signal.Signals(signum).name + "\\n")
    if signum == signal.SIGTERM:
        sys.exit(0)
for s in (signal.SIGUSR1, signal.SIGWINCH, signal.SIGCONT, signal.SIGTERM):
    signal.signal(s, record)
open(got + ".ready", "w").close()
t = time.monotonic()
while time.monotonic() - t < 20:
    time.sleep(0.01)
"""



def test_pgles_handlers_pass_each_signal_to_the_workloads_group(tmp_path, monkeypatch):
    """The handlers the launcher installs, called as the kernel calls them: SIGUSR1 passed
    on, SIGWINCH passed on, SIGCONT passed on with the clock restarted and the lease
    refreshed, SIGTERM passed on and the command stopped (SIGKILL armed after the grace); a
    signal pgle was started ignoring stays ignored; every handler is removed at the end."""
    got = tmp_path / "got"
    monkeypatch.setitem(os.environ, launcher.KILL_GRACE_VAR, "25")
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGCONT)}
    previous_usr2 = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        running = launcher.Running([sys.executable, "-c", RECORDER, str(got)], dict(os.environ),
                                   tmp_path / "w.log", cwd=None, terminal_level=None)
        handlers = running.signals
        assert signal.getsignal(signal.SIGUSR1) == handlers.forward
        assert signal.getsignal(signal.SIGCONT) == handlers.resume
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN  # nohup'd: left ignored
        # Neither stream a terminal: no size to pass on, SIGWINCH is left as it was.
        assert signal.getsignal(signal.SIGWINCH) != handlers.resized
        deadline = time.monotonic() + 20
        while not Path(str(got) + ".ready").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        handlers.forward(signal.SIGUSR1, None)
        assert recorded_lines(got, 1) == ["SIGUSR1"] and handlers.interrupted is None
        assert handlers.kill_at is None
        handlers.resized(signal.SIGWINCH, None)
        assert recorded_lines(got, 2)[1] == "SIGWINCH"
        resumed: list[int] = []
        handlers.on_resume.append(lambda: resumed.append(1))
        handlers.resume(signal.SIGCONT, None)
        assert recorded_lines(got, 3)[2] == "SIGCONT" and resumed == [1]
        t = time.monotonic()
        handlers.forward(signal.SIGTERM, None)
        assert handlers.interrupted == signal.SIGTERM
        assert handlers.kill_at is not None and t + 24 < handlers.kill_at < t + 26
        with returns_within(30):
            res = running.wait()
        assert res.interrupted == signal.SIGTERM and res.exit_code == 0 and not res.killed
        assert recorded_lines(got, 4) == ["SIGUSR1", "SIGWINCH", "SIGCONT", "SIGTERM"]
        for s, h in before.items():
            assert signal.getsignal(s) == h  # pgle's handlers are gone
    finally:
        signal.signal(signal.SIGUSR2, previous_usr2)


def test_a_signal_before_the_workload_exists_is_passed_on_once_it_does(tmp_path):
    got = tmp_path / "got"
    handlers = launcher._Signals(30.0, ())
    try:
        handlers.forward(signal.SIGUSR1, None)  # the child is not started yet
        assert handlers.pending == [signal.SIGUSR1]
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", RECORDER, str(got)], process_group=0)
        deadline = time.monotonic() + 20
        while not Path(str(got) + ".ready").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        handlers.attach(child)
        assert handlers.pending == [] and recorded_lines(got, 1) == ["SIGUSR1"]
        handlers.forward(signal.SIGTERM, None)
        assert child.wait(timeout=20) == 0 and recorded_lines(got, 2) == ["SIGUSR1", "SIGTERM"]
    finally:
        handlers.restore()


def test_a_held_workload_comes_back_with_its_output_then_ends_on_resume(tmp_path):
    """The handoff (pgle.launch.handoff): once the harness holds, the launch returns at once
    with the recorded exit code and everything written so far in the log; `resume` waits for
    the real end, and an Execution keeps the held code where the real one is 0."""
    from pgle.launch import execution

    ready = tmp_path / "ready"
    code = (f"import os, time\nprint('before the hold', flush=True)\n"
            f"open({str(ready)!r} + '.tmp', 'w').close()\n"
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\ntime.sleep(1)\n"
            "print('after', flush=True)\n")
    t0 = time.monotonic()
    with returns_within(30):
        res = launcher.launch([sys.executable, "-c", code], dict(os.environ),
                              tmp_path / "w.log", poll_s=0.05,
                              held=lambda: 3 if ready.exists() else None)
    assert res.pending is not None and res.exit_code == 3 and res.signal is None
    # The held result is a whole one: its time so far, its log, no log error.
    assert 0 < res.duration_s <= time.monotonic() - t0
    assert res.log_path == tmp_path / "w.log" and res.log_error is None
    assert (tmp_path / "w.log").read_text() == "before the hold\n"
    ex = execution.Execution(None, res, None, None, None)  # type: ignore[arg-type]
    assert ex.held and not ex.interrupted and ex.exit_code == 3
    with returns_within(30):
        ex.resume()
    assert ex.exit_code == 3 and ex.result.pending is None
    assert (tmp_path / "w.log").read_text() == "before the hold\nafter\n"
    ex.resume()  # nothing held any more: nothing to do


def test_a_resized_terminal_resizes_each_of_the_workloads_terminals(tmp_path):
    """pgle's stdout and stderr two terminals of their own sizes: on SIGWINCH each of the
    workload's pseudo-terminals takes the new size of the terminal it stands for."""
    import fcntl
    import struct
    import termios

    def size(fd: int) -> tuple[int, int]:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        return rows, cols

    def set_size(fd: int, rows: int, cols: int) -> None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    terminals = [os.openpty(), os.openpty()]
    saved = [os.dup(1), os.dup(2)]
    channels: list[launcher._Channel] = []
    handlers = None
    try:
        for fd, (_, slave) in zip((1, 2), terminals, strict=True):
            os.dup2(slave, fd)
        set_size(1, 33, 111)
        set_size(2, 20, 50)
        channels = [launcher._Channel(1), launcher._Channel(2)]
        assert all(c.terminal for c in channels)
        assert [size(c.read_fd) for c in channels] == [(33, 111), (20, 50)]
        handlers = launcher._Signals(30.0, (channels[0], channels[1]))
        assert signal.getsignal(signal.SIGWINCH) == handlers.resized
        set_size(1, 40, 120)
        set_size(2, 25, 60)
        handlers.resized(signal.SIGWINCH, None)
        assert [size(c.read_fd) for c in channels] == [(40, 120), (25, 60)]
        assert handlers.pending == [signal.SIGWINCH]  # for the workload once it exists
    finally:
        if handlers is not None:
            handlers.restore()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        for c in channels:
            os.close(c.read_fd)
            os.close(c.child_fd)
        for master, slave in terminals:
            os.close(master)
            os.close(slave)


def _held_launch(tmp_path: Path, after: str, **kw) -> launcher.LaunchResult:
    """A workload that prints, says it holds (the `ready` file), then runs `after`."""
    ready = tmp_path / "ready"
    code = (f"import os, sys, time\nprint('before the hold', flush=True)\n"
            f"open({str(ready)!r} + '.tmp', 'w').close()\n"
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\n{after}\n")
    with returns_within(30):
        return launcher.launch([sys.executable, "-c", code], dict(os.environ),
                               tmp_path / "w.log", poll_s=0.05,
                               held=lambda: 3 if ready.exists() else None, **kw)


def test_a_held_workload_that_fails_at_its_real_end_keeps_that_code(tmp_path):
    from pgle.launch import execution

    res = _held_launch(tmp_path, "time.sleep(0.5)\nsys.exit(4)")
    ex = execution.Execution(None, res, None, None, None)  # type: ignore[arg-type]
    assert ex.held and ex.exit_code == 3
    with returns_within(30):
        ex.resume()
    assert ex.exit_code == 4  # the real end failed: its code, not the held one


def test_a_stopping_signal_while_held_stops_the_command_at_resume(tmp_path):
    from pgle.errors import Interrupted
    from pgle.launch import execution

    res = _held_launch(tmp_path, "time.sleep(20)")
    ex = execution.Execution(None, res, None, None, None)  # type: ignore[arg-type]
    assert ex.held and not ex.interrupted
    assert res.pending is not None
    res.pending.signals.forward(signal.SIGTERM, None)  # pgle's handler, as the kernel calls it
    assert ex.interrupted
    with returns_within(30), pytest.raises(Interrupted) as e:
        ex.resume()
    assert e.value.signum == signal.SIGTERM and e.value.message == (
        "interrupted by SIGTERM: pgle passed it to the workload, which exited with code 143; "
        f"nothing more is run. Its output: {tmp_path / 'w.log'}")


def test_a_workload_that_keeps_writing_is_held_after_two_seconds_at_most(tmp_path):
    """The launch waits for the pumps to catch up with a held workload's output, but not for
    a workload that never stops writing: it comes back held all the same."""
    t0 = time.monotonic()
    res = _held_launch(tmp_path, "t = time.monotonic()\nwhile time.monotonic() - t < 6:\n"
                                 "    print('tick', flush=True)\n    time.sleep(0.002)")
    assert res.pending is not None and time.monotonic() - t0 < 5
    # At most 2 s (and a poll) after it said it holds: the launch waits no longer.
    assert time.time() - (tmp_path / "ready").stat().st_mtime < 2.8
    with returns_within(30):
        final = res.pending.resume()
    assert final.exit_code == 0


def test_a_program_that_cannot_start_is_one_sentence_and_leaves_nothing_behind(tmp_path):
    from pgle.errors import PgleError

    missing = str(tmp_path / "no-such-program")
    handlers = {s: signal.getsignal(s) for s in (*launcher.FORWARDED_SIGNALS, signal.SIGCONT)}
    fds = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(PgleError) as e:
        launcher.launch([missing], dict(os.environ), tmp_path / "w.log", poll_s=0.05)
    assert e.value.message == f"cannot start {missing}: No such file or directory."
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # pgle's handlers removed
    assert sorted(os.listdir("/proc/self/fd")) == fds  # pipes, terminals and log closed


def test_the_exit_watch_sees_the_exit_at_once_and_closes_once(tmp_path):
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    watch = launcher._ExitWatch(child)
    try:
        assert watch.fd is not None  # a pidfd (Linux >= 5.3)
        t0 = time.monotonic()
        assert not watch.within(0.05)
        assert 0.04 <= time.monotonic() - t0 < 0.45
        assert watch.within(20)
        assert time.monotonic() - t0 < 10 and child.poll() is not None
    finally:
        watch.close()
        child.wait(timeout=20)
    assert watch.fd is None
    watch.close()  # twice: nothing left to close


def test_a_frozen_terminal_is_given_up_after_the_grace_and_said(tmp_path, monkeypatch, capfd):
    """pgle's stdout a terminal nobody reads (Ctrl-S): the workload writes more than it takes
    and exits; pgle waits PIPE_GRACE_S for it, then says so and returns; the log is whole."""
    master, slave = os.openpty()
    saved = os.dup(1)
    terminal = open(1, "w", closefd=False)  # noqa: SIM115  pgle's stdout, fd 1
    monkeypatch.setattr(sys, "stdout", terminal)
    code = "import sys\nfor i in range(20000):\n    print('line %05d' % i)\n"
    try:
        os.dup2(slave, 1)
        res = _launch(tmp_path, code)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(slave)
        os.close(master)
    assert res.exit_code == 0
    assert launcher.PIPE_GRACE_S <= res.duration_s < launcher.PIPE_GRACE_S + 10
    log = tmp_path / "w.log"
    assert log.read_text() == "".join(f"line {i:05d}\n" for i in range(20000))
    assert capfd.readouterr().err == (
        "pgle: warning: the terminal took none of the workload's stdout for 5 s after the "
        f"workload exited (frozen with Ctrl-S?); the rest of it is in {log} only\n")


def test_ctrl_z_stops_the_workloads_group_then_pgle_and_sigcont_resumes_both(tmp_path):
    """pgle's Ctrl-Z handler, called as the kernel calls it: the workload's group gets SIGTSTP,
    then pgle stops itself with the default action (the shell sees the job stopped; where the
    test's process group is orphaned the kernel drops it); a helper this test starts sends
    SIGCONT until the test is past it, which resumes pgle and, through its handler, the
    workload. The handler is in place again for the next Ctrl-Z."""
    import subprocess

    got = tmp_path / "got"
    recorder = RECORDER.replace("signal.SIGCONT, signal.SIGTERM", "signal.SIGCONT, signal.SIGTSTP, "
                                "signal.SIGTERM")
    child = subprocess.Popen([sys.executable, "-c", recorder, str(got)], process_group=0)
    handlers = launcher._Signals(30.0, ())
    past = tmp_path / "past"
    helper = None
    try:
        deadline = time.monotonic() + 20
        while not Path(str(got) + ".ready").exists():
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.01)
        handlers.attach(child)
        assert signal.getsignal(signal.SIGTSTP) == handlers.suspend
        helper = subprocess.Popen([sys.executable, "-c", (
            # At least one SIGCONT: in an orphaned process group (a run under setsid or
            # nohup) the kernel drops the SIGTSTP, pgle never stops and `past` exists at once.
            "import os, signal, sys, time\nt = time.monotonic()\n"
            "while True:\n    time.sleep(0.2)\n    os.kill(int(sys.argv[1]), signal.SIGCONT)\n"
            "    if os.path.exists(sys.argv[2]) or time.monotonic() - t > 30:\n        break\n"),
            str(os.getpid()), str(past)])
        handlers.suspend(signal.SIGTSTP, None)
        past.touch()
        assert helper.wait(timeout=60) == 0
        assert signal.getsignal(signal.SIGTSTP) == handlers.suspend  # ready for the next one
        lines = recorded_lines(got, 2)
        assert lines[0] == "SIGTSTP" and set(lines[1:]) == {"SIGCONT"}, lines
        handlers.forward(signal.SIGTERM, None)
        assert child.wait(timeout=20) == 0
    finally:
        past.touch()
        if helper is not None:
            helper.wait(timeout=60)
        if child.poll() is None:
            child.kill()
            child.wait(timeout=20)
        handlers.restore()


def test_the_workload_gets_its_folder_its_own_group_the_mark_and_pgles_pipe(tmp_path):
    """What the launch hands the workload: the folder asked for, a process group of its own,
    this launch's mark (pgle.launch.escapees) and the read end of the pipe whose EOF says
    pgle died (PGLE_PARENT_FD, only pgle holds the write end)."""
    import json as json_

    folder = tmp_path / "here"
    folder.mkdir()
    code = ("import json, os, stat\nfd = int(os.environ['PGLE_PARENT_FD'])\n"
            "print(json.dumps({'cwd': os.getcwd(), 'pgid': os.getpgid(0), 'pid': os.getpid(),"
            " 'token': os.environ['PGLE_LAUNCH_TOKEN'],"
            " 'fifo': stat.S_ISFIFO(os.fstat(fd).st_mode),"
            " 'fds': sorted(int(f) for f in os.listdir('/proc/self/fd'))}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    with returns_within(30):
        res = launcher.launch([sys.executable, "-c", code], env, tmp_path / "w.log",
                              cwd=str(folder), poll_s=0.05)
    assert res.exit_code == 0
    seen = json_.loads((tmp_path / "w.log").read_text())
    assert seen["cwd"] == str(folder) and seen["pgid"] == seen["pid"]
    assert len(seen["token"]) == 32 and seen["fifo"]
    # Nothing else of pgle's: stdin, stdout, stderr, the pipe's read end (and listdir's own).
    assert len(seen["fds"]) <= 5, seen["fds"]


def test_a_workload_ignoring_a_forwarded_sigterm_is_killed_after_the_grace(tmp_path, capfd):
    """pgle's SIGTERM handler, called as the kernel calls it (the same rule test_pumps_inprocess
    checks by signalling pgle's own process, which the mutation run cannot do): SIGKILL,
    group and all, once the grace is over, said on stderr; the exit code is the kill's."""
    ready = tmp_path / "ready"
    code = (f"import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            f"open({str(ready)!r} + '.tmp', 'w').close()\n"
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\ntime.sleep(25)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env[launcher.KILL_GRACE_VAR] = "0.5"
    running = launcher.Running([sys.executable, "-c", code], env, tmp_path / "w.log",
                               cwd=None, terminal_level=None)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.01)
        t0 = time.monotonic()
        running.signals.forward(signal.SIGTERM, None)
        with returns_within(30):
            res = running.wait(poll_s=0.05)
    finally:
        running.signals.restore()
    assert 0.5 <= time.monotonic() - t0 < 5  # the grace, not the workload's 25 s
    assert res.killed and res.interrupted == signal.SIGTERM and not res.stopped_by_watchdog
    assert res.exit_code == 128 + signal.SIGKILL and res.signal == signal.SIGKILL
    assert capfd.readouterr().err == (
        "pgle: the workload was still running 0.5 s after SIGTERM: killed it (SIGKILL, its "
        "process group too; PGLE_KILL_GRACE_S sets the grace period)\n")


# Ignores SIGTERM: only the SIGKILL after the grace ends it.
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").close()
time.sleep(30)
"""


def test_the_kill_comes_at_the_grace_not_at_the_next_poll(tmp_path):
    """SIGTERM passed on between two polls 2 s apart, with a 0.3 s grace: the SIGKILL comes
    0.3 s later, the wait cut to the grace's end, not at the next poll."""
    ready = tmp_path / "ready"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    env[launcher.KILL_GRACE_VAR] = "0.3"
    running = launcher.Running([sys.executable, "-c", STUBBORN, str(ready)], env,
                               tmp_path / "w.log", cwd=None, terminal_level=None)
    sent: list[float] = []

    def watchdog() -> int | None:
        if not sent and ready.exists():
            sent.append(time.monotonic())
            running.signals.forward(signal.SIGTERM, None)  # as the kernel calls it
        return None

    with returns_within(30):
        res = running.wait(watchdog=watchdog, poll_s=2.0)
    took = time.monotonic() - sent[0]
    assert res.killed and res.interrupted == signal.SIGTERM
    assert took < 0.9, took  # 0.3 s and the reaping; a wait of 1 s or more is late


def test_sigcont_restarts_the_stall_watchdogs_clock(tmp_path):
    """pgle resumed (SIGCONT, from `fg` or `bg`): the time it was stopped is not the
    workload's, so the stall watchdog's clock restarts there."""
    now = [1000.0]
    run = tmp_path / "run"
    run.mkdir()
    watch = StallWatch(run, 60.0, lambda s: None, clock=lambda: now[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGLE_")}
    running = launcher.Running([sys.executable, "-c", "import time; time.sleep(15)"], env,
                               tmp_path / "w.log", cwd=None, terminal_level=None)
    restarted: list[float] = []

    def watchdog() -> int | None:
        now[0] += 1.0  # under STOP_GAP_S a poll: only the restart moves the clock's start
        running.signals.resume(signal.SIGCONT, None)  # as the kernel calls it
        restarted.append(watch.last)
        return 3

    with returns_within(30):
        res = running.wait(watchdog=watchdog, poll_s=0.05, stall=watch)
    assert res.stopped_by_watchdog and restarted == [1001.0]


def test_a_held_result_says_the_log_is_incomplete(tmp_path):
    """The log failed (a full disk) before the harness held: the held result carries the
    error, as the real end's would, so the command's report says the log is incomplete."""
    from helpers.smallfs import fill, small_filesystem

    ready = tmp_path / "ready"
    code = (f"import os, time\nprint('x' * 8192, flush=True)\n"
            f"open({str(ready)!r} + '.tmp', 'w').close()\n"
            f"os.rename({str(ready)!r} + '.tmp', {str(ready)!r})\ntime.sleep(0.5)\n")
    with small_filesystem(tmp_path / "fs", 64) as fs:
        fill(fs)
        with returns_within(30):
            res = launcher.launch([sys.executable, "-c", code], dict(os.environ),
                                  fs / "w.log", poll_s=0.05,
                                  held=lambda: 3 if ready.exists() else None)
        assert res.pending is not None and res.exit_code == 3
        assert res.log_error == "No space left on device (ENOSPC)"
        with returns_within(30):
            assert res.pending.resume().log_error == "No space left on device (ENOSPC)"


# Starts a silent daemon that keeps the streams open, then writes more than a frozen
# terminal takes and exits.
FROZEN_AND_HELD = """
import subprocess, sys
DAEMON = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(30)"
subprocess.Popen([sys.executable, "-c", DAEMON, sys.argv[1]], start_new_session=True)
for i in range(20000):
    print('line %05d' % i)
"""


def test_a_frozen_terminal_and_a_daemon_holding_the_output_are_both_given_up(
        tmp_path, monkeypatch, capfd):
    """pgle's stdout a terminal nobody reads, and a daemon of the workload that holds the
    output open: pgle gives up the terminal after the grace, waits the grace once more for
    the stream to end, then stops waiting for it too and says each (the grace 1 s here)."""
    import signal

    monkeypatch.setattr(launcher, "PIPE_GRACE_S", 1.0)
    pid_file = tmp_path / "daemon.pid"
    master, slave = os.openpty()
    saved = os.dup(1)
    terminal = open(1, "w", closefd=False)  # noqa: SIM115  pgle's stdout, fd 1
    monkeypatch.setattr(sys, "stdout", terminal)
    try:
        os.dup2(slave, 1)
        res = _launch(tmp_path, FROZEN_AND_HELD.replace("sys.argv[1]", repr(str(pid_file))))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(slave)
        os.close(master)
        if pid_file.exists() and pid_file.read_text():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # this test's workload's
    assert res.exit_code == 0
    log = tmp_path / "w.log"
    assert capfd.readouterr().err == (
        "pgle: warning: the terminal took none of the workload's stdout for 1 s after the "
        f"workload exited (frozen with Ctrl-S?); the rest of it is in {log} only\n"
        "pgle: warning: the workload exited, but a process it started still holds its output "
        "open; pgle stopped waiting after 1 s: what that process prints from now on is "
        f"neither shown nor kept in {log}\n")
