"""`--require-applied` over a job (`pgle run` on several ranks): exit 3 unless the job's verdict is
applied; a job partial on some rank is not (issue 37's independent mutants: a partial job
passed)."""

from __future__ import annotations

import pytest

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.verdicts.across_ranks import JobReports, combine_verdicts


def _rank(status: str, coverage: float, missing: int) -> dict:
    module = {"module": "jit_train_step", "status": status, "coverage": coverage,
              "fingerprint": "a" * 32, "instructions_missing": missing,
              "missing_instructions": [], "notes": []}
    return {"command": "run", "status": status, "modules": [module], "reasons": []}


@pytest.mark.parametrize(("rank1", "status", "code"), [
    ("applied", "applied", 0),
    ("partial", "partial", EXIT_NOT_VERIFIED),
    ("not_applied", "partial", EXIT_NOT_VERIFIED),
])
def test_require_applied_holds_the_job_to_applied(rank1, status, code):
    ranks = {0: _rank("applied", 1.0, 0), 1: _rank(rank1, 1.0 if rank1 == "applied" else 0.5, 4)}
    report = combine_verdicts(JobReports("run", 2, ranks), require_applied=True)
    assert (report.status, report.exit_code) == (status, code)
    said = [line for line in report.summary if line.startswith("--require-applied")]
    expected = f"--require-applied: the job's status is {status}, not applied"
    assert said == ([] if code == 0 else [expected])
    # Without the option the same job exits 0: the verdict is reported, not enforced.
    assert combine_verdicts(JobReports("run", 2, ranks)).exit_code == 0
