"""What a profile says: counts, top costs, cost by category, and the diff of two profiles.

Categories come from XLA's instruction naming (a name is `<opcode or kind>[.N]`,
async collectives are `<kind>-start.N` / `<kind>-done.N`), since a profile holds
names and costs only. Whether a name is a collective (and of which family) or a host copy is
decided by pgle.xla.instruction_kinds, the classifier verify uses too (`psum.3` is an
all-reduce in both):
- collective: all-reduce, all-gather, reduce-scatter, all-to-all, ragged-all-to-all,
  collective-permute, collective-broadcast, send/recv (by family, with start/done pairs)
- gemm: cuBLAS/cuBLASLt GEMMs, Triton GEMM fusions, cuDNN calls, convolutions, dots and other
  custom calls
- fusion: every other fusion
- copy: copy, copy-start/done, memcpy/memset-like ops
- other: the rest, and async wrappers whose kind a name does not show (`fusion-start`: on
  jax >= 0.11 maybe a Triton collective fusion; `custom-call-start`)
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import re
from collections.abc import Iterable
from typing import Any

from pgle.profiles.files import Profile, ProfileSource, split_qualified
from pgle.xla import instruction_kinds

CATEGORIES = ("collective", "gemm", "fusion", "copy", "other")
_GEMM_RE = re.compile(r"gemm|matmul|cublas|cudnn|\bdot\b|^dot|convolution|custom-call|custom_call")
_COPY_RE = re.compile(
    r"^(copy|memcpy|memset|dynamic-update-slice|dynamic-slice)(-start|-done)?([.-]|$)"
)
_REMAT_RE = re.compile(r"\.remat\d*$")


@dataclasses.dataclass(frozen=True)
class Classified:
    category: str
    kind: str | None = None  # collective kind
    phase: str | None = None  # 'start' | 'done' | None (sync)
    pair_key: str | None = None  # name with -start/-done removed, to pair them


# One shared instance per plain category (Classified is frozen): building a frozen dataclass
# per name was about half of classify's time on 2,000 names (issue 16).
_PLAIN = {cat: Classified(cat) for cat in CATEGORIES}


# inspect and diff classify each name more than once (categories, collectives, both sides): a
# cache smaller than the profile thrashed from 65,536 names on (superlinear, issue 25).
@functools.lru_cache(maxsize=1 << 20)
def classify(name: str) -> Classified:
    """Category of one instruction name (qualifier and `.rematN` ignored)."""
    _, bare = split_qualified(name)
    if ".remat" in bare:
        bare = _REMAT_RE.sub("", bare)
    k = instruction_kinds.classify(bare)
    if k.category == instruction_kinds.COLLECTIVE:
        return Classified("collective", k.family, k.phase, k.pair_key)
    if k.category == instruction_kinds.HOST_COPY:
        return _PLAIN["copy"]
    if k.category == instruction_kinds.OTHER:
        return _PLAIN["other"]
    low = bare.lower()
    if _COPY_RE.match(low):
        return _PLAIN["copy"]
    if _GEMM_RE.search(low):
        return _PLAIN["gemm"]
    if "fusion" in low:
        return _PLAIN["fusion"]
    return _PLAIN["other"]


def effective_costs(profile: Profile) -> dict[str, float]:
    """name -> cost; for a repeated name the last entry wins, as in XLA's estimator map.
    (XLA averages repeated names instead when any `.rematN` name is present; inspect and
    diff show names as written, so `.rematN` entries stay separate here.)"""
    return dict(profile.costs)


def _flat(source: ProfileSource) -> dict[str, float]:
    """One name -> cost map; a directory's names become `<fp>::<name>`."""
    if source.kind == "file":
        return effective_costs(source.modules[""])
    out: dict[str, float] = {}
    for fp, profile in source.modules.items():
        for name, cost in effective_costs(profile).items():
            out[f"{fp}::{name}"] = cost
    return out


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def category_totals(costs: dict[str, float]) -> dict[str, dict[str, Any]]:
    total = sum(c for c in costs.values() if math.isfinite(c))
    # Flat counters, summed in the same order as before (the same floats): a nested dict
    # update per name was most of inspect's and diff's time here (cProfile, issue 16).
    count = dict.fromkeys(CATEGORIES, 0)
    cost_us = dict.fromkeys(CATEGORIES, 0.0)
    isfinite = math.isfinite
    for name, cost in costs.items():
        cat = classify(name).category
        count[cat] += 1
        if isfinite(cost):
            cost_us[cat] += cost
    return {
        cat: {
            "count": count[cat],
            "cost_us": cost_us[cat],
            "share": (cost_us[cat] / total) if total > 0 else 0.0,
        }
        for cat in CATEGORIES
    }


def collective_summary(
    costs: dict[str, float], latencies: Iterable[tuple[str, str, float]] = ()
) -> dict[str, Any]:
    """Per collective kind: counts of sync ops, starts, dones, matched start/done pairs, cost."""
    kinds: dict[str, dict[str, Any]] = {}
    starts: dict[str, set[str]] = {}
    dones: dict[str, set[str]] = {}
    for name, cost in costs.items():
        c = classify(name)
        if c.category != "collective":
            continue
        kind = c.kind
        assert kind is not None  # classify gives every collective its kind
        fp, _ = split_qualified(name)
        row = kinds.setdefault(
            kind, {"count": 0, "sync": 0, "start": 0, "done": 0, "pairs": 0, "cost_us": 0.0}
        )
        row["count"] += 1
        row["cost_us"] += cost if math.isfinite(cost) else 0.0
        if c.phase is None:
            row["sync"] += 1
        else:
            row[c.phase] += 1
            (starts if c.phase == "start" else dones).setdefault(kind, set()).add(
                f"{fp}|{c.pair_key}"
            )
    for kind, row in kinds.items():
        row["pairs"] = len(starts.get(kind, set()) & dones.get(kind, set()))
    lat_pairs = sum(
        1 for s, t, _ in latencies if classify(s).phase == "start" and classify(t).phase == "done"
    )
    return {"kinds": dict(sorted(kinds.items())), "latency_pairs": lat_pairs}


def inspect_source(source: ProfileSource, *, top: int = 20) -> dict[str, Any]:
    """Everything `pgle inspect` reports, as plain data."""
    costs = _flat(source)
    latencies = [lat for p in source.modules.values() for lat in p.latencies]
    finite = [c for c in costs.values() if math.isfinite(c)]
    total = sum(finite)
    raw = [e for p in source.modules.values() for e in p.costs]
    names = [n for n, _ in raw]
    top_rows = heapq.nsmallest(
        max(top, 0),
        costs.items(),
        key=lambda kv: (-(kv[1] if math.isfinite(kv[1]) else -math.inf), kv[0]),
    )
    data: dict[str, Any] = {
        "instruction_count": len(raw),
        "unique_instructions": len(costs),
        "latency_count": len(latencies),
        "total_cost_us": total,
        "top": [
            {
                "name": n,
                "cost_us": _num(c),
                "category": classify(n).category,
                "share": (c / total if total > 0 and math.isfinite(c) else 0.0),
            }
            for n, c in top_rows[: max(top, 0)]
        ],
        "categories": category_totals(costs),
        "collectives": collective_summary(costs, latencies),
        "duplicates": len(names) - len(set(names))
        if source.kind == "file"
        else sum(
            p.instruction_count - len({n for n, _ in p.costs}) for p in source.modules.values()
        ),
        "remat_entries": sum(
            1 for n in names if ".remat" in n and _REMAT_RE.search(split_qualified(n)[1])
        ),
        "bad_values": sum(1 for _, c in raw if not math.isfinite(c) or c < 0),
        "zero_costs": sum(1 for _, c in raw if c == 0),
    }
    data["fingerprints"] = _by_fingerprint(source)
    data["fingerprint_aliases"] = _aliases(source)
    return data


def _aliases(source: ProfileSource) -> dict[str, list[str]]:
    """Fingerprints that are one module (recorded by merge / collect's rank merge), else the
    module names the manifest gives several fingerprints."""
    if source.kind != "directory":
        return {}
    from pgle.profiles.merge import fingerprint_aliases, module_names  # directories only

    return fingerprint_aliases([module_names(source)])


def _by_fingerprint(source: ProfileSource) -> dict[str, Any]:
    """Per module: from the directory's files, or from `<fp>::` qualifiers in one file."""
    groups: dict[str, dict[str, Any]] = {}
    if source.kind == "directory":
        for fp, p in source.modules.items():
            costs = effective_costs(p)
            groups[fp] = {
                "instruction_count": p.instruction_count,
                "total_cost_us": sum(c for c in costs.values() if math.isfinite(c)),
            }
        return groups
    malformed = 0
    for name, cost in source.modules[""].costs:
        qualifier, _ = split_qualified(name)
        if qualifier is None:
            continue
        if qualifier == "":
            malformed += 1
            continue
        row = groups.setdefault(qualifier, {"instruction_count": 0, "total_cost_us": 0.0})
        row["instruction_count"] += 1
        row["total_cost_us"] += cost if math.isfinite(cost) else 0.0
    if groups or malformed:
        bare = sum(1 for n, _ in source.modules[""].costs if split_qualified(n)[0] is None)
        return {"qualified": groups, "bare_instructions": bare, "malformed": malformed}
    return groups


def diff_sources(a: ProfileSource, b: ProfileSource, *, top: int = 20) -> dict[str, Any]:
    """Names only in A / only in B, the largest cost changes, category shifts."""
    ca, cb = _flat(a), _flat(b)
    only_a = sorted(set(ca) - set(cb))
    only_b = sorted(set(cb) - set(ca))
    common = [n for n in ca if n in cb]
    # Tuples, and dicts only for the rows shown: building a dict per common name was most of
    # `pgle diff`'s own time on 2,000 names (cProfile, issue 16).
    changes = []
    for n in common:
        x, y = ca[n], cb[n]
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        rel = (y - x) / x if x != 0 else (0.0 if y == 0 else math.inf)
        changes.append((n, x, y, y - x, _num(rel)))

    def row(change: tuple[str, float, float, float, float | None]) -> dict[str, Any]:
        n, x, y, delta, rel = change
        return {
            "name": n,
            "a_us": x,
            "b_us": y,
            "delta_us": delta,
            "relative": rel,
            "category": classify(n).category,
        }

    k = max(top, 0)
    # The k first of each order, not a sort of every name (heapq.nsmallest is sorted()[:k]).
    by_abs = [row(c) for c in heapq.nsmallest(k, changes, key=lambda c: (-abs(c[3]), c[0]))]
    by_rel = [
        row(c)
        for c in heapq.nsmallest(
            k,
            (c for c in changes if c[3] != 0),
            key=lambda c: (-(abs(c[4]) if c[4] is not None else math.inf), c[0]),
        )
    ]
    cat_a, cat_b = category_totals(ca), category_totals(cb)
    categories = {
        cat: {
            "a_us": cat_a[cat]["cost_us"],
            "b_us": cat_b[cat]["cost_us"],
            "delta_us": cat_b[cat]["cost_us"] - cat_a[cat]["cost_us"],
            "a_count": cat_a[cat]["count"],
            "b_count": cat_b[cat]["count"],
        }
        for cat in CATEGORIES
    }
    total_a = sum(v for v in ca.values() if math.isfinite(v))
    total_b = sum(v for v in cb.values() if math.isfinite(v))
    union = len(set(ca) | set(cb))
    return {
        "a_count": len(ca),
        "b_count": len(cb),
        "common": len(common),
        "overlap": (len(common) / union) if union else 1.0,
        "only_in_a": only_a,
        "only_in_b": only_b,
        "total_a_us": total_a,
        "total_b_us": total_b,
        "total_delta_us": total_b - total_a,
        "largest_changes": by_abs,
        "largest_relative_changes": by_rel,
        "categories": categories,
    }


# --- reports for `pgle inspect` and `pgle diff` ------------------------------------------------
