"""The one classifier of instruction kinds (pgle.xla.instruction_kinds, issue 32): from a name,
and from the executed HLO the real XLA:GPU compiler of jax 0.12.0.1 wrote (deviceless H100
x8, tests/data/xla_gpu/0.12.0.1/issue32/hlo/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO, report_of, run_pgle
from pgle.profiles import stats
from pgle.verdicts import sync_converted
from pgle.xla.instruction_kinds import (COLLECTIVE, COMPUTE, HOST_COPY, OTHER, classify,
                                        classify_hlo)

DATA = REPO / "tests" / "data" / "xla_gpu"


@pytest.mark.parametrize("name,category,family", [
    ("all-gather-start.12", COLLECTIVE, "all-gather"),
    ("psum.3", COLLECTIVE, "all-reduce"),
    ("psum_invariant.7.2", COLLECTIVE, "all-reduce"),  # jax >= 0.11's all-reduce
    ("all_gather.3.2", COLLECTIVE, "all-gather"),  # a synchronous one, renamed (jax >= 0.11.1)
    ("0123456789abcdef0123456789abcdef::ragged-all-to-all.5", COLLECTIVE, "ragged-all-to-all"),
    ("copy-start.2", HOST_COPY, None),
    ("fusion-start", OTHER, None),  # maybe a Triton collective fusion: the name cannot tell
    ("custom-call-start.1", OTHER, None),
    ("async-done.3", OTHER, None),
    ("gemm_fusion_dot.1", COMPUTE, None),
    ("custom-call.2", COMPUTE, None),
    ("loop_reduce_fusion", COMPUTE, None),
])
def test_by_name(name, category, family):
    k = classify(name)
    assert (k.category, k.family, k.by) == (category, family, "name")
    assert k.never_compute is (category != COMPUTE)


def test_the_executed_hlo_tells_a_triton_collective_fusion():
    text = (DATA / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-good.txt").read_text()
    assert '"kind":"__triton_collective"' in text  # what jax 0.12.0.1 compiled the psum to
    kinds = classify_hlo(text)
    for name in ("fusion-start", "fusion-done"):
        assert (kinds[name].category, kinds[name].family, kinds[name].by) == (
            COLLECTIVE, "all-reduce", "hlo")
    assert kinds["all-gather-start"].family == "all-gather"
    assert kinds["gemm_fusion_dot"].category == COMPUTE
    # The same names from a log alone: unknown async, never compute.
    assert classify("fusion-start").category == OTHER


def test_async_custom_calls_are_never_compute():
    # An async custom call as XLA prints one (TransformerEngine-JAX-like targets).
    hlo = """HloModule m

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %custom-call-start = ((f32[8]{0}), f32[8]{0}) custom-call-start(%p), custom_call_target="te_moe_dispatch"
  %custom-call-done = f32[8]{0} custom-call-done(%custom-call-start)
  %custom-call-start.1 = ((f32[8]{0}), f32[8]{0}) custom-call-start(%p), custom_call_target="my_kernel"
  %custom-call-done.1 = f32[8]{0} custom-call-done(%custom-call-start.1)
  ROOT %custom-call.2 = f32[8]{0} custom-call(%custom-call-done.1), custom_call_target="__cublas$gemm"
}
"""
    kinds = classify_hlo(hlo)
    assert kinds["custom-call-start"].category == COLLECTIVE  # a dispatch: communication
    assert kinds["custom-call-start.1"].category == OTHER  # async, purpose unknown
    assert kinds["custom-call.2"].category == COMPUTE


def test_inspect_and_verify_agree_psum_is_an_all_reduce(tmp_path):
    """Before issue 32 `inspect` filed psum.* under "other" while `verify` counted it as an
    all-reduce."""
    c = stats.classify("psum.3")
    assert (c.category, c.kind) == ("collective", "all-reduce")
    assert stats.classify("fusion-start").category == "other"
    profile = tmp_path / "p.pbtxt"
    profile.write_text('costs { name: "psum.3" cost_us: 10.0 }\n'
                       'costs { name: "fusion.1" cost_us: 5.0 }\n')
    rep = report_of(run_pgle("inspect", str(profile), "--json", cwd=tmp_path))
    cats = json.dumps(rep)
    assert '"all-reduce"' in cats, cats[:2000]


def test_run_reads_the_executed_hlo_a_log_alone_cannot():
    """The executed HLO `pgle run` keeps turns a missing fusion-start from `unknown` into a
    missing collective (an all-reduce); without it the module is never applied either."""
    text = (DATA / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-good.txt").read_text()
    executed = sync_converted.executed_of(text)
    s = sync_converted.split(["fusion-start", "fusion-done"], executed=executed, renamed=True)
    assert s.missing == ["fusion-start", "fusion-done"] and s.unknown == []
    assert "all-reduce" in s.labels["fusion-start"]
    alone = sync_converted.split(["fusion-start", "fusion-done"], renamed=True)
    assert alone.unknown == ["fusion-start", "fusion-done"] and alone.missing == []


def test_collectives_total_counts_the_triton_collective_fusion():
    from pgle.verdicts.collectives import collective_names

    text = (DATA / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-good.txt").read_text()
    assert collective_names(text) == ["all-gather-start", "fusion-start"]


def test_hlo_fixture_is_the_real_compilers(tmp_path):
    doc = json.loads((DATA / "0.12.0.1" / "issue32" / "cases.json").read_text())
    assert doc["versions"]["jaxlib"] == "0.12.0.1"
    assert doc["cases"]["triton-psum-good"]["hlo"] == "hlo/triton-psum-good.txt"
    assert Path(DATA / "0.12.0.1" / "issue32" / "hlo" / "triton-psum-good.txt").stat().st_size


def test_the_reports_collective_table_uses_the_same_classifier():
    from pgle.analysis.overlap import collective_kind

    assert collective_kind("psum.3") == "all-reduce" == collective_kind("all-reduce-start.1")
    assert collective_kind("all_gather.3.2") == "all-gather"  # made synchronous, jax >= 0.11
    assert collective_kind("fusion.4") is None
