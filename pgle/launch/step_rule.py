"""Which jitted function is "the step": one rule for the profiling window (inside the
workload, pgle.launch.harness), the step times, the module lists and `pgle report` (reading
the harness's `jit_functions` event).

The harness counts, per jitted function (jax.jit in every spelling, jax.pmap, pjit, and the
`.lower().compile()` executables of those), its top-level executions and the host time each
one accounts for: from its start to the next top-level jitted call of any function (or its own
return, for the last). With async dispatch that gap holds whatever waits for the step's
results (`float(loss)`, a metric), so a train step outweighs a small jitted helper called as
often. A function's first execution (tracing, compilation) is left out of its time.

The rule: among functions executed at least `min_executions` times, the one with the most
host time; ties go to the most executions. Stdlib only: it runs inside the workload.
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


def pick(
    functions: Iterable[Mapping[str, Any]], *, min_executions: int = MIN_EXECUTIONS
) -> Mapping[str, Any] | None:
    """The step among `{"function", "executions", "seconds"}` records, or None."""
    candidates = [f for f in functions if (f.get("executions") or 0) >= min_executions]
    if not candidates:
        return None
    return max(candidates, key=lambda f: (f.get("seconds") or 0.0, f["executions"]))


def describe() -> str:
    return (
        f"the jitted function executed at least {MIN_EXECUTIONS} times that accounts for "
        "the most host time"
    )
