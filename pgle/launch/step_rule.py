"""Which jitted function is "the step": one rule for the profiling window (inside the
workload, pgle.launch.harness), the step times, the module lists and `pgle report` (reading
the harness's `jit_functions` event).

The harness counts, per jitted function (jax.jit in every spelling, jax.pmap, pjit, and the
`.lower().compile()` executables of those), its top-level executions, the host time each one
accounts for (from its start to the next top-level jitted call of any function), and the work
it caused: its share of the time between two known completions of the executions' outputs
(pgle.launch.harness.CompletionWatcher), which async dispatch does not hide. A small eval that
forces a sync every N steps absorbs the queued steps' time as host time, but not as work (issue
33: jax's spmd_mnist picked `jit(accuracy)` over `jit(train_step)` by host time).

The rule: among functions executed at least `min_executions` times, the one whose work is the
greatest (its mean known work x its executions); when some candidate has no known completion
(outputs that are no arrays, all donated before they could be watched), the one with the most
host time. Ties go to the most executions. A function's first execution (tracing, compilation)
is left out of both. Stdlib only: it runs inside the workload.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MIN_EXECUTIONS = 3  # a step repeats; fewer executions are setup, eval or a one-off
_SANITIZE = re.compile(r"[^\w.-]")


def module_of(function: str) -> str:
    """The XLA module jax compiles for a function pgle names `jit(train_step)`:
    `jit_train_step` (jax 0.10.2 `mlir.sanitize_name(...).rstrip('_')`: every character but
    word characters, `.` and `-` becomes `_`)."""
    return _SANITIZE.sub("_", function).rstrip("_")


def weight(function: Mapping[str, Any]) -> float:
    """The work a function caused: mean known work x executions (0 with none known)."""
    known = function.get("work_known") or 0
    if not known:
        return 0.0
    return (function.get("work_s") or 0.0) / known * (function.get("executions") or 0)


def pick(
    functions: Iterable[Mapping[str, Any]], *, min_executions: int = MIN_EXECUTIONS
) -> Mapping[str, Any] | None:
    """The step among `{"function", "executions", "seconds", "work_s", "work_known"}`
    records, or None."""
    ranked = candidates(functions, min_executions)
    if not ranked:
        return None
    if all(f.get("work_known") for f in ranked):
        return max(ranked, key=lambda f: (weight(f), f["executions"]))
    return max(ranked, key=lambda f: (f.get("seconds") or 0.0, f["executions"]))


def by_work(
    functions: Iterable[Mapping[str, Any]], *, min_executions: int = MIN_EXECUTIONS
) -> bool:
    """`pick` ranks by work: every candidate has an execution whose completion was seen (or
    there is no candidate)."""
    return all(f.get("work_known") for f in candidates(functions, min_executions))


def candidates(
    functions: Iterable[Mapping[str, Any]], min_executions: int = MIN_EXECUTIONS
) -> list[Mapping[str, Any]]:
    """The functions the rule ranks: executed at least `min_executions` times."""
    return [f for f in functions if (f.get("executions") or 0) >= min_executions]


def clear(
    functions: Iterable[Mapping[str, Any]], margin: float, min_executions: int = MIN_EXECUTIONS
) -> bool:
    """The busiest candidate by work is at least `margin` times the next one (or alone)."""
    weights = sorted((weight(f) for f in candidates(functions, min_executions)), reverse=True)
    return len(weights) < 2 or weights[0] >= margin * weights[1]


def describe(by_work: bool = True) -> str:
    if by_work:
        return (
            f"the jitted function executed at least {MIN_EXECUTIONS} times whose executions' "
            "work (until their outputs were ready) adds up to the most"
        )
    return (
        f"the jitted function executed at least {MIN_EXECUTIONS} times that accounts for "
        "the most host time (the completion of its outputs was not seen)"
    )
