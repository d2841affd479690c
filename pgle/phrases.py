"""How pgle words numbers in its sentences: `1 entry`, `3 entries`, `ranks 0-2, 5`.

One place for every count a message prints, so that no line says "1 entries" or "2 step(s)".
Standard library only: the harness, inside the workload, uses it too.
"""

from __future__ import annotations

from collections.abc import Iterable

# Nouns whose plural is not the noun + "s" (or + "es", "ies" by the rules below).
_IRREGULAR = {"copy": "copies", "host copy": "host copies", "is": "are", "was": "were"}


def plural_of(noun: str) -> str:
    """'module' -> 'modules', 'entry' -> 'entries', 'pass' -> 'passes'."""
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 module', '2 modules', '0 entries' (`nouns`: the plural, when the rule gets it wrong)."""
    return f"{n} {noun if n == 1 else (nouns or plural_of(noun))}"


def all_of(n: int, noun: str) -> str:
    """'all 3 executions', 'the 1 execution' (never "all 1 executions")."""
    return f"the 1 {noun}" if n == 1 else f"all {plural(n, noun)}"


def listed(names: list[str], most: int = 8) -> str:
    """'a, b, c', or the first `most` names and 'and N more'."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def rank_ranges(numbers: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def ranks_phrase(numbers: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0-2, 5'."""
    nums = sorted(set(numbers))
    return f"rank{'' if len(nums) == 1 else 's'} {rank_ranges(nums)}"
