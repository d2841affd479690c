"""pgle's flag table against what every supported jaxlib itself says (default test run).

tests/data/xla_gpu/flags/<version>.txt: the XLA_FLAGS names each jax release from 0.4.34 to
0.12.0.1 accepts, with kind, enum values and default from its own DebugOptions
(tests/xla_gpu/flag_inventory.py; tests/data/xla_gpu/flags/README.md). The table must say, for
every release, exactly which of its flags exist there, their defaults and their values; the
flags jax 0.11/0.12 added or removed that touch PGLE, the scheduler, collectives or command
buffers must all be in it. tests/xla_gpu/test_live.py asks the lane's jaxlibs live.
"""

from __future__ import annotations

import re
import sys

import pytest
from helpers.pgle_testing import DATA, TESTS

from pgle.xla import flag_table
from pgle.xla.flag_table import (
    CHECKED_THROUGH,
    FLAGS,
    OLDEST_SUPPORTED_JAX,
    REMOVED_FLAGS,
)
from pgle.xla.versions import parse_version

sys.path.insert(0, str(TESTS / "xla_gpu"))
import flag_inventory

FLAG_DATA = DATA / "xla_gpu" / "flags"
INVENTORY = {parse_version(p.stem): flag_inventory.read_inventory(p)
             for p in FLAG_DATA.glob("*.txt") if not p.name.endswith(".usage.txt")}
RELEASES = sorted(INVENTORY)
# Names that matter to PGLE: the profile, the scheduler, collectives, command buffers
# (CUDA graphs), the profiler and its trace.
RELEVANT = re.compile(r"pgle|latency|schedul|collective|all_reduce|all_gather|reduce_scatter|"
                      r"all_to_all|permute|p2p|send|recv|nccl|command_buffer|graph|cupti|"
                      r"profil|pipelin|async|overlap|combine|fencing|copy|trace|fdo")


def _v(version) -> str:
    return ".".join(map(str, version))


def test_every_supported_release_was_inventoried():
    # jax/jaxlib releases 0.4.34-0.12.0.1 on PyPI (pip index versions jaxlib, 2026-11-25).
    assert [_v(r) for r in RELEASES] == [
        "0.4.34", "0.4.35", "0.4.36", "0.4.38", "0.5.0", "0.5.1", "0.5.3", "0.6.0", "0.6.1",
        "0.6.2", "0.7.0", "0.7.1", "0.7.2", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.9.0",
        "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2",
        "0.12.0", "0.12.0.1"]
    assert RELEASES[0] == OLDEST_SUPPORTED_JAX and RELEASES[-1] == CHECKED_THROUGH


def test_two_ways_of_asking_agree():
    """The probed names equal the names in XLA's own flag listing (usage text)."""
    for usage in FLAG_DATA.glob("*.usage.txt"):
        listed = set(re.findall(r"^\t--(\w+)=", usage.read_text(), re.MULTILINE))
        assert listed == set(INVENTORY[parse_version(usage.name[:-len(".usage.txt")])]), usage


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_the_table_knows_in_which_releases_each_flag_exists(name):
    info = FLAGS[name]
    wrong = [_v(r) for r in RELEASES
             if (name in INVENTORY[r]) != (flag_table.exists_in(info, r)
                                            and not flag_table.removed_flag(name, r))]
    assert not wrong, f"{name}: the table is wrong for jax {', '.join(wrong)}"


@pytest.mark.parametrize("entry", REMOVED_FLAGS, ids=lambda e: e.pattern)
def test_removed_flags_are_gone_from_the_release_the_table_names(entry):
    for r in RELEASES:
        present = [n for n in INVENTORY[r] if re.fullmatch(entry.pattern.replace("*", ".*"), n)]
        if r >= entry.removed_in or (entry.since and r < entry.since):
            assert not present, (_v(r), present)
        elif "*" not in entry.pattern:
            assert present, f"{entry.pattern} is missing from jax {_v(r)}"


def _same_default(kind: str, a: str, b: str) -> bool:
    if kind == "enum_list":
        return set(a.split(",")) - {""} == set(b.split(",")) - {""}
    return a == b


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_defaults_per_release(name):
    info = FLAGS[name]
    wrong = []
    for r in RELEASES:
        e = INVENTORY[r].get(name)
        if e is None or e.default is None or e.kind == "?":  # no DebugOptions field of its own
            continue
        table = flag_table.default_in(info, r)
        real = e.default
        if info.kind == "enum" and info.ignore_case:  # XLA reads `on`, declares `..._MODE_ON`
            real = real.rsplit("_", 1)[-1].lower()
        if not _same_default(info.kind, table, real):
            wrong.append(f"jax {_v(r)}: table {table!r}, XLA {e.default!r}")
    assert not wrong, wrong


def _matches(table_value: str, declared: str) -> bool:
    t = table_value.upper()
    return declared == t or declared.endswith("_" + t)


@pytest.mark.parametrize("name", sorted(n for n, i in FLAGS.items()
                                        if i.kind in ("enum", "enum_list")))
def test_enum_values_per_release(name):
    """Each release's values: every value the table allows is one XLA declares, and every value
    XLA declares (but its INVALID placeholder) is one the table allows."""
    info = FLAGS[name]
    for r in RELEASES:
        e = INVENTORY[r].get(name)
        if e is None or not e.values:
            continue
        declared = [d for d in e.values if "INVALID" not in d]
        allowed = flag_table.values_in(info, r)
        assert all(any(_matches(t, d) for d in declared) for t in allowed), (_v(r), allowed)
        assert all(any(_matches(t, d) for t in allowed) for d in declared), (_v(r), declared)


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_kind_is_xlas(name):
    e = INVENTORY[CHECKED_THROUGH].get(name)
    assert e is not None, f"{name} is not a flag of jax {_v(CHECKED_THROUGH)}"
    if e.kind == "?":  # an alias with no DebugOptions field (--xla_gpu_enable_pipelined_*)
        assert "deprecated alias" in FLAGS[name].pgle
        return
    want = {"bool": {"bool"}, "int": {"int"}, "string": {"string", "string_list", "?_list"},
            "enum": {"enum"}, "enum_list": {"enum_list"}}[FLAGS[name].kind]
    assert e.kind in want, (name, e.kind)


def test_every_relevant_flag_of_jax_0_11_and_0_12_is_known():
    """Added or removed after jax 0.10.2: pgle's table holds every flag that touches PGLE, the
    scheduler, collectives or command buffers (new ones in FLAGS, removed ones refused)."""
    before, newest = set(INVENTORY[(0, 10, 2)]), set(INVENTORY[CHECKED_THROUGH])
    later = set().union(*(set(INVENTORY[r]) for r in RELEASES if r > (0, 10, 2)))
    added = sorted(n for n in later - before if RELEVANT.search(n))
    assert "xla_gpu_enable_cupti_multi_subscriber" in added  # the flags the issue named
    assert "xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes" in added
    assert [n for n in added if n not in FLAGS] == []
    removed = sorted(before - newest)
    assert removed and [n for n in removed if not flag_table.removed_flag(n, None)] == []


def test_new_flags_are_explained_not_unknown():
    """`pgle flags explain` on jax 0.12.0.1: what today's main called `[unknown]`."""
    for name in ("xla_gpu_enable_cupti_multi_subscriber",
                 "xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes",
                 "xla_gpu_experimental_scheduler_memory_fencing_slack_windows",
                 "xla_gpu_pipeline_all_reduce"):
        info = FLAGS[name]
        value = {"bool": "true", "int": "0", "enum": "off"}[info.kind]
        row = flag_table.explain_flag(name, value, f"--{name}={value}", CHECKED_THROUGH)
        assert row["status"] == "ok" and row["meaning"], row
        old = flag_table.explain_flag(name, value, f"--{name}={value}", (0, 10, 2))
        assert old["status"] == "error" and "needs jax >= 0.11" in old["message"]
