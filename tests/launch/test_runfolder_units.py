"""The run folder as pgle makes it, in process on real folders (pgle.launch.runfolder; issue
37: its rules were checked only through `python -m pgle`): a new folder per run, named so
`pgle runs` can read its pid, never reused; `.pgle` kept out of git without touching what is
there; the lease says who runs in it and SIGCONT refreshes it at once; a --run-dir that holds a
run is refused."""

from __future__ import annotations

import json
import os
import re
import socket
import time

import pytest

from pgle.errors import BadInput
from pgle.launch import runfolder
from pgle.launch.runfolder import RUN_FILES, RunFolder


def test_each_run_gets_a_new_folder_named_with_its_command_and_pid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = RunFolder.create("collect")
    second = RunFolder.create("collect")  # the same second: another name, never the same
    assert first.path != second.path
    runs = (tmp_path / ".pgle" / "runs").resolve()
    assert first.path.parent == runs and second.path.parent == runs
    pid = os.getpid()
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-collect-{pid}", first.path.name), first.path.name
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-collect-[0-9a-f]{{6}}-{pid}", second.path.name)
    assert (tmp_path / ".pgle" / ".gitignore").read_text() == (
        "# written by pgle: run folders and traces are not source\n*\n")
    assert first.log == first.path / "workload.log" and first.events == first.path / "events.jsonl"
    assert first.spec.name == "spec.json" and first.trace.name == "trace"


def test_a_gitignore_already_there_is_left_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pgle").mkdir()
    (tmp_path / ".pgle" / ".gitignore").write_text("mine\n")
    RunFolder.create("run")
    assert (tmp_path / ".pgle" / ".gitignore").read_text() == "mine\n"


def test_the_lease_names_this_process_and_sigcont_refreshes_it(tmp_path):
    folder = RunFolder.create("run", str(tmp_path / "r"))
    lease = json.loads(folder.lease.read_text())
    assert lease["host"] == socket.gethostname() and lease["pid"] == os.getpid()
    assert abs(lease["started"] - time.time()) < 600
    assert lease["refresh_seconds"] == runfolder.LEASE_REFRESH_SECONDS == 60.0
    assert lease["ttl_seconds"] == runfolder.LEASE_TTL_SECONDS == 600.0
    os.utime(folder.lease, (1000.0, 1000.0))
    runfolder.refresh_leases()  # what the launcher's SIGCONT handler calls
    assert time.time() - folder.lease.stat().st_mtime < 600
    # The heartbeat's own refresh: a lease whose folder was removed is let go.
    os.utime(folder.lease, (1000.0, 1000.0))
    runfolder._HEARTBEAT.refresh([str(folder.lease)])
    assert time.time() - folder.lease.stat().st_mtime < 600
    gone = str(tmp_path / "gone" / "lease.json")
    runfolder._HEARTBEAT.hold(gone)
    runfolder._HEARTBEAT.refresh([gone])
    assert gone not in runfolder._HEARTBEAT.paths
    assert str(folder.lease) in runfolder._HEARTBEAT.paths


@pytest.mark.parametrize("name", RUN_FILES)
def test_a_run_dir_holding_a_run_is_refused(tmp_path, name):
    held = tmp_path / "r"
    held.mkdir()
    (held / name).symlink_to(tmp_path / "nowhere")  # a dangling link counts too
    with pytest.raises(BadInput) as e:
        RunFolder.create("run", str(held))
    assert e.value.message == f"run folder {held} already holds a run ({name})."
    assert e.value.hint == "Pick an empty --run-dir."
    assert sorted(os.listdir(held)) == [name]  # nothing written there


def test_a_run_dir_that_cannot_be_made_is_one_sentence(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BadInput) as e:
        RunFolder.create("run", str(blocker / "sub"))
    assert e.value.message == f"cannot create run folder {blocker / 'sub'}: Not a directory."


def test_a_run_dir_is_made_with_its_parents_or_taken_empty(tmp_path):
    nested = tmp_path / "a" / "b" / "c"
    assert RunFolder.create("run", str(nested)).path == nested.resolve()
    empty = tmp_path / "empty"
    empty.mkdir()
    folder = RunFolder.create("run", str(empty))
    assert sorted(os.listdir(folder.path)) == ["lease.json"]


def test_the_heartbeat_is_one_daemon_thread_that_never_keeps_pgle_alive(tmp_path):
    beat = runfolder._Heartbeat()
    lease = tmp_path / "lease.json"
    lease.write_text("{}")
    beat.hold(str(lease))
    first = beat.thread
    assert first is not None and first.is_alive() and first.daemon  # pgle exits without it
    assert first.name == "pgle-lease"  # named in pgle's own stack dumps
    beat.hold(str(tmp_path / "other.json"))
    assert beat.thread is first and beat.paths == {str(lease), str(tmp_path / "other.json")}
    beat.release(str(lease))
    assert beat.paths == {str(tmp_path / "other.json")}
    os.utime(lease, (1000.0, 1000.0))
    beat.refresh_now()  # released: not refreshed
    assert lease.stat().st_mtime == 1000.0


def test_the_pgle_folder_a_link_of_the_users_own_is_followed_a_file_refused(tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pgle").write_text("")
    with pytest.raises(BadInput) as e:
        RunFolder.create("run")
    assert e.value.message == "pgle folder ./.pgle is not a directory."
    (tmp_path / ".pgle").unlink()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".pgle").symlink_to("elsewhere")  # made by the user: followed
    folder = RunFolder.create("run")
    assert folder.path.parent == (tmp_path / "elsewhere" / "runs").resolve()
    (tmp_path / ".pgle").unlink()
    (tmp_path / ".pgle").mkdir()
    (tmp_path / ".pgle" / "runs").symlink_to(tmp_path / "elsewhere" / "runs")
    assert RunFolder.create("run").path.parent == (tmp_path / "elsewhere" / "runs").resolve()


@pytest.mark.skipif(os.geteuid() != 0, reason="gives a folder to another user: needs root")
def test_folders_of_another_user_are_named_in_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pgle").mkdir()
    os.chown(tmp_path / ".pgle", 12345, 12345)
    caplog.set_level("WARNING")
    RunFolder.create("run")
    os.chown(tmp_path / ".pgle" / "runs", 12345, 12345)
    RunFolder.create("run")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    why = "its owner can rename, replace or read the run folders pgle makes in it."
    assert warned == [  # once per folder and process
        f"pgle folder ./.pgle belongs to uid 12345, not to you: {why}",
        f"run folders' parent ./.pgle/runs belongs to uid 12345, not to you: {why}",
    ]


def test_a_run_folders_parent_that_is_a_file_is_named_as_such(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pgle").mkdir()
    (tmp_path / ".pgle" / "runs").write_text("")
    with pytest.raises(BadInput) as e:
        RunFolder.create("run")
    assert e.value.message == "run folders' parent ./.pgle/runs is not a directory."


def test_a_run_folder_name_the_system_refuses_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command = "c" * 300  # past NAME_MAX with the stamp and the pid
    with pytest.raises(BadInput) as e:
        RunFolder.create(command)
    assert re.fullmatch(rf"cannot create run folder \./\.pgle/runs/\d{{8}}-\d{{6}}-{command}-"
                        rf"{os.getpid()}: File name too long\.", e.value.message), e.value.message
    assert os.listdir(tmp_path / ".pgle" / "runs") == []


def test_a_hundred_names_taken_is_refused_and_the_hundred_and_first_never_tried(tmp_path,
                                                                               monkeypatch):
    """Every name pgle tries is taken (another process made each a moment before): 100 tries,
    then one sentence. The clock and the random tags are fixed here so the names are known."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runfolder.time, "strftime", lambda fmt: "20261129-120000")
    tags = iter(f"{i:06x}" for i in range(1, 1000))
    monkeypatch.setattr(runfolder.secrets, "token_hex", lambda n: next(tags))
    runs = tmp_path / ".pgle" / "runs"
    runs.mkdir(parents=True)
    pid = os.getpid()
    (runs / f"20261129-120000-run-{pid}").mkdir()
    for i in range(1, 100):  # the 99 tagged names of tries 2..100
        (runs / f"20261129-120000-run-{i:06x}-{pid}").mkdir()
    with pytest.raises(BadInput) as e:
        RunFolder.create("run")
    assert e.value.message == "cannot create a run folder in .pgle/runs: 100 names were taken."
    assert len(os.listdir(runs)) == 100  # the 101st name (free) was not made


def test_a_lease_is_refreshed_itself_never_what_a_link_there_points_to(tmp_path):
    """A lease path that became a link (someone replaced the file): the heartbeat touches the
    link, never its target (os.utime without following it)."""
    target = tmp_path / "someone_elses"
    target.write_text("")
    os.utime(target, (1000.0, 1000.0))
    lease = tmp_path / "lease.json"
    lease.symlink_to(target)
    beat = runfolder._Heartbeat()
    beat.paths.add(str(lease))
    beat.refresh([str(lease)])
    assert target.stat().st_mtime == 1000.0 and time.time() - lease.lstat().st_mtime < 600
    os.utime(lease, (2000.0, 2000.0), follow_symlinks=False)
    beat.refresh_now()
    assert target.stat().st_mtime == 1000.0 and time.time() - lease.lstat().st_mtime < 600


def test_the_heartbeat_refreshes_every_lease_it_holds_each_period(tmp_path, monkeypatch):
    monkeypatch.setattr(runfolder, "LEASE_REFRESH_SECONDS", 0.01)
    beat = runfolder._Heartbeat()
    leases = [tmp_path / "a.json", tmp_path / "b.json"]
    for lease in leases:
        lease.write_text("{}")
        os.utime(lease, (1000.0, 1000.0))
        beat.hold(str(lease))
    deadline = time.monotonic() + 5  # a beat every 10 ms: a dead heartbeat fails here
    while any(lease.stat().st_mtime == 1000.0 for lease in leases):
        assert time.monotonic() < deadline, "the heartbeat never refreshed the leases"
        time.sleep(0.01)
    for lease in leases:
        beat.release(str(lease))


def test_a_gitignore_that_cannot_be_written_is_not_left_half_written(tmp_path):
    from helpers.smallfs import fill, small_filesystem
    from pgle.shared_folders import OpenDir

    with small_filesystem(tmp_path / "fs", 64) as fs:
        fill(fs)
        with OpenDir.open(fs) as root:
            runfolder.ignore_pgle_folder(root)  # no space for its line: nothing is left
        assert not (fs / ".gitignore").exists()
        (fs / "filler").unlink()
        with OpenDir.open(fs) as root:
            runfolder.ignore_pgle_folder(root)
        assert (fs / ".gitignore").read_text().endswith("\n*\n")


def test_a_process_out_of_descriptors_is_told_so_in_one_sentence(tmp_path, monkeypatch):
    """No descriptor left for `.` (RLIMIT_NOFILE reached): a BadInput naming the folder and
    the system's reason, not a traceback."""
    import resource

    import pgle.atomic  # noqa: F401  imported by the code on the way: no descriptor for it later

    monkeypatch.chdir(tmp_path)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, hard))  # the next open fails
    try:
        with pytest.raises(BadInput) as e:
            RunFolder.create("run")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert e.value.message == "cannot create run folder .pgle/runs: Too many open files."


def test_a_lease_on_a_full_disk_is_one_sentence_and_leaves_no_folder_behind(tmp_path,
                                                                          monkeypatch):
    from helpers.smallfs import fill, small_filesystem
    from pgle.atomic import WriteFailed

    with small_filesystem(tmp_path / "fs", 64) as fs:
        given = fs / "given"
        given.mkdir()
        (fs / ".pgle" / "runs").mkdir(parents=True)
        fill(fs)
        with pytest.raises(WriteFailed) as e:
            RunFolder.create("run", str(given))
        lease = given.resolve() / "lease.json"
        assert e.value.message == f"cannot write run folder lease {lease}: No space left on device."
        assert e.value.hint == "Free some space and rerun; nothing was written."
        assert os.listdir(given) == []  # no half lease; the --run-dir itself is the user's
        monkeypatch.chdir(fs)
        with pytest.raises(WriteFailed):
            RunFolder.create("run")
        assert os.listdir(fs / ".pgle" / "runs") == []  # the folder pgle made is gone again


def test_claiming_the_files_of_a_folder_removed_meanwhile_is_one_sentence(tmp_path):
    folder = RunFolder.create("run", str(tmp_path / "r"))
    for name in os.listdir(folder.path):
        os.unlink(folder.path / name)
    os.rmdir(folder.path)
    with pytest.raises(BadInput) as e:
        folder.claim_files()
    assert e.value.message == f"cannot write in run folder {folder.path}: No such file or directory."


def test_a_lease_with_no_inode_left_is_one_sentence(tmp_path):
    """A filesystem out of inodes: the lease cannot even be created (ENOSPC at its open)."""
    import subprocess

    from pgle.atomic import WriteFailed

    where = tmp_path / "fs"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs with few inodes")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=8,mode=0777",
                           "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        given = where / "given"
        given.mkdir()
        for i in range(100):  # every inode left taken
            try:
                (where / f"f{i}").touch()
            except OSError:
                break
        with pytest.raises(WriteFailed) as e:
            RunFolder.create("run", str(given))
        lease = given.resolve() / "lease.json"
        assert e.value.message == f"cannot write run folder lease {lease}: No space left on device."
        assert e.value.hint == "Free some space and rerun; nothing was written."
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
