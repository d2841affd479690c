"""How a store keeps and serves several profiles of one module.

`replace`        keep only the newest profile of a module (same jax, device kind); serve it.
`keep:N`         keep the N newest; serve the newest.
`merge:N[:pP]`   keep the N newest; serve their per-instruction percentile P (default 90, jaxlib's
                 `aggregate_profiled_instructions` rule, as auto PGLE aggregates its runs).
"""

from __future__ import annotations

import dataclasses
import re

from pgle.errors import BadInput

DEFAULT = "keep:3"


@dataclasses.dataclass(frozen=True)
class Policy:
    keep: int
    merge: bool
    percentile: int = 90

    def __str__(self) -> str:
        if self.merge:
            return f"merge:{self.keep}:p{self.percentile}"
        return "replace" if self.keep == 1 else f"keep:{self.keep}"


def parse_policy(text: str | None) -> Policy:
    s = (text or DEFAULT).strip().lower()
    if s == "replace":
        return Policy(keep=1, merge=False)
    m = re.fullmatch(r"keep:(\d+)", s)
    if m and int(m.group(1)) >= 1:
        return Policy(keep=int(m.group(1)), merge=False)
    m = re.fullmatch(r"merge:(\d+)(?::p(\d{1,3}))?", s)
    if m and int(m.group(1)) >= 1 and (m.group(2) is None or int(m.group(2)) <= 100):
        return Policy(keep=int(m.group(1)), merge=True, percentile=int(m.group(2) or 90))
    raise BadInput(
        f"unknown store policy '{text}'.",
        hint="Use replace, keep:N or merge:N[:pP] (for example keep:3 or merge:5:p90).",
    )
