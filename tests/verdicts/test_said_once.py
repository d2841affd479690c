"""Issue 38: a long cause shared by several grouped rows is said once (pgle.verdicts.rows)."""

from __future__ import annotations

import re

from pgle.verdicts.rows import module_lines, said_once

CAUSE = ("the backend is cpu: the JAX profiler records no device kernels there, so every "
         "profile is empty")
FIX = "run on an NVIDIA GPU with no other CUPTI client attached"


def _row(name: str, n: int) -> dict:
    return {"module": name, "status": "empty_profile", "profiled_executions": n,
            "reason": f"all {n} profiled executions gave an empty profile: {CAUSE}", "fix": FIX}


def test_rows_that_differ_by_a_count_say_their_cause_and_fix_once():
    lines = module_lines([_row("jit_a", 10), _row("jit_b", 9), _row("jit_c", 3)], ok="optimized")
    text = "\n".join(lines)
    assert text.count(CAUSE.split(": ", 1)[1]) == 1 and text.count(FIX) == 1, text
    assert all("jit_" in line for line in lines) and "all 9 profiled" in text, text
    # No clause of 60+ characters (the doc test's reading) in two lines.
    seen: dict[str, str] = {}
    for line in lines:
        for clause in re.split(r"; | \(|\): ", line):
            if len(clause) >= 60:
                assert seen.get(clause, line) == line, clause
                seen[clause] = line


def test_short_clauses_and_a_single_line_are_left_alone():
    assert said_once(["  a: ok (fine)", "  b: ok (fine)"]) == ["  a: ok (fine)", "  b: ok (fine)"]
    line = f"  a: bad ({CAUSE}); fix: {FIX}"
    assert said_once([line]) == [line]
