"""A function's qualified name as the source spells it, also when mutmut's copy of pgle ran.

In a mutation run (tests/mutants/score.py) mutmut renames each function it mutated and calls it
through a trampoline: `_marked_class` runs as `x__marked_class__mutmut_orig` (or `..._mutmut_7`,
a mutant), the method `Harness.step_class` as `Harness.xǁHarnessǁstep_class__mutmut_orig`
(mutmut 3.8.1's names). Tests that count pgle's frames by name count them under the source's
names either way."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

_MANGLED = re.compile(r"^x(?:ǁ\w+ǁ|_)(?P<name>\w+?)__mutmut_(?:orig|\d+)$")


def plain(qualname: str) -> str:
    return ".".join(m.group("name") if (m := _MANGLED.match(part)) else part
                    for part in qualname.split("."))


def plain_counts(counts: Mapping[str, int]) -> Counter[str]:
    out: Counter[str] = Counter()
    for name, n in counts.items():
        out[plain(name)] += n
    return out

