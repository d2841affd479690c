"""The job folder's rules at their edges, in process on real folders (issue 37).

A rank's claim on a folder that holds an earlier launch's files, the gather's refusals, its
progress line and its end when several ranks left unreadable reports, and which peer's failure
a rank blames when the `failed/` files disagree or were planted by something else.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import time
from pathlib import Path

import pytest

from helpers.deadline import returns_within
from pgle.errors import BadInput
from pgle.jobs import folder
from pgle.jobs.folder import PeerFailure
from pgle.jobs.ranks import RankInfo

HINT = ("Give each process of the job its own rank (PGLE_RANK, SLURM_PROCID, ...); use a new "
        "job folder (the default one is per SLURM job step) or remove it.")


@pytest.mark.parametrize(
    "planted",
    [["rank-3.exit"], ["rank-3.json"], ["failed/rank-3"], ["rank-3.exit", "rank-3.json"]],
)
def test_a_claim_on_an_earlier_launchs_files_names_them(tmp_path, planted):
    jd = tmp_path / "job"
    (jd / "failed").mkdir(parents=True)
    for name in planted:
        (jd / name).write_text("{}")
    with pytest.raises(folder.RankTaken) as err:
        folder.claim_rank(jd, RankInfo(rank=3, world_size=4))
    names = ", ".join(Path(n).name for n in planted)
    assert err.value.message == (
        f"job folder {jd} already holds {names}: another process was given rank 3 too, or the "
        "files are from an earlier launch.")
    assert err.value.hint == HINT
    assert not (jd / "rank-3.start").exists()


def test_the_start_record_is_written_with_sorted_keys(tmp_path):
    jd = tmp_path / "job"
    path = folder.claim_rank(jd, RankInfo(rank=1, local_rank=1, world_size=2, job_id="9", step_id="0"))
    text = path.read_text()
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True) + "\n"
    assert (data["rank"], data["local_rank"], data["world_size"], data["job"]) == (1, 1, 2, "9.0")
    # The private name it was written under is gone.
    assert sorted(p.name for p in jd.iterdir()) == ["rank-1.start"]


def test_a_claim_never_replaces_a_file_or_link_already_there(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("theirs")
    planted = tmp_path / "rank-0.start"
    planted.write_text("planted")
    assert folder._claim_json(planted, {"rank": 0}) is False
    link = tmp_path / "rank-1.start"
    link.symlink_to(target)
    assert folder._claim_json(link, {"rank": 1}) is False
    assert planted.read_text() == "planted" and target.read_text() == "theirs"
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "rank-0.start", "rank-1.start"]


def test_a_claim_writes_what_json_lacks_as_text(tmp_path):
    claimed = tmp_path / "rank-0.start"
    assert folder._claim_json(claimed, {"rank": 0, "job_dir": tmp_path / "job"}) is True
    assert json.loads(claimed.read_text()) == {"job_dir": str(tmp_path / "job"), "rank": 0}


def _no_hard_links(number: int):
    """os.link as a file system without hard links answers it (vfat: EPERM; some FUSE and
    network file systems: EOPNOTSUPP; EXDEV across mounts). The one stand-in in these tests:
    no file system here lacks hard links (ext4, tmpfs, overlay), and vfat cannot be mounted."""

    def link(src, dst, *args, **kwargs):
        raise OSError(number, os.strerror(number), os.fspath(src), None, os.fspath(dst))

    return link


@pytest.mark.parametrize("number", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_a_claim_without_hard_links_is_an_exclusive_create(tmp_path, monkeypatch, number):
    """Where links fail, the claim is an O_EXCL|O_NOFOLLOW create written whole: one winner,
    nothing already there replaced or followed, the file as a link would have left it (the
    umask's mode, the record whole), and no private copy left behind."""
    monkeypatch.setattr(os, "link", _no_hard_links(number))
    old = os.umask(0o022)
    try:
        claimed = tmp_path / "rank-0.start"
        assert folder._claim_json(claimed, {"rank": 0, "world_size": 2}) is True
        assert claimed.read_text() == '{"rank": 0, "world_size": 2}\n'
        assert claimed.stat().st_mode & 0o7777 == 0o644 and not claimed.is_symlink()
        assert folder._claim_json(claimed, {"rank": 0, "world_size": 3}) is False  # taken
        assert claimed.read_text() == '{"rank": 0, "world_size": 2}\n'
        target = tmp_path / "elsewhere"
        link = tmp_path / "rank-1.start"
        link.symlink_to(target)  # dangling: a create that followed it would make `elsewhere`
        assert folder._claim_json(link, {"rank": 1}) is False
        assert link.is_symlink() and not target.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-0.start", "rank-1.start"]
    finally:
        os.umask(old)


def test_a_claim_whose_link_fails_otherwise_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "link", _no_hard_links(errno.EACCES))
    with pytest.raises(PermissionError):
        folder._claim_json(tmp_path / "rank-0.start", {"rank": 0})
    assert list(tmp_path.iterdir()) == []  # neither the claim nor its private copy


@pytest.mark.parametrize(
    "world,timeout,message",
    [(0, 1.0, "world size must be at least 1, not 0."),
     (2, -1.0, "gathering timeout must not be negative, not -1.0 s.")],
)
def test_a_gather_refuses_a_bad_world_or_timeout(tmp_path, world, timeout, message):
    with pytest.raises(BadInput) as err:
        folder.gather(tmp_path, world, timeout)
    assert err.value.message == message


def _within(seconds: float, fn, *args, **kw):
    """fn's result, or a failed test if it has not returned within `seconds` (not a hang)."""
    with returns_within(seconds):
        return fn(*args, **kw)


def _report(jd: Path, rank: int) -> None:
    (jd / f"rank-{rank}.json").write_text(json.dumps({"status": "applied", "rank": {"rank": rank}}))


def test_a_one_rank_job_gathers_its_own_report(tmp_path):
    _report(tmp_path, 0)
    got = _within(10, folder.gather, tmp_path, 1, 0.0)
    assert (list(got.reports), got.missing) == ([0], [])


def test_several_unreadable_reports_end_the_gather_at_once(tmp_path):
    # Written atomically, an unreadable report will not change: waiting out a 60 s timeout
    # for it would only delay the job report.
    _report(tmp_path, 0)
    (tmp_path / "rank-1.json").write_text("[1, 2]")
    (tmp_path / "rank-2.json").write_text("not json")
    started = time.monotonic()
    got = _within(10, folder.gather, tmp_path, 3, 60.0)
    assert (list(got.reports), got.missing) == ([0], [1, 2])
    assert time.monotonic() - started < 10


def test_the_gather_ends_at_its_timeout(tmp_path):
    _report(tmp_path, 0)
    got = _within(10, folder.gather, tmp_path, 2, 0.3)
    assert (list(got.reports), got.missing) == ([0], [1])


def _waiting_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting for")]


@pytest.mark.parametrize(
    "world,phrase",
    [(8, "8 of 8 rank reports (ranks 0-7)"),
     (9, "9 of 9 rank reports (ranks 0-7, ...)"),
     (10, "10 of 10 rank reports (ranks 0-7, ...)")],
)
def test_the_progress_line_names_at_most_eight_ranks(tmp_path, caplog, world, phrase):
    caplog.set_level(logging.INFO, logger="pgle.jobs.folder")
    _within(10, folder.gather, tmp_path, world, 1.0, progress_every_s=0.0)
    lines = _waiting_lines(caplog)
    assert lines and lines[0] == f"waiting for {phrase}; 0 s of the 1 s gather timeout"


def test_no_progress_line_before_its_interval(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pgle.jobs.folder")
    _within(10, folder.gather, tmp_path, 2, 0.3, progress_every_s=30.0)
    assert _waiting_lines(caplog) == []


def _failed(jd: Path, rank: int, data) -> None:
    (jd / "failed").mkdir(parents=True, exist_ok=True)
    (jd / "failed" / f"rank-{rank}").write_text(json.dumps(data))


@pytest.mark.parametrize(
    "files,expected",
    [
        # The earliest failure by its rank's clock wins, whatever its code.
        ({1: {"exit_code": 1, "time": 100.0}, 2: {"exit_code": 3, "time": 200.0}}, (1, 1)),
        # The extreme codes a workload can exit with are real failures.
        ({1: {"exit_code": -255, "time": 100.0}, 2: {"exit_code": 3, "time": 200.0}}, (1, -255)),
        ({1: {"exit_code": 255, "time": 100.0}, 2: {"exit_code": 3, "time": 200.0}}, (1, 255)),
        # Beyond them, or a zero, the file is foreign: its name still says the rank failed,
        # with code 1, after every real failure.
        ({1: {"exit_code": 256, "time": 100.0}, 2: {"exit_code": 3, "time": 200.0}}, (2, 3)),
        ({1: {"exit_code": -256, "time": 100.0}, 2: {"exit_code": 3, "time": 200.0}}, (2, 3)),
        ({1: {"exit_code": 0, "time": 100.0}}, (1, 1)),
        ({1: "not an object"}, (1, 1)),
        ({1: {"exit_code": 0, "time": 100.0}, 2: {"exit_code": 4, "time": 200.0}}, (2, 4)),
        # No time: the failure counts as the earliest.
        ({1: {"exit_code": 5}, 2: {"exit_code": 6, "time": 0.5}}, (1, 5)),
    ],
)
def test_the_blamed_peer(tmp_path, files, expected):
    for rank, data in files.items():
        _failed(tmp_path, rank, data)
    assert folder.peer_failure(tmp_path, 0) == PeerFailure(*expected)


@pytest.mark.parametrize(
    "template,fields",
    [("/jobs/{local_rank}", "local_rank"), ("/jobs/%r-%l", "local_rank and rank")],
)
def test_a_job_folder_per_rank_is_refused(template, fields):
    with pytest.raises(BadInput) as err:
        folder.job_dir_for(RankInfo(rank=1, world_size=2, job_id="7"), explicit=template)
    assert err.value.message == (
        f"job folder {template!r} uses the {fields}, which differ between ranks; all ranks must "
        "share one job folder.")


def test_a_shared_job_folder_needs_a_job_id():
    with pytest.raises(BadInput) as err:
        folder.job_dir_for(RankInfo(rank=1, world_size=4, source="pgle"))
    assert (err.value.message, err.value.hint) == (
        "cannot name a job folder shared by the 4 ranks: no job id is known (ranks detected "
        "from pgle).",
        "Set PGLE_JOB_ID to the same value on every rank, or pass a job folder.")


def test_the_exit_record_says_who_when_and_where_in_sorted_keys(tmp_path):
    before = time.time()
    path = folder.mark_exit(tmp_path, 2, 5)
    text = path.read_text()
    data = json.loads(text)
    assert text.rstrip("\n") == json.dumps(data, sort_keys=True)
    assert sorted(data) == ["exit_code", "host", "pid", "rank", "stopped_for", "time"]
    assert (data["rank"], data["exit_code"], data["stopped_for"]) == (2, 5, None)
    assert data["host"] == socket.gethostname() and data["pid"] == os.getpid()
    assert before <= data["time"] <= time.time()
    # Its own failure: in failed/ too, where its peers look.
    assert json.loads((tmp_path / "failed" / "rank-2").read_text()) == data


def test_a_claimed_rank_rewrites_its_own_start_record(tmp_path):
    info = RankInfo(rank=3, world_size=4, job_id="9")
    folder.claim_rank(tmp_path, info)
    path = folder.mark_started(tmp_path, info, claimed=True)
    assert path == tmp_path / "rank-3.start"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-3.start"]


def test_a_report_holding_a_path_is_written_with_it_as_text(tmp_path):
    folder.write_report(tmp_path, 1, {"run_dir": Path("/runs/r1")})
    assert json.loads((tmp_path / "rank-1.json").read_text()) == {"run_dir": "/runs/r1"}


def test_the_watchdog_ignores_the_ranks_own_failure(tmp_path):
    _failed(tmp_path, 1, {"exit_code": 4, "time": 1.0})
    check = folder.watchdog(tmp_path, 1)
    assert check() is None
    _failed(tmp_path, 0, {"exit_code": 6, "time": 2.0})
    assert folder.watchdog(tmp_path, 1)() == PeerFailure(0, 6)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another account needs root")
def test_a_failure_record_in_a_failed_folder_of_another_account_is_refused(tmp_path):
    """failed/ is checked as part of the path (another account's folder is not this job's),
    and the refusal names the record by its place in the job folder."""
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "rank-0").write_text(json.dumps({"exit_code": 3, "time": 1.0}))
    assert folder._read_json(tmp_path / "failed" / "rank-0")["exit_code"] == 3
    os.chown(tmp_path / "failed", 12345, 12345)
    with pytest.raises(OSError) as err:
        folder._read_json(tmp_path / "failed" / "rank-0")
    assert err.value.strerror == "failed belongs to another account (uid 12345), not this one"


def test_a_gather_waits_its_whole_timeout_polling_at_a_bounded_rate(tmp_path, caplog):
    """A rank that never reports: the gather returns at its timeout, not before; it polls with
    a growing interval (a few dozen polls, no busy loop); its progress lines are at least
    `progress_every_s` apart."""
    (tmp_path / "rank-0.json").write_text('{"status": "ok"}')
    began, cpu = time.monotonic(), time.thread_time()
    with caplog.at_level(logging.INFO, logger="pgle"), returns_within(15):
        got = folder.gather(tmp_path, 2, 2.0, progress_every_s=0.6)
    assert time.monotonic() - began >= 2.0
    assert time.thread_time() - cpu < 0.3
    assert got.missing == [1] and list(got.reports) == [0]
    lines = [r.created for r in caplog.records if r.getMessage().startswith("waiting for 1 of")]
    assert lines and all(b - a >= 0.55 for a, b in zip(lines, lines[1:])), lines
