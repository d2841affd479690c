"""The 50-name cap on the missing instructions pgle keeps per module: the report shows 50, and
the verdict still sees every missing collective beyond the cap."""

from __future__ import annotations

import io

from pgle.evidence.xla_log import MAX_MISSING_NAMES, LogScanner
from pgle.verdicts.pgle_applied import judge


def absl(sev: str, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  7 {file}:538] {msg}"


def scan(missing: list[str]):
    s, p = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
    lines = [absl("I", s, "Using PGLE profile from /p.pb"),
             absl("I", s, "Found profile for module jit_step, using profile guided latency estimator"),
             absl("W", p, "Found 500 instructions from the profile."),
             absl("W", p, f"Missing {len(missing)} instructions from the profile.")]
    lines += [absl("W", p, f"  {n}") for n in missing]
    return LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))


def test_fifty_names_kept_and_collectives_past_the_cap_still_seen():
    compute = [f"fusion.{i}" for i in range(60)]
    evidence = scan(compute + ["all-reduce-start.3"])
    m = evidence.modules[0]
    assert MAX_MISSING_NAMES == 50
    assert m.missing_names == compute[:50]
    assert m.missing_communication == ["all-reduce-start.3"]
    verdict = judge(evidence, platform="cuda", min_coverage=0.5)
    row = verdict.modules[0]
    assert row["status"] == "partial" and len(row["missing_instructions"]) == 50
    assert any("all-reduce" in r for r in verdict.reasons + row.get("notes", [])), verdict


def test_exactly_fifty_names_are_all_kept():
    names = [f"fusion.{i}" for i in range(50)]
    assert scan(names).modules[0].missing_names == names
