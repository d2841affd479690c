"""What rank 0 accepts of another rank's files, in process on real files (issue 37): each refused
report's phrase, a rank's profile refused in one line naming the rank, the files read under the
job folder without following links, and the permission bits a merged output keeps.
"""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from pgle.jobs import rank_data


@pytest.mark.parametrize("report, phrase", [
    ([], "the report is list, not a JSON object"),
    ({"status": 1}, "status is int, not text"),
    ({"status": "ok", "exit_code": "0"}, "exit_code is str, not a whole number"),
    ({"status": "ok", "exit_code": True}, "exit_code is bool, not a whole number"),
    ({"status": "ok", "exit_code": 0, "command": 5}, "command is int, not text or null"),
    ({"status": "ok", "exit_code": 0, "profile": []}, "profile is list, not an object or null"),
    ({"status": "ok", "exit_code": 0, "modules": {}}, "modules is dict, not a list or null"),
    ({"status": "ok", "exit_code": 0, "rank": "0"},
     "rank is str, not an object or a whole number or null"),
    ({"status": "ok", "exit_code": 0, "step_times": 1}, "step_times is int, not an object or a "
                                                         "list or null"),
    ({"status": "ok", "exit_code": 0, "profiled": 1}, "profiled is int, not true or false or null"),
    ({"status": "ok", "exit_code": 0, "modules": [{"coverage": "1"}]},
     "modules[0].coverage is str, not a whole number or a number or null"),
    ({"status": "ok", "exit_code": 0, "modules": [{"module": "a"}, 3]},
     "modules[1] is int, not an object"),
    ({"status": "ok", "exit_code": 0, "window": {"steps": 1.5}},
     "window.steps is float, not a whole number or null"),
    ({"status": "ok", "exit_code": 0, "stopped_for": {"rank": None}},
     "stopped_for.rank is NoneType, not a whole number"),
    ({"status": "ok", "exit_code": 0, "profile": {"path": 3}}, "profile.path is int, not text or "
                                                               "null"),
    ({"status": "ok", "exit_code": 0, "rank": {"host": 1}}, "rank.host is int, not text or null"),
    ({"status": "ok", "exit_code": 256}, "exit_code 256 is not an exit code"),
    ({"status": "ok", "exit_code": 0, "workload_exit_code": -256},
     "workload_exit_code -256 is not an exit code"),
    ({"status": "ok", "exit_code": 0, "reasons": ["a", 1]}, "reasons holds int, not text"),
    ({"status": "ok", "exit_code": 0, "notices": [None]}, "notices holds NoneType, not text"),
])
def test_a_report_rank_0_cannot_use_says_why(report, phrase):
    with pytest.raises(ValueError) as err:
        rank_data.check_report(report)
    assert str(err.value) == phrase


def test_a_report_rank_0_can_use_is_taken_as_it_is():
    ok = {"status": "ok", "exit_code": 255, "workload_exit_code": -255, "rank": 3,
          "profiled": None, "modules": [{"coverage": 0.5, "rank": 1}], "reasons": ["a"],
          "future_field": {"x": [1]}}
    assert rank_data.check_report(ok) is ok
    assert rank_data.parse_report(json.dumps(ok).encode()) == ok
    with pytest.raises(ValueError, match=r"^the report is larger than 16 MiB$"):
        rank_data.parse_report(b" " * (rank_data.MAX_REPORT_BYTES + 1))


def test_reading_under_the_job_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_bytes(b"12345")
    assert rank_data.read_under(tmp_path, "sub/f", 5) == b"12345"
    with pytest.raises(OSError) as err:
        rank_data.read_under(tmp_path, "sub/f", 4)
    assert (err.value.errno, err.value.strerror) == (errno.EPERM,
                                                     "sub/f is 5 bytes, over the 4 pgle reads")
    for rel in ("", "..", "sub/../sub/f", "./sub/f"):
        with pytest.raises(OSError) as err:
            rank_data.read_under(tmp_path, rel, 10)
        assert err.value.strerror == f"{rel} is not a name inside the job folder"
    (tmp_path / "link").symlink_to(tmp_path / "sub" / "f")
    with pytest.raises(OSError) as err:
        rank_data.read_under(tmp_path, "link", 10)
    assert err.value.strerror == "link is a symbolic link"
    (tmp_path / "dirlink").symlink_to(tmp_path / "sub")
    with pytest.raises(OSError) as err:
        rank_data.read_under(tmp_path, "dirlink/f", 10)
    assert err.value.strerror == "dirlink is a link or not a folder"
    with pytest.raises(OSError) as err:
        rank_data.read_under(tmp_path, "sub", 10)
    assert err.value.strerror == "sub is not a regular file"
    os.link(tmp_path / "sub" / "f", tmp_path / "hard")
    with pytest.raises(OSError) as err:
        rank_data.read_under(tmp_path, "hard", 10)
    assert err.value.strerror == "hard has 2 hard links; pgle wrote it with one"
    with pytest.raises(FileNotFoundError):
        rank_data.read_under(tmp_path, "absent", 10)
    assert rank_data.list_under(tmp_path, "sub") == [("f", False)]


def test_a_ranks_start_exit_and_failure_files_are_json_objects(tmp_path):
    (tmp_path / "rank-1.exit").write_text('{"exit_code": 3}')
    assert rank_data.read_report(tmp_path, "rank-1.exit") == {"exit_code": 3}
    (tmp_path / "rank-1.start").write_text("[1]")
    with pytest.raises(ValueError, match=r"^rank-1.start is not a JSON object$"):
        rank_data.read_report(tmp_path, "rank-1.start")
    (tmp_path / "rank-1.json").write_text('{"status": 1}')
    with pytest.raises(ValueError, match=r"^status is int, not text$"):
        rank_data.read_report(tmp_path, "rank-1.json")


def test_a_ranks_profile_is_refused_in_one_line_naming_the_rank(tmp_path):
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 4, ".pb")
    assert (err.value.rank, err.value.why) == (
        4, f"its profile {tmp_path / 'profiles' / 'rank-4.pb'} does not exist")
    assert str(err.value) == f"rank 4: its profile {tmp_path / 'profiles' / 'rank-4.pb'} " \
        "does not exist"
    (tmp_path / "profiles").mkdir()
    (tmp_path / "elsewhere.pb").write_text("x")
    (tmp_path / "profiles" / "rank-4.pb").symlink_to(tmp_path / "elsewhere.pb")
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 4, ".pb")
    assert err.value.why == (f"its profile {tmp_path / 'profiles' / 'rank-4.pb'} is refused: "
                             "profiles/rank-4.pb is a symbolic link")
    assert rank_data.profile_rel(4, "") == "profiles/rank-4"
    assert rank_data.profile_rel(4, ".pbtxt") == "profiles/rank-4.pbtxt"


def test_a_merged_output_gets_no_wider_permissions_than_its_inputs(tmp_path):
    paths = []
    for name, mode in (("a", 0o640), ("b", 0o604), ("c", 0o644)):
        p = tmp_path / name
        p.write_text("x")
        os.chmod(p, mode)
        paths.append(p)
    assert rank_data.narrowest_mode(paths) == 0o600
    assert rank_data.narrowest_mode([tmp_path / "gone", *paths[:1]]) == 0o640
    assert rank_data.narrowest_mode([paths[0], tmp_path / "gone", paths[2]]) == 0o640
    assert rank_data.narrowest_mode([]) == 0o777
    out = tmp_path / "out"
    (out / "deeper").mkdir(parents=True)
    (out / "m.pb").write_text("x")
    os.chmod(out / "m.pb", 0o666)
    (out / "link").symlink_to(paths[2])
    os.chmod(out, 0o777)
    rank_data.restrict(out, 0o640)
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)  # noqa: E731
    assert mode(out / "m.pb") == 0o640
    assert mode(out) == 0o750  # a folder is entered by whom it may be read by
    assert mode(out / "deeper") == 0o755  # only the folder's own files
    assert mode(paths[2]) == 0o644  # a link's target is not this output's
    single = tmp_path / "single.pb"
    single.write_text("x")
    os.chmod(single, 0o644)
    rank_data.restrict(single, 0o604)
    assert mode(single) == 0o604
    os.chmod(single, 0o600)
    rank_data.restrict(single, 0o644)  # never widened
    assert mode(single) == 0o600
    rank_data.restrict(tmp_path / "gone", 0o600)  # nothing there: nothing to do


def test_a_ranks_profile_file_or_folder_is_read_within_its_bounds(tmp_path, monkeypatch):
    from pgle.profiles.files import Profile, write_profile

    prof = tmp_path / "profiles"
    prof.mkdir()
    write_profile(Profile(costs=[("fusion.1", 2.0)]), prof / "rank-1.pbtxt")
    src = rank_data.load_rank_profile(tmp_path, 1, ".pbtxt")
    assert (src.kind, src.instruction_count) == ("file", 1)
    (prof / "rank-2.pbtxt").write_text("garbage {{{")
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 2, ".pbtxt")
    assert err.value.rank == 2
    assert err.value.why.startswith(f"profile {prof / 'rank-2.pbtxt'} is not a valid text "
                                    "ProfiledInstructionsProto: ")
    assert not err.value.why.endswith(".")
    # A per-module folder: each file read, the bound shared by all of them.
    (prof / "rank-3").mkdir()
    for fp in ("a" * 32, "b" * 32):
        write_profile(Profile(costs=[("fusion.1", 2.0)]), prof / "rank-3" / f"{fp}.pbtxt")
    src = rank_data.load_rank_profile(tmp_path, 3, "")
    assert (src.kind, sorted(src.modules)) == ("directory", ["a" * 32, "b" * 32])
    one = (prof / "rank-3" / f"{'a' * 32}.pbtxt").stat().st_size
    monkeypatch.setattr(rank_data, "MAX_PROFILE_BYTES", one + 1)  # room for one file, not two
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 3, "")
    assert "pgle reads" in err.value.why
    monkeypatch.undo()
    monkeypatch.setattr(rank_data, "MAX_PROFILE_FILES", 2)
    assert sorted(rank_data.load_rank_profile(tmp_path, 3, "").modules) == ["a" * 32, "b" * 32]
    monkeypatch.setattr(rank_data, "MAX_PROFILE_FILES", 1)
    with pytest.raises(rank_data.RankDataError) as err:
        rank_data.load_rank_profile(tmp_path, 3, "")
    assert err.value.why == (f"its profile {prof / 'rank-3'} is refused: profiles/rank-3 holds "
                             "2 entries, over 1")
    monkeypatch.undo()
    (prof / "rank-5").mkdir()
    with pytest.raises(rank_data.RankDataError, match="rank 5: profile directory .* holds no"):
        rank_data.load_rank_profile(tmp_path, 5, "")
    # A file where a folder is expected, and a folder's entry that is a folder.
    (prof / "rank-6").write_text("x")
    with pytest.raises(rank_data.RankDataError, match="is refused: profiles/rank-6 is"):
        rank_data.load_rank_profile(tmp_path, 6, "")
    (prof / "rank-3" / "sub").mkdir()
    assert ("sub", True) in rank_data.list_under(tmp_path, "profiles/rank-3")
    (prof / "rank-3" / "link").symlink_to(prof / "rank-3" / "sub")
    assert ("link", False) in rank_data.list_under(tmp_path, "profiles/rank-3")
