"""Another rank's files at the edges of what pgle reads of them (issue 37).

A file whose size lies (it grows after its size was read), a big file read in several
chunks, a folder or file another account owns, a file where a folder should be, JSON nested
exactly to the limit, and the modes `restrict` leaves on a folder's files.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from helpers.fs_limits import immutable
from pgle.jobs import rank_data


def _refusal(fn, *args) -> str:
    with pytest.raises(OSError) as err:
        fn(*args)
    return err.value.strerror


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux's /proc")
def test_a_file_that_grows_past_the_limit_after_its_size_was_read_is_refused():
    # /proc's files say 0 bytes and then give more: a file that grew after the fstat.
    assert _refusal(rank_data.read_under, Path("/proc/self"), "status", 10) == \
        "status is over the 10 bytes pgle reads"


def test_a_file_of_several_chunks_is_read_whole(tmp_path):
    data = os.urandom(1 << 20) * 2 + b"tail"
    (tmp_path / "big").write_bytes(data)
    assert rank_data.read_under(tmp_path, "big", 4 << 20) == data


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another account needs root")
def test_files_and_folders_of_another_account_are_refused(tmp_path):
    (tmp_path / "rank-1.json").write_text("{}")
    os.chown(tmp_path / "rank-1.json", 12345, 12345)
    assert _refusal(rank_data.read_under, tmp_path, "rank-1.json", 100) == \
        "rank-1.json belongs to another account (uid 12345), not this one"
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "rank-1").write_text("x")
    os.chown(tmp_path / "profiles", 12345, 12345)
    assert _refusal(rank_data.list_under, tmp_path, "profiles") == \
        "profiles belongs to another account (uid 12345), not this one"
    assert _refusal(rank_data.read_under, tmp_path, "profiles/rank-1", 100) == \
        "profiles belongs to another account (uid 12345), not this one"
    # Deeper: the refusal names the path down to the folder that is another account's.
    os.chown(tmp_path / "profiles", os.geteuid(), os.getegid())
    (tmp_path / "profiles" / "rank-2" / "m").mkdir(parents=True)
    (tmp_path / "profiles" / "rank-2" / "m" / "a.pbtxt").write_text("x")
    os.chown(tmp_path / "profiles" / "rank-2", 12345, 12345)
    assert _refusal(rank_data.read_under, tmp_path, "profiles/rank-2/m/a.pbtxt", 100) == \
        "profiles/rank-2 belongs to another account (uid 12345), not this one"


def test_a_file_where_a_folder_should_be_is_refused(tmp_path):
    (tmp_path / "profiles").write_text("not a folder")
    assert _refusal(rank_data.list_under, tmp_path, "profiles") == \
        "profiles is a link or not a folder"
    assert _refusal(rank_data.read_under, tmp_path, "profiles/rank-1", 100) == \
        "profiles is a link or not a folder"


def _nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_json_nesting_is_counted_exactly():
    assert rank_data.json_depth_ok(_nested(64))
    assert not rank_data.json_depth_ok(_nested(65))
    # A deep value anywhere is found, whatever comes after it.
    assert not rank_data.json_depth_ok([_nested(64), [1]])
    assert not rank_data.json_depth_ok({"deep": _nested(64), "flat": {"a": 1}})
    assert rank_data.json_depth_ok(json.loads("[" * 64 + "]" * 64))


def test_restrict_takes_from_a_folders_files_what_the_mode_does_not_grant(tmp_path):
    out = tmp_path / "merged"
    out.mkdir(mode=0o755)
    (out / "run.sh").write_text("x")
    (out / "run.sh").chmod(0o755)
    (out / "odd").write_text("x")
    (out / "odd").chmod(0o044)
    rank_data.restrict(out, 0o600)
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "odd").stat().st_mode) == 0o000
    # The folder itself may still be entered by whom it may be read by.
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def _value_error(fn, *args) -> str:
    with pytest.raises(ValueError) as err:
        fn(*args)
    return str(err.value)


def test_a_ranks_record_that_does_not_parse_is_named(tmp_path):
    (tmp_path / "rank-1.start").write_text("{bad")
    assert _value_error(rank_data.read_report, tmp_path, "rank-1.start").startswith(
        "rank-1.start is not JSON (")
    (tmp_path / "rank-1.exit").write_bytes(b'{"exit_code": "\xff"}')
    assert _value_error(rank_data.read_report, tmp_path, "rank-1.exit") == \
        "rank-1.exit is not UTF-8 text"


def test_a_report_of_exactly_the_limit_is_read():
    head, tail = b'{"notices": ["', b'"]}'
    data = head + b"x" * (rank_data.MAX_REPORT_BYTES - len(head) - len(tail)) + tail
    assert len(rank_data.parse_report(data)["notices"][0]) == len(data) - len(head) - len(tail)
    assert _value_error(rank_data.parse_report, data + b" ") == \
        f"the report is larger than {rank_data.MAX_REPORT_BYTES >> 20} MiB"


def test_restrict_goes_on_past_a_path_whose_mode_cannot_change(tmp_path):
    """The folder itself refuses chmod (immutable): its files are still restricted."""
    out = tmp_path / "merged"
    out.mkdir(mode=0o755)
    for name in ("a.pbtxt", "b.pbtxt", "c.pbtxt"):
        (out / name).write_text("x")
        (out / name).chmod(0o644)
    with immutable(out):
        rank_data.restrict(out, 0o600)
        assert stat.S_IMODE(out.stat().st_mode) == 0o755  # left as it was
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {
        "a.pbtxt": 0o600, "b.pbtxt": 0o600, "c.pbtxt": 0o600}


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux's /proc")
def test_the_limit_counts_every_read_of_a_file_that_grew():
    # /proc/self/maps says 0 bytes and gives about a page per read (this process maps well
    # over 5,000 bytes of it): what the reads gave all together is over the limit.
    assert _refusal(rank_data.read_under, Path("/proc/self"), "maps", 5000) == \
        "maps is over the 5,000 bytes pgle reads"


def test_a_job_folder_that_is_a_file_is_not_a_folder_in_the_systems_words(tmp_path):
    (tmp_path / "job").write_text("x")
    for rel in ("rank-1.json", "profiles/rank-1.pb"):
        with pytest.raises(NotADirectoryError):
            rank_data.read_under(tmp_path / "job", rel, 100)


def test_a_ranks_profile_that_does_not_parse_is_refused_with_the_parsers_words(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "rank-1.pbtxt").write_text('costs { name: "a" cost_us: X }\n')
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 1, ".pbtxt")
    # The parser's sentence, its final period dropped (the message is one line of a list).
    assert err.value.message.startswith("rank 1: profile ")
    assert err.value.message.endswith("Couldn't parse float: X"), err.value.message
