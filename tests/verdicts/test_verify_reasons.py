"""`pgle verify` on the real XLA:GPU logs (tests/data/xla_gpu/<jax>/): each reason said once,
and the evidence the scanner collects is read by a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_lines, run_pgle
from pgle import api

DATA = Path(__file__).resolve().parent.parent / "data" / "xla_gpu"
LOGS = sorted(p for p in DATA.glob("[0-9]*/*.log"))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_reason_is_said_once(log):
    reasons = api.verify(str(log), jax=log.parent.name).reasons
    assert len(reasons) == len(set(reasons)), reasons


def test_a_parse_error_of_every_compile_is_one_reason(tmp_path):
    log = DATA / "0.7.2" / "garbage-pb.log"
    report = api.verify(str(log), jax="0.7.2")
    parse = [r for r in report.reasons if r.startswith("XLA could not parse the profile")]
    assert parse == ["XLA could not parse the profile: /tmp/pgle-lane/0.7.2/profiles/garbage.pb: "
                     "Read less bytes than requested (10 compiles)"]
    proc = run_pgle("verify", "--jax", "0.7.2", str(log), cwd=tmp_path)
    verdict = next(line for line in pgle_lines(proc) if line.startswith("pgle: verdict: "))
    assert verdict.count("could not parse") == 1


def test_the_lhs_flag_warning_is_read_by_the_verdict():
    # jax 0.5.1-0.7.0 read a profile without --xla_gpu_enable_latency_hiding_scheduler and warn.
    report = api.verify(str(DATA / "0.5.3" / "no-lhs-flag.log"), jax="0.5.3")
    assert report.details["lhs_unset"] > 0
    assert any("--xla_gpu_enable_latency_hiding_scheduler is unset" in r and "0.4.34" in r
               for r in report.reasons)
    assert "lhs_unset" not in api.verify(str(DATA / "0.5.3" / "good-pb.log"), jax="0.5.3").details
