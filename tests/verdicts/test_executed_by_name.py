"""Which executed HLO a verdict row is judged against (pgle.verdicts.sync_converted): by
fingerprint, or, where the log gives none, by a module name compiled once. A name compiled
twice (other shapes, an eval step) is two modules: neither is picked by name, or a collective
missing in one would be judged by the other's HLO (issue 37's independent mutants)."""

from __future__ import annotations

from pgle.verdicts.sync_converted import ExecutedModules, executed_of

HLO = """HloModule jit_step, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %NAME = f32[8]{0} add(f32[8]{0} %p, f32[8]{0} %p)
}
"""


def test_a_name_compiled_twice_is_matched_by_fingerprint_only():
    first = executed_of(HLO.replace("NAME", "add.1"))
    second = executed_of(HLO.replace("NAME", "add.2"))
    assert first.names != second.names
    once = ExecutedModules([("jit_step", first), ("jit_eval", second)])
    assert once.find("jit_step", None) is first and once.find("jit_eval", None) is second
    twice = ExecutedModules([("jit_step", first), ("jit_step", second)])
    assert twice.find("jit_step", None) is None
    assert twice.find("jit_other", None) is None
