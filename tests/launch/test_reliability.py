"""Faults and hostile input (issue 12): no hang, no orphan, no silent loss, no raw traceback.

Each test here is one row of docs/reliability.md. Real pgle processes, a real
small filesystem for the full-disk cases, a real `kill -9`, the real jaxlib for
flags, a real second user for permissions.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle, write_profile

from helpers.processes import start_pgle
from helpers.smallfs import fill, small_filesystem
from helpers.users import as_user, other_user, reachable_by_others

ECHO = str(WORKLOADS / "echo_env.py")


def no_traceback(proc) -> None:
    err = proc.stderr.decode(errors="replace")
    assert "Traceback" not in err, err


def write_script(path: Path, body: str) -> str:
    path.write_text(textwrap.dedent(body))
    return str(path)


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


# --- 1. full disk under the run folder -------------------------------------

def test_full_disk_under_the_run_folder_keeps_output_flowing(project, tmp_path):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = write_script(project / "loud.py", """
        import sys
        for i in range(40000):
            print(f"line {i:06d} " + "x" * 90)
        print("END", flush=True)
    """)
    with small_filesystem(tmp_path / "small", size_kib=512) as small:
        proc = run_pgle("run", "--profile", "p.pb", "--run-dir", str(small / "run"), script,
                        cwd=project, timeout=240)
    no_traceback(proc)
    out = proc.stdout.decode().splitlines()
    assert len(out) == 40001 and out[-1] == "END"  # every byte still reached the terminal
    stopped = [l for l in pgle_lines(proc) if "stopped writing" in l]
    assert len(stopped) == 1 and "No space left on device" in stopped[0], pgle_lines(proc)
    assert any("incomplete" in l for l in pgle_lines(proc) if "warning" in l)
    assert proc.returncode == 0


def test_events_file_on_a_full_disk_does_not_break_the_workload(project, tmp_path):
    """The harness writes events from inside the user's steps: ENOSPC there must not raise.
    The workload's output fills the disk first; then 300 steps' events find no room."""
    script = write_script(project / "steps.py", """
        import jax, jax.numpy as jnp
        print(("y" * 99 + "\\n") * 3000, flush=True)
        x = jnp.ones(4)
        for i in range(300):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = x + 1
        print("SUM", float(x.sum()), flush=True)
    """)
    with small_filesystem(tmp_path / "small", size_kib=256) as small:
        fill(small, leave_bytes=64 * 1024)
        proc = run_pgle("collect", "-o", str(project / "p.pb"), "--run-dir", str(small / "run"),
                        "--allow-empty", script, cwd=project, timeout=240)
    no_traceback(proc)
    # Whatever pgle concludes, the workload itself ran to its end.
    assert b"SUM 1204.0" in proc.stdout, proc.stderr.decode()
    assert any("stopped writing" in l for l in pgle_lines(proc))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert len([l for l in pgle_lines(proc) if l.startswith("pgle: error")]) <= 1


# --- 2. orphaned workload ----------------------------------------------------

ORPHAN = """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(300)
"""


@pytest.mark.parametrize("command", ["run", "collect"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGQUIT], ids=["kill-9", "ctrl-backslash"])
def test_killing_pgle_kills_the_workload_and_its_children(project, command, sig):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = write_script(project / "orphan.py", ORPHAN)
    pids_file = project / "pids"
    extra = ["--profile", "p.pb"] if command == "run" else ["-o", "out.pb"]
    pgle = start_pgle(command, *extra, script, "--", str(pids_file), cwd=project,
                      env=pgle_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not pids_file.exists():
            assert pgle.poll() is None and time.monotonic() < deadline, "workload never started"
            time.sleep(0.1)
        workload, grandchild = map(int, pids_file.read_text().split())
        os.kill(pgle.pid, sig)
        pgle.wait(timeout=30)
        deadline = time.monotonic() + 20  # "within a few seconds", generous under load
        while not (gone(workload) and gone(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(workload), "the workload outlived pgle"
        assert gone(grandchild), "the workload's own child outlived pgle"
    finally:
        if pgle.poll() is None:
            pgle.kill()
        if pids_file.exists():
            for pid in map(int, pids_file.read_text().split()):
                if not gone(pid):
                    os.kill(pid, signal.SIGKILL)


# --- 3. output handling --------------------------------------------------------

def test_a_line_without_end_reaches_the_log_while_the_workload_runs(project):
    """Held partial lines are bounded: 3 MB without a newline is in the log before the
    workload ends (pgle held all of it in memory, re-copied per chunk, before)."""
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    gate = project / "gate"
    script = write_script(project / "long.py", f"""
        import os, sys, time
        sys.stdout.write("y" * 3_000_000)
        sys.stdout.flush()
        open({str(gate)!r} + ".wrote", "w").close()
        while not os.path.exists({str(gate)!r}):
            time.sleep(0.05)
        sys.stdout.write("\\rdone\\n")
    """)
    run_dir = project / "run"
    terminal = open(project / "terminal", "w+b")  # drained: a pipe nobody reads would block pgle
    pgle = subprocess.Popen([sys.executable, "-m", "pgle", "run", "--profile", "p.pb",
                             "--run-dir", str(run_dir), script], cwd=project, env=pgle_env(),
                            stdout=terminal, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        log = run_dir / "workload.log"
        while time.monotonic() < deadline and not (
                Path(str(gate) + ".wrote").exists() and log.exists()
                and log.stat().st_size >= 2_000_000):
            time.sleep(0.1)
        held_back = not log.exists() or log.stat().st_size < 2_000_000
    finally:
        gate.touch()
        _, err = pgle.communicate(timeout=120)
        terminal.close()
    out = (project / "terminal").read_bytes()
    assert not held_back, "the log got nothing of the long line while the workload ran"
    assert out == b"y" * 3_000_000 + b"\rdone\n"  # the terminal got it byte for byte
    assert log.read_bytes().startswith(b"y" * 3_000_000) and b"\rdone\n" in log.read_bytes()
    assert pgle.returncode == 0, err.decode()


def test_carriage_return_progress_passes_through_unchanged(project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    script = write_script(project / "bar.py", """
        import sys
        for i in range(20000):
            sys.stdout.write(f"\\r{i:5d}/20000 [" + "#" * (i % 50) + "]")
        sys.stdout.write("\\n")
    """)
    proc = run_pgle("run", "--profile", "p.pb", script, cwd=project)
    expected = "".join(f"\r{i:5d}/20000 [" + "#" * (i % 50) + "]" for i in range(20000)) + "\n"
    assert proc.stdout.decode() == expected
    assert proc.returncode == 0


# --- 4. XLA_FLAGS refused before launch -----------------------------------------

@pytest.mark.parametrize("flags, says", [
    ('--xla_dump_to="/x --xla_gpu_enable_latency_hiding_scheduler=true', "quote is never closed"),
    ("--xla_gpu_enable_latency_hiding_scheduler=maybe", "'maybe' is not a boolean"),
    ("-xla_dump_to=/tmp/d", "exactly two dashes"),
    ("--xla_gpu_no_such_flag_pgle=1", "rejects it (XLA does not know this flag)"),  # real jaxlib
], ids=["unbalanced-quote", "bool-maybe", "single-dash", "unknown-flag"])
@pytest.mark.parametrize("command", ["run", "collect"])
def test_bad_xla_flags_are_refused_before_launch(project, flags, says, command):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    marker = project / "launched"
    script = write_script(project / "w.py", f"open({str(marker)!r}, 'w').close()\n")
    extra = ["--profile", "p.pb"] if command == "run" else ["-o", "out.pb"]
    proc = run_pgle(command, *extra, script, cwd=project, env=pgle_env(XLA_FLAGS=flags))
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr.decode()
    errors = [l for l in pgle_lines(proc) if l.startswith("pgle: error:")]
    assert len(errors) == 1 and says in errors[0], pgle_lines(proc)
    assert not marker.exists(), "the workload was launched"
    assert not list(project.glob(".pgle/runs/*/workload.log"))


def test_flags_explain_and_doctor_call_an_unbalanced_quote_an_error(project):
    env = pgle_env(XLA_FLAGS='--xla_dump_to="/x')
    proc = run_pgle("flags", "explain", "--json", cwd=project, env=env)
    report = report_of(proc)
    assert proc.returncode == 1 and report["status"] == "error"
    assert "quote is never closed" in report["reasons"][0]
    proc = run_pgle("doctor", "--json", cwd=project, env=env)
    checks = [c for c in report_of(proc)["checks"] if c["check"] == "XLA_FLAGS"]
    assert any(c["status"] == "error" and "quote is never closed" in c["found"] for c in checks)


# --- 6. errors after the run: one line, no half-written file -----------------------

def test_output_that_is_a_directory_is_refused_before_the_run(project):
    (project / "dir.pb").mkdir()
    marker = project / "launched"
    script = write_script(project / "w.py", f"open({str(marker)!r}, 'w').close()\n")
    proc = run_pgle("collect", "-o", "dir.pb", "--force", script, cwd=project)
    no_traceback(proc)
    assert proc.returncode == 2 and "is a directory" in proc.stderr.decode()
    assert not marker.exists()


JAX_STEPS = """
    import jax, jax.numpy as jnp
    f = jax.jit(lambda x: jnp.sin(x) @ x.T)
    x = jnp.ones((32, 32))
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x = f(x)
    x.block_until_ready()
"""


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".pb", ".json")))


def test_immutable_output_gives_one_line_and_keeps_the_old_file(project):
    script = write_script(project / "steps.py", JAX_STEPS)
    out = project / "out"
    out.mkdir()
    (out / "p.pb").write_bytes(b"old")
    if subprocess.run(["chattr", "+i", str(out / "p.pb")], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here (needs root and ext4/xfs)")
    try:
        proc = run_pgle("collect", "--steps", "1:2", "--allow-empty", "-o", str(out / "p.pb"),
                        "--force", script, cwd=project)
    finally:
        subprocess.run(["chattr", "-i", str(out / "p.pb")], capture_output=True)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr.decode()
    errors = [l for l in pgle_lines(proc) if l.startswith("pgle: error:")]
    assert len(errors) == 1 and "cannot write" in errors[0] and "p.pb" in errors[0]
    assert (out / "p.pb").read_bytes() == b"old"
    assert leftovers(out) == ["p.pb"]  # no temp file, no manifest without its profile


def test_full_disk_when_writing_the_profile(project, tmp_path):
    script = write_script(project / "steps.py", JAX_STEPS)
    with small_filesystem(tmp_path / "small", size_kib=256) as small:
        fill(small)
        proc = run_pgle("collect", "--steps", "1:2", "--allow-empty", "-o", str(small / "p.pb"),
                        script, cwd=project)
        left = leftovers(small)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr.decode()
    errors = [l for l in pgle_lines(proc) if l.startswith("pgle: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], pgle_lines(proc)
    assert left == []  # neither a 0-byte profile nor a manifest


def test_run_with_a_full_disk_under_the_current_folder(project, tmp_path):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    with small_filesystem(tmp_path / "small", size_kib=256) as small:
        fill(small)
        proc = run_pgle("run", "--profile", str(project / "p.pb"), ECHO, cwd=small)
    no_traceback(proc)
    assert proc.returncode in (1, 2), proc.stderr.decode()
    errors = [l for l in pgle_lines(proc) if l.startswith("pgle: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], pgle_lines(proc)


def test_convert_on_a_full_disk(project, tmp_path):
    from helpers.xspace import Event, TraceBuilder
    trace = TraceBuilder()
    trace.add_module("jit_train", 5, "a" * 32, "module")
    line = trace.line(0, "Stream #13(compute)")
    line += [Event(f"fusion.{i}", "jit_train", 5, i * 10_000, 5_000) for i in range(2000)]
    trace.write(project / "run")
    with small_filesystem(tmp_path / "small", size_kib=256) as small:
        fill(small, leave_bytes=8192)
        proc = run_pgle("convert", str(project / "run"), str(small / "p.pbtxt"), cwd=project)
        left = leftovers(small)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr.decode()
    assert "No space left on device" in proc.stderr.decode()
    assert left == []


def test_convert_of_a_cpu_trace_writes_nothing(project, twelve_steps):
    """The CPU trace of a real collect (the one of section 10 below)."""
    runs = list((twelve_steps[1] / "r" / "trace" / "plugins" / "profile").iterdir())
    proc = run_pgle("convert", str(runs[0]), "cpu.pb", cwd=project)
    no_traceback(proc)
    assert proc.returncode == 1 and "empty profile" in proc.stderr.decode()
    assert not (project / "cpu.pb").exists()


# --- 9. permissions: another user can use what pgle writes -----------------------

def test_files_pgle_writes_are_readable_by_another_user(project):
    user = other_user()
    script = write_script(project / "steps.py", JAX_STEPS)
    shared = project / "shared"
    proc = subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", sys.executable, "-m", "pgle", "collect",
         "--steps", "1:2", "--allow-empty", "-o", str(shared / "profiles" / "p.pb"), script],
        cwd=project, env=pgle_env(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    profile, man = shared / "profiles" / "p.pb", shared / "profiles" / "p.pb.manifest.json"
    for path in (profile, man):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((shared / "profiles").stat().st_mode) == 0o755
    # A shared compilation cache: pgle's manifest there is another user's to read and update.
    from pgle.cache import manifest as cache_manifest

    cache = project / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)  # a folder the team shares (no sticky bit: entries get replaced)
    old = os.umask(0o022)
    try:
        cache_manifest.update(str(cache), lambda d: d.setdefault("runs", []).append({"who": "root"}))
    finally:
        os.umask(old)
    assert stat.S_IMODE((cache / cache_manifest.MANIFEST_NAME).stat().st_mode) == 0o644
    reachable_by_others(str(cache))
    lock = cache / cache_manifest.LOCK_NAME
    for path in (profile, man, cache / cache_manifest.MANIFEST_NAME):
        read = as_user(user, ["cat", str(path)])
        assert read.returncode == 0, read.stderr.decode()
    # The other user takes the same lock pgle takes (flock(1) opens it read-only if it must).
    locked = as_user(user, ["flock", "--nonblock", str(lock), "true"])
    assert locked.returncode == 0, locked.stderr.decode()
    # ...and can replace the manifest, as pgle's atomic write does (a rename in the folder).
    swapped = as_user(user, ["sh", "-c", 'cp "$1" "$1.new" && mv "$1.new" "$1"', "sh",
                             str(cache / cache_manifest.MANIFEST_NAME)])
    assert swapped.returncode == 0, swapped.stderr.decode()


# --- 10. the window is what the report claims ---------------------------------------

def trace_steps(trace_dir: Path, name: str = "train") -> list[int]:
    """step_num of every `name` step event in the kept trace (host planes)."""
    from pgle.profiles.proto import xspace_class

    steps = []
    for path in trace_dir.rglob("*.xplane.pb"):
        space = xspace_class()()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    if plane.event_metadata[event.metadata_id].name != name:
                        continue
                    for s in event.stats:
                        if stat_names.get(s.metadata_id) == "step_num":
                            steps.append(s.int64_value or s.uint64_value or int(s.str_value))
    return sorted(steps)


@pytest.fixture(scope="module")
def twelve_steps(tmp_path_factory):
    """A real collect of 12 marked steps, window 4:3, run folder r/: (process, project). Two
    tests read it (a run costs ~2.5 s of CPU)."""
    project = tmp_path_factory.mktemp("twelve") / "proj ü"
    project.mkdir()
    script = write_script(project / "twelve.py", """
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: jnp.sin(x) @ x.T)
        x = jnp.ones((64, 64))
        for i in range(12):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = f(x)
        x.block_until_ready()
    """)
    proc = run_pgle("collect", "--steps", "4:3", "--allow-empty", "-o", "p.pb", "--run-dir", "r",
                    "--json", script, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc, project


def test_collect_window_holds_exactly_the_steps_claimed(twelve_steps):
    proc, project = twelve_steps
    window = report_of(proc)["window"]
    assert (window["first_step"], window["steps"]) == (4, 3)
    assert trace_steps(project / "r" / "trace") == [4, 5, 6]


def test_window_seconds_exclude_stop_trace(project):
    """Three steps of 0.5 s: the window's seconds cover them, and not the time
    stop_trace takes to shut the profiler down and write the trace."""
    script = write_script(project / "slow.py", """
        import time, jax, jax.numpy as jnp
        x = jnp.ones(4) + 1
        for i in range(6):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                time.sleep(0.5)
    """)
    proc = run_pgle("collect", "--steps", "1:3", "--allow-empty", "-o", "p.pb", "--run-dir", "r",
                    script, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    events = [json.loads(l) for l in (project / "r" / "events.jsonl").read_text().splitlines()]
    start = next(e for e in events if e["kind"] == "trace_start")
    stop = next(e for e in events if e["kind"] == "trace_stop")
    assert stop["seconds"] >= 1.5 - 0.05  # three sleeps of 0.5 s
    assert stop["stop_trace_seconds"] > 0
    # trace_stop is written after stop_trace returned: its own time is outside the window.
    assert stop["seconds"] <= stop["t"] - start["t"] - stop["stop_trace_seconds"] + 0.01


# --- 12. a window other than asked, said so --------------------------------------------

THREE_STEPS = JAX_STEPS.replace("range(4)", "range(3)")


@pytest.mark.parametrize("args, says", [
    (["--steps", "2:5"], "--steps 2:5 (steps 2..6) was cut short: the workload ended after step 2"),
    (["--steps", "5:2"], "never opened: the workload marked only 3 steps"),
    (["--steps", "1:2", "--step-name", "trian"], "--step-name 'trian' matched no step"),
    (["--step-name", "trian"], "it marks 'train'"),
], ids=["cut-short", "never-opened", "mistyped-step-name", "mistyped-step-name-auto"])
def test_a_window_other_than_asked_is_reported(project, args, says):
    script = write_script(project / "three.py", THREE_STEPS)
    proc = run_pgle("collect", *args, "--allow-empty", "-o", "p.pb", "--json", script, cwd=project)
    report = report_of(proc)
    assert any(says in w for w in report["warnings"]), report["warnings"]
    assert any(says in r for r in report["reasons"]), report["reasons"]
    assert any(says in l for l in pgle_lines(proc) if "warning" in l)


# --- 13. features the suite must notice when they break -------------------------------

def echoed_flags(proc) -> str:
    for line in (proc.stdout + proc.stderr).decode().splitlines():
        if line.startswith("ECHO "):
            return json.loads(line[5:])["xla_flags"]
    raise AssertionError(proc.stderr.decode())


def test_collect_turns_command_buffers_off_unless_the_user_set_them(project):
    # Kernels inside CUDA graphs are invisible to the profiler.
    proc = run_pgle("collect", "-o", "p.pb", ECHO, cwd=project)
    assert "--xla_gpu_enable_command_buffer=''" in echoed_flags(proc).split()
    proc = run_pgle("collect", "-o", "p.pb", ECHO, cwd=project,
                    env=pgle_env(XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION"))
    assert echoed_flags(proc).split().count("--xla_gpu_enable_command_buffer=FUSION") == 1
    assert "--xla_gpu_enable_command_buffer=''" not in echoed_flags(proc)


def test_tune_ratio_is_profiled_over_baseline_runs_and_never_uses_collect(tmp_path):
    """The ratio is profiled runs over baseline runs (median 0.1 s / 0.4 s = 0.25; inverted
    it would be 4); collect's steps (1.0 s, the profiler on) never enter it. Real events files
    as the harness writes them, read by tune's own comparison (a GPU is needed for a real
    profiled phase)."""
    from pgle.commands.arms import compare_step_times

    def folder(name, step_s):
        d = tmp_path / name
        d.mkdir()
        lines, t = [], 1000.0
        for i in range(8):
            lines.append(json.dumps({"kind": "step_enter", "t": t, "name": "train", "index": i}))
            t += step_s
        (d / "events.jsonl").write_text("\n".join(lines) + "\n")
        return d

    times = compare_step_times(folder("c", 1.0), [folder("b1", 0.4), folder("b2", 0.4)],
                               [folder("r1", 0.1), folder("r2", 0.1)], platform="gpu",
                               applied=True)
    assert abs(times["ratio"] - 0.25) < 1e-9
    assert times["interval"]["low"] <= times["ratio"] <= times["interval"]["high"]
    assert times["baseline"]["count"] == 12 and times["runs"] == {"baseline": 2, "run": 2}
    few = compare_step_times(folder("c2", 1.0), [folder("b3", 0.4)], [], platform="gpu",
                             applied=True)
    assert few["ratio"] is None and "fewer than 5" in few["caveat"]
    # Issue 22: where no module applied the profile both sides ran one schedule: no ratio.
    same = compare_step_times(folder("c3", 1.0), [folder("b4", 0.4)], [folder("r3", 0.1)],
                              platform="gpu", applied=False)
    assert same["ratio"] is None and "no module applied the profile" in same["caveat"]


def test_the_trace_holds_the_last_steps_device_work(project):
    """The window's last step only dispatches (async); the device barrier before stop_trace
    lets its 24 ops finish inside the trace (without it the trace holds none of them)."""
    script = write_script(project / "async.py", """
        import jax, jax.numpy as jnp
        def chain(f):
            def body(x):
                for _ in range(24):
                    x = f(x @ x)
                return x
            return jax.jit(body)
        warm, last = chain(jnp.tanh), chain(jnp.cos)
        x = jnp.ones((512, 512)) * 0.001
        warm(x).block_until_ready(); last(x).block_until_ready()
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                y = (last if i == 2 else warm)(x)
        y.block_until_ready()
    """)
    proc = run_pgle("collect", "--steps", "2:1", "--allow-empty", "-o", "p.pb", "--run-dir", "r",
                    script, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    from pgle.profiles.proto import xspace_class

    ops = set()
    for path in (project / "r" / "trace").rglob("*.xplane.pb"):
        space = xspace_class()()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            names = {k: v.name for k, v in plane.event_metadata.items()}
            ops |= {names[e.metadata_id] for line in plane.lines for e in line.events
                    if names[e.metadata_id].startswith("wrapped_cosine")}
    # XLA:CPU names each fused cos `wrapped_cosine[.N]` (jax 0.10.2).
    assert len(ops) == 24, sorted(ops)
