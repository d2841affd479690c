"""The module lines every verdict prints, in process (issue 37): the order of the auto-PGLE
family's rows (most executed first, counting the recompile), the one-shot line, "as above", and
the JSON row's optional keys. The rows are the ones pgle.verdicts.auto_pgle builds from JAX's
log facts; the commands' end-to-end tests run in subprocesses, which mutmut does not map.
"""

from __future__ import annotations

from pgle.evidence.event_kinds import PgleSessionError
from pgle.evidence.jax_log import ModuleFacts, RunFacts
from pgle.verdicts import auto_pgle as ap
from pgle.verdicts.rows import LONG_CLAUSE, AutoRow, module_lines, said_once


def _facts(*mods: ModuleFacts) -> RunFacts:
    return RunFacts({m.module: m for m in mods}, observed=True)


FEW = "(profiled {} times but never executed again: auto PGLE recompiles on execution 3); " \
      "fix: run more steps, or lower --runs"


def test_auto_rows_come_most_executed_first_counting_the_recompile():
    # Executions: a_two 2, b_three 3, c_opt 2 profiled + the recompile = 3 (a tie with b_three,
    # which keeps the rows' order: b_three first).
    facts = _facts(ModuleFacts("jit_a_two", profiled=2), ModuleFacts("jit_b_three", profiled=3),
                   ModuleFacts("jit_c_opt", profiled=2, fdo_lengths=[100]))
    rows = [r.to_dict() for r in ap.auto_rows(facts, 2, "gpu")]
    assert module_lines(rows, ok="optimized") == [
        "  jit_b_three: not_optimized " + FEW.format(3),
        "  jit_c_opt: optimized (recompiled with a 100-byte profile after 2 profiled executions)",
        "  jit_a_two: not_optimized " + FEW.format(2),
    ]


def test_nsys_rows_come_most_executed_in_prewarm_first():
    facts = _facts(ModuleFacts("jit_a", pgle_miss=True), ModuleFacts("jit_b", pgle_miss=True),
                   ModuleFacts("jit_c", pgle_miss=True), ModuleFacts("jit_d", pgle_loaded=True))
    manifest = {"modules": {
        "jit_a": {"status": "not_optimized", "executions_seen": 1},
        "jit_b": {"status": "optimized", "executions_seen": 5},
        "jit_c": {"status": "not_optimized", "executions_seen": 1},
        "jit_d": {"status": "optimized", "executions_seen": 3},
    }}
    assert module_lines(ap.nsys_modules(facts, manifest), ok="loaded_optimized") == [
        "  jit_b: fell_back (prewarm wrote its PGLE-optimized entry, but it is gone (pruned or "
        "evicted) or its key changed; loaded the first-pass executable); fix: prewarm again; "
        "keep JAX_COMPILATION_CACHE_MAX_SIZE unset",
        "  jit_d: loaded_optimized (loaded its PGLE-optimized executable)",
        "  2 modules executed only once (fell_back; one-shot code such as setup or eval, which "
        "auto PGLE never re-optimizes): jit_a, jit_c",
    ]


def test_prewarm_rows_come_most_executed_first():
    facts = _facts(ModuleFacts("jit_a", profiled=1), ModuleFacts("jit_b", profiled=4),
                   ModuleFacts("jit_c", profiled=2, fdo_lengths=[9], misses=["p"],
                               writes=["p"], pgle_keys=["p"]))
    rows = ap.prewarm_modules(facts, 2, "gpu", {"p"}, set())
    assert [r["executions_seen"] for r in rows] == [1, 4, 3]
    assert [line.split(":")[0] for line in module_lines(rows, ok="optimized")] == \
        ["  jit_b", "  jit_c", "  jit_a"]


def test_a_clause_of_exactly_the_long_length_is_said_once():
    clause = "c" * LONG_CLAUSE
    assert said_once([f"  a: bad; {clause}", f"  b: worse; {clause}"]) == \
        [f"  a: bad; {clause}", "  b: worse; as above"]
    short = "c" * (LONG_CLAUSE - 1)
    assert said_once([f"  a: bad; {short}", f"  b: worse; {short}"]) == \
        [f"  a: bad; {short}", f"  b: worse; {short}"]


CAUSE_GPU = ("CUPTI contention (Nsight Systems, DCGM or another profiler attached to the GPU), or "
             "kernels hidden in CUDA graphs; profile with nothing else attached")


def test_as_above_keeps_the_lines_parentheses():
    # The GPU's empty-profile cause, said by two rows that differ by a count: the clause said
    # "as above" closed a parenthesis, which the line keeps (it read "CUPTI contention (as
    # above; profile ..." before).
    facts = _facts(ModuleFacts("jit_a", profiled=3, empty_profiles=3),
                   ModuleFacts("jit_b", profiled=2, empty_profiles=2))
    assert module_lines([r.to_dict() for r in ap.auto_rows(facts, 2, "gpu")], ok="optimized") == [
        f"  jit_a: empty_profile (all 3 profiled executions gave an empty profile: {CAUSE_GPU}); "
        "fix: run on an NVIDIA GPU with no other CUPTI client attached",
        "  jit_b: empty_profile (all 2 profiled executions gave an empty profile: CUPTI "
        "contention (as above); profile with nothing else attached); fix: as above",
    ]
    # A cause that ends the reason: its closing parenthesis stays.
    cause = "the backend is cpu: every profile is empty, so nothing to apply"
    lines = [f"  jit_a: bad (3 empty: {cause}); fix: x", f"  jit_b: bad (2 empty: {cause}); fix: x"]
    assert said_once(lines) == [lines[0], "  jit_b: bad (2 empty: the backend is cpu: as above); "
                                "fix: x"]


def test_an_auto_rows_json_keys():
    row = AutoRow("jit_a", "optimized", 2, 2, 0, 100)
    assert row.to_dict() == {"module": "jit_a", "status": "optimized", "profiled_executions": 2,
                             "runs": 2, "empty_profiles": 0, "profile_bytes": 100,
                             "reason": None, "fix": None}
    row.from_cache, row.collision = True, "threads"
    assert row.to_dict() == {"module": "jit_a", "status": "optimized", "profiled_executions": 2,
                             "runs": 2, "empty_profiles": 0, "profile_bytes": 100,
                             "reason": None, "fix": None, "from_cache": True,
                             "collision": "threads"}


def test_a_module_of_a_profiler_collision_is_never_one_shot_code():
    # jit_a could not profile (another thread held the profiler): its own line, with the fix;
    # jit_b and jit_c ran once (setup, eval): one line.
    errors = [PgleSessionError(t=5.0, module="jit_a", thread=11, error="ALREADY_EXISTS",
                               holder_module="jit_d", holder_thread=12)]
    collision = ap.profiler_collision("/nonexistent/log", errors, [])
    facts = _facts(ModuleFacts("jit_a", profiled=1), ModuleFacts("jit_b", profiled=1),
                   ModuleFacts("jit_c", profiled=1), ModuleFacts("jit_d", fdo_lengths=[64],
                                                                 profiled=2))
    rows = [r.to_dict() for r in ap.auto_rows(facts, 2, "gpu", collision=collision)]
    assert module_lines(rows, ok="optimized") == [
        "  jit_d: optimized (recompiled with a 64-byte profile after 2 profiled executions)",
        "  jit_a: not_optimized (not profiled: another thread's profiling session held the "
        f"profiler); fix: {ap.THREADS_FIX}",
        "  2 modules executed only once (not_optimized; one-shot code such as setup or eval, "
        "which auto PGLE never re-optimizes): jit_b, jit_c",
    ]


def test_a_module_prewarm_never_saw_comes_after_those_it_ran():
    # jit_a is not in prewarm's manifest (no count); jit_b ran once there, and loaded.
    facts = _facts(ModuleFacts("jit_a", pgle_loaded=True), ModuleFacts("jit_b", pgle_loaded=True))
    manifest = {"modules": {"jit_b": {"status": "optimized", "executions_seen": 1}}}
    assert module_lines(ap.nsys_modules(facts, manifest), ok="loaded_optimized") == [
        "  jit_b, jit_a: loaded_optimized (loaded its PGLE-optimized executable)"]


def test_nsys_skips_a_module_outside_the_pgle_path_and_goes_on():
    # jit_a (first in order) only hit the cache outside the PGLE path: no row, the rest stay.
    facts = _facts(ModuleFacts("jit_a", hits=["h"]), ModuleFacts("jit_b", pgle_loaded=True))
    assert [r["module"] for r in ap.nsys_modules(facts, {"modules": {}})] == ["jit_b"]


def test_as_above_closes_only_the_parentheses_the_clause_opened_before_it():
    # THREADS_FIX's last clause holds `jax.jit(f).lower(...).compile()`: three "(" of its own,
    # four ")" : one closes the " (" before the clause, and stays.
    lines = [f"  jit_a: not_optimized (x); fix: {ap.THREADS_FIX}",
             f"  jit_b: fell_back (y); fix: {ap.THREADS_FIX}"]
    assert said_once(lines) == [
        lines[0], "  jit_b: fell_back (y); fix: profile with manual PGLE instead (as above: "
                  "as above) (as above)"]
