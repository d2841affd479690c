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

import collections
import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from pgle.errors import BadInput
from pgle.profiles.files import Profile

METHODS = ("percentile", "median", "mean", "min", "max")
# Below this share of its names found in any other input, an input is flagged as
# probably coming from another program (other flags, shapes, jax version, module).
LOW_OVERLAP = 0.5


def percentile_index(n: int, percentile: int) -> int:
    """jaxlib's index rule; n=2, p=90 gives 0 (the smaller value)."""
    return int(percentile / 100.0 * (n - 1)) if n > 1 else 0


def check_merge(method: str, percentile: object) -> int:
    """The percentile; BadInput for one that is no whole number from 0 to 100, then for an
    unknown --method."""
    if (
        isinstance(percentile, bool)
        or not isinstance(percentile, int)
        or not 0 <= percentile <= 100
    ):
        raise BadInput(f"percentile {percentile!r} is not a whole number from 0 to 100.")
    if method not in METHODS:
        raise BadInput(
            f"unknown merge method '{method}'.", hint=f"Use one of: {', '.join(METHODS)}."
        )
    return percentile


def merge_profiles(
    profiles: Sequence[Profile], *, method: str = "percentile", percentile: int = 90
) -> Profile:
    """One profile whose every cost (and latency) is `method` over all inputs' values: the
    profiles' tuples through the one merge engine, `ColumnMerge` (names as numpy objects)."""
    import numpy as np

    percentile = check_merge(method, percentile)
    costs, latencies = ColumnMerge(), ColumnMerge()
    for p in profiles:
        costs.add(_objects([n for n, _ in p.costs]), np.array([c for _, c in p.costs], float))
        latencies.add(
            _objects([(s, t) for s, t, _ in p.latencies]),
            np.array([v for _, _, v in p.latencies], float),
        )
    names, merged = costs.merge(method, percentile)
    pairs, lat = latencies.merge(method, percentile)
    return Profile(
        costs=list(zip(names, merged.tolist(), strict=True)),
        latencies=[(s, t, v) for (s, t), v in zip(pairs, lat.tolist(), strict=True)],
    )


def _objects(items: list[Any]) -> Any:
    """A 1-d numpy object array of these names (tuples stay whole, NUL bytes stay)."""
    import numpy as np

    out = np.empty(len(items), object)
    for i, item in enumerate(items):
        out[i] = item
    return out


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
    # Set operations, not a loop per name: 256 inputs of 20k names took 11.7 s as a loop.
    sets = [set(n for n, _ in p.costs) for _, p in labelled]
    counts = collections.Counter(itertools.chain.from_iterable(sets))
    several = {n for n, c in counts.items() if c > 1}
    out = []
    for (label, _), s in zip(labelled, sets, strict=True):
        shared = (1.0 if s else 0.0) if len(sets) < 2 or not s else len(s & several) / len(s)
        out.append(InputOverlap(label=label, names=len(s), shared=shared))
    return out


def overlap_warnings(overlaps: Sequence[InputOverlap]) -> list[str]:
    warnings = []
    for o in overlaps:
        if o.names == 0:
            warnings.append(f"{o.label} is empty: it adds nothing to the merge.")
        elif o.low:
            warnings.append(
                f"{o.label} shares only {o.shared:.0%} of its {o.names} instruction names with the "
                "other inputs: it probably comes from another program (other flags, shapes, "
                "sharding or jax version), and merging it mixes unrelated costs."
            )
    return warnings


def module_names(source: Any) -> dict[str, str]:
    """fingerprint -> module name of a per-module directory, from its manifest.json (written
    by `pgle collect --per-module`); {} without one."""
    from pgle.profiles import manifest

    if getattr(source, "kind", None) != "directory":
        return {}
    man = manifest.read(manifest.manifest_path(source.path)) or {}
    rows = list(man.get("modules") or [])
    names = {
        r["fingerprint"]: r["module"]
        for r in rows
        if isinstance(r, dict) and r.get("fingerprint") and r.get("module")
    }
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


def merge_directory_modules(
    sources: Sequence[Any], *, method: str = "percentile", percentile: int = 90
) -> tuple[dict[str, Profile], dict[str, list[str]], dict[str, list[tuple[str, Any]]]]:
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
    merged = {
        fp: merge_profiles([p for _, p in lab], method=method, percentile=percentile)
        for fp, lab in labelled.items()
    }
    return merged, aliases, labelled


def alias_lines(aliases: Mapping[str, Sequence[str]]) -> list[str]:
    return [
        f"module {name} has {len(fps)} fingerprints ({', '.join(fps)}): the same profile is "
        "written under each (per-rank autotuning can change a module's fingerprint)"
        for name, fps in aliases.items()
    ]


# The occurrence-rank matrix of percentile/median is used while it holds at most twice the
# values plus this many cells; sparser inputs (names in few of many inputs) sort the values.
DENSE_SLACK = 1024
# ... and while the ranks picked (per name: its percentile's, or the median's two) take at most
# this many values: np.partition selects each in turn.
DENSE_KTHS = 64


class ColumnMerge:
    """pgle's one merge engine (issue 35): inputs given as numpy columns (names as bytes, or as
    any objects: `merge_profiles`), added one at a time (issue 25: ranks whose names differ,
    text profiles, per-module folders, latencies).

    Names become ids in first-seen order (an input that matches the first one position by
    position costs one vectorized comparison; a few renamed names a dict lookup each; any other
    order a dict lookup each). Each value keeps its id, its occurrence rank (the how-many-th value
    of its name it is, over the inputs in order) and its cost: 16 bytes, where the files hold
    30-40 bytes a value. The merge follows jaxlib's aggregate (a stable sort of a name's values
    in input order, the value at the percentile's index) and Python's own rules for the other
    methods: summed left to right for the mean, first of equals for min and max, and a name
    holding a NaN sorted by Python's `sorted`, as `statistics.median` does."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.index: dict[bytes, int] = {}
        self.names: list[bytes] = []
        self.ref = self.ref_ids = None
        self.ref_unique = True
        self.occ = np.zeros(0, np.int64)  # values so far, per id
        self.present = np.zeros(0, np.int64)  # inputs holding each id
        self.inputs: list[tuple[Any, Any, Any, bool]] = []  # (ids, ranks, costs, duplicates)
        self.nan: list[Any] = []  # ids holding a NaN
        self.negative_zero: list[Any] = []  # ids holding a -0.0 (equal to 0.0, other bits)

    def _grow(self) -> None:
        np = self.np
        extra = len(self.names) - self.occ.size
        if extra > 0:
            self.occ = np.concatenate((self.occ, np.zeros(extra, np.int64)))
            self.present = np.concatenate((self.present, np.zeros(extra, np.int64)))

    def _ids_of(self, names: Any) -> Any:  # numpy arrays (numpy is imported lazily)
        np = self.np
        index, known = self.index, self.names

        def assign(values: Any) -> list[int]:
            out: list[int] = []
            for name in values:
                i = index.get(name)
                if i is None:
                    i = index[name] = len(known)
                    known.append(name)
                out.append(i)
            return out

        if self.ref is None:
            ids = np.array(assign(names.tolist()), np.int64)
            self.ref, self.ref_ids = names, ids
            self.ref_unique = len(self.names) == names.size
            return ids
        if names.size == self.ref.size:
            same = names == self.ref
            if same.all():
                return self.ref_ids
            wrong = np.flatnonzero(~same)
            if wrong.size * 20 <= names.size:  # a few renamed: a dict lookup each
                ids = self.ref_ids.copy()
                ids[wrong] = assign(names[wrong].tolist())
                return ids
        # Another order: a dict lookup per name (half the time of sorting the names seen so
        # far again, as each rank adds a few, and a binary search; issue 25).
        return np.array(assign(names.tolist()), np.int64)

    def add(self, names: Any, costs: Any) -> None:
        np = self.np
        nan = np.isnan(costs)
        zero = costs == 0
        if zero.any():
            negative = zero & np.signbit(costs)
            if negative.any():
                self.negative_zero.append(names[negative])
        ids = self._ids_of(names)
        if nan.any():
            self.nan.append(ids[nan])  # Python's sort orders NaN its own way
        self._grow()
        unique = (ids is self.ref_ids and self.ref_unique) or (
            ids.size == 0 or np.bincount(ids, minlength=1).max() <= 1
        )
        if unique:
            ranks = self.occ[ids]
            self.occ[ids] += 1
            self.present[ids] += 1
        else:
            ranks = self.occ[ids] + _within(np, ids)
            self.occ += np.bincount(ids, minlength=self.occ.size)
            self.present[np.unique(ids)] += 1
        self.inputs.append(
            (
                ids.astype(np.int32),
                ranks.astype(np.int32),
                np.asarray(costs, np.float64),
                not unique,
            )
        )

    def _negative_zero_ids(self) -> Any:  # an int64 numpy array (numpy imported lazily)
        np = self.np
        if not self.negative_zero:
            return np.zeros(0, np.int64)
        return np.unique(
            np.array(
                [self.index[b] for names in self.negative_zero for b in names.tolist()], np.int64
            )
        )

    def overlaps(self, labels: Sequence[str]) -> list[InputOverlap]:
        """Each input's distinct names and the share of them some other input holds (as
        name_overlap), under its label."""
        np = self.np
        out = []
        for label, (ids, _, _, dups) in zip(labels, self.inputs, strict=False):
            distinct = np.unique(ids) if dups else ids
            n = int(distinct.size)
            if len(self.inputs) < 2 or not n:
                shared = 1.0 if n else 0.0
            else:
                shared = int((self.present[distinct] > 1).sum()) / n
            out.append(InputOverlap(label=label, names=n, shared=shared))
        return out

    def merge(self, method: str, percentile: int) -> tuple[list[Any], Any]:
        """(names in first-seen order, merged costs)."""
        np = self.np
        check_merge(method, percentile)
        n = len(self.names)
        count = self.occ
        names = [b.decode("utf-8") if isinstance(b, bytes) else b for b in self.names]
        if method in ("mean", "min", "max"):
            acc = np.zeros(n, np.float64)
            for ids, ranks, costs, dups in self.inputs:
                # Within one input, a repeated name's values in file order, one round each.
                rounds = _rounds(np, ids) if dups else [slice(None)]
                for sel in rounds:
                    i, r, c = ids[sel], ranks[sel], costs[sel]
                    if method == "mean":
                        acc[i] += c
                    else:
                        cur = acc[i]
                        take = (r == 0) | ((c < cur) if method == "min" else (c > cur))
                        acc[i] = np.where(take, c, cur)
            return names, (acc / np.maximum(count, 1) if method == "mean" else acc)
        depth = int(count.max()) if n else 0
        if method == "median":
            lo, hi = (count - 1) // 2, count // 2
        else:
            k = (percentile / 100.0 * (count - 1).astype(np.float64)).astype(np.int64)
            lo = hi = np.where(count > 1, k, 0)
        total = sum(ids.size for ids, _, _, _ in self.inputs)
        kths = np.unique(np.concatenate((lo, hi))) if n else lo
        if depth * n <= 2 * total + DENSE_SLACK and kths.size <= DENSE_KTHS:
            # Dense: one row per name, its values in occurrence order (inf past its count).
            # Partitioned at the few ranks picked (names of one program share their count):
            # linear, where a sort is n log n. Equal values are interchangeable but for 0.0 and
            # -0.0: names holding a -0.0 are sorted stably instead, as merge_profiles does.
            matrix = np.full((n, depth), np.inf)
            for ids, ranks, costs, _ in self.inputs:
                matrix[ids, ranks] = costs
            rows = np.arange(n)
            signed = self._negative_zero_ids()
            kept = np.sort(matrix[signed], axis=1, kind="stable") if signed.size else None
            matrix.partition(kths, axis=1)
            if kept is not None:
                matrix[signed] = kept
            pick_lo, pick_hi = matrix[rows, lo], matrix[rows, hi]
        else:
            ids = np.concatenate([x[0] for x in self.inputs]).astype(np.int64)
            costs = np.concatenate([x[2] for x in self.inputs])
            # Stable: values of one name in occurrence order before sorting by cost.
            order = np.lexsort((costs, ids))
            first = np.concatenate(([0], np.cumsum(count)[:-1]))
            sorted_costs = costs[order]
            pick_lo, pick_hi = sorted_costs[first + lo], sorted_costs[first + hi]
        merged = pick_lo if method == "percentile" else (pick_lo + pick_hi) / 2
        if method == "median":
            merged = np.where(count % 2 == 1, pick_hi, merged)
        for i in np.unique(np.concatenate(self.nan)).tolist() if self.nan else []:
            # Python's sort of this name's values, in input order, and the same picks.
            values: list[float] = []
            for ids, _, costs, _ in self.inputs:
                values += costs[ids == i].tolist()
            values.sort()
            merged[i] = (values[lo[i]] + values[hi[i]]) / 2 if lo[i] != hi[i] else values[hi[i]]
        return names, merged


def _within(np: Any, ids: Any) -> Any:  # np: the numpy module, imported lazily
    """For each value of one input, how many values of the same name come before it there."""
    order = np.argsort(ids, kind="stable")
    run = np.r_[True, ids[order][1:] != ids[order][:-1]]
    first = np.maximum.accumulate(np.where(run, np.arange(ids.size), 0))
    within = np.empty(ids.size, np.int64)
    within[order] = np.arange(ids.size) - first
    return within


def _rounds(np: Any, ids: Any) -> list[Any]:
    """Index sets of one input's values, each holding a name at most once, in file order for
    repeated names: the first of each name, then the second, ..."""
    within = _within(np, ids)
    return [np.flatnonzero(within == w) for w in range(int(within.max()) + 1)]
