"""The one HLO text reader (pgle.xla.hlo_text, issue 35): every committed executed HLO (the real
XLA:GPU compiler of jax 0.10.2/0.11.2/0.12.0.1, deviceless H100 x8, and `pgle estimate`'s
fixtures) and a real jax CPU compile, read by it, and its three users (the schedule change, the
classifier, estimate's replay) seeing the same instructions."""
from __future__ import annotations

import re

import pytest

from helpers.pgle_testing import REPO
from pgle.analysis import schedule
from pgle.errors import BadInput
from pgle.estimate import kinds, prediction
from pgle.verdicts import collectives, sync_converted
from pgle.xla import hlo_text
from pgle.xla.instruction_kinds import COLLECTIVE, classify_hlo

DATA = REPO / "tests" / "data"
FILES = sorted(
    p for p in DATA.rglob("*.txt") if p.read_text(errors="replace").startswith("HloModule ")
)
# An instruction line as XLA prints one, read independently of the reader: `  [ROOT ]%name = `.
_LINE = re.compile(r"^\s+(?:ROOT\s+)?%([\w.\-]+)\s*=\s")


def _ids(path):
    return str(path.relative_to(DATA))


def test_every_committed_real_hlo_is_found():
    versions = {p.relative_to(DATA).parts[:2] for p in FILES}
    assert {("xla_gpu", "0.10.2"), ("xla_gpu", "0.11.2"), ("xla_gpu", "0.12.0.1")} <= versions
    assert DATA / "estimate" / "pgle.hlo.txt" in FILES and len(FILES) >= 18


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_reads_every_committed_real_hlo(path):
    text = path.read_text()
    module = hlo_text.parse(text)
    assert module.name and module.name.startswith("jit_")
    assert sum(c.entry for c in module.computations.values()) == 1
    # Every instruction line XLA printed is an instruction, in text order.
    printed = [m.group(1) for line in text.splitlines() if (m := _LINE.match(line))]
    read = [i.name for c in module.computations.values() for i in c.instructions]
    assert read == printed
    for comp in module.computations.values():
        earlier: set[str] = set()
        for ins in comp.instructions:
            assert re.fullmatch(r"[a-z][a-z\-]*", ins.opcode), (ins.name, ins.opcode)
            assert ins.shape.startswith(("(", "f", "s", "u", "b", "p", "t", "c")), ins.shape
            # A scheduled computation uses only what it computed before (or its parameters).
            assert set(ins.operands) <= earlier, ins.name
            earlier.add(ins.name)
            assert all(c in module.computations for c in ins.called), ins.name
    fp = re.search(r'fingerprint_before_lhs="([0-9a-f]+)"', text)
    assert module.fingerprint == (fp.group(1) if fp else None)


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_the_three_users_see_the_same_instructions(path):
    text = path.read_text()
    module = hlo_text.parse(text)
    ops = {i.name: i.opcode for c in module.computations.values() for i in c.instructions}
    # The classifier: every instruction, none else.
    kinds_of = classify_hlo(text)
    assert set(kinds_of) == set(ops)
    assert set(sync_converted.executed_of(text).names) == set(ops)
    # estimate's replay: the entry's instructions in schedule order, classified alike.
    assert module.entry is not None
    replayed = prediction.schedule_of(module)
    assert [i.name for i in replayed] == [i.name for i in module.entry.instructions]
    for ins in replayed:
        if kinds.kind_of(ins) == COLLECTIVE:
            assert kinds_of[ins.name].category == COLLECTIVE
    # The schedule change: pairs of that module's async starts and dones.
    for pair in schedule.async_pairs(text):
        assert ops[pair.start].endswith("-start") and ops[pair.done].endswith("-done")
        assert set(pair.between) <= set(ops)
        assert pair.kind == kinds_of[pair.start].family
    names = collectives.collective_names(text)
    assert all(kinds_of[n].communication for n in names)


def test_a_triton_collective_fusion_pair_is_the_all_reduce_it_runs():
    # jax 0.11.2 compiles a small psum to an async Triton collective fusion: the schedule
    # change names it by the one classifier, no longer `fusion`.
    for jax in ("0.11.2", "0.12.0.1"):
        text = (DATA / "xla_gpu" / jax / "issue32" / "hlo" / "triton-psum-good.txt").read_text()
        pairs = {p.start: p.kind for p in schedule.async_pairs(text)}
        assert pairs == {"all-gather-start": "all-gather", "fusion-start": "all-reduce"}


def test_attributes_and_called_computations():
    text = (DATA / "xla_gpu" / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-good.txt").read_text()
    module = hlo_text.parse(text)
    start, done = module.shapes()["fusion-start"], module.shapes()["fusion-done"]
    assert start.opcode == "fusion-start" and start.shape.startswith("(")
    assert start.called == (start.attribute("calls"),) and start.called[0] in module.computations
    assert '"__triton_collective"' in (start.attribute("backend_config") or "")
    assert start.attribute("no_such_attribute") is None and done.operands == ("fusion-start",)


def test_a_real_jax_compile_with_loops_branches_and_tuples():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x):
        y = jax.lax.cond(x.sum() > 0, lambda v: (v * 2, v.T), lambda v: (v + 1, v), x)
        n, z = jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, jnp.tanh(c[1])),
                                  (0, y[0]))
        return jnp.sort(z, axis=0), n  # sort: a `to_apply` comparator

    text = jax.jit(f).lower(jnp.ones((8, 8))).compile().as_text()  # jax 0.10.2, CPU
    module = hlo_text.parse(text)
    every = [i for c in module.computations.values() for i in c.instructions]
    loops = [i for i in every if i.opcode == "while"]
    assert loops and all(i.shape.startswith("(") for i in loops)  # the loop state: a tuple
    for loop in loops:
        body, cond = loop.attribute("body"), loop.attribute("condition")
        assert body in module.computations and cond in module.computations
        assert set(loop.called) == {body, cond}
    branches = [i for i in every if i.opcode == "conditional"]
    assert branches and all(len(b.called) == 2 for b in branches)
    sorts = [i for i in every if i.opcode == "sort"]
    assert sorts and all(s.called == (s.attribute("to_apply"),) for s in sorts)
    assert {c for i in every for c in i.called} <= set(module.computations)


def test_text_without_a_computation():
    module = hlo_text.parse("this is not HLO\n")
    assert module.computations == {} and module.entry is None
    with pytest.raises(BadInput, match="holds no computation"):
        schedule.async_pairs("this is not HLO\n")
    # Not HLO: no count of collectives, rather than a count of zero.
    with pytest.raises(ValueError, match="no computation"):
        collectives.collective_names("this is not HLO\n")
