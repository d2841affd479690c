"""A verdict cannot be forged: XLA:GPU evidence counts only where it is consistent with what
pgle knows of the run (pgle/verdicts/origin.py): the platforms XLA compiled for and the
threads that compiled (recorded by pgle's harness inside the workload), and the profile pgle
handed over.

The workload (tests/workloads/print_gpu_log.py) runs real JAX on CPU and prints a real log the
XLA:GPU compiler printed in the deviceless lane (tests/data/xla_gpu/0.10.2/good-pbtxt.log: five
modules, every one fully covered), with its profile path replaced by the one pgle gave it.
"""
from __future__ import annotations

from pathlib import Path

from helpers.pgle_testing import (REPO, WORKLOADS, pgle_env, replay_env, report_of, run_pgle,
                                  write_profile)
from pgle.evidence.xla_log import LogScanner
from pgle.verdicts.origin import Origin, path_matcher
from pgle.verdicts.pgle_applied import judge

PRINT = str(WORKLOADS / "print_gpu_log.py")
REAL_LOG = REPO / "tests" / "data" / "xla_gpu" / "0.10.2" / "good-pbtxt.log"


def _run(project: Path, env: dict) -> tuple[dict, int]:
    write_profile(project / "p.pb", {"fusion.1": 10.0})
    proc = run_pgle("run", "--profile", "p.pb", "--require-applied", "--json", PRINT,
                    cwd=project, env=env)
    return report_of(proc), proc.returncode


def test_a_cpu_workload_printing_a_real_gpu_log_gets_no_applied(project):
    report, code = _run(project, pgle_env(PRINT_LOG=str(REAL_LOG)))
    assert REAL_LOG.read_text().count("Found profile for module") == 5
    assert report["status"] == "not_applicable" and code == 3, report["reasons"]
    assert "compiled only for cpu" in report["reasons"][0]
    assert "XLA:GPU did not print them in this run" in report["reasons"][0]
    assert report["modules"] == []
    assert report["not_counted"]["xla_lines"] > 0


def test_lines_from_another_process_threads_are_not_counted(project):
    # Even a run whose compiles were for a GPU (the replay stand-in): the log's thread ids
    # are the lane child's, not any thread of this run that compiled.
    report, code = _run(project, replay_env(pgle_env(PRINT_LOG=str(REAL_LOG))))
    assert report["status"] == "not_applicable" and code == 3, report["reasons"]
    assert "none of which compiled anything in this run" in report["reasons"][0]


def test_a_read_of_another_profile_is_not_counted():
    evidence = LogScanner().scan_file(REAL_LOG)
    origin = Origin(profile_match=path_matcher("/data/mine.pbtxt"), profile_given="/data/mine.pbtxt")
    verdict = judge(evidence, origin=origin)
    assert verdict.status == "not_applied", verdict.reasons
    assert all(m["status"] == "not_applied" for m in verdict.modules)
    assert "which is not the profile pgle handed over (/data/mine.pbtxt)" in verdict.reasons[0]
    # The same log, the path it read handed over: applied.
    read = evidence.reads[0]
    assert judge(LogScanner().scan_file(REAL_LOG),
                 origin=Origin(profile_match=path_matcher(read))).status == "applied"


def test_a_directory_read_counts_inside_the_directory_only():
    match = path_matcher("/p/dir")
    assert match("/p/dir/0123.pbtxt") and match("/p/dir/") and not match("/p/dir2/0123.pbtxt")


def test_fdo_profile_reads_are_not_the_users_profile():
    log = REPO / "tests" / "data" / "xla_gpu" / "0.10.2" / "fdo-pbtxt.log"
    verdict = judge(LogScanner().scan_file(log),
                    origin=Origin(profile_match=path_matcher("/p/profile.pb"),
                                  profile_given="/p/profile.pb"))
    assert verdict.status == "not_applied"
    assert "auto PGLE is on" in verdict.reasons[0]


def _relinked_log(tmp_path: Path, src: Path, old: str, new: str) -> Path:
    log = tmp_path / src.name
    log.write_text(src.read_text().replace(old, new))
    return log


def test_a_profile_handed_over_through_a_symlink_is_that_profile(tmp_path):
    """Issue 32: profiles are compared as files, not path strings. The run's flag named
    link.pbtxt -> good.pbtxt; `verify --profile good.pbtxt` (and the other way round) is
    the same profile; another file is still not."""
    good = tmp_path / "good.pbtxt"
    write_profile(good, {"fusion.1": 10.0})
    (tmp_path / "link.pbtxt").symlink_to(good)
    log = _relinked_log(tmp_path, REAL_LOG, "/tmp/pgle-lane/0.10.2/profiles/good.pbtxt",
                        str(tmp_path / "link.pbtxt"))
    for given in ("good.pbtxt", "link.pbtxt"):
        proc = run_pgle("verify", "--json", "--profile", given, str(log), cwd=tmp_path)
        rep = report_of(proc)
        assert rep["status"] == "applied", (given, rep["reasons"])
    other = tmp_path / "other.pbtxt"
    write_profile(other, {"fusion.1": 10.0})
    rep = report_of(run_pgle("verify", "--json", "--profile", "other.pbtxt", str(log),
                             cwd=tmp_path))
    assert rep["status"] == "not_applied"
    assert "not the profile pgle handed over" in " ".join(rep["reasons"])


def test_a_profile_directory_handed_over_through_a_symlink_is_that_directory(tmp_path):
    src = REPO / "tests" / "data" / "xla_gpu" / "0.10.2" / "dir-pbtxt.log"
    real = tmp_path / "profiles"
    fps = sorted({line.rsplit("/", 1)[1].split(".")[0] for line in src.read_text().splitlines()
                  if "Using PGLE profile from" in line})
    for fp in fps:
        write_profile(real / f"{fp}.pbtxt", {"fusion.1": 10.0})
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    log = _relinked_log(tmp_path, src, "/tmp/pgle-lane/0.10.2/profiles/dir-pbtxt",
                        str(tmp_path / "link"))
    rep = report_of(run_pgle("verify", "--json", "--profile", str(real), str(log), cwd=tmp_path))
    assert rep["status"] == "applied", rep["reasons"]
    match = path_matcher(str(real))
    assert match(str(tmp_path / "link" / f"{fps[0]}.pbtxt"))
    assert not match(str(tmp_path / "elsewhere" / f"{fps[0]}.pbtxt"))
