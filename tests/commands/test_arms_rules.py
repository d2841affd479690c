"""`tune --compare`'s arms (pgle.commands.arms): each arm is one way to compile, spelled one way
whatever the order of its parts; the sol arm really sets XLA's SoL flag; o1 from the first jax
that has JAX_OPTIMIZATION_LEVEL; no ratio from too few step times on either side (issue 37's
independent mutants)."""

from __future__ import annotations

import pytest

from helpers.pgle_testing import pgle_lines, run_pgle
from pgle.commands import arms
from pgle.errors import BadInput


def test_the_same_arm_spelled_twice_is_refused_before_anything_runs(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("open('ran', 'w').close()\n")
    proc = run_pgle("tune", "--compare", "o1+pgle,pgle+o1", str(script), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr.decode()
    assert pgle_lines(proc) == ["pgle: error: --compare: arm 'o1+pgle' is listed twice."], \
        proc.stderr.decode()
    assert not (tmp_path / "ran").exists()


def test_arms_flags_and_variables():
    default, sol, both = arms.parse_arms("sol,pgle+sol")
    assert default.name == "default" and (default.xla, default.variables) == ({}, {})
    assert sol.xla == {"xla_gpu_enable_analytical_sol_latency_estimator": "true"}
    assert (both.name, both.xla, both.pgle) == (
        "sol+pgle", {"xla_gpu_enable_analytical_sol_latency_estimator": "true"}, True)


def test_o1_from_jax_0_6_2():
    assert [a.name for a in arms.parse_arms("o1", jax=(0, 6, 2))] == ["default", "o1"]
    with pytest.raises(BadInput, match="jax 0.6.1 has no JAX_OPTIMIZATION_LEVEL"):
        arms.parse_arms("o1", jax=(0, 6, 1))


def test_no_ratio_from_too_few_steps_on_either_side():
    many, few = [0.010] * 10, [0.010, 0.011]
    for before, after in ((many, few), (few, many), (few, few)):
        interval, why = arms.ratio(before, after)
        assert interval is None and why.startswith("no step-time ratio"), (before, after)
    interval, why = arms.ratio(many, [0.005] * 10)
    assert why is None and interval["ratio"] == pytest.approx(0.5)


def test_default_runs_first_whatever_the_order_given():
    """Every ratio is against `default`: it leads the arms (added when missing), the others
    keep the order given."""
    assert [a.name for a in arms.parse_arms("pgle,default,o1")] == ["default", "pgle", "o1"]
    assert [a.name for a in arms.parse_arms("sol,pgle")] == ["default", "sol", "pgle"]


def test_an_arm_naming_a_part_twice_is_refused():
    with pytest.raises(BadInput, match="unknown arm 'o1\\+o1'"):
        arms.parse_arms("o1+o1")
    with pytest.raises(BadInput, match="unknown arm 'pgle\\+sol\\+pgle'"):
        arms.parse_arms("pgle+sol+pgle")


def test_an_arms_runs_are_numbered_from_the_second():
    """`--repeat 3`: an arm's folders are its name, then -2, -3 (the n-th run)."""
    pgle = arms.Arm("o1+pgle", o1=True, pgle=True)
    assert [pgle.folder(False, i) for i in range(3)] == [
        "arm-o1-pgle", "arm-o1-pgle-2", "arm-o1-pgle-3"]
    assert [arms.Arm("default").folder(True, i) for i in range(2)] == ["baseline", "baseline-2"]
    assert [arms.PLAIN[1].folder(True, i) for i in range(2)] == ["run", "run-2"]
