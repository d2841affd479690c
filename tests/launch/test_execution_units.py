"""One launch through the harness (pgle.launch.execution), in process on a real workload
process: the spec it writes (secrets redacted, the real arguments by environment only), the
run folder it leaves, command mode's environment, a stall and a Ctrl-C as the command sees
them, and the sentences a user reads (issue 37: only subprocess tests reached it)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from pgle.errors import EXIT_STALLED, Interrupted, Stalled
from pgle.evidence import schema
from pgle.launch import childenv, execution
from pgle.launch.launcher import LaunchResult
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.redact import REDACTED


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PGLE_", "XLA_", "JAX_", "TF_CPP_"))} | {"JAX_PLATFORMS": "cpu"}


def test_a_script_runs_under_the_harness_and_leaves_its_run_folder(tmp_path, capfd):
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('hello', sys.argv[1:])\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    child = childenv.build(_env(), xla={"xla_gpu_enable_latency_hiding_scheduler": "true"})
    copy = tmp_path / "copy.log"
    ex = execution.execute(Workload(str(script), None, ("--token", "s3cret")), run, child,
                           log_copy=str(copy))
    assert ex.exit_code == 0 and not ex.held and not ex.interrupted
    # The script saw its real arguments; every file pgle keeps has them redacted.
    assert run.log.read_text() == "hello ['--token', 's3cret']\n" == copy.read_text()
    spec = json.loads(run.spec.read_text())
    assert spec["workload"]["args"] == ["--token", REDACTED] and "s3cret" not in run.spec.read_text()
    assert spec["events"] == str(run.events)
    assert spec["count_jits"] is True and spec["hold_timeout_s"] == 900.0  # the defaults
    assert spec["observe_pgle"] is False and spec["hold"] is False and spec["profile"] is None
    assert spec["expected_xla_flags"] == {
        "xla_gpu_enable_latency_hiding_scheduler": "--xla_gpu_enable_latency_hiding_scheduler=true"}
    assert not (run.path / schema.STACKS_NAME).exists()  # never written: not left behind
    assert ex.events.exit is not None and ex.events.exit.code == 0
    report = ex.report("run", "ok", reasons=["why"], details={"k": 1}).to_dict()
    assert report["command"] == "run" and report["status"] == "ok"
    assert report["reasons"] == ["why"] and report["k"] == 1  # the command's own fields
    assert report["workload_exit_code"] == 0 and report["log_path"] == str(run.log)
    assert report["run_dir"] == str(run.path)
    assert ex.dropped_flags_reason() is None


def test_a_command_runs_as_it_is_with_the_harness_on_its_path(tmp_path):
    run = RunFolder.create("run", str(tmp_path / "run"))
    env = _env() | {"PYTHONPATH": "/mine"}
    code = "import os, sys, jax; print(os.environ['PYTHONPATH']); sys.exit(3)"
    w = Workload(None, None, ("-c", code), (sys.executable, "-c", code))
    ex = execution.execute(w, run, childenv.build(env))
    assert ex.exit_code == 3
    # The harness found its spec (it starts in the process that imports jax): its records.
    assert ex.events.exit is not None and ex.events.exit.code == 3
    assert run.log.read_text() == f"{execution.BOOT}{os.pathsep}/mine\n"
    assert json.loads(run.spec.read_text())["workload"]["command"] == [sys.executable, "-c", code]
    env2 = execution.command_environment({"A": "1"}, run.spec)
    assert env2 == {"A": "1", schema.SPEC_VAR: str(run.spec),
                    execution.PGLE_ROOT_VAR: str(Path(execution.__file__).resolve().parents[2]),
                    "PYTHONPATH": str(execution.BOOT)}


def test_a_stall_is_raised_with_what_the_watchdog_found(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text("import time\ntime.sleep(15)\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    before_stop: list[object] = []
    with pytest.raises(Stalled) as e:
        execution.execute(Workload(str(script), None, ()), run, childenv.build(_env()),
                          stall_timeout=1.0, before_stall_stop=before_stop.append)
    assert e.value.exit_code == EXIT_STALLED
    ex = e.value.execution
    assert ex.exit_code == EXIT_STALLED and ex.stall is not None
    assert before_stop == [ex.stall]  # told before pgle stopped it
    assert e.value.message == ex.stall.message()
    assert e.value.message.startswith("the workload made no progress for ")


def test_exit_codes_and_sentences_of_an_interrupted_launch(tmp_path):
    log = tmp_path / "w.log"
    ctrl_c = LaunchResult(130, signal.SIGINT, 1.0, log, interrupted=signal.SIGINT)
    e = execution.interrupted(ctrl_c)
    assert isinstance(e, Interrupted) and e.exit_code == 130 and e.signum == signal.SIGINT
    assert e.message == ("interrupted by SIGINT (Ctrl-C): pgle passed it to the workload, which "
                         f"exited with code 130; nothing more is run. Its output: {log}")
    killed = LaunchResult(137, signal.SIGKILL, 1.0, log, interrupted=signal.SIGTERM, killed=True)
    e = execution.interrupted(killed)
    assert e.exit_code == 143 and e.message == (
        "interrupted by SIGTERM: pgle passed it to the workload, which ignored it and was "
        f"killed (SIGKILL) after the grace period; nothing more is run. Its output: {log}")
    assert execution.interrupted(LaunchResult(0, None, 1.0, log)).exit_code == 130
    assert execution.remedy("File too large (EFBIG)") == "raise the file size limit (ulimit -f)"
    assert execution.remedy("No space left on device (ENOSPC)") == "free space"
    assert execution.remedy("Disk quota exceeded (EDQUOT)") == "free space"
    assert execution.remedy("Input/output error (EIO)") == "fix that"


def test_pgles_flags_are_those_it_added_or_changed():
    child = childenv.build({"XLA_FLAGS": "--xla_dump_to=/d --xla_gpu_enable_latency_hiding_scheduler=false"},
                           xla={"xla_gpu_enable_latency_hiding_scheduler": "true",
                                "xla_dump_to": "/d"})
    assert execution.pgle_flags(child) == {
        "xla_gpu_enable_latency_hiding_scheduler": "--xla_gpu_enable_latency_hiding_scheduler=true"}
    assert execution.pgle_flags(childenv.build({})) == {}


def test_a_held_workload_is_seen_once_the_harness_holds(tmp_path):
    run = RunFolder.create("run", str(tmp_path / "run"))
    poll = execution._held(run)
    assert poll() is None  # no handoff folder yet
    (run.path / schema.HANDOFF_DIR).mkdir()
    with open(run.events, "a") as f:
        f.write(json.dumps({"kind": schema.EXIT, "t": 1.0, "code": 3}) + "\n")
    assert poll() is None  # exited, not held
    with open(run.events, "a") as f:
        f.write(json.dumps({"kind": schema.HOLD, "t": 2.0}) + "\n")
    assert poll() == 3
    other = RunFolder.create("run", str(tmp_path / "other"))
    (other.path / schema.HANDOFF_DIR).mkdir()
    other.events.write_text(json.dumps({"kind": schema.HOLD, "t": 2.0}) + "\n")
    assert execution._held(other)() == 0  # held before any exit code: 0


def test_empty_stacks_files_are_dropped_and_written_ones_kept(tmp_path):
    run = RunFolder.create("run", str(tmp_path / "run"))
    proc = run.path / schema.PROCS_DIR / "123"
    proc.mkdir(parents=True)
    (run.path / schema.STACKS_NAME).write_text("")
    (proc / schema.STACKS_NAME).write_text("Thread 0x1 (most recent call first):\n")
    link = run.path / schema.PROCS_DIR / "456"
    link.mkdir()
    (link / schema.STACKS_NAME).symlink_to(tmp_path / "empty")
    (tmp_path / "empty").write_text("")
    quiet = run.path / schema.PROCS_DIR / "789"  # a process that never dumped
    quiet.mkdir()
    (quiet / schema.STACKS_NAME).write_text("")
    execution._drop_empty_stacks(run)
    assert not (run.path / schema.STACKS_NAME).exists()
    assert not (quiet / schema.STACKS_NAME).exists()
    assert (proc / schema.STACKS_NAME).exists() and (link / schema.STACKS_NAME).is_symlink()


def test_a_script_that_replaces_xla_flags_is_told_which_of_pgles_flags_xla_never_saw(tmp_path):
    script = tmp_path / "assigns.py"
    script.write_text("import os\nos.environ['XLA_FLAGS'] = '--xla_dump_hlo_as_text'\n"
                      "import jax\nprint(jax.jit(lambda x: x + 1)(1))\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    child = childenv.build(_env(), xla={"xla_dump_to": str(tmp_path / "dump")})
    ex = execution.execute(Workload(str(script), None, ()), run, child)
    assert ex.exit_code == 0, run.log.read_text()
    assert ex.dropped_flags_reason() == (
        f"the workload replaced XLA_FLAGS before XLA read it: pgle's --xla_dump_to={tmp_path}/dump "
        "never reached XLA (XLA saw '--xla_dump_hlo_as_text'); make the script append to "
        "os.environ['XLA_FLAGS'] instead of assigning it (docs/guide/real-scripts.md)")


def test_what_a_command_hands_the_launch_reaches_it(tmp_path, capfd):
    """on_start before the launch, on_exit with the workload's code the moment it exits, the
    terminal's INFO filter, a reported quiet spell as a warning of the command, and every
    field of the harness's spec as given."""
    from pgle.launch.stall import StallPolicy

    info = "I1129 10:00:00.123456   4242 gpu_compiler.cc:1] Using PGLE profile from /p\n"
    script = tmp_path / "w.py"
    script.write_text(f"import sys, time\nsys.stderr.write({info!r})\nsys.stderr.flush()\n"
                      "time.sleep(1.5)\nsys.exit(3)\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    child = childenv.build(_env(), info_log=True)
    calls: list[object] = []
    ex = execution.execute(
        Workload(str(script), None, ()), run, child,
        step_name="jit(step)", capture_loggers=[{"name": "absl"}], warnings_always=["ignore"],
        count_jits=False, hold_timeout_s=12.5, export_dir=str(tmp_path / "export"),
        on_start=lambda: calls.append("start"), on_exit=calls.append,
        stall_timeout=StallPolicy(None, 0.5, rhythm_stop=False), progress=True)
    assert ex.exit_code == 3 and calls == ["start", 3]
    assert ex.child is child and ex.stall is None
    assert info not in capfd.readouterr().err and info in run.log.read_text()
    assert [w for w in child.warnings if "pgle lets it run" in w]
    spec = json.loads(run.spec.read_text())
    assert spec["step_name"] == "jit(step)" and spec["capture_loggers"] == [{"name": "absl"}]
    assert spec["warnings_always"] == ["ignore"] and spec["count_jits"] is False
    assert spec["hold_timeout_s"] == 12.5 and spec["export_dir"] == str(tmp_path / "export")
    assert spec["observe_pgle"] is False and spec["hold"] is False and spec["profile"] is None
    assert ex.spec.step_name == "jit(step)"


def test_a_watchdog_stops_the_launch_and_on_exit_hears_its_code(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("import time\ntime.sleep(15)\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    exits: list[int] = []
    ex = execution.execute(Workload(str(script), None, ()), run, childenv.build(_env()),
                           watchdog=lambda: 9, on_exit=exits.append, stall_timeout=0)
    assert ex.exit_code == 9 and exits == [9] and ex.result.stopped_by_watchdog


def test_every_flag_xla_never_saw_is_named_as_pgle_gave_it_or_by_its_name(tmp_path):
    """Read from a real events file: each missing flag as pgle set it where the spec has it,
    by its bare name where not (an older harness' record), in the order seen."""
    from pgle.evidence.events import read_run_events
    from pgle.evidence.schema import HarnessSpec, WorkloadSpec

    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({
        "kind": schema.XLA_FLAGS_SEEN, "t": 1.0, "effective": "--xla_dump_hlo_as_text",
        "missing": ["xla_dump_to", "xla_gpu_pgle_profile_file_or_directory_path"]}) + "\n")
    spec = HarnessSpec(str(events), WorkloadSpec("t.py", None, (), ()),
                       expected_xla_flags={"xla_dump_to": "--xla_dump_to=/d"})
    result = LaunchResult(0, None, 1.0, tmp_path / "w.log")
    ex = execution.Execution(None, result, read_run_events(events), None, spec)  # type: ignore[arg-type]
    assert ex.dropped_flags_reason() == (
        "the workload replaced XLA_FLAGS before XLA read it: pgle's --xla_dump_to=/d "
        "xla_gpu_pgle_profile_file_or_directory_path never reached XLA (XLA saw "
        "'--xla_dump_hlo_as_text'); make the script append to os.environ['XLA_FLAGS'] instead "
        "of assigning it (docs/guide/real-scripts.md)")


def test_progress_lines_say_whether_a_window_is_awaited_and_only_when_asked(tmp_path, caplog,
                                                                            monkeypatch):
    """The launch's progress lines (pgle.launch.progress), every poll here instead of every
    10 s: plain running time without a window, the window awaited with one (a steps window
    the script never reaches), none unless asked."""
    import functools

    from pgle.launch.progress import WindowProgress

    monkeypatch.setattr(execution, "WindowProgress", functools.partial(WindowProgress, every=0.0))
    caplog.set_level("INFO", logger="pgle.launch.progress")
    script = tmp_path / "w.py"
    script.write_text("import time\ntime.sleep(1.2)\n")

    def lines(name: str, **kw) -> list[str]:
        caplog.clear()
        run = RunFolder.create("run", str(tmp_path / name))
        ex = execution.execute(Workload(str(script), None, ()), run, childenv.build(_env()),
                               stall_timeout=0, **kw)
        assert ex.exit_code == 0, run.log.read_text()
        return [r.getMessage() for r in caplog.records if r.name == "pgle.launch.progress"]

    plain = lines("plain", progress=True)
    assert plain and all(x.startswith("workload running for ") and "window" not in x
                         for x in plain), plain
    assert lines("quiet") == []  # progress is off unless asked
    window = schema.WindowSpec("steps", str(tmp_path / "trace"), start=100, count=1)
    awaited = lines("window", progress=True, profile_window=window)
    assert awaited and all(x.endswith("the profiling window has not opened yet")
                           for x in awaited), awaited
    spec = json.loads((tmp_path / "window" / "spec.json").read_text())
    assert spec["profile"]["mode"] == "steps" and spec["profile"]["start"] == 100


def test_a_module_runs_as_python_m_would_and_observing_auto_pgle_is_asked(tmp_path):
    run = RunFolder.create("run", str(tmp_path / "run"))
    ex = execution.execute(Workload(None, "this", ()), run, childenv.build(_env()),
                           observe_pgle=True)
    assert ex.exit_code == 0 and run.log.read_text().startswith("The Zen of Python")
    spec = json.loads(run.spec.read_text())
    assert spec["workload"] == {"script": None, "module": "this", "args": [], "command": []}
    assert spec["observe_pgle"] is True


def test_a_commands_secret_arguments_never_travel_in_its_environment(tmp_path):
    """Only a script run by the harness gets its real arguments back from the environment; a
    command gets them on its command line, and its processes (here a shell) never see them
    in PGLE_WORKLOAD_ARGS."""
    run = RunFolder.create("run", str(tmp_path / "run"))
    shown = f'echo "${{{schema.WORKLOAD_ARGS}:-none}}" "$1"'
    command = ("sh", "-c", shown, "sh", "--token=s3cret")
    ex = execution.execute(Workload(None, None, command[1:], command), run,
                           childenv.build(_env()))
    assert ex.exit_code == 0
    assert run.log.read_text() == "none --token=s3cret\n"


def test_a_hold_is_asked_of_the_harness_and_a_workload_without_jax_distributed_just_ends(
        tmp_path):
    """`hold` reaches the spec; a workload that never started jax.distributed has no peer to
    exchange with: the harness does not hold it, and the launch ends as any other."""
    script = tmp_path / "w.py"
    script.write_text("print('done')\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    ex = execution.execute(Workload(str(script), None, ()), run, childenv.build(_env()),
                           hold=True, hold_timeout_s=3)
    spec = json.loads(run.spec.read_text())
    assert spec["hold"] is True and spec["hold_timeout_s"] == 3
    assert not ex.held and ex.exit_code == 0 and run.log.read_text() == "done\n"


def _held_distributed(tmp_path, hold_timeout_s):
    """A one-process jax.distributed workload launched with `hold` (the harness holds its end
    for pgle's exchange): (its run folder, the held execution)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "dist.py"
    script.write_text(f"import jax\njax.distributed.initialize('127.0.0.1:{port}', "
                      "num_processes=1, process_id=0)\nprint('initialized', flush=True)\n")
    run = RunFolder.create("run", str(tmp_path / "run"))
    return run, execution.execute(Workload(str(script), None, ()), run,
                                  childenv.build(_env()), hold=True,
                                  hold_timeout_s=hold_timeout_s)


def test_a_workload_of_jax_distributed_is_held_at_its_end_until_resumed(tmp_path):
    """A one-process jax.distributed job: the harness holds its end for pgle's exchange
    (pgle.launch.handoff) and the launch comes back at once, held; nothing asked, the
    harness lets it go after hold_timeout_s, and resume() sees the real end."""
    run, ex = _held_distributed(tmp_path, hold_timeout_s=3)
    assert ex.held and ex.exit_code == 0 and ex.result.pending is not None
    assert (run.path / schema.HANDOFF_DIR).is_dir()
    ex.resume()
    assert not ex.held and ex.exit_code == 0
    assert run.log.read_text().startswith("initialized\n")


def test_a_held_workload_killed_before_its_end_fails_the_launch(tmp_path):
    """The workload exited 0 as far as the harness saw, then was killed while held (as an OOM
    killer or a scheduler's preemption does): resume() reports the real end, not the 0."""
    run, ex = _held_distributed(tmp_path, hold_timeout_s=60)
    assert ex.held and ex.exit_code == 0
    pending = ex.result.pending
    assert pending is not None
    os.kill(pending.child.pid, signal.SIGKILL)  # pgle's own child
    ex.resume()
    assert not ex.held and ex.exit_code not in (0, None), ex.result


def test_a_log_cut_short_by_a_full_disk_is_a_warning_of_the_command(tmp_path, capfd):
    """The run folder's disk fills while the workload prints: the workload runs on, its
    output still shows, and the command's warnings say the log is incomplete and why."""
    from helpers.smallfs import fill, small_filesystem

    with small_filesystem(tmp_path / "fs", 256) as fs:
        script = tmp_path / "loud.py"
        script.write_text("for i in range(40000):\n    print('line %05d' % i)\n")
        run = RunFolder.create("run", str(fs / "run"))
        fill(fs, leave_bytes=48 << 10)  # room for the spec and the first lines only
        child = childenv.build(_env())
        ex = execution.execute(Workload(str(script), None, ()), run, child)
        assert ex.exit_code == 0 and ex.result.log_error == "No space left on device (ENOSPC)"
        assert capfd.readouterr().out.count("\n") == 40000  # shown whole all the same
        assert (f"the workload log {run.log} is incomplete (No space left on device (ENOSPC)): "
                "the verdict saw only the lines written before that; free space and rerun to "
                "be sure") in child.warnings


def test_a_watchdogs_stop_asks_for_the_stacks_only_where_the_stall_watchdog_is_on(tmp_path):
    """A job's rank stopped because a peer failed writes its stacks for the stall watchdog;
    with the watchdog off (`--stall-timeout off`, 0) pgle sends the workload no dump signal."""
    script = tmp_path / "w.py"
    script.write_text("import time\ntime.sleep(15)\n")
    for stall_timeout, dumped in ((None, True), (0, False)):
        run = RunFolder.create("run", str(tmp_path / f"run-{stall_timeout}"))

        def peer_failed(run: RunFolder = run) -> int | None:
            # Once the harness can dump (its stacks event written), as a peer's failure would.
            events = run.events.read_text() if run.events.exists() else ""
            return 9 if f'"kind": "{schema.STACKS}"' in events else None

        ex = execution.execute(Workload(str(script), None, ()), run, childenv.build(_env()),
                               watchdog=peer_failed, stall_timeout=stall_timeout)
        assert ex.exit_code == 9 and ex.result.stopped_by_watchdog
        stacks = run.path / schema.STACKS_NAME
        assert stacks.exists() is dumped, stall_timeout
        if dumped:
            assert "most recent call first" in stacks.read_text()
