"""Hypothesis settings for the property tests (issue 37): deterministic (`derandomize`: the same
examples on every run, so a failure is never flaky), no deadline (a loaded 2-core machine is
slow, not wrong), few examples (the README's test command stays within its 15 minutes).
`PGLE_HYPOTHESIS=thorough` runs many more examples, still deterministic."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "pgle", max_examples=60, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("thorough" if os.environ.get("PGLE_HYPOTHESIS") == "thorough" else "pgle")
