"""Issue 31, item 5 and the malformed-rank-data cases: a rank contributes bytes, never paths.

What other ranks leave in a job folder (or send through `--gather kv`) is foreign data. These
tests plant hostile rank files in a real job folder and run a real rank 0 (`pgle collect` with
PGLE_RANK=0 of 2 on CPU, tests/helpers/dist_collect_profile standing in for a GPU trace's
conversion), or call the readers on real files: a report naming another file, a link or a hard
link planted as a rank's profile, a file of another account, files and bundles past their
bounds, malformed and deeply nested reports.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pythonpath
from pgle.jobs import folder, kv, rank_data
from pgle.profiles.files import BINARY, Profile, encode_profile, read_profile

HELPER = str(TESTS / "helpers" / "dist_collect_profile")
STEPS = str(WORKLOADS / "many_steps.py")
PRIVATE = 'costs { name: "private_fusion.7" cost_us: 1234.0 }\n'
RANK1 = 'costs { name: "fusion.0" cost_us: 20.0 }\ncosts { name: "fusion.2" cost_us: 5.0 }\n'


def _plant_rank(jd: Path, rank: int, profile: dict | None = None) -> None:
    jd.mkdir(parents=True, exist_ok=True)
    (jd / f"rank-{rank}.start").write_text(json.dumps({"rank": rank, "host": "h", "pid": 1}))
    (jd / f"rank-{rank}.exit").write_text(json.dumps({"rank": rank, "exit_code": 0}))
    report = {"command": "collect", "status": "collected", "exit_code": 0,
              "profile": profile or {}, "modules": []}
    (jd / f"rank-{rank}.json").write_text(json.dumps(report))


def _rank_0(project: Path, world_size: int) -> tuple[int, dict | None, str, float]:
    env = pgle_env(PGLE_RANK="0", PGLE_WORLD_SIZE=str(world_size), PGLE_JOB_ID="hostile",
                   SLURM_PROCID="0", PYTHONPATH=pythonpath(HELPER))
    began = time.monotonic()
    # Every rank has left a report (rank 4's unreadable): a gather timeout far past the
    # bound the malformed-data test checks, which only a wait for rank 4 would reach.
    proc = subprocess.run(
        [sys.executable, "-m", "pgle", "collect", "--json", "-o", "profile.pb",
         "--gather-timeout", "200", STEPS, "--", "12"],
        cwd=project, env=env, capture_output=True, text=True, timeout=400)
    out = proc.stdout.strip()
    return (proc.returncode, json.loads(out) if out.startswith("{") else None, proc.stderr,
            time.monotonic() - began)


class HostileJob(NamedTuple):
    victim: Path
    project: Path
    jd: Path
    code: int
    job: dict
    err: str
    wall: float


@pytest.fixture(scope="module")
def hostile_job(tmp_path_factory) -> HostileJob:
    """One real rank 0 of a job of 5 whose ranks 1-4 are planted, one hostile case each (one
    launch for all: each case is about one rank's row, warning or file):
      rank 1: its report names a private (0600) profile elsewhere
      rank 2: a link to that private profile planted as its profile
      rank 3: a real profile of its own, 0600 (its owner's umask 077)
      rank 4: a malformed report"""
    tmp = tmp_path_factory.mktemp("hostile")
    victim = tmp / "victim.pbtxt"
    victim.write_text(PRIVATE)
    victim.chmod(0o600)
    project = tmp / "project"
    project.mkdir()
    jd = project / ".pgle" / "jobs" / "hostile"
    _plant_rank(jd, 1, {"path": str(victim), "instructions": 1})
    _plant_rank(jd, 2, {"path": str(jd / "profiles" / "rank-2.pb")})
    (jd / "profiles").mkdir()
    os.symlink(victim, jd / "profiles" / "rank-2.pb")
    _plant_rank(jd, 3, {"path": "/anything/at/all.pb"})
    mine = jd / "profiles" / "rank-3.pb"
    mine.write_bytes(encode_profile(Profile(costs=[("fusion.0", 20.0), ("fusion.2", 5.0)]), BINARY))
    mine.chmod(0o600)
    _plant_rank(jd, 4)
    (jd / "rank-4.json").write_text(json.dumps(
        {"status": "collected", "exit_code": "zero", "modules": "all of them"}))
    code, job, err, wall = _rank_0(project, 5)
    assert job is not None, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return HostileJob(victim, project, jd, code, job, err, wall)


def _warnings_of(job: dict, rank: int) -> list[str]:
    return [w for w in job["warnings"] if f"rank {rank}" in w]


def test_a_report_naming_another_file_is_not_read(hostile_job):
    """Rank 1's report names a private (0600) profile: rank 0 reads rank 1's profile only at
    the place it derives itself, so the private one is neither merged nor echoed back."""
    job = hostile_job.job
    assert "private_fusion.7" not in (hostile_job.project / "profile.pb").read_bytes().decode(
        "latin-1")
    assert job["status"] == "partial"
    assert any("does not exist" in w for w in _warnings_of(job, 1)), job["warnings"]
    assert str(hostile_job.victim) not in json.dumps(job)  # not even its name goes into it


def test_a_link_planted_as_a_ranks_profile_is_refused(hostile_job):
    job = hostile_job.job
    assert "private_fusion.7" not in (hostile_job.project / "profile.pb").read_bytes().decode(
        "latin-1")
    assert any("symbolic link" in w for w in _warnings_of(job, 2)), job["warnings"]


def test_a_merge_of_private_profiles_is_private(hostile_job):
    """Rank 3's profile is 0600 (its owner's umask 077): the merge is no wider, whatever rank
    0's umask."""
    job, project = hostile_job.job, hostile_job.project
    # Only rank 0's and rank 3's profiles were merged (ranks 1 and 2 were refused above).
    assert sorted(job["profile"]["merged_from"]) == ["0", "3"], job["profile"]
    assert dict(read_profile(project / "profile.pb").costs)["fusion.0"] == 10.0
    assert stat.S_IMODE((project / "profile.pb").stat().st_mode) == 0o600
    assert stat.S_IMODE((project / "profile.pb.manifest.json").stat().st_mode) == 0o600
    (row,) = [r for r in job["rank_profiles"] if r["rank"] == 3]
    assert row["status"] == "collected"
    assert row["profile_path"] == str(hostile_job.jd / "profiles" / "rank-3.pb")  # rank 0's
    # own reckoning, not the report's


def test_malformed_rank_data_names_the_rank_and_still_writes_a_job_report(hostile_job):
    code, job = hostile_job.code, hostile_job.job
    assert code == 1, hostile_job.err[-3000:]
    (missing,) = job["job"]["missing"]
    assert missing["rank"] == 4 and "report unreadable: exit_code is str" in missing["why"]
    assert (hostile_job.jd / "job.json").is_file()
    # Issue 37: rank 4's report is there, unreadable, and not read again: no wait for it
    # until the 200 s gather timeout.
    assert hostile_job.wall < 120, f"rank 0 took {hostile_job.wall:.0f} s"


# -- the readers, on real files ---------------------------------------------------------------


def test_reports_are_checked_against_their_schema():
    good = {"status": "ok", "exit_code": 0, "profile": {"path": None}, "modules": [{"status": "x"}]}
    assert rank_data.check_report(good) is good
    for bad, phrase in [
        ([], "not a JSON object"),
        ({"status": 3}, "status is int"),
        ({"exit_code": True}, "exit_code is bool"),
        ({"exit_code": 10**40}, "not an exit code"),
        ({"modules": [1]}, "modules[0] is int"),
        ({"modules": [{"coverage": "high"}]}, "modules[0].coverage is str"),
        ({"warnings": [{"a": 1}]}, "warnings holds dict"),
        ({"profile": {"instructions": "many"}}, "profile.instructions is str"),
        ({"window": {"first_step": []}}, "window.first_step is list"),
    ]:
        with pytest.raises(ValueError, match=phrase.replace("[", r"\[")):
            rank_data.check_report(bad)


def test_deep_and_huge_reports_are_refused_in_one_phrase(tmp_path):
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ValueError, match="nests"):
        rank_data.parse_report(deep)
    with pytest.raises(ValueError, match="nests deeper than 64"):
        rank_data.parse_report(b'{"a":' * 100 + b"1" + b"}" * 100)
    big = tmp_path / "rank-3.json"
    with open(big, "wb") as f:  # sparse: no disk, and never read
        f.truncate(rank_data.MAX_REPORT_BYTES + 1)
    with pytest.raises(OSError, match="over the"):
        rank_data.read_report(tmp_path, "rank-3.json")
    assert folder.describe_missing(tmp_path, [3])[3].startswith("report unreadable: rank-3.json is")


def test_a_profile_past_the_bound_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "profiles").mkdir()
    with open(tmp_path / "profiles" / "rank-2.pb", "wb") as f:
        f.truncate(rank_data.MAX_PROFILE_BYTES + 1)
    with pytest.raises(rank_data.RankDataError, match=r"^rank 2: .* over the 1,073,741,824"):
        rank_data.load_rank_profile(tmp_path, 2, ".pb")


def test_a_hard_link_and_a_linked_folder_are_refused(tmp_path):
    victim = tmp_path / "victim.pbtxt"
    victim.write_text(PRIVATE)
    jd = tmp_path / "job"
    (jd / "profiles").mkdir(parents=True)
    os.link(victim, jd / "profiles" / "rank-1.pbtxt")
    with pytest.raises(rank_data.RankDataError, match="rank 1: .*2 hard links"):
        rank_data.load_rank_profile(jd, 1, ".pbtxt")
    # A per-module folder that is a link to another folder.
    other = tmp_path / "other"
    other.mkdir()
    (other / ("a" * 32 + ".pbtxt")).write_text(PRIVATE)
    os.symlink(other, jd / "profiles" / "rank-2")
    with pytest.raises(rank_data.RankDataError, match="rank 2: .*link"):
        rank_data.load_rank_profile(jd, 2, "")
    # And the profiles folder itself swapped for a link.
    os.rename(jd / "profiles", tmp_path / "moved")
    os.symlink(tmp_path / "moved", jd / "profiles")
    with pytest.raises(rank_data.RankDataError, match="rank 1: .*profiles is a link"):
        rank_data.load_rank_profile(jd, 1, ".pbtxt")


def test_another_accounts_file_is_refused(tmp_path):
    """Root can make a file another uid owns (chown): what a second user would plant."""
    if os.geteuid() != 0:
        pytest.skip("needs root to chown a file to another uid")
    jd = tmp_path / "job"
    (jd / "profiles").mkdir(parents=True)
    planted = jd / "profiles" / "rank-1.pbtxt"
    planted.write_text(RANK1)
    os.chown(planted, 4242, 4242)
    with pytest.raises(rank_data.RankDataError, match="belongs to another account"):
        rank_data.load_rank_profile(jd, 1, ".pbtxt")
    (jd / "rank-1.json").write_text('{"status": "ok"}')
    os.chown(jd / "rank-1.json", 4242, 4242)
    assert folder.gather(jd, 2, 0.0).missing == [0, 1]
    assert "another account" in folder.describe_missing(jd, [1])[1]


# -- --gather kv bundles --------------------------------------------------------------------


def test_a_bundle_keeps_modes_and_streams_profiles(tmp_path):
    sender = tmp_path / "sender"
    raw = kv.bundle(sender, {"rank-1.json": b'{"status": "ok"}', "profiles/rank-1.pbtxt":
                             RANK1.encode()}, modes={"profiles/rank-1.pbtxt": 0o600})
    src = tmp_path / "arrived"
    src.write_bytes(raw)
    mine = tmp_path / "mine"
    assert sorted(kv.write_rank_files(mine, 1, src)) == ["profiles/rank-1.pbtxt", "rank-1.json"]
    assert (mine / "profiles" / "rank-1.pbtxt").read_text() == RANK1
    assert stat.S_IMODE((mine / "profiles" / "rank-1.pbtxt").stat().st_mode) == 0o600


def test_malformed_and_oversized_bundles_are_one_phrase(tmp_path):
    mine = tmp_path / "mine"
    good = kv.bundle(tmp_path, {"rank-1.json": b"{}"})
    cases = [
        (b"{" * 10, "not a pgle bundle"),
        (good[:-1], "do not add up"),
        (kv.MAGIC + (1 << 40).to_bytes(8, "big"), "header is"),
        (kv.MAGIC + (5).to_bytes(8, "big") + b"[[[[[", "not JSON"),
    ]
    head = json.dumps({"job_dir": "x", "files": [["rank-1.json", 1 << 30, 0o644]]}).encode()
    cases.append((kv.MAGIC + len(head).to_bytes(8, "big") + head, "do not add up"))
    for raw, phrase in cases:
        with pytest.raises(ValueError, match=phrase):
            kv.write_rank_files(mine, 1, raw)
    # A member over its bound is refused before a byte of it is read: a sparse file stands in
    # for what the store delivered.
    head = json.dumps({"job_dir": "x", "files": [["rank-1.json", 64 << 20, 0o644]]}).encode()
    arrived = tmp_path / "arrived"
    with open(arrived, "wb") as f:
        f.write(kv.MAGIC + len(head).to_bytes(8, "big") + head)
        f.truncate(f.tell() + (64 << 20))
    with pytest.raises(ValueError, match="over the 16,777,216"):
        kv.write_rank_files(mine, 1, arrived)


def test_a_big_bundle_is_received_in_bounded_memory(tmp_path):
    """A 300 MB bundle used to take rank 0 to 3.5 GB (JSON + base64, several copies): now its
    profile streams to disk, so rank 0's memory grows by far less than the bundle."""
    size = 300 << 20
    head = json.dumps({"job_dir": "x", "files": [["profiles/rank-1.pb", size, 0o644]]}).encode()
    arrived = tmp_path / "arrived"
    with open(arrived, "wb") as f:
        f.write(kv.MAGIC + len(head).to_bytes(8, "big") + head)
        f.truncate(f.tell() + size)
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from pgle.jobs import kv\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "kv.write_rank_files(Path(sys.argv[2]), 1, sys.argv[1])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(arrived), str(tmp_path / "mine")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    grew_kib = int(proc.stdout)
    assert grew_kib < 64 << 10, f"rank 0 grew by {grew_kib >> 10} MiB for a 300 MiB bundle"
    assert (tmp_path / "mine" / "profiles" / "rank-1.pb").stat().st_size == size


def test_two_processes_given_one_rank_fail_loudly(tmp_path):
    """Two processes started as rank 1 of one job at once: only one may claim the rank (its
    start record, created exclusively); the other says so in one line, exits 2 and writes
    none of rank 1's files, so the claimant's record stays whole."""
    env = pgle_env(PGLE_RANK="1", PGLE_WORLD_SIZE="2", PGLE_JOB_ID="twice",
                   PYTHONPATH=pythonpath(HELPER))
    procs = [subprocess.Popen(
        [sys.executable, "-m", "pgle", "collect", "--json", "-o", "profile.pb",
         "--gather-timeout", "30", STEPS, "--", "6"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for _ in range(2)]
    results = sorted((p.returncode, out, err) for p in procs
                     for out, err in [p.communicate(timeout=300)])
    (ok, _, ok_err), (dup, _, dup_err) = results
    assert (ok, dup) == (0, 2), ok_err[-2000:] + dup_err[-2000:]
    lines = [line for line in dup_err.splitlines() if "rank 1" in line]
    assert len(lines) == 1 and "was given rank 1 too" in lines[0], dup_err
    assert "Traceback" not in dup_err
    jd = tmp_path / ".pgle" / "jobs" / "twice"
    start = json.loads((jd / "rank-1.start").read_text())
    report = json.loads((jd / "rank-1.json").read_text())
    assert report["exit_code"] == 0 and report["status"] != "error", report
    assert not (jd / "failed").exists() or not list((jd / "failed").iterdir())
    assert [p.name for p in jd.iterdir() if p.name.startswith(".rank-1")] == []
    assert start["pid"] != 0


def test_a_rank_claim_is_exclusive(tmp_path):
    """The claim itself: the second mark_started of one rank, with the first's file there,
    is RankTaken, and the first's record is left as it was."""
    from pgle.jobs.ranks import RankInfo

    info = RankInfo(rank=1, world_size=2, job_id="j", source="pgle")
    path = folder.mark_started(tmp_path, info)
    first = path.read_bytes()
    with pytest.raises(folder.RankTaken):
        folder.mark_started(tmp_path, info)
    assert path.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-1.start"]
