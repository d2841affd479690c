"""Every version boundary of every version table, on both sides (issue 37): the release that
introduced a behaviour is judged as having it, the release before (and the boundary's own
pre-release) as not, and any generated version as its side of the boundary says.

Tables: pgle/xla/versions.py, pgle/xla/flag_data.py (through pgle/xla/flag_table.py),
pgle/verdicts/checker.py, collectives.py, sync_converted.py, pgle/cache/key_rules.py and
pgle/evidence/log_version.py."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.strategies import before, both_sides
from helpers.strategies import versions as any_version
from pgle.cache import key_rules
from pgle.evidence import log_version
from pgle.verdicts import checker, collectives, sync_converted
from pgle.verdicts.pgle_applied import SILENCE_FULL, SILENCE_OFF, SILENCE_UNKNOWN
from pgle.xla import flag_table, versions
from pgle.xla.flag_data import FLAGS, REMOVED_FLAGS
from pgle.xla.versions import Version, parse_version


def side(v, boundary) -> bool:
    return v >= boundary


# -- pgle.xla.versions ----------------------------------------------------------------------


@given(any_version)
def test_version_gates_follow_their_boundaries(v):
    assert versions.supports_expect_pgle(v) == side(v, (0, 5, 1))
    assert versions.needs_lhs_flag(v) == (v <= (0, 5, 0))
    assert (versions.newer_than_verified(v) is not None) == (v > versions.NEWEST_VERIFIED_JAX)


@pytest.mark.parametrize("boundary", [(0, 5, 1), (0, 4, 36), (0, 10, 1), (0, 11, 0)])
def test_at_least_on_both_sides(boundary):
    for v, after in both_sides(boundary):
        assert versions.at_least(v, boundary) == after, v
    assert versions.at_least(None, boundary)  # unknown counts as new


def test_lhs_flag_and_newest_verified_on_both_sides():
    for v, after in both_sides((0, 5, 1)):
        assert versions.supports_expect_pgle(v) == after, v
    assert versions.needs_lhs_flag((0, 5, 0)) and not versions.needs_lhs_flag((0, 5, 1))
    assert versions.newer_than_verified(versions.NEWEST_VERIFIED_JAX) is None
    assert versions.newer_than_verified((0, 12, 0, 2)) is not None
    assert versions.newer_than_verified((0, 12, 1)) is not None
    assert versions.newer_than_verified(None) is None


@given(st.lists(st.integers(0, 40), min_size=1, max_size=4),
       st.sampled_from(["", ".dev20250101", "rc1", "a2", "b1", ".post1", "+cuda12"]))
def test_parse_version_orders_pre_releases_before_their_release(parts, tail):
    text = ".".join(map(str, parts)) + tail
    v = parse_version(text)
    assert tuple(v) == tuple(parts)
    pre = tail in (".dev20250101", "rc1", "a2", "b1")
    assert getattr(v, "pre", False) == pre
    assert (v < tuple(parts)) == pre  # a nightly sorts before its release...
    if any(parts):
        assert v > before(tuple(parts))  # ...and after the release before it


# -- pgle.xla.flag_data / flag_table ----------------------------------------------------------

_REMOVED = [e for e in REMOVED_FLAGS if not any(c in e.pattern for c in "*?[")]


@pytest.mark.parametrize("entry", _REMOVED, ids=lambda e: e.pattern)
def test_removed_flags_on_both_sides_of_their_removal(entry):
    for v, after in both_sides(entry.removed_in):
        assert (flag_table.removed_flag(entry.pattern, v) is not None) == after, v


@pytest.mark.parametrize("entry", [e for e in REMOVED_FLAGS if e not in _REMOVED],
                         ids=lambda e: e.pattern)
def test_removed_flag_families_on_both_sides(entry):
    name = entry.pattern.replace("*", "x").replace("?", "x")
    assert fnmatch.fnmatchcase(name, entry.pattern)
    for v, after in both_sides(entry.removed_in):
        assert (flag_table.removed_flag(name, v) is not None) == after, v


_SINCE = [i for i in FLAGS.values() if i.since]


@pytest.mark.parametrize("info", _SINCE, ids=lambda i: i.name)
def test_flags_exist_from_their_first_release(info):
    for v, after in both_sides(info.since):
        assert flag_table.exists_in(info, v) == after, v


_DEFAULTS = [(i, k) for i in FLAGS.values() for k in range(len(i.older_defaults))]


@pytest.mark.parametrize("info,k", _DEFAULTS, ids=lambda x: getattr(x, "name", str(x)))
def test_older_defaults_change_at_their_release(info, k):
    until, value = info.older_defaults[k]
    newer = info.older_defaults[k + 1][1] if k + 1 < len(info.older_defaults) else info.default
    assert flag_table.default_in(info, before(until)) == value
    assert flag_table.default_in(info, Version(until, pre=True)) == value
    assert flag_table.default_in(info, until) == newer


_VALUE_SINCE = [(i, v, first) for i in FLAGS.values() for v, first in i.value_since]


@pytest.mark.parametrize("info,value,first", _VALUE_SINCE, ids=str)
def test_enum_values_appear_at_their_release(info, value, first):
    for v, after in both_sides(first):
        if flag_table.exists_in(info, v):
            assert (value in flag_table.values_in(info, v)) == after, v


_OLD_VALUES = [(i, v, first, removed) for i in FLAGS.values() for v, first, removed in i.old_values]


@pytest.mark.parametrize("info,value,first,removed", _OLD_VALUES, ids=str)
def test_removed_enum_values_go_at_their_release(info, value, first, removed):
    for v, after in both_sides(removed):
        if first is None or v >= first:
            assert (value in flag_table.values_in(info, v)) == (not after), v
    if first is not None:
        assert value not in flag_table.values_in(info, before(first))


# -- pgle.verdicts -----------------------------------------------------------------------------


@given(any_version, st.sampled_from([None, "PGLE_STRICTNESS_LEVEL_WARN", "WARN", "warn"]),
       st.booleans())
def test_checker_silence_under_warn_follows_both_boundaries(v, level, old_flag):
    got = checker.silence(v, level, old_flag=old_flag)
    if v < (0, 4, 36):
        assert got == (SILENCE_FULL if old_flag else SILENCE_OFF)
    elif v < (0, 5, 1):
        assert got == SILENCE_UNKNOWN
    else:
        assert got == SILENCE_FULL


@given(any_version)
def test_checker_silence_under_error_and_off(v):
    new = v >= (0, 4, 36)
    assert checker.silence(v, "PGLE_STRICTNESS_LEVEL_ERROR") == (SILENCE_FULL if new else SILENCE_OFF)
    assert checker.silence(v, "PGLE_STRICTNESS_LEVEL_OFF") == SILENCE_OFF


def test_new_checker_boundary_0_4_36_on_both_sides():
    assert checker.silence((0, 4, 36), None) == SILENCE_UNKNOWN  # the new checker, WARN: silent
    assert checker.silence((0, 4, 35), None) == SILENCE_OFF  # no checker without the old flag
    assert checker.silence((0, 4, 35), None, old_flag=True) == SILENCE_FULL
    assert checker.silence((0, 4, 36), None, old_flag=True) == SILENCE_UNKNOWN
    assert checker.silence((0, 5, 0), None) == SILENCE_UNKNOWN
    assert checker.silence((0, 5, 1), None) == SILENCE_FULL
    assert checker.silence(None, None) == SILENCE_UNKNOWN


SOL = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA H800", "NVIDIA H20",
       "NVIDIA GH200 480GB", "NVIDIA B200", "NVIDIA GB200", "NVIDIA B300 SXM6 AC"]
NOT_SOL = ["NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB", "NVIDIA L40S", "NVIDIA A10G",
           "NVIDIA RTX 6000 Ada Generation", "NVIDIA H2000"]


@given(any_version)
def test_sol_fallback_from_0_10_1_on_hopper_and_blackwell(v):
    for device in [*SOL, *NOT_SOL, None]:
        got = collectives.sol_fallback_expected(v, device)
        if v < (0, 10, 1):
            assert got is False
        else:
            assert got is (device is None or device in SOL), device


def test_sol_fallback_boundary_on_both_sides():
    assert collectives.SOL_FALLBACK_SINCE == (0, 10, 1)
    assert before(collectives.SOL_FALLBACK_SINCE) == collectives.LAST_WITHOUT_SOL_FALLBACK
    for v, after in both_sides((0, 10, 1)):
        for device in SOL:
            assert collectives.sol_fallback_expected(v, device) is after, (v, device)
    assert collectives.sol_fallback_expected(None, "NVIDIA H200") is None


@given(any_version)
def test_sync_pairs_renamed_from_0_11_1(v):
    assert sync_converted.renames(v) == (v >= (0, 11, 1))


def test_sync_rename_boundary_on_both_sides():
    assert before(sync_converted.RENAMED_SINCE) == sync_converted.LAST_KEEPING_NAMES
    for v, after in both_sides((0, 11, 1)):
        assert sync_converted.renames(v) == after, v
    assert sync_converted.renames(None) is None


# -- pgle.cache.key_rules ----------------------------------------------------------------------


@given(any_version)
def test_key_excluded_flags_grow_at_0_4_36_and_0_11(v):
    got = key_rules.key_excluded_flags(v)
    assert ("xla_gpu_experimental_autotune_cache_mode" in got) == (v >= (0, 4, 36))
    assert ("xla_gpu_per_fusion_autotune_cache_dir" in got) == (v >= (0, 11, 0))
    assert "xla_dump_to" in got


@given(any_version, st.sampled_from([None, "none", "all", "xla_gpu_per_fusion_autotune_cache_dir",
                                      "xla_gpu_kernel_cache_file", " all "]))
def test_key_holds_cache_dir_against_a_model(v, caches):
    value = ("xla_gpu_per_fusion_autotune_cache_dir" if caches is None else caches).strip()
    kernel = value in ("all", "xla_gpu_kernel_cache_file")
    autotune = value in ("all", "xla_gpu_per_fusion_autotune_cache_dir")
    if v < (0, 4, 36):
        want = False
    elif v < (0, 11, 0):
        want = kernel or autotune
    else:
        want = kernel
    assert key_rules.key_holds_cache_dir(v, caches) == want


def test_cache_key_boundaries_on_both_sides():
    for boundary, flag in ((key_rules.XLA_CACHES_SINCE, "xla_gpu_experimental_autotune_cache_mode"),
                           (key_rules.AUTOTUNE_PATH_NOT_IN_KEY_SINCE, "xla_tpu_compiler_variant")):
        for v, after in both_sides(boundary):
            assert (flag in key_rules.key_excluded_flags(v)) == after, (v, flag)
    for v, after in both_sides(key_rules.XLA_CACHES_SINCE):
        assert key_rules.key_holds_cache_dir(v, None) == after, v
        assert (key_rules.relocatable_variables(v) != {}) == after, v
    for v, after in both_sides(key_rules.AUTOTUNE_PATH_NOT_IN_KEY_SINCE):
        assert key_rules.key_holds_cache_dir(v, None) == (not after), v
        assert key_rules.key_holds_cache_dir(v, "all")


# -- pgle.evidence.log_version -----------------------------------------------------------------

_FEATURES = {kind: (first, last) for kind, first, last, _ in log_version.FEATURES}


@pytest.mark.parametrize("lane", sorted(log_version.LINES))
def test_every_lane_capture_lies_within_its_wordings_bounds(lane):
    """A wording the lane saw in version V's log has bounds that include V: a bound moved by
    one release past a capture would misjudge that version's logs."""
    v = log_version.parse(lane)
    for kind in log_version.LINES[lane]:
        if kind in _FEATURES:
            first, last = _FEATURES[kind]
            assert log_version._in(v, first, last), (lane, kind, first, last)


@pytest.mark.parametrize("lane", sorted(log_version.LINES))
def test_a_lane_logs_line_numbers_infer_its_own_version(lane):
    wording = {kind: numbers[0] for kind, numbers in log_version.LINES[lane].items()}
    inf = log_version.infer(wording)
    assert lane in inf.matches, (lane, inf)
    v = log_version.parse(lane)
    assert inf.within(v, v) == (inf.matches == (lane,))


@pytest.mark.parametrize("kind", sorted(_FEATURES))
def test_each_wording_alone_gives_its_bounds_on_both_sides(kind):
    first, last = _FEATURES[kind]
    wording = {kind[len("prefix:"):] and "prefix": kind.split(":", 1)[1]} if kind.startswith(
        "prefix:") else ({} if kind in ("clones", "candidates") else {kind: 0})
    inf = log_version.infer(wording, clones=kind == "clones", candidates=kind == "candidates")
    assert (inf.low, inf.high) == (first, last)
    if first is not None:
        assert inf.within(first, None) and not inf.within(first + (0, 1), None)
    if last is not None:
        assert inf.within(None, last) and not inf.within(None, before(last))


def test_checker_silence_of_a_saved_log_at_the_version_boundaries():
    def inf(v):
        return log_version.Inference(v, v, (), ())

    kw = dict(checker_off=False, checker_lines=0, discards=0)
    assert checker.silence_of_log(inf((0, 4, 35)), **kw) == SILENCE_OFF
    assert checker.silence_of_log(inf((0, 4, 36)), **kw) == SILENCE_UNKNOWN
    assert checker.silence_of_log(inf((0, 5, 0)), **kw) == SILENCE_UNKNOWN
    assert checker.silence_of_log(inf((0, 5, 1)), **kw) == SILENCE_FULL
    assert checker.silence_of_log(inf((0, 4, 36)), **dict(kw, discards=1)) == SILENCE_FULL
    assert checker.silence_of_log(inf((0, 4, 35)), **dict(kw, discards=1)) == SILENCE_FULL
    assert checker.silence_of_log(inf((0, 4, 35)), **dict(kw, checker_off=True)) == SILENCE_OFF


def test_a_saved_log_of_unknown_version_stays_unknown_even_with_discards():
    """checker.py: 'unknown ... when the version is unknown': a discard proves ERROR strictness
    only on a jax known to have the new checker (a log that could be older stays unknown)."""
    unknown = log_version.Inference(None, None, (), ())
    either = log_version.Inference(None, (0, 5, 0), (), ())
    for inf in (unknown, either):
        assert checker.silence_of_log(inf, checker_off=False, checker_lines=0,
                                      discards=1) == SILENCE_UNKNOWN


def test_since_decides_only_where_every_version_the_log_allows_agrees():
    """verify's version rules (SoL fallback, renamed pairs): True past `first`, False up to
    `last_before`, None where the log's versions straddle the boundary or nothing tells."""
    cases = {
        "old": log_version.Inference(None, (0, 5, 0), (), ()),
        "new": log_version.Inference((0, 11, 1), None, (), ()),
        "straddles": log_version.Inference((0, 5, 0), (0, 12, 0), (), ()),
        "unknown": log_version.Inference(None, None, (), ()),
        "pinned old": log_version.Inference(None, None, ("0.10.2",), ()),
        "pinned new": log_version.Inference(None, None, ("0.12.0.1",), ()),
    }
    got = {name: inf.since((0, 11, 1), (0, 11, 0)) for name, inf in cases.items()}
    assert got == {"old": False, "new": True, "straddles": None, "unknown": None,
                   "pinned old": False, "pinned new": True}
