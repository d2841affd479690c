"""The line each module of a PGLE-applied verdict prints (issue 37; pgle/verdicts/rows.py), in
process: coverage and the missing count less what XLA made synchronous, the collectives covered
or missing, async wrappers of unknown kind, the compile that failed, XLA's first note, a rank's
label, an unnamed module, identical lines grouped, and a row across ranks. The rows are
AppliedRow, the type pgle.verdicts.pgle_applied.judge builds.
"""

from __future__ import annotations

import pytest

from pgle.verdicts.rows import AppliedRow, module_lines


def row(module: str | None = "jit_a", status: str = "partial", cov: float | None = 0.75,
        missing: int | None = 1, rank: int | None = None, notes: tuple[str, ...] = (),
        **kw) -> dict:
    return AppliedRow(module, status, 3, missing, cov, None, "/p.pb", True, rank, [],
                      list(notes), **kw).to_dict()


CONVERTED = [{"scheduled": "all-reduce-start", "executed": "all-reduce.6"}]


@pytest.mark.parametrize("rows, lines", [
    ([row(rank=3)], ["  jit_a [rank 3]: partial (coverage 75%, 1 missing; no collective missing)"]),
    ([row(rank=0, status="applied", cov=1.0, missing=0)],
     ["  jit_a [rank 0]: applied (coverage 100%)"]),
    ([row(status="applied", cov=None, missing=None)], ["  jit_a: applied (coverage ?)"]),
    ([row(collectives_missing=["all-reduce-start.1", "all-gather-start"], collectives_total=5,
          missing=4, cov=0.5)],
     ["  jit_a: partial (coverage 50%, 4 missing; collectives covered 3/5)"]),
    ([row(collectives_missing=["a-start", "b-start"], collectives_total=2, missing=2, cov=0.6)],
     ["  jit_a: partial (coverage 60%, 2 missing; collectives covered 0/2)"]),
    ([row(collectives_missing=["a-start", "b-start"], collectives_total=1, missing=2, cov=0.6)],
     ["  jit_a: partial (coverage 60%, 2 missing; 2 collectives missing)"]),
    ([row(collectives_missing=["a-start"], missing=1)],
     ["  jit_a: partial (coverage 75%, 1 missing; 1 collective missing)"]),
    ([row(async_unknown=["fusion-start"])],
     ["  jit_a: partial (coverage 75%, 1 missing; 1 async of unknown kind missing (maybe "
      "collectives))"]),
    ([row(missing=3, collectives_converted=CONVERTED, collectives_unresolved=["all-gather-start"],
          collectives_missing=["all-gather-start"])],
     ["  jit_a: partial (coverage 75%, 2 missing; 1 collective missing; 1 of them maybe made "
      "synchronous by XLA (the log cannot tell); 1 async collective made synchronous by XLA, in "
      "no profile: not counted)"]),
    # The one missing instruction is the one XLA made synchronous: no missing count, and no
    # "no collective missing" (nothing else is missing).
    ([row(status="applied", cov=1.0, missing=1, collectives_converted=CONVERTED + CONVERTED,
          collectives_missing=[])],
     ["  jit_a: applied (coverage 100%; 2 async collectives made synchronous by XLA, in no "
      "profile: not counted)"]),
    ([row(status="not_applied", rule="compile_failed",
          notes=("the compile failed (XLA: INVALID_ARGUMENT: x)", "second"))],
     ["  jit_a: not_applied (compile failed): the compile failed (XLA: INVALID_ARGUMENT: x)"]),
    ([row(status="not_applied", cov=None, missing=None, notes=("no abc.pb in the dir", "2nd"))],
     ["  jit_a: not_applied (coverage ?): no abc.pb in the dir"]),
    ([row(status="applied", cov=1.0, missing=0, notes=("an applied row's note",))],
     ["  jit_a: applied (coverage 100%)"]),
])
def test_an_applied_verdicts_module_line(rows, lines):
    assert module_lines(rows, ok="applied") == lines


def test_identical_lines_are_grouped_from_three():
    bad = [row(module=m, status="not_applied", cov=None, missing=None) for m in ("a", "b", "c")]
    good = [row(module=m, status="applied", cov=1.0, missing=0) for m in ("d", "e", "f")]
    assert module_lines(bad + good) == [
        "  3 modules (a, b, c): not_applied (coverage ?)", "  d: applied (coverage 100%)",
        "  e: applied (coverage 100%)", "  f: applied (coverage 100%)"]
    assert module_lines(bad[:2]) == ["  a: not_applied (coverage ?)",
                                     "  b: not_applied (coverage ?)"]


def test_modules_xla_did_not_name():
    rows = [dict(row(module=None), ordinal=2), dict(row(module=None, rank=1), ordinal=None),
            dict(row(module=None), fingerprint="ab" * 16)]
    assert module_lines(rows) == [
        "  3 modules (unnamed module #2, (module name not logged) [rank 1], "
        f"{'ab' * 16}): partial (coverage 75%, 1 missing; no collective missing)"]


def test_a_row_across_ranks():
    r = {"module": "jit_x", "status": "applied", "ranks": {"applied": [0, 1]}, "absent_ranks": [],
         "ranks_summary": "applied on ranks 0-1", "reason": "why", "fix": "do"}
    assert module_lines([r], ok="applied") == ["  jit_x: applied on ranks 0-1 (why)"]
    assert module_lines([dict(r, status="optimized")], ok="applied") == [
        "  jit_x: applied on ranks 0-1 (why); fix: do"]
    some = dict(r, status="partial", absent_ranks=[2],
                ranks_summary="applied on ranks 0-1; no evidence for it on rank 2")
    assert module_lines([some], ok="applied") == [
        "  jit_x: partial (applied on ranks 0-1; no evidence for it on rank 2); fix: do"]
    two = dict(r, status="partial", ranks={"applied": [0], "partial": [1]},
               ranks_summary="applied on rank 0; partial on rank 1")
    assert module_lines([two], ok="applied") == [
        "  jit_x: partial (applied on rank 0; partial on rank 1); fix: do"]
