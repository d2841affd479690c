"""Which jax wrote a saved log, as `pgle verify` tells it (issue 37's independent mutants): the
lane's real XLA:GPU logs (tests/data/xla_gpu/<jax>/, captured 2026-11-25), as they are and as a
later XLA whose source lines moved would write them, and a profile path with a space."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.pgle_testing import REPO, write_profile
from pgle.cli.main import cli as pgle_main

DATA = REPO / "tests" / "data" / "xla_gpu"
LANE = sorted(p.name for p in DATA.iterdir() if p.is_dir() and p.name[0].isdigit())


def verify(*args: str) -> tuple[dict, int]:
    result = CliRunner().invoke(pgle_main, ["verify", "--json", *args], catch_exceptions=False)
    return json.loads(result.stdout), result.exit_code


@pytest.mark.parametrize("version", LANE)
def test_the_lane_s_line_numbers_pin_each_version(version):
    # Every captured version has logs whose source line numbers only it prints: verify names
    # it, alone, as the writer, and never leaves it out of a log it wrote (a log pinned to
    # several versions leaves the checker's silence to the weakest of them).
    narrowest = None
    for log in sorted((DATA / version).glob("*.log")):
        report, _ = verify(str(log))
        assumed = report["jax_assumed"]
        if "line numbers match" not in assumed:
            continue
        versions = assumed.split(" (")[0].removeprefix("jax ").split(" or ")
        assert version in versions, (log.name, assumed)
        narrowest = min(narrowest or versions, versions, key=len)
        if len(narrowest) == 1:
            break
    assert narrowest == [version], narrowest


def _moved_lines(text: str) -> str:
    """The log as an XLA whose sources moved would print it: every `file.cc:N]` shifted."""
    return re.sub(r"(\.cc):(\d+)\]", lambda m: f"{m[1]}:{int(m[2]) + 5000}]", text)


def test_a_log_of_an_unseen_release_is_dated_by_its_newest_clue(tmp_path: Path):
    # The SoL fallback line exists from jax 0.10.2 (bound: > 0.9.2), the absl prefix from
    # 0.7.2, "Using PGLE profile from fdo_profile" from 0.5.1: the log is from >= 0.9.3.
    src = DATA / "0.10.2" / "collectives-all.log"
    text = src.read_text()
    assert "SolLatencyEstimator" in text
    log = tmp_path / "unseen.log"
    log.write_text(_moved_lines(text))
    report, _ = verify(str(log))
    assert report["jax_assumed"].startswith("jax >= 0.9.3 (from "), report["jax_assumed"]


def test_a_log_of_an_unseen_old_release_is_dated_by_its_oldest_upper_clue(tmp_path: Path):
    # "Using PGLE profile for module from fdo_profile" ends with jax 0.5.0, "Found profile,
    # using ..." without a module name by 0.6.9, the tsl prefix by 0.7.1: the tightest bound
    # holds, whatever order the clues come in (the loosest would date it up to jax 0.7.1).
    text = (DATA / "0.4.35" / "fdo-pb.log").read_text()
    log = tmp_path / "unseen-old.log"
    log.write_text(_moved_lines(text))
    report, _ = verify(str(log))
    assert report["jax_assumed"].startswith("jax <= 0.5.0 (from "), report["jax_assumed"]


def test_a_profile_read_at_a_path_with_a_space_is_seen(tmp_path: Path):
    # XLA prints the path as given; a folder with a space in its name is as common as any.
    # The log's profile is not the one handed to verify: that read is named and not counted.
    src = (DATA / "0.10.2" / "good-pbtxt.log").read_text()
    old = "/tmp/pgle-lane/0.10.2/profiles/good.pbtxt"
    assert old in src
    read = str(tmp_path / "my profiles" / "good.pbtxt")
    log = tmp_path / "spaced.log"
    log.write_text(src.replace(old, read))
    other = write_profile(tmp_path / "other.pbtxt", {"fusion.1": 1.0})
    report, _ = verify("--profile", str(other), str(log))
    assert report["status"] == "not_applied", report["reasons"]
    assert report["reasons"][0] == (
        f"XLA read {read}, which is not the profile pgle handed over ({other}) nor inside it: "
        "not counted."
    )
    # The profile it did read, handed over: applied.
    write_profile(Path(read), {"fusion.1": 1.0})
    report, code = verify("--profile", read, str(log))
    assert (report["status"], code) == ("applied", 0), report["reasons"]


def _has_pbtxt_misses(version: str) -> bool:
    log = DATA / version / "dir-pb.log"
    return log.exists() and "does not exist" in log.read_text()


@pytest.mark.parametrize("version", [v for v in LANE if _has_pbtxt_misses(v)])
def test_a_missing_pbtxt_beside_a_pb_is_no_missing_profile(version, tmp_path: Path):
    # XLA's directory mode looks up <fp>.pbtxt, logs it missing, then reads <fp>.pb: only both
    # missing means the module had no profile. The verdict is the one of the same log without
    # those lookup lines.
    text = (DATA / version / "dir-pb.log").read_text()
    quiet = tmp_path / "without-lookups.log"
    quiet.write_text("".join(
        line for line in text.splitlines(keepends=True)
        if not ("does not exist" in line and line.rstrip().endswith(".pbtxt"))
    ))
    report, code = verify(str(DATA / version / "dir-pb.log"))
    reference, ref_code = verify(str(quiet))
    assert reference["modules"] and reference["status"] in ("applied", "partial")
    assert (report["status"], code) == (reference["status"], ref_code), report["reasons"]
    assert [(m["module"], m["status"]) for m in report["modules"]] == [
        (m["module"], m["status"]) for m in reference["modules"]
    ]


def test_a_line_a_version_never_prints_rules_that_version_out():
    """Each lane version's own line numbers, plus one kind of line it does not print (at the
    number another version prints it): the log is not that version's. Before, a kind missing
    from a version's column counted as agreeing: 0.4.34 matched a log with the async-collective
    lines, 0.4.38 and 0.5.0 one with an accuracy-checker block."""
    from pgle.evidence import log_version

    kinds = {k for table in log_version.LINES.values() for k in table}
    tried = 0
    for version, table in log_version.LINES.items():
        own = {kind: numbers[0] for kind, numbers in table.items()}
        assert version in log_version.infer(own).matches, version
        for kind in sorted(kinds - set(table)):
            number = next(t[kind][0] for t in log_version.LINES.values() if kind in t)
            assert version not in log_version.infer({**own, kind: number}).matches, (version, kind)
            tried += 1
    assert tried >= 6
