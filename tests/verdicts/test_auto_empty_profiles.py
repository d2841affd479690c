"""`pgle auto`: a module's profile is empty only when every profiled execution gave an empty
trace; one empty trace among several (a CUPTI hiccup, a step that ran nothing on the GPU) is not
the module's cause (issue 37's independent mutants)."""

from __future__ import annotations

import pytest

from pgle.evidence.jax_log import ModuleFacts, RunFacts
from pgle.verdicts.auto_pgle import auto_rows


@pytest.mark.parametrize(("empty", "status"), [(3, "empty_profile"), (1, "not_optimized"),
                                               (0, "not_optimized")])
def test_empty_profile_needs_every_profiled_execution_empty(empty, status):
    facts = RunFacts({"jit_step": ModuleFacts("jit_step", profiled=3, runs=3,
                                              empty_profiles=empty)}, observed=True)
    (row,) = [r.to_dict() for r in auto_rows(facts, 3, "gpu")]
    assert row["status"] == status, row
    if status == "not_optimized":
        # The real cause: profiled, then never executed again to be recompiled.
        assert row["reason"] == ("profiled 3 times but never executed again: auto PGLE "
                                 "recompiles on execution 4"), row
