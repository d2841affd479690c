"""Ranks that compiled different programs (issue 36): named from the modules' identities the
ranks publish, before the compile or the first collective hangs.

Each rank's harness hashes every module before XLA compiles it (`module_identity` events:
pgle.launch.jax_internals.module_identity); its pgle publishes the list in the job folder
(pgle.jobs.fleet). A module is the n-th compile of one name in a rank (`jit_step` compiled
for two shapes is two modules): SPMD ranks compile in the same order. Two ranks that compiled
one such module to different fingerprints diverge; the ranks named are those outside the
largest group (on a tie, outside the group of the lowest rank).

Pure functions of plain data: the callers read and validate the files.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgle.errors import BadInput
from pgle.shared_folders import read_bytes_nofollow

TEXT_MAX_BYTES = 4 << 20  # the most of a module's text read to find the first difference
LINE_MAX_CHARS = 240  # of a differing line, in the report


@dataclasses.dataclass(frozen=True)
class ModuleId:
    name: str
    index: int  # the index-th compile of this name in the rank (0 first)
    fingerprint: str
    text_file: str | None = None


@dataclasses.dataclass(frozen=True)
class Divergence:
    module: str
    index: int
    ranks: list[int]  # the ranks that differ from the majority
    fingerprints: dict[str, list[int]]  # fingerprint -> the ranks that compiled it
    first_difference: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "module": self.module,
            "ranks": self.ranks,
            "fingerprints": self.fingerprints,
        }
        if self.index:
            out["compile"] = self.index
        if self.first_difference is not None:
            out["first_difference"] = self.first_difference
        return out

    def line(self) -> str:
        groups = sorted(self.fingerprints.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        parts = [f"{_ranks(r)} {fp[:12]}" for fp, r in groups]
        which = f"{self.module}" + (f" (its compile #{self.index + 1})" if self.index else "")
        text = (
            f"ranks compiled different programs for {which}: {'; '.join(parts)}; "
            f"{_ranks(self.ranks)} {'differs' if len(self.ranks) == 1 else 'differ'}"
        )
        first = self.first_difference
        if first:
            text += f"; first difference at line {first['line']}"
        return text


def _ranks(ranks: Sequence[int]) -> str:
    from pgle.phrases import ranks_phrase

    return ranks_phrase(list(ranks))


def indexed(pairs: Sequence[tuple[str, str, str | None]]) -> list[ModuleId]:
    """(name, fingerprint, text_file) in compile order -> ModuleIds numbered per name."""
    seen: dict[str, int] = {}
    out = []
    for name, fingerprint, text_file in pairs:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(ModuleId(name, n, fingerprint, text_file))
    return out


def compare(modules: Mapping[int, Sequence[ModuleId]]) -> list[Divergence]:
    """Every module at least two ranks compiled to different fingerprints, in the order the
    lowest such rank compiled them."""
    by_key: dict[tuple[str, int], dict[int, ModuleId]] = {}
    order: dict[tuple[str, int], tuple[int, int]] = {}
    for rank in sorted(modules):
        for pos, m in enumerate(modules[rank]):
            key = (m.name, m.index)
            by_key.setdefault(key, {})[rank] = m
            order.setdefault(key, (rank, pos))
    out = []
    for key in sorted(by_key, key=lambda k: order[k]):
        per_rank = by_key[key]
        groups: dict[str, list[int]] = {}
        for rank, m in sorted(per_rank.items()):
            groups.setdefault(m.fingerprint, []).append(rank)
        if len(groups) < 2:
            continue
        majority = max(groups.values(), key=lambda r: (len(r), -min(r)))
        differ = sorted(r for r in per_rank if r not in majority)
        first = None
        a, b = per_rank[majority[0]], per_rank[differ[0]]
        if a.text_file and b.text_file:
            first = first_difference(a.text_file, b.text_file, majority[0], differ[0])
        out.append(Divergence(key[0], key[1], differ, groups, first))
    return out


def _read_text(path: str) -> list[str] | None:
    """A module's text another rank's harness wrote: foreign data, read without following a
    link and only up to TEXT_MAX_BYTES."""
    try:
        data = read_bytes_nofollow(path, "module text", TEXT_MAX_BYTES)
    except (OSError, BadInput):
        return None
    return data.decode("utf-8", "replace").splitlines()


def first_difference(path_a: str, path_b: str, rank_a: int, rank_b: int) -> dict[str, Any] | None:
    """The first line (1-based) the two ranks' module texts differ in, with both lines; None
    when either text cannot be read."""
    a, b = _read_text(path_a), _read_text(path_b)
    if a is None or b is None:
        return None
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    if n == len(a) == len(b):
        return None
    line_a = a[n].strip()[:LINE_MAX_CHARS] if n < len(a) else ""
    line_b = b[n].strip()[:LINE_MAX_CHARS] if n < len(b) else ""
    return {"line": n + 1, "ranks": {str(rank_a): line_a, str(rank_b): line_b}}


def inside(path: str | None, root: Path) -> str | None:
    """A path another rank published, kept only when it lies inside `root` (the job folder)."""
    if not path or not isinstance(path, str):
        return None
    full = os.path.normpath(os.path.join(root, path))
    base = os.path.normpath(root)
    return full if full.startswith(base + os.sep) else None
