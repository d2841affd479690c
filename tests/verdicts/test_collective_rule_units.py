"""The status of a module whose accuracy checker printed Found/Missing, in process (issue 37;
pgle.verdicts.collectives.decide): nothing found, a missing collective or host copy, collectives
the log cannot resolve, async wrappers of unknown kind, collectives XLA made synchronous (left
out of the coverage), the speed-of-light rule, and --min-coverage at its edge.
"""

from __future__ import annotations

import pytest

from pgle.verdicts import sync_converted as sc
from pgle.verdicts.collectives import DEFAULT_MIN_COVERAGE, decide
from pgle.verdicts.sync_converted import Split


def _decide(found, missing, comm=(), *, coverage, min_coverage=None, sol=False, sync=None):
    d = decide(found, missing, list(comm), coverage=coverage, min_coverage=min_coverage,
               sol_fallback=sol, sync=sync)
    return d.status, d.rule, d.notes, d.coverage


GUESS = ("the scheduler guesses their cost, which is what PGLE is for; collect the profile "
         "again from a run of this exact program")


def test_nothing_found():
    assert _decide(None, 0, coverage=None) == ("not_applied", "nothing_found", [], None)
    assert _decide(0, 5, coverage=0.0, sol=True) == ("not_applied", "nothing_found", [], 0.0)


def test_a_missing_collective_or_host_copy():
    assert _decide(8, 2, ["all-reduce-start.1", "copy-start.2"], coverage=0.8, sol=True) == (
        "partial", "collectives", [
            "the profile misses 2 collectives or host copies (all-reduce, host copy: "
            f"all-reduce-start.1, copy-start.2): {GUESS}"], 0.8)
    # The executed HLO's label where the name does not tell (a Triton collective fusion).
    labelled = Split(missing=["fusion-start"], labels={"fusion-start": "all-reduce"})
    assert _decide(8, 2, ["x"], coverage=0.8, sync=labelled)[2] == [
        f"the profile misses 1 collective or host copy (all-reduce: fusion-start): {GUESS}"]
    # With others the log cannot resolve: both said.
    both = Split(missing=["all-gather-start"], unresolved=["all-reduce-start"],
                 why_unresolved="version")
    assert _decide(8, 2, coverage=0.8, sync=both)[2][1:] == [sc.unresolved_note(both)]


def test_what_the_log_cannot_tell():
    unresolved = Split(unresolved=["all-reduce-start"], why_unresolved="version")
    assert _decide(9, 1, ["all-reduce-start"], coverage=0.9, sync=unresolved) == (
        "partial", "collectives_unresolved", [sc.unresolved_note(unresolved)], 0.9)
    unknown = Split(unknown=["fusion-start"])
    assert _decide(9, 1, ["fusion-start"], coverage=0.9, sync=unknown, sol=True) == (
        "partial", "async_unknown", [sc.unknown_note(unknown)], 0.9)


def test_collectives_made_synchronous_leave_the_coverage():
    hlo = Split(converted=[("all-reduce-start", "all-reduce.6")], by="hlo")
    note = sc.converted_note(hlo)
    # The one missing instruction is the converted one: applied, whatever the threshold.
    assert _decide(20, 1, ["all-reduce-start"], coverage=20 / 21, min_coverage=0.99,
                   sync=hlo) == ("applied", "converted_to_sync", [note], 1.0)
    # Two compute instructions missing besides: coverage 18/20, the threshold decides.
    assert _decide(18, 3, ["all-reduce-start"], coverage=18 / 21, sync=hlo) == (
        "applied", "min_coverage", [note], 0.9)
    assert _decide(18, 3, ["all-reduce-start"], coverage=18 / 21, min_coverage=0.91,
                   sync=hlo)[:2] == ("partial", "min_coverage")
    # Nothing found besides the converted one: no coverage to give.
    log = Split(converted=[("all-reduce-start", None)], by="log")
    assert _decide(0, 1, ["all-reduce-start"], coverage=0.5, sync=log) == (
        "applied", "converted_to_sync", [sc.converted_note(log)], None)
    # The checker's found count unknown: the coverage given stays.
    assert _decide(None, 2, coverage=0.9, min_coverage=0.0, sync=log) == (
        "applied", "min_coverage", [sc.converted_note(log)], 0.9)


def test_the_speed_of_light_rule_and_the_threshold():
    assert _decide(18, 2, coverage=0.9, sol=True) == ("applied", "sol_fallback", [
        "2 compute instructions not in the profile (coverage 90%), no collective is missing: "
        "XLA prices them with its speed-of-light estimator (jax >= 0.10.1 on Hopper/Blackwell): "
        "the SoL rule decides, as --min-coverage was not given"], 0.9)
    # --min-coverage given: it decides, SoL or not.
    assert _decide(18, 2, coverage=0.9, min_coverage=0.95, sol=True) == (
        "partial", "min_coverage", [], 0.9)


@pytest.mark.parametrize("coverage, status", [(0.9, "applied"), (0.85, "partial")])
def test_the_default_threshold_at_its_edge(coverage, status):
    assert DEFAULT_MIN_COVERAGE == 0.9
    assert _decide(18, 2, coverage=coverage) == (status, "min_coverage", [], coverage)


def test_as_many_compute_missing_as_found():
    hlo = Split(converted=[("all-reduce-start", "all-reduce.6")], by="hlo")
    assert _decide(2, 3, ["all-reduce-start"], coverage=0.4, sync=hlo) == (
        "partial", "min_coverage", [sc.converted_note(hlo)], 0.5)
