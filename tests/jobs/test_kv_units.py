"""`--gather kv` in process (issue 37): what a rank sends and keeps, on real files.

The end-to-end `--gather kv` tests (test_kv_gather.py) run real ranks through jax.distributed;
mutmut maps no test to a function reached only in a subprocess, so these call pgle.jobs.kv
directly: which of a rank's files travel, what a receiving rank writes and where, the paths in
the reports it rewrites, each malformed bundle's phrase, and one handoff round with a real
(ended) workload process.
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

from helpers.deadline import returns_within

from pgle.evidence import schema
from pgle.jobs import kv, rank_data

H1 = "0123456789abcdef0123456789abcdef"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _rank_folder(jd: Path, rank: int) -> None:
    """Every kind of file a rank publishes, plus files of rank 1 and strays beside them."""
    (jd / "failed").mkdir(parents=True)
    (jd / "profiles" / f"rank-{rank}").mkdir(parents=True)
    for name, text in [(f"rank-{rank}.start", "s"), (f"rank-{rank}.exit", "e"),
                       (f"rank-{rank}.json", "{}"), (f"failed/rank-{rank}", "f"),
                       (f"profiles/rank-{rank}.pb", "pb"),
                       (f"profiles/rank-{rank}.pb.manifest.json", "m"),
                       (f"profiles/rank-{rank}/{H1}.pbtxt", "t"),
                       (f"profiles/rank-{rank}/manifest.json", "dm"),
                       (f"profiles/rank-{rank}/notes.txt", "stray"),
                       (f"profiles/rank-{rank}.pb.tmp", "stray"),
                       ("rank-1.json", "other"), ("profiles/rank-1.pb", "other"),
                       ("job.json", "{}")]:
        (jd / name).write_text(text)
    os.chmod(jd / f"rank-{rank}.json", 0o600)


def test_a_rank_sends_exactly_its_own_files_with_their_modes(tmp_path):
    jd = tmp_path / "job"
    _rank_folder(jd, 3)
    (jd / "profiles" / "rank-3x").mkdir()  # not rank 3's: its name only starts alike
    (jd / "profiles" / "rank-3x" / "a.pb").write_text("no")
    got = kv.rank_files_with_modes(jd, 3)
    assert sorted(got) == ["failed/rank-3", "profiles/rank-3.pb",
                           "profiles/rank-3.pb.manifest.json",
                           f"profiles/rank-3/{H1}.pbtxt", "profiles/rank-3/manifest.json",
                           "rank-3.exit", "rank-3.json", "rank-3.start"]
    assert got["profiles/rank-3.pb"][0] == b"pb"
    assert got["rank-3.json"] == (b"{}", 0o600)
    assert got["rank-3.start"][1] == _mode(jd / "rank-3.start")
    # A rank that has published nothing yet sends nothing, with or without a profiles folder.
    assert kv.rank_files_with_modes(jd, 7) == {}
    assert kv.rank_files_with_modes(tmp_path / "empty", 0) == {}


def test_a_rank_with_a_folder_where_a_report_goes_sends_the_rest(tmp_path):
    jd = tmp_path / "job"
    (jd / "rank-2.json").mkdir(parents=True)
    (jd / "rank-2.start").write_text("s")
    assert sorted(kv.rank_files_with_modes(jd, 2)) == ["rank-2.start"]


def test_a_bundle_is_magic_header_length_header_then_the_files(tmp_path):
    raw = kv.bundle(tmp_path / "j", {"rank-1.json": b"{}", "profiles/rank-1.pb": b"PB"},
                    extra={"note": 1}, modes={"rank-1.json": 0o600})
    assert raw.startswith(b"PGLEKV2\n")
    n = int.from_bytes(raw[8:16], "big")
    header = json.loads(raw[16:16 + n])
    assert header == {"note": 1, "job_dir": str(tmp_path / "j"),
                      "files": [["rank-1.json", 2, 0o600], ["profiles/rank-1.pb", 2, 0o644]]}
    assert raw[16 + n:] == b"{}PB"
    with kv.Bundle(raw) as b:
        assert b.job_dir == str(tmp_path / "j") and b.extra["note"] == 1
        assert [(name, size, mode) for name, size, mode in b.items()] == \
            [("rank-1.json", 2, 0o600), ("profiles/rank-1.pb", 2, 0o644)]


def test_a_bundle_read_member_by_member(tmp_path):
    raw = kv.bundle(tmp_path, {"a": b"alpha", "b": b"", "c": b"gamma!"})
    arrived = tmp_path / "arrived"
    arrived.write_bytes(raw)
    with kv.Bundle(arrived) as b:
        seen = {}
        for name, _size, _mode in b.items():
            if name == "a":
                with pytest.raises(ValueError, match="a file of 5 bytes, over the 4 pgle takes"):
                    b.read(4)
                seen[name] = b.read(5)
            elif name == "c":  # `b` skipped unread: the next member still starts right
                seen[name] = b.read(6)
        assert seen == {"a": b"alpha", "c": b"gamma!"}
    with kv.Bundle(raw) as b:
        items = b.items()
        next(items)  # `a`, not read: skipped on the next member
        assert next(items)[0] == "b"
        next(items)
        out = tmp_path / "c"
        with open(out, "wb") as f:
            with pytest.raises(ValueError, match="a file of 6 bytes, over the 5 pgle takes"):
                b.copy_to(f, 5)
            b.copy_to(f, 6)
        assert out.read_bytes() == b"gamma!"


def test_a_member_cut_short_while_streamed_is_refused(tmp_path):
    arrived = tmp_path / "arrived"
    arrived.write_bytes(kv.bundle(tmp_path, {"p": b"x" * 200_000}))
    with kv.Bundle(arrived) as b, open(tmp_path / "out", "wb") as out:
        os.truncate(arrived, arrived.stat().st_size - 100_000)  # shrank after its size was checked
        for _ in b.items():
            with pytest.raises(ValueError, match="^cut short$"):
                b.copy_to(out, 200_000)
    assert (tmp_path / "out").read_bytes() == b"x" * 100_000


def _raw(header: object, body: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return kv.MAGIC + len(head).to_bytes(8, "big") + head + body


@pytest.mark.parametrize("raw, phrase", [
    (b"", "^not a pgle bundle$"),
    (b"PGLEKV1\n" + bytes(8), "^not a pgle bundle$"),
    (kv.MAGIC + (kv.MAX_HEADER_BYTES + 1).to_bytes(8, "big"),
     "^its header is 4,194,305 bytes, over 4,194,304$"),
    (_raw([]), "^its header is not a pgle bundle's$"),
    (_raw({"files": {}}), "^its header is not a pgle bundle's$"),
    (_raw({"job_dir": "x"}), "^its header is not a pgle bundle's$"),
    (_raw({"files": ["a"]}), "^its header lists a file malformed$"),
    (_raw({"files": [["a", 1]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", 1, 420, 0]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [[1, 1, 420]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", "1", 420]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", 1, "420"]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", True, 420]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", 1, False]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", -1, 420]]}, b"x"), "^its header lists a file malformed$"),
    (_raw({"files": [["a", 2, 420]]}, b"x"), "^its files do not add up to its size"),
    (_raw({"files": [["a", 1, 420]]}, b"xy"), r"\(cut short, or padded\)$"),
    (kv.MAGIC + (3).to_bytes(8, "big") + b"[1,", "^its header is not JSON"),
])
def test_each_malformed_bundle_has_its_phrase(raw, phrase):
    with pytest.raises(ValueError, match=phrase):
        kv.Bundle(raw)


def test_a_well_formed_bundle_edge_cases_are_accepted(tmp_path):
    # A zero-byte member, the mode masked to permission bits, a job_dir that is not text.
    with kv.Bundle(_raw({"job_dir": 5, "files": [["a", 0, 0o104755]]})) as b:
        assert b.members == [("a", 0, 0o755)] and b.job_dir == ""
    with kv.Bundle(_raw({"files": []})) as b:
        assert b.members == [] and b.job_dir == ""


def test_a_bundle_file_over_the_bound_is_refused_before_reading(tmp_path):
    arrived = tmp_path / "huge"
    with open(arrived, "wb") as f:
        f.truncate(kv.MAX_BUNDLE_BYTES + 1)
    with pytest.raises(ValueError, match=f"^it is {kv.MAX_BUNDLE_BYTES + 1:,} bytes, over the "
                                         f"{kv.MAX_BUNDLE_BYTES:,} pgle takes$"):
        kv.Bundle(arrived)
    with open(arrived, "r+b") as f:  # exactly the bound: read on (and found not a bundle)
        f.truncate(kv.MAX_BUNDLE_BYTES)
    with pytest.raises(ValueError, match="^not a pgle bundle$"):
        kv.Bundle(arrived)


def test_a_rank_over_the_key_bound_is_told_to_use_a_shared_folder(tmp_path):
    # The header's bound (the whole bundle's, 1 GiB, is not worth a test's memory).
    pad = "x" * kv.MAX_HEADER_BYTES
    with pytest.raises(Exception, match=r"^--gather kv: this rank's files are 4 MiB, over the "
                                        f"{kv.MAX_BUNDLE_BYTES >> 20} MiB a key may carry; "
                                        "use a shared --job-dir.$"):
        kv.bundle(tmp_path, {"rank-1.json": b"{}"}, extra={"pad": pad})
    head = len(json.dumps({"pad": "", "job_dir": str(tmp_path), "files": []}))
    raw = kv.bundle(tmp_path, {}, extra={"pad": "x" * (kv.MAX_HEADER_BYTES - head)})
    assert int.from_bytes(raw[8:16], "big") == kv.MAX_HEADER_BYTES  # at the bound: sent
    with kv.Bundle(raw) as b:  # and read
        assert b.members == [] and b.job_dir == str(tmp_path)


def test_a_rank_one_byte_over_the_whole_bundles_bound_is_refused_before_joining(tmp_path):
    """The whole bundle's bound (1 GiB and 64 MiB), counted with its magic, length and header:
    one byte over is refused before anything is joined. The profile is a view of untouched
    anonymous memory (no page of it is read), so the refusal costs nothing."""
    def frame(size: int) -> int:  # magic, the header's length, the header (which names `size`)
        return len(kv.MAGIC) + 8 + len(json.dumps({"job_dir": str(tmp_path),
                                                   "files": [["p", size, 0o644]]}))

    size = kv.MAX_BUNDLE_BYTES + 1 - frame(kv.MAX_BUNDLE_BYTES)
    assert frame(size) + size == kv.MAX_BUNDLE_BYTES + 1
    with mmap.mmap(-1, size) as untouched:
        view = memoryview(untouched)
        try:
            with pytest.raises(Exception, match=r"^--gather kv: this rank's files are "
                                                f"{(kv.MAX_BUNDLE_BYTES + 1) >> 20} MiB, over the "
                                                f"{kv.MAX_BUNDLE_BYTES >> 20} MiB a key may "
                                                "carry; use a shared --job-dir.$"):
                kv.bundle(tmp_path, {"p": view})  # type: ignore[dict-item]
        finally:
            view.release()


@pytest.fixture(autouse=True)
def _returns():
    """Every test here returns in well under a second: a wait that never ends (an exchange
    that missed its workload's end waits its timeout and 30 s) fails its test in 10 s instead
    of reading as a timeout in a mutation run."""
    with returns_within(10):
        yield


def test_rank_0_keeps_only_the_senders_files_and_maps_their_paths(tmp_path):
    sender = "/elsewhere/job"
    report = {"status": "ok", "exit_code": 0,
              "profile": {"path": f"{sender}/profiles/rank-2.pb"},
              "run_dir": f"{sender}/rank-2", "modules": [{"module": f"{sender}/profiles/rank-2"}],
              "log_path": "/other/log"}
    files = {
        "rank-2.json": json.dumps(report).encode(),
        "rank-2.start": b'{"host": "h"}',
        "profiles/rank-2.pb": b"PROFILE",
        f"profiles/rank-2/{H1}.pb": b"MOD",
        "rank-3.json": b"{}",  # another rank's: not this sender's to send
        "profiles/../rank-2.json": b"{}",
        "job.json": b"{}",
        "rank-2.json.tmp": b"{}",
    }
    raw = kv.bundle(Path(sender), files, modes={"profiles/rank-2.pb": 0o640})
    mine = tmp_path / "mine"
    written = kv.write_rank_files(mine, 2, raw)
    assert written == ["rank-2.json", "rank-2.start", "profiles/rank-2.pb",
                       f"profiles/rank-2/{H1}.pb"]
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_file()) == \
        sorted(written)
    kept = json.loads((mine / "rank-2.json").read_text())
    assert (mine / "rank-2.json").read_text() == json.dumps(kept, sort_keys=True) + "\n"
    assert kept["profile"]["path"] == str(mine / "profiles" / "rank-2.pb")
    assert kept["modules"][0]["module"] == str(mine / "profiles" / "rank-2")
    assert kept["run_dir"] == f"{sender}/rank-2" and kept["log_path"] == "/other/log"
    assert (mine / "profiles" / "rank-2.pb").read_bytes() == b"PROFILE"
    assert _mode(mine / "profiles" / "rank-2.pb") == 0o640
    assert (mine / "profiles" / "rank-2" / f"{H1}.pb").read_bytes() == b"MOD"
    # Not JSON: kept as sent, for the gather to name unreadable.
    raw = kv.bundle(Path(sender), {"rank-2.json": b"{not json"})
    assert kv.write_rank_files(mine, 2, raw) == ["rank-2.json"]
    assert (mine / "rank-2.json").read_bytes() == b"{not json"
    # A member named twice is written once (the first).
    raw = _raw({"job_dir": sender, "files": [["rank-2.start", 1, 0o644],
                                             ["rank-2.start", 1, 0o644]]}, b"AB")
    assert kv.write_rank_files(mine, 2, raw) == ["rank-2.start"]
    assert (mine / "rank-2.start").read_bytes() == b"A"


def test_a_report_over_its_bound_is_refused_and_a_profile_gets_the_profile_bound(tmp_path):
    over = rank_data.MAX_REPORT_BYTES + 1
    head = json.dumps({"job_dir": "x", "files": [["profiles/rank-1.pb", over, 0o644],
                                                 ["rank-1.json", over, 0o644]]}).encode()
    arrived = tmp_path / "arrived"
    with open(arrived, "wb") as f:
        f.write(kv.MAGIC + len(head).to_bytes(8, "big") + head)
        f.truncate(f.tell() + 2 * over)
    with pytest.raises(ValueError, match=f"^a file of {over:,} bytes, over the "
                                         f"{rank_data.MAX_REPORT_BYTES:,} pgle takes$"):
        kv.write_rank_files(tmp_path / "mine", 1, arrived)
    # The profile, as big as that, was within its own bound and written whole.
    assert (tmp_path / "mine" / "profiles" / "rank-1.pb").stat().st_size == over


def test_rank_0_sends_job_json_and_its_profile_file_with_its_manifest(tmp_path):
    jd = tmp_path / "job"
    jd.mkdir()
    (jd / "job.json").write_text('{"status": "ok"}')
    prof = tmp_path / "out" / "merged.pb"
    prof.parent.mkdir()
    prof.write_bytes(b"PB")
    os.chmod(prof, 0o600)
    (tmp_path / "out" / "merged.pb.manifest.json").write_text("{}")
    (tmp_path / "out" / "other.pb").write_text("not sent")
    files, extra, modes = kv.job_files(jd, str(prof))
    assert files == {"job.json": b'{"status": "ok"}', "profile/merged.pb": b"PB",
                     "profile/merged.pb.manifest.json": b"{}"}
    assert extra == {"profile": str(prof), "profile_kind": "file"}
    assert modes["profile/merged.pb"] == 0o600 and "job.json" not in modes
    # No manifest beside it: the profile alone.
    (tmp_path / "out" / "merged.pb.manifest.json").unlink()
    assert sorted(kv.job_files(jd, str(prof))[0]) == ["job.json", "profile/merged.pb"]


def test_rank_0_sends_a_profile_directorys_files(tmp_path):
    jd = tmp_path / "job"
    jd.mkdir()
    (jd / "job.json").write_text("{}")
    d = tmp_path / "merged"
    (d / "sub").mkdir(parents=True)
    (d / f"{H1}.pb").write_bytes(b"M")
    (d / "manifest.json").write_bytes(b"{}")
    files, extra, _ = kv.job_files(jd, str(d))
    assert sorted(files) == ["job.json", f"profile/{H1}.pb", "profile/manifest.json"]
    assert extra == {"profile": str(d), "profile_kind": "directory"}
    # No profile (or one that is not there): job.json alone, and no kind.
    assert kv.job_files(jd, None) == ({"job.json": b"{}"}, {"profile": None}, {})
    assert kv.job_files(jd, str(tmp_path / "gone.pb")) == \
        ({"job.json": b"{}"}, {"profile": str(tmp_path / "gone.pb")}, {})


def _job_bundle(tmp_path: Path, sender: Path, profile: Path | None) -> bytes:
    files, extra, modes = kv.job_files(sender, str(profile) if profile else None)
    return kv.bundle(sender, files, extra, modes)


def test_a_rank_keeps_the_job_profile_inside_its_own_job_folder(tmp_path):
    sender = tmp_path / "r0" / "job"
    (sender / "profiles").mkdir(parents=True)
    prof = sender / "profile.pb"
    prof.write_bytes(b"MERGED")
    os.chmod(prof, 0o640)
    (sender / "profile.pb.manifest.json").write_text("{}")
    (sender / "job.json").write_text(json.dumps({
        "status": "ok", "profile": {"path": str(prof)},
        "manifest": str(sender / "profile.pb.manifest.json"),
        "job": str(sender / "job.json"), "log": "/r0/log"}))
    mine = tmp_path / "r1" / "job"
    mine.mkdir(parents=True)
    report = kv.write_job_files(mine, _job_bundle(tmp_path, sender, prof), None)
    assert report == {"status": "ok", "profile": {"path": str(mine / "profile.pb")},
                      "manifest": str(mine / "profile.pb.manifest.json"),
                      "job": str(mine / "job.json"), "log": "/r0/log"}
    assert json.loads((mine / "job.json").read_text()) == report
    assert (mine / "job.json").read_text().startswith('{\n  "status"')
    assert (mine / "profile.pb").read_bytes() == b"MERGED"
    assert _mode(mine / "profile.pb") == 0o640
    assert (mine / "profile.pb.manifest.json").read_text() == "{}"


def test_a_rank_puts_the_job_profile_at_its_own_output(tmp_path):
    sender = tmp_path / "r0"
    sender.mkdir()
    prof = tmp_path / "shared-out" / "p.pb"  # outside rank 0's job folder
    prof.parent.mkdir()
    prof.write_bytes(b"P")
    (sender / "job.json").write_text(json.dumps({"profile": str(prof)}))
    raw = _job_bundle(tmp_path, sender, prof)
    mine = tmp_path / "r1"
    mine.mkdir()
    own = tmp_path / "mine-out" / "q.pb"
    report = kv.write_job_files(mine, raw, str(own))
    assert report == {"profile": str(own)}
    assert own.read_bytes() == b"P"
    # Without an output of its own, a profile outside rank 0's job folder is not kept.
    other = tmp_path / "r2"
    other.mkdir()
    assert kv.write_job_files(other, raw, None) == {"profile": str(prof)}
    assert sorted(p.name for p in other.iterdir()) == ["job.json"]


def test_a_rank_keeps_a_profile_directory_file_by_file(tmp_path):
    sender = tmp_path / "r0"
    d = sender / "profiles" / "merged"
    d.mkdir(parents=True)
    (d / f"{H1}.pb").write_bytes(b"M1")
    (d / "manifest.json").write_text("{}")
    (sender / "job.json").write_text(json.dumps({"dir": str(d), "m": str(d / f"{H1}.pb")}))
    mine = tmp_path / "r1"
    mine.mkdir()
    report = kv.write_job_files(mine, _job_bundle(tmp_path, sender, d), None)
    md = mine / "profiles" / "merged"
    assert report == {"dir": str(md), "m": str(md / f"{H1}.pb")}
    assert sorted(p.name for p in md.iterdir()) == [f"{H1}.pb", "manifest.json"]
    assert (md / f"{H1}.pb").read_bytes() == b"M1"


def test_a_job_bundle_with_hostile_names_writes_only_the_profile(tmp_path):
    sender = "/r0/job"
    files = [["job.json", 2, 0o644], ["profile/p.pb", 1, 0o644], ["profile/../evil", 1, 0o644],
             ["profile/..", 1, 0o644], ["profile/", 1, 0o644], ["other/p.pb", 1, 0o644],
             ["profile/q.pb", 1, 0o644], ["profile/p.pb.manifest.json", 1, 0o600]]
    raw = _raw({"job_dir": sender, "profile": "/r0/job/p.pb", "profile_kind": "file",
                "files": files}, b"{}PEDSOQM")
    mine = tmp_path / "r1"
    mine.mkdir()
    assert kv.write_job_files(mine, raw, None) == {}
    assert sorted(p.name for p in mine.iterdir()) == ["job.json", "p.pb", "p.pb.manifest.json"]
    assert (mine / "p.pb").read_bytes() == b"P"
    assert (mine / "p.pb.manifest.json").read_bytes() == b"M"
    assert _mode(mine / "p.pb.manifest.json") == 0o600
    assert not (tmp_path / "evil").exists()


def test_a_job_bundle_without_job_json_or_profile(tmp_path):
    mine = tmp_path / "r1"
    mine.mkdir()
    raw = _raw({"job_dir": "/r0", "profile": 7, "files": []})
    assert kv.write_job_files(mine, raw, str(tmp_path / "own.pb")) == {}
    assert (mine / "job.json").read_text() == "{}\n"
    assert not (tmp_path / "own.pb").exists()
    # A profile that is no path sends no profile, whatever members come along.
    raw = _raw({"job_dir": "/r0", "profile": 7, "files": [["profile/XXXX", 2, 0o644]]}, b"PB")
    assert kv.write_job_files(mine, raw, str(tmp_path / "own.pb")) == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1"]
    # job.json that is not an object: written, but no report returned.
    raw = _raw({"job_dir": "/r0", "files": [["job.json", 3, 0o644]]}, b"[1]")
    assert kv.write_job_files(mine, raw, None) is None
    raw = _raw({"job_dir": "/r0", "files": [["job.json", 3, 0o644]]}, b"{{{")
    with pytest.raises(ValueError, match="^rank 0's job report is not JSON"):
        kv.write_job_files(mine, raw, None)


# -- one handoff round, against a real workload process that has ended ----------------------


def _execution(tmp_path: Path, ended: bool = True) -> types.SimpleNamespace:
    run = tmp_path / "run"
    (run / schema.HANDOFF_DIR).mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    pending = types.SimpleNamespace(child=child)
    return types.SimpleNamespace(run=types.SimpleNamespace(path=str(run)),
                                 result=types.SimpleNamespace(pending=pending if ended else None))


def test_a_round_asks_the_workload_and_reads_its_answer(tmp_path):
    ex = _execution(tmp_path)
    folder = Path(ex.run.path) / schema.HANDOFF_DIR
    exchange = kv.HeldExchange(ex)
    to = folder / "pgle" / "0-0.in"
    (folder / "pgle").mkdir()
    to.write_bytes(b"value")
    (folder / "answer-0.json").write_text(json.dumps({
        "fetched": {"pgle/s/job": str(to), "pgle/s/extra": str(to),
                    "pgle/s/elsewhere": str(folder / "pgle" / "0-0.in")},
        "errors": ["publish x: refused"]}))
    fetched, errors = exchange.round({"pgle/s/rank-1": b"DATA"},
                                     ["pgle/s/job", "pgle/s/elsewhere", "pgle/s/none"],
                                     final=False, timeout_s=5.0)
    request = json.loads((folder / "request-0.json").read_text())
    assert request == {"publish": {"pgle/s/rank-1": str(folder / "pgle" / "0-0.out")},
                       "fetch": [{"key": "pgle/s/job", "to": str(to)},
                                 {"key": "pgle/s/elsewhere", "to": str(folder / "pgle" / "0-1.in")},
                                 {"key": "pgle/s/none", "to": str(folder / "pgle" / "0-2.in")}],
                       "timeout_s": 5.0, "final": False}
    assert (folder / "pgle" / "0-0.out").read_bytes() == b"DATA"
    assert fetched == {"pgle/s/job": to}
    # What it was not asked for, or put elsewhere than asked, did not arrive.
    assert errors == ["publish x: refused", "fetch pgle/s/extra: nothing arrived",
                      "fetch pgle/s/elsewhere: nothing arrived"]
    assert exchange.n == 1 and not exchange.done
    # The next round is numbered 1; the workload (ended, no answer) did not answer it.
    fetched, errors = exchange.round({}, [], final=True, timeout_s=5.0)
    assert json.loads((folder / "request-1.json").read_text())["final"] is True
    assert (fetched, errors) == ({}, [
        "the workload's process ended before answering (it crashed, or jax.distributed "
        "stopped it)"])
    assert exchange.done and exchange.n == 2
    assert exchange.round({}, ["k"], final=False, timeout_s=1.0) == \
        ({}, ["the workload was already released"])
    assert not (folder / "request-2.json").exists()


def test_a_fetched_file_that_is_gone_did_not_arrive(tmp_path):
    ex = _execution(tmp_path)
    folder = Path(ex.run.path) / schema.HANDOFF_DIR
    (folder / "answer-0.json").write_text(json.dumps({
        "fetched": {"k": str(folder / "pgle" / "0-0.in")}, "errors": []}))
    assert kv.HeldExchange(ex).round({}, ["k"], final=False, timeout_s=1.0) == \
        ({}, ["fetch k: nothing arrived"])


def test_release_ends_the_workload_once(tmp_path):
    ex = _execution(tmp_path)
    folder = Path(ex.run.path) / schema.HANDOFF_DIR
    exchange = kv.HeldExchange(ex)
    exchange.release()
    assert json.loads((folder / "request-0.json").read_text()) == \
        {"publish": {}, "fetch": [], "timeout_s": 1.0, "final": True}
    assert exchange.done
    exchange.release()
    assert not (folder / "request-1.json").exists()


def test_an_answer_that_is_not_an_object_is_no_answer(tmp_path):
    ex = _execution(tmp_path)
    folder = Path(ex.run.path) / schema.HANDOFF_DIR
    (folder / "answer-0.json").write_text("[]")
    assert kv.HeldExchange(ex).round({}, [], final=False, timeout_s=1.0)[1] == [
        "the workload's process ended before answering (it crashed, or jax.distributed "
        "stopped it)"]


def test_an_answer_written_while_the_workload_runs_is_read(tmp_path):
    """The workload still runs (no pending child known): the answer arriving later is read."""
    ex = _execution(tmp_path, ended=False)
    folder = Path(ex.run.path) / schema.HANDOFF_DIR
    writer = subprocess.Popen([sys.executable, "-c",
                               "import json, sys, time, os\n"
                               "while not os.path.exists(sys.argv[1] + '/request-0.json'):\n"
                               "    time.sleep(0.01)\n"
                               "open(sys.argv[1] + '/answer-0.json.t', 'w').write("
                               "json.dumps({'fetched': {}, 'errors': ['late']}))\n"
                               "os.replace(sys.argv[1] + '/answer-0.json.t', "
                               "sys.argv[1] + '/answer-0.json')\n", str(folder)])
    try:
        assert kv.HeldExchange(ex).round({}, [], final=False, timeout_s=60.0) == ({}, ["late"])
    finally:
        writer.wait(timeout=60)


def test_a_job_bundle_of_a_profile_folder_writes_only_its_plain_files(tmp_path):
    files = [["profile/a.pb", 1, 0o644], ["profile/sub/x.pb", 1, 0o644], ["profile/", 1, 0o644],
             ["profile/.", 1, 0o644], ["profile/..", 1, 0o644], ["notprof/b.pb", 1, 0o644],
             ["job.json", 0, 0o644]]
    raw = _raw({"job_dir": "/r0/job/", "profile": "/r0/job/merged", "profile_kind": "directory",
                "files": files}, b"ASXYZB")
    mine = tmp_path / "r1"
    mine.mkdir()
    # An empty job.json is an empty report; the folder inside rank 0's job folder (named with a
    # trailing slash) lands inside this rank's.
    assert kv.write_job_files(mine, raw, None) == {}
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*")) == \
        ["job.json", "merged", "merged/a.pb"]
    assert (mine / "merged" / "a.pb").read_bytes() == b"A"


def test_a_job_bundle_whose_profile_is_not_text_keeps_no_profile(tmp_path):
    raw = _raw({"job_dir": "/r0", "profile": ["p.pb"], "files": [["profile/p.pb", 1, 0o644]]},
               b"P")
    mine = tmp_path / "r1"
    mine.mkdir()
    kv.write_job_files(mine, raw, str(tmp_path / "own.pb"))
    assert not (tmp_path / "own.pb").exists()


def test_only_names_under_profile_are_the_profile(tmp_path):
    raw = _raw({"job_dir": "/r0/jobX", "profile": "/r0/jobX/p.pb", "profile_kind": "file",
                "files": [["profile/p.pb", 1, 0o644], ["notprof/p.pb", 1, 0o644]]}, b"PN")
    mine = tmp_path / "r1"
    mine.mkdir()
    kv.write_job_files(mine, raw, None)
    assert (mine / "p.pb").read_bytes() == b"P"


def test_a_foreign_member_first_does_not_hide_the_senders_files(tmp_path):
    # issue 37: each member is judged alone; one that is not the sender's is skipped, not the end.
    sender = tmp_path / "sender"
    manifest = b'{"b": 1, "a": "kept as sent"}'
    raw = kv.bundle(sender, {"rank-3.json": b"{}", "rank-2.json": b'{"status": "applied"}',
                             "profiles/rank-2/manifest.json": manifest},
                    modes={"rank-2.json": 0o600})
    mine = tmp_path / "mine"
    assert kv.write_rank_files(mine, 2, raw) == ["rank-2.json", "profiles/rank-2/manifest.json"]
    # A report keeps the mode it had; a profile's manifest is a profile file, copied byte for
    # byte (only reports have their paths mapped to this folder).
    assert _mode(mine / "rank-2.json") == 0o600
    assert (mine / "profiles" / "rank-2" / "manifest.json").read_bytes() == manifest
