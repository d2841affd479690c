"""Merge profiles from several runs or ranks into one.

The default (`method="percentile"`, `percentile=90`) gives exactly what jaxlib's
`aggregate_profiled_instructions(profiles, percentile)` gives, which is what JAX
auto PGLE uses (xla/python/aggregate_profile.cc, checked against jaxlib 0.10.2):
all costs of one name, from every input (duplicates within one input included),
sorted, value at index `int(percentile / 100.0 * (n - 1))`. Two differences,
both on purpose: latencies are merged the same way per (source, target) instead
of being dropped, and bad input is an error instead of being skipped or half-read.
Names keep the order in which they first appear.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping, Sequence

from pgle.errors import BadInput
from pgle.profiles.files import Profile

METHODS = ("percentile", "median", "mean", "min", "max")
# Below this share of its names found in any other input, an input is flagged as
# probably coming from another program (other flags, shapes, jax version, module).
LOW_OVERLAP = 0.5


def percentile_index(n: int, percentile: int) -> int:
    """jaxlib's index rule; n=2, p=90 gives 0 (the smaller value)."""
    return int(percentile / 100.0 * (n - 1)) if n > 1 else 0


def _reducer(method: str, percentile: int):
    if method == "percentile":
        return lambda vals: sorted(vals)[percentile_index(len(vals), percentile)]
    if method == "median":
        return statistics.median
    if method == "mean":
        def mean(vals):
            total = 0.0
            for v in vals:
                total += v
            return total / len(vals)
        return mean
    if method == "min":
        return min
    if method == "max":
        return max
    raise BadInput(f"unknown merge method '{method}'.", hint=f"Use one of: {', '.join(METHODS)}.")


def check_method(method: str, percentile: int) -> None:
    """BadInput for an unknown --method (or a --percentile it cannot use)."""
    _reducer(method, percentile)


def check_percentile(percentile) -> int:
    if isinstance(percentile, bool) or not isinstance(percentile, int) or not 0 <= percentile <= 100:
        raise BadInput(f"percentile {percentile!r} is not a whole number from 0 to 100.")
    return percentile


def merge_profiles(profiles: Sequence[Profile], *, method: str = "percentile",
                   percentile: int = 90) -> Profile:
    """One profile whose every cost (and latency) is `method` over all inputs' values."""
    percentile = check_percentile(percentile)
    reduce = _reducer(method, percentile)
    costs: dict[str, list[float]] = {}
    latencies: dict[tuple[str, str], list[float]] = {}
    for p in profiles:
        for name, cost in p.costs:
            values = costs.get(name)
            if values is None:
                costs[name] = [cost]
            else:
                values.append(cost)
        for src, dst, lat in p.latencies:
            latencies.setdefault((src, dst), []).append(lat)
    return Profile(
        costs=[(name, reduce(values)) for name, values in costs.items()],
        latencies=[(src, dst, reduce(values)) for (src, dst), values in latencies.items()],
    )


@dataclasses.dataclass
class InputOverlap:
    label: str
    names: int
    shared: float  # share of its names present in at least one other input (1.0 for one input)

    @property
    def low(self) -> bool:
        return self.names > 0 and self.shared < LOW_OVERLAP


def name_overlap(labelled: Sequence[tuple[str, Profile]]) -> list[InputOverlap]:
    """How much of each input's name set the other inputs also have."""
    sets = [set(n for n, _ in p.costs) for _, p in labelled]
    counts: dict[str, int] = {}
    for s in sets:
        for n in s:
            counts[n] = counts.get(n, 0) + 1
    out = []
    for (label, _), s in zip(labelled, sets, strict=True):
        if len(sets) < 2 or not s:
            shared = 1.0 if s else 0.0
        else:
            shared = sum(1 for n in s if counts[n] > 1) / len(s)
        out.append(InputOverlap(label=label, names=len(s), shared=shared))
    return out


def overlap_warnings(overlaps: Sequence[InputOverlap]) -> list[str]:
    warnings = []
    for o in overlaps:
        if o.names == 0:
            warnings.append(f"{o.label} is empty: it adds nothing to the merge.")
        elif o.low:
            warnings.append(
                f"{o.label} shares only {o.shared:.0%} of its {o.names} instruction names with the other "
                "inputs: it probably comes from another program (other flags, shapes, sharding or jax "
                "version), and merging it mixes unrelated costs.")
    return warnings


def module_names(source: Any) -> dict[str, str]:
    """fingerprint -> module name of a per-module directory, from its manifest.json (written
    by `pgle collect --per-module`); {} without one."""
    from pgle.profiles import manifest

    if getattr(source, "kind", None) != "directory":
        return {}
    man = manifest.read(manifest.manifest_path(source.path)) or {}
    rows = list(man.get("modules") or [])
    names = {r["fingerprint"]: r["module"] for r in rows
             if isinstance(r, dict) and r.get("fingerprint") and r.get("module")}
    for name, fps in (man.get("fingerprint_aliases") or {}).items():
        for fp in fps:
            names.setdefault(fp, name)
    return names


def fingerprint_aliases(names: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """Module name -> its fingerprints, where inputs gave one module several (per-rank
    autotuning: a real 4-process A100 run gave one rank a different fingerprint for identical
    pre-optimisation HLO, issue 10)."""
    by_name: dict[str, set[str]] = {}
    for mapping in names:
        for fp, name in mapping.items():
            by_name.setdefault(name, set()).add(fp)
    return {n: sorted(fps) for n, fps in sorted(by_name.items()) if len(fps) > 1}


def merge_directory_modules(sources: Sequence[Any], *, method: str = "percentile",
                            percentile: int = 90):
    """Per-module directories -> (fingerprint -> merged profile, aliases, fingerprint ->
    [(input label, profile)] merged into it).

    Every fingerprint one module was seen under gets the profile merged over all of them, so
    each rank finds a file under its own fingerprint (XLA looks up `<fp>.pbtxt` by the
    fingerprint of the module it compiles)."""
    by_fp: dict[str, list[tuple[str, Any]]] = {}
    for s in sources:
        for fp, p in s.modules.items():
            by_fp.setdefault(fp, []).append((str(s.path), p))
    aliases = fingerprint_aliases([module_names(s) for s in sources])
    group = {fp: [fp] for fp in by_fp}
    for fps in aliases.values():
        present = [fp for fp in fps if fp in by_fp]
        for fp in present:
            group[fp] = present
    labelled = {fp: [x for g in group[fp] for x in by_fp[g]] for fp in by_fp}
    merged = {fp: merge_profiles([p for _, p in lab], method=method, percentile=percentile)
              for fp, lab in labelled.items()}
    return merged, aliases, labelled


def alias_lines(aliases: Mapping[str, Sequence[str]]) -> list[str]:
    return [f"module {name} has {len(fps)} fingerprints ({', '.join(fps)}): the same profile is "
            "written under each (per-rank autotuning can change a module's fingerprint)"
            for name, fps in aliases.items()]
