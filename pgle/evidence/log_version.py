"""Which jax version wrote an XLA:GPU log, from the log's own wording.

`pgle verify` judges a saved log; what XLA's silence means depends on the jax version that
wrote it (the accuracy checker, directory lookups), and that need not be the jax installed
where pgle runs. Two kinds of clue, both collected by the scanner (`Evidence.wording`):
- the source line numbers of gpu_hlo_schedule.cc and profile_guided_latency_estimator.cc
  in the prefix: they move between XLA versions. LINES holds those of every jax version the
  deviceless lane captured (tests/data/xla_gpu/<jax>/); a log whose line numbers all agree
  with one or more of them is pinned to those;
- wordings and prefixes with known first/last versions (FEATURES): for versions the lane
  never ran, a range.
"""

from __future__ import annotations

import dataclasses

Version = tuple[int, ...]

# Source line of each kind of line, per jax version (the lane's captures, 2026-11-23/25).
# Kinds as pgle.evidence.xla_log records them in Evidence.wording.
LINES: dict[str, dict[str, int]] = {}

# (kind, first jax version that prints it or None, last one or None): what a kind of line
# or prefix proves about the version that wrote the log.
FEATURES: tuple[tuple[str, Version | None, Version | None, str], ...] = (
    ("may_not_apply", None, (0, 4, 30), "\"PGLE profile may not applicable\" (jax <= 0.4.30)"),
    ("using_fdo_for_module", None, (0, 4, 35),
     "\"Using PGLE profile for module from fdo_profile\" (jax <= 0.4.35)"),
    ("parse_failed_old", None, (0, 4, 35), "\"Unable to read PGLE ... proto\" (jax <= 0.4.35)"),
    ("fdo_unparsable_old", None, (0, 4, 35), "\"Unable to prase FDO profile\" (jax <= 0.4.35)"),
    ("unknown_flags", None, (0, 5, 0), "\"Unknown flags in XLA_FLAGS\" (jax <= 0.5.0)"),
    ("unknown_flag", (0, 5, 1), None, "\"Unknown flag in XLA_FLAGS\" (jax >= 0.5.1)"),
    ("parse_failed", (0, 4, 36), None, "\"Tried but failed to parse PGLE proto\" (jax >= 0.4.36)"),
    ("lhs_unset", (0, 5, 1), (0, 6, 2), "\"Profile data detected but ... unset\" (jax 0.5.1-0.6.2)"),
    ("file_missing", (0, 6, 1), None, "\"PGLE profile file does not exist\" (jax >= 0.6.1)"),
    ("found_profile", None, (0, 6, 2), "\"Found profile, using ...\" without a module name "
     "(jax <= 0.6.2)"),
    ("found_profile_named", (0, 7, 0), None, "\"Found profile for module M\" (jax >= 0.7.0)"),
    ("unified_estimator", (0, 7, 0), None, "\"Using unified latency estimator\" (jax >= 0.7.0)"),
    ("sol_fallback", (0, 9, 0), None, "\"PGLE fallback: using SolLatencyEstimator\" (jax >= 0.9)"),
    ("prefix:tsl", None, (0, 7, 1), "the tsl log prefix (jax <= 0.7.1)"),
    ("prefix:absl", (0, 7, 2), None, "the absl log prefix (jax >= 0.7.2)"),
    ("clones", (0, 7, 2), (0, 8, 3), "<module>-clone modules (jax 0.7.2-0.8.3)"),
    ("candidates", (0, 11, 0), None, "autotuner candidate modules (jax >= 0.11)"),
)


@dataclasses.dataclass(frozen=True)
class Inference:
    """What the log says about its jax version: a range, and the lane versions it matches."""

    low: Version | None  # None: no lower bound
    high: Version | None  # None: no upper bound
    matches: tuple[str, ...]  # lane versions whose line numbers the log agrees with
    clues: tuple[str, ...]

    def describe(self) -> str:
        if self.matches:
            which = " or ".join(self.matches)
            return f"jax {which} (the log's source line numbers match the lane's capture)"
        if self.low is None and self.high is None:
            return "an unknown jax version (no telling wording in the log)"
        return f"jax {span(self.low, self.high)} (from {'; '.join(self.clues[:3])})"

    def within(self, low: Version | None, high: Version | None) -> bool:
        """Whether every version the log may come from lies in [low, high]."""
        if self.matches:
            return all(_in(parse(v), low, high) for v in self.matches)
        lo_ok = low is None or (self.low is not None and self.low >= low)
        hi_ok = high is None or (self.high is not None and self.high <= high)
        return lo_ok and hi_ok


def infer(wording: dict[str, object], *, clones: bool = False,
          candidates: bool = False) -> Inference:
    kinds = {k for k in wording if not k.endswith("prefix")}
    if wording.get("prefix"):
        kinds.add(f"prefix:{wording['prefix']}")
    if clones:
        kinds.add("clones")
    if candidates:
        kinds.add("candidates")
    low: Version | None = None
    high: Version | None = None
    clues = []
    for kind, first, last, text in FEATURES:
        if kind not in kinds:
            continue
        clues.append(text)
        if first is not None and (low is None or first > low):
            low = first
        if last is not None and (high is None or last < high):
            high = last
    numbered = {k: v for k, v in wording.items() if isinstance(v, int) and v > 0}
    matches = tuple(v for v, table in LINES.items()
                    if numbered and all(table.get(k) == n for k, n in numbered.items())
                    and _in(parse(v), low, high))
    return Inference(low, high, matches, tuple(clues))


def parse(text: str) -> Version:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def span(low: Version | None, high: Version | None) -> str:
    def s(v: Version) -> str:
        return ".".join(map(str, v))
    if low and high:
        return s(low) if low == high else f"{s(low)}-{s(high)}"
    if low:
        return f">= {s(low)}"
    return f"<= {s(high)}" if high else "unknown"


def _in(v: Version, low: Version | None, high: Version | None) -> bool:
    return (low is None or v >= low) and (high is None or v[:len(high)] <= high)
