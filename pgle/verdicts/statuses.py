"""Every status a verdict or a profile-writing command gives, as `enum.StrEnum`s.

Members are `str`s whose values are the strings the reports have always carried: JSON,
`--json` output, `==` with a status read back from another rank's report, and f-strings see
the plain value (tests/verdicts/test_statuses.py checks the JSON, and that every status
string pgle writes is a member here).
"""

from __future__ import annotations

import enum


class Applied(enum.StrEnum):
    """`pgle run`, `verify`, `tune`: did XLA apply the profile (per module, and the run's)."""

    APPLIED = "applied"
    PARTIAL = "partial"
    NOT_APPLIED = "not_applied"
    NOT_APPLICABLE = "not_applicable"  # not a GPU run: XLA reads no profile there
    ERROR = "error"


class Optimized(enum.StrEnum):
    """`pgle auto`, `prewarm`: was each module recompiled with a profile (auto PGLE)."""

    OPTIMIZED = "optimized"
    NOT_OPTIMIZED = "not_optimized"
    EMPTY_PROFILE = "empty_profile"  # recompiled, with a profile that held nothing


class Loaded(enum.StrEnum):
    """`pgle nsys`: what each module loaded from the prewarmed cache."""

    LOADED_OPTIMIZED = "loaded_optimized"
    FELL_BACK = "fell_back"  # the first-pass entry: no PGLE-optimized one was found
    COMPILED_ANEW = "compiled_anew"


class Collected(enum.StrEnum):
    """`pgle collect`, `convert`, `inspect`: what became of the profile."""

    COLLECTED = "collected"
    PARTIAL = "partial"  # a job's merge: some ranks' profiles, not all
    EMPTY = "empty"
    FAILED = "failed"
    NOT_PROFILED = "not_profiled"  # --rank N: this process ran without the profiler


class Written(enum.StrEnum):
    """A per-module profile directory's rows (`collect --per-module`, `convert`)."""

    WRITTEN = "written"
    NO_FINGERPRINT = "no fingerprint"  # nothing keys the module: no file for it
    POOLED = "pooled"  # one output file: every module's entries together


ALL: tuple[type[enum.StrEnum], ...] = (Applied, Optimized, Loaded, Collected, Written)
