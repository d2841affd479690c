"""pgle's verdicts on real XLA:GPU logs: every lane fixture (tests/data/xla_gpu/<jax>/), through
the real `pgle verify` command, against what really happened (scenarios.json).

The logs come from the real XLA:GPU compiler of each jax version compiling for 8 H100s on a
machine without a GPU (tests/xla_gpu/lane.py; tests/data/xla_gpu/README.md). The truth of each
scenario comes from XLA's full log, the compile's exit status, the schedules and the compiled
modules' own instruction names, not from pgle (tests/xla_gpu/truth.py).
tests/data/xla_gpu/pgle-verdicts-before-fixes.md lists what pgle said before issue 10's fixes.

`pgle verify` holds only the log, so it is held to the truth as the log shows it
(`truth.log_view`): on jax >= 0.11.1 XLA turns an async collective nothing overlaps into a new
synchronous instruction after scheduling (program d's train step: `all-reduce-start` ->
`all-reduce.6`; program e's ring: `collective-permute-start.1` -> `ppermute.6.2`; seen in the
compile's own HLO, scenarios.json), so that no profile can hold the name the accuracy checker
asks for. The truth counts such a module `applied`; a log without XLA's `Added pair` lines
cannot tell it from a profile lacking that collective, and verify must say `partial`, rule
`collectives_unresolved`, with how to tell (issue 22's rule: never `applied` while a
collective the module may run is missing). The scenario `sync-converted` (captured with
TF_CPP_VMODULE=...,convert_async_collectives_to_sync=3) shows the lines, and there verify
must say `applied`.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.pgle_testing import REPO, report_of, run_pgle

sys.path.insert(0, str(REPO / "tests" / "xla_gpu"))
import truth as lane_truth  # noqa: E402

from pgle.cli.main import cli as pgle_main  # noqa: E402

DATA = lane_truth.DATA
VERSIONS = lane_truth.versions()
CASES = [(v, name) for v in VERSIONS for name in lane_truth.load(v)["scenarios"]]


def verify(*args: str) -> tuple[dict, int]:
    """`pgle verify --json ARGS` in this process (the real click command)."""
    result = CliRunner().invoke(pgle_main, ["verify", "--json", *args], catch_exceptions=False)
    return json.loads(result.stdout), result.exit_code


def label_lines(report: dict) -> str:
    return "\n".join(report.get("summary") or [])


LANE = [line.strip() for line in (REPO / "tests" / "xla_gpu" / "versions.txt").read_text()
        .splitlines() if line.strip() and not line.startswith("#")]


def test_the_matrix_is_there():
    # Every version of the live lane's matrix, plus 0.4.34 (captured 2026-11-23: the oldest
    # jax pgle supports; it prints what 0.4.35 prints).
    assert sorted(LANE, key=lane_truth.version_tuple) == [v for v in VERSIONS if v != "0.4.34"]
    assert "0.4.34" in VERSIONS
    assert len(CASES) >= 13 * 35


@pytest.mark.parametrize("version,name", CASES, ids=[f"{v}-{n}" for v, n in CASES])
def test_verdict_matches_what_happened(version, name, tmp_path, monkeypatch):
    doc = lane_truth.load(version)
    sc = doc["scenarios"][name]
    exact_status, exact_mods = lane_truth.truth(name, sc, doc)
    truth_status, truth_mods = lane_truth.log_view(name, sc, doc)
    if (truth_status, truth_mods) != (exact_status, exact_mods):
        # Only a conversion the log does not show, only where XLA renames (jax >= 0.11.1).
        assert lane_truth.version_tuple(version) >= lane_truth.RENAMED_SINCE
        assert truth_status == exact_status or (
            exact_status.startswith("applied") and truth_status.startswith("partial"))
        for k, fact in truth_mods.items():
            # ... or a Triton collective fusion the log names without its kind (jax >= 0.11).
            assert fact == exact_mods[k] or "unresolved=" in fact or "unknown=" in fact, (
                k, fact, exact_mods[k])
    else:
        assert not re.search("unresolved=|unknown=", " ".join(map(str, truth_mods.values())))
    args = ["--jax", version]
    profile_given = False
    if name == "relative-path":
        # XLA logs the path as given (`Using PGLE profile from good.pbtxt`): run verify from
        # the workload's directory with the same relative path.
        (tmp_path / "good.pbtxt").write_text(lane_truth.good_profile_text(doc))
        monkeypatch.chdir(tmp_path)
        args += ["--profile", "good.pbtxt"]
    elif name == "absent":
        args += ["--profile", str(tmp_path / "absent.pbtxt")]
        profile_given = True
    report, code = verify(*args, str(DATA / version / f"{name}.log"))
    assert code == 0, report
    want = lane_truth.expected_status(version, name, truth_status, profile_given=profile_given)
    reasons = " ".join(report["reasons"])
    if want == "hidden":
        # The INFO log is off: WARNING checker blocks may show, nothing else does.
        has_lines = (DATA / version / f"{name}.log").read_text().strip() != ""
        assert report["status"] == ("error" if has_lines else "not_applied"), report
        assert "TF_CPP_MIN_LOG_LEVEL" in reasons
        assert report["modules"] == [] or not has_lines
        return
    assert report["status"] == want, (truth_status, report["status"], reasons)
    assert not report["warnings"], report["warnings"]  # relative path: no "read a different file"
    rows = {m["module"]: m for m in report["modules"]}
    assert not any(str(k).endswith("-clone") for k in rows), "clones are folded into their module"
    mods = lane_truth.per_module(truth_mods)
    # Only the workload's modules are rows: XLA's own (autotuner candidates) are apart.
    names = {k[0] if isinstance(k, tuple) else k for k in mods}
    assert set(rows) <= names | {None}, (set(rows) - names, report["modules"])
    if any(isinstance(k, tuple) for k in mods):
        # An `srun --label` log: each rank's truth in the row's per-rank statuses.
        for (module, rank), fact in mods.items():
            want_rank = "not_applied" if fact == "not read" else "applied"
            assert any(m["module"] == module and rank in (m["ranks"].get(want_rank) or [])
                       for m in report["modules"]), (module, rank, fact, report["modules"])
        return
    if name == "no-vmodule" and None in rows:
        # No VLOG line names the modules (jax <= 0.6.2 without TF_CPP_VMODULE): the k-th one.
        assert len(report["modules"]) == len(mods)
        assert [m["ordinal"] for m in report["modules"]] == list(range(1, len(mods) + 1))
        assert "unnamed module #1:" in label_lines(report)
        mods = {None: mods[next(iter(mods))]}
        rows = {None: report["modules"][0]}
    log_text = (DATA / version / f"{name}.log").read_text()
    strict_unseen = lane_truth.version_tuple(version) < lane_truth.WARN_PRINTS_SINCE \
        and "Discarding the profile" not in log_text
    for module, fact in mods.items():
        row = rows.get(module)
        if fact == "full" and strict_unseen:
            # ERROR strictness (or the old strict flag) proved the fit, but the log of a jax
            # whose checker prints nothing cannot show the strictness: verify says unknown.
            assert (row["status"], row["coverage"]) == ("applied", None), row
            continue
        if fact == "failed":
            assert row is not None and row["status"] == "not_applied", (module, row)
            continue
        if fact == "failed (not PGLE)":
            # Another compile error (jax >= 0.11 ERROR: an HLO verifier failure): never
            # applied, and the row quotes XLA's reason (issue 32).
            err = next(x["error"] for x in sc["facts"]["failed_modules"]
                       if x["module"] == module)
            assert row is not None and (row["status"], row["rule"]) == (
                "not_applied", "compile_failed"), (module, row)
            assert err.split(": ", 1)[1] in row["notes"][0], (err, row["notes"])
            continue
        if fact == "not read":
            assert row is None or not row["profile_found"] or row["status"] == "not_applied", row
            continue
        assert row is not None, (module, fact, report["modules"])
        if fact == "full":
            assert (row["status"], row["coverage"]) == ("applied", 1.0), row
        elif fact == "read (no checker)":
            # jax <= 0.4.35 without the checker flag: read, coverage unverified.
            assert (row["status"], row["coverage"]) == ("applied", None), row
            assert any("unverified" in n for n in row["notes"]), row["notes"]
        elif fact == "read (checker silent)":
            # jax 0.4.36-0.5.0: the WARN checker prints nothing, so nothing proves the fit.
            assert (row["status"], row["coverage"]) == ("applied", None), row
            assert any("coverage unknown" in n for n in row["notes"]), row["notes"]
        else:
            f = lane_truth.parse_fact(fact)
            assert row["coverage"] == pytest.approx(lane_truth.coverage(f)), (module, fact, row)
            assert row["instructions_missing"] == f["total"] - f["found"]
            if row["rule"] == "discarded":
                continue  # the compile failed (ERROR strictness): no rule of coverage decides
            assert [c["scheduled"] for c in row["collectives_converted"]] == f["converted"], row
            assert row["collectives_unresolved"] == f["unresolved"], row
            assert sorted(row["async_unknown"]) == sorted(f["unknown"]), row
            assert sorted(row["collectives_missing"]) == sorted(f["unresolved"] + f["collectives"])
            if f["found"] == 0:
                assert (row["status"], row["rule"]) == ("not_applied", "nothing_found"), row
            elif f["collectives"]:
                assert (row["status"], row["rule"]) == ("partial", "collectives"), row
            elif f["unresolved"]:
                assert (row["status"], row["rule"]) == ("partial", "collectives_unresolved")
                assert any("convert_async_collectives_to_sync=3" in n for n in row["notes"])
            elif f["unknown"]:
                # jax >= 0.11's Triton collective fusion, named by the log without its kind.
                assert (row["status"], row["rule"]) == ("partial", "async_unknown"), row
            elif f["converted"] and not f["collectives"]:
                assert row["status"] == "applied", row
                assert any("cannot be" in n and "synchronous" in n for n in row["notes"]), row


@pytest.mark.parametrize("version", VERSIONS)
def test_error_strictness_names_the_failed_compile(version):
    report, _ = verify("--jax", version, str(DATA / version / "partial-error.log"))
    assert report["status"] == "error"
    assert "Found" in report["reasons"][0] and "Discarding the profile" in report["reasons"][0]
    assert "ERROR strictness" in report["reasons"][0]
    # 0.7.2/0.8.3 fail on the clone: the row still names the module.
    assert report["modules"][0]["module"] == "jit_prog_a_collectives"


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_flag_is_an_error_naming_it(version):
    report, _ = verify("--jax", version, str(DATA / version / "unknown-checker-flag.log"))
    assert report["status"] == "error"
    flag = ("--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN"
            if lane_truth.version_tuple(version) < (0, 4, 36)
            else "--xla_gpu_enable_pgle_accuracy_checker=true")
    assert flag in report["reasons"][0] and "aborted" in report["reasons"][0]
    # 0.4.34 lists every XLA_FLAGS entry after the unknown ones: only the unknown one is named.
    assert "profile_file_or_directory_path" not in report["reasons"][0]


def test_jax_0_4_34_wordings_are_errors():
    for name in ("garbage-pbtxt", "garbage-pb", "fdo-garbage"):
        report, _ = verify("--jax", "0.4.34", str(DATA / "0.4.34" / f"{name}.log"))
        assert report["status"] == "error", (name, report["reasons"])
        assert "could not parse" in report["reasons"][0]
    report, _ = verify("--jax", "0.4.34", str(DATA / "0.4.34" / "fdo-pb.log"))
    assert report["status"] == "applied"
    assert all(m["profile_path"] == "fdo_profile (binary)" for m in report["modules"])


def test_jax_0_4_34_coverage_is_unverified_without_the_checker():
    report, _ = verify("--jax", "0.4.34", str(DATA / "0.4.34" / "good-pbtxt.log"))
    assert report["status"] == "applied"
    assert [m["coverage"] for m in report["modules"]] == [None] * 5
    assert "coverage ?" in label_lines(report)
    # With a checker-era jax the same silence is full coverage.
    report, _ = verify("--jax", "0.5.3", str(DATA / "0.5.3" / "good-pbtxt.log"))
    assert [m["coverage"] for m in report["modules"]] == [1.0] * 5


def test_absent_profile_silent_log_says_the_file_is_missing(tmp_path):
    for version in ("0.4.34", "0.5.3"):
        log = DATA / version / "absent.log"
        report, _ = verify("--jax", version, str(log))
        assert report["status"] == "not_applied"
        assert "logs nothing when the profile file does not exist" in report["reasons"][0]
        report, _ = verify("--jax", version, "--profile", str(tmp_path / "absent.pbtxt"), str(log))
        assert report["status"] == "error"
        assert "does not exist, and XLA gave no sign" in report["reasons"][0]


def test_directory_of_pb_files_pbtxt_lookup_error_is_not_an_error():
    # jax >= 0.6.2 logs `E ... PGLE profile file does not exist: <dir>/<fp>.pbtxt` before
    # reading <fp>.pb: that is the normal lookup order, not a failure.
    for version in ("0.6.2", "0.7.2", "0.8.3", "0.10.2"):
        text = (DATA / version / "dir-pb.log").read_text()
        assert "does not exist" in text and ".pbtxt" in text
        report, _ = verify("--jax", version, str(DATA / version / "dir-pb.log"))
        assert report["status"] == "applied", (version, report["reasons"])


@pytest.mark.parametrize("version", ["0.7.2", "0.8.3"])
def test_clones_fold_into_their_module(version):
    report, _ = verify("--jax", version, str(DATA / version / "fdo-pbtxt.log"))
    assert report["status"] == "applied"
    a = report["modules"][0]
    assert a["module"] == "jit_prog_a_collectives" and a["coverage"] == 1.0
    assert any("jit_prog_a_collectives-clone" in n and "never runs" in n for n in a["notes"])
    report, _ = verify("--jax", version, str(DATA / version / "dir-pbtxt-with-clones.log"))
    assert report["status"] == "partial"
    notes = " ".join(n for m in report["modules"] for n in m["notes"])
    assert "changes the module's own fingerprint" in notes


def test_missing_log_level_is_said():
    report, _ = verify("--jax", "0.8.3", str(DATA / "0.8.3" / "no-log-level.log"))
    assert report["status"] == "error"
    assert "INFO log is hidden" in report["reasons"][0]
    assert "4 modules" in report["reasons"][0]
    assert report["modules"] == []


def test_missing_vmodule_names_modules_by_order():
    report, _ = verify("--jax", "0.6.2", str(DATA / "0.6.2" / "no-vmodule.log"))
    lines = label_lines(report)
    for k in range(1, 6):
        assert f"unnamed module #{k}: applied" in lines
    assert "None" not in lines


def test_public_jax_0_4_25_may_not_applicable_is_not_applied():
    log = DATA / "public" / "maxtext-jax0.4.25-h100x8-may-not-applicable.log"
    report, _ = verify("--jax", "0.4.25", str(log))
    assert report["status"] == "partial"
    names = [m["module"] for m in report["modules"]]
    assert "jit_train_step" in names and None not in names
    train = next(m for m in report["modules"] if m["module"] == "jit_train_step")
    assert train["status"] == "partial" and train["coverage"] is None
    assert any("wrapped_transpose.10" in n for n in train["notes"])
    assert "applied the profile." not in report["reasons"][0] or "0 of" in report["reasons"][0]


def _rewrite(src: Path, dst: Path, fn) -> Path:
    dst.write_bytes(fn(src.read_bytes()))
    return dst


def test_epoch_prefix_before_absl_init_parses(tmp_path):
    # Lines logged before absl is initialised: `I0000 00:00:<epoch>.<us> <tid> file:line]`.
    import re
    log = _rewrite(DATA / "0.10.2" / "good-pbtxt.log", tmp_path / "epoch.log",
                   lambda b: re.sub(rb"(?m)^([IWEF])\d{4} \d\d:\d\d:\d\d\.",
                                    rb"\g<1>0000 00:00:1732377600.", b))
    assert b"I0000 00:00:1732377600." in log.read_bytes()
    report, _ = verify("--jax", "0.10.2", str(log))
    assert report["status"] == "applied" and len(report["modules"]) == 5


@pytest.mark.parametrize("glue", [b"\r", b""], ids=["carriage-return", "no-newline"])
def test_progress_bar_before_log_lines_does_not_hide_them(tmp_path, glue):
    # A progress bar (tqdm) printed without a newline just before XLA's lines (issue 12 item 5).
    src = (DATA / "0.10.2" / "good-pbtxt.log").read_bytes()
    out = b"".join(b"compiling 40%|####      | 2/5" + glue + line + b"\n"
                   for line in src.splitlines())
    log = tmp_path / "bar.log"
    log.write_bytes(out)
    report, code = verify("--jax", "0.10.2", "--require-applied", str(log))
    assert (report["status"], code) == ("applied", 0)
    assert len(report["modules"]) == 5
    # Also for the tsl prefix of jax < 0.7.2.
    src = (DATA / "0.5.3" / "good-pbtxt.log").read_bytes()
    log.write_bytes(b"".join(b"step 3/10" + glue + line + b"\n" for line in src.splitlines()))
    report, code = verify("--jax", "0.5.3", "--require-applied", str(log))
    assert (report["status"], code) == ("applied", 0)


def test_verify_as_a_user_runs_it_exit_codes(tmp_path):
    # The real console entry point in a subprocess: exit 3 under --require-applied for error.
    proc = run_pgle("verify", "--jax", "0.8.3", "--require-applied", "--json",
                    str(DATA / "0.8.3" / "partial-error.log"), cwd=tmp_path)
    assert proc.returncode == 3
    assert report_of(proc)["status"] == "error"
    proc = run_pgle("verify", "--jax", "0.8.3", "--require-applied",
                    str(DATA / "0.8.3" / "dir-pbtxt.log"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_pgle("verify", "--jax", "banana", str(DATA / "0.8.3" / "dir-pbtxt.log"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode().strip().splitlines() == [
        "pgle: error: --jax banana is not a version (e.g. 0.4.34)."]
