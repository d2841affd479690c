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

# Source line of each kind of line (rows) per jax version (columns): the lane's captures,
# 2026-11-23/25 ("-": that version does not print it; "a/b": either line). added_pair /
# async_start_seen: convert_async_collectives_to_sync.cc, scenario sync-converted. Kinds as
# pgle.evidence.xla_log records them in Evidence.wording.
_LINE_GRID = """
                       0.4.34   0.4.35   0.4.38    0.5.0    0.5.1    0.5.3    0.6.2
added_pair                  -      188      188      187      187      187      187
async_start_seen            -      172      172      171      171      171      171
checker_found             191      191        -        -      191      192      192
checker_missing           193      193        -        -      193      194      194
fdo_unparsable              -        -        -        -      380      380      363
fdo_unparsable_old        352      354      370      371        -        -        -
file_missing                -        -        -        -        -        -      384
fingerprint               447      449      453      454      478      478      463
found_profile             477      493      479      480      504      504      489
found_profile_named         -        -        -        -        -        -        -
lhs_unset                   -        -        -        -      668      672      614
parse_failed                -        -        -        -      397      397      380
parse_failed_old      374/385  376/387  392/403  393/404        -        -        -
sol_fallback                -        -        -        -        -        -        -
unified_estimator           -        -        -        -        -        -        -
unknown_flag                -        -        -        -      233      233      234
unknown_flags_listed      224      226      226      226        -        -        -
using                 371/382  373/384  389/400  390/401      394      394      377
using_fdo                   -        -        -        -  368/377  368/377  351/360
using_fdo_for_module  342/349  344/351  360/367  361/368        -        -        -

                        0.7.0    0.7.2    0.8.3    0.9.2   0.10.2   0.11.2 0.12.0.1
added_pair                187      187      203      203      238      252       75
async_start_seen          171      171      187      187      222      233       56
checker_found             192      192      192      192      192      192      192
checker_missing           194      194      194      194      194      194      194
fdo_unparsable            356      357      357      357      363      379      378
fdo_unparsable_old          -        -        -        -        -        -        -
file_missing              377      378      378      378      384      400      399
fingerprint               453      454      454      460      466      482      481
found_profile               -        -        -        -        -        -        -
found_profile_named       479      480      480      486      522      538      537
lhs_unset                 626        -        -        -        -        -        -
parse_failed              373      374      374      374      380      396      395
parse_failed_old            -        -        -        -        -        -        -
sol_fallback                -        -        -        -      506      522      521
unified_estimator           -      494      495      501      536      552      551
unknown_flag              234      234      234      234      234      234      234
unknown_flags_listed        -        -        -        -        -        -        -
using                     370      371      371      371      377      393      392
using_fdo             344/353  345/354  345/354  345/354  351/360  367/376  366/375
using_fdo_for_module        -        -        -        -        -        -        -
"""


def _grid(text: str) -> dict[str, dict[str, tuple[int, ...]]]:
    table: dict[str, dict[str, tuple[int, ...]]] = {}
    for block in text.strip("\n").split("\n\n"):
        versions, *rows = (line.split() for line in block.splitlines())
        table.update((version, {}) for version in versions)
        for kind, *cells in rows:
            for version, cell in zip(versions, cells, strict=True):
                if cell != "-":
                    table[version][kind] = tuple(map(int, cell.split("/")))
    return table


LINES = _grid(_LINE_GRID)
KINDS = frozenset(k for table in LINES.values() for k in table)  # some version prints them

# (kind, first jax version that prints it or None, last one or None): what a kind of line
# or prefix proves about the version that wrote the log.
FEATURES: tuple[tuple[str, Version | None, Version | None, str], ...] = (
    # Bounds are safe: a first/last version the lane did not pin down is the nearest release
    # that cannot be wrong (the lane's versions: 0.4.34, 0.4.35, 0.4.38, 0.5.0, 0.5.1, 0.5.3,
    # 0.6.2, 0.7.0, 0.7.2, 0.8.3, 0.9.2, 0.10.2, 0.11.2, 0.12.0.1).
    ("may_not_apply", None, (0, 4, 33), '"PGLE profile may not applicable" (jax <= 0.4.33)'),
    (
        "using_fdo_for_module",
        None,
        (0, 5, 0),
        '"Using PGLE profile for module from fdo_profile" (jax <= 0.5.0)',
    ),
    ("using_fdo", (0, 5, 1), None, '"Using PGLE profile from fdo_profile" (jax >= 0.5.1)'),
    ("parse_failed_old", None, (0, 5, 0), '"Unable to read PGLE ... proto" (jax <= 0.5.0)'),
    ("parse_failed", (0, 5, 1), None, '"Tried but failed to parse PGLE proto" (jax >= 0.5.1)'),
    ("fdo_unparsable_old", None, (0, 5, 0), '"Unable to prase FDO profile" (jax <= 0.5.0)'),
    ("fdo_unparsable", (0, 5, 1), None, '"Unable to parse fdo_profile" (jax >= 0.5.1)'),
    (
        "unknown_flags_listed",
        None,
        (0, 5, 0),
        '"Unknown flags in XLA_FLAGS" listing the other flags too (jax <= 0.5.0)',
    ),
    ("unknown_flag", (0, 5, 1), None, '"Unknown flag in XLA_FLAGS" (jax >= 0.5.1)'),
    ("lhs_unset", (0, 5, 1), (0, 7, 1), '"Profile data detected but ... unset" (jax 0.5.1-0.7.0)'),
    ("checker_found", (0, 4, 0), None, "an accuracy-checker block"),
    ("file_missing", (0, 6, 0), None, '"PGLE profile file does not exist" (jax >= 0.6)'),
    (
        "found_profile",
        None,
        (0, 6, 9),
        ('"Found profile, using ..." without a module name (jax <= 0.6.2)'),
    ),
    ("found_profile_named", (0, 6, 3), None, '"Found profile for module M" (jax >= 0.7.0)'),
    ("unified_estimator", (0, 7, 1), None, '"Using unified latency estimator" (jax >= 0.7.2)'),
    (
        "sol_fallback",
        (0, 9, 3),
        None,
        ('"PGLE fallback: using SolLatencyEstimator" (jax >= 0.10.2)'),
    ),
    ("prefix:tsl", None, (0, 7, 1), "the tsl log prefix (jax <= 0.7.0)"),
    ("prefix:absl", (0, 7, 1), None, "the absl log prefix (jax >= 0.7.2)"),
    ("clones", (0, 7, 1), (0, 9, 1), "<module>-clone modules (jax 0.7.2-0.8.3)"),
    ("candidates", (0, 10, 3), None, "autotuner candidate modules (jax >= 0.11)"),
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

    def since(self, first: Version, last_before: Version) -> bool | None:
        """Whether the log's jax is `first` or newer: True or False where every version the log
        may come from agrees (all >= `first`, or all <= `last_before`), else None."""
        if self.within(first, None):
            return True
        return False if self.within(None, last_before) else None


def infer(
    wording: dict[str, object], *, clones: bool = False, candidates: bool = False
) -> Inference:
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
    matches = tuple(
        v
        for v, table in LINES.items()
        if numbered
        # a kind the grid knows but this version does not print rules it out; a kind the
        # grid does not know says nothing
        and all(n in table[k] if k in table else k not in KINDS for k, n in numbered.items())
        and _in(parse(v), low, high)
    )
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
    return (low is None or v >= low) and (high is None or v[: len(high)] <= high)
