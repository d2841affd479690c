"""The flag table: its shape, value checks, versions, and agreement with the installed jaxlib."""

from __future__ import annotations

import fnmatch

import pytest

from pgle.xla import flag_probe
from pgle.xla import flag_table
from pgle.xla import versions
from pgle.xla.flag_table import FLAGS, REMOVED_FLAGS
from pgle.xla.flags import render_flag

KINDS = {"bool", "int", "string", "enum", "enum_list"}


def test_every_entry_is_complete_and_consistent():
    for name, info in FLAGS.items():
        assert name == info.name and name.startswith("xla_")
        assert info.kind in KINDS and info.meaning.endswith((".", ")"))
        assert flag_table.value_error(info, info.default if info.kind != "bool" else None) is None
        if info.kind in ("enum", "enum_list"):
            assert info.values
        assert not any(fnmatch.fnmatchcase(name, r.pattern) for r in REMOVED_FLAGS)


def test_pgle_constants_are_in_the_table():
    for name in (flag_table.PGLE_PROFILE_PATH, flag_table.LHS, flag_table.COMMAND_BUFFER,
                 flag_table.ACCURACY_CHECKER, flag_table.HOST_DEVICE_COUNT):
        assert name in FLAGS


def test_facts_the_table_must_keep():
    # pgle-facts.md section 6 and the installed jaxlib 0.10.2's defaults.
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        assert FLAGS[f"xla_gpu_{kind}_combine_threshold_bytes"].default == "31457287"
    assert FLAGS[flag_table.LHS].default == "false"
    assert FLAGS[flag_table.ACCURACY_CHECKER].default == "PGLE_STRICTNESS_LEVEL_WARN"
    assert FLAGS[flag_table.ACCURACY_CHECKER].since == (0, 4, 36)
    assert flag_table.removed_flag("xla_gpu_enable_async_all_reduce", (0, 4, 28)) is not None
    assert flag_table.removed_flag("xla_gpu_enable_async_all_reduce", (0, 4, 27)) is None
    assert flag_table.removed_flag("xla_gpu_graph_level", None).removed_in == (0, 7, 2)


@pytest.mark.parametrize("name, value, bad", [
    ("xla_gpu_triton_gemm_any", None, False),
    ("xla_gpu_triton_gemm_any", "True", False),
    ("xla_gpu_triton_gemm_any", "0", False),
    ("xla_gpu_triton_gemm_any", "yes", True),
    ("xla_gpu_triton_gemm_any", "", True),
    ("xla_gpu_all_reduce_combine_threshold_bytes", "-1", False),
    ("xla_gpu_all_reduce_combine_threshold_bytes", " 5", False),
    ("xla_gpu_all_reduce_combine_threshold_bytes", "0x10", True),
    ("xla_gpu_all_reduce_combine_threshold_bytes", "1e3", True),
    ("xla_gpu_all_reduce_combine_threshold_bytes", None, True),
    ("xla_gpu_pgle_accuracy_checker", "PGLE_STRICTNESS_LEVEL_ERROR", False),
    ("xla_gpu_pgle_accuracy_checker", "ERROR", True),
    ("xla_gpu_enable_command_buffer", "", False),
    ("xla_gpu_enable_command_buffer", "+COLLECTIVES,-FUSION", False),
    ("xla_gpu_enable_command_buffer", "FOO", True),
    ("xla_gpu_pgle_profile_file_or_directory_path", "/p.pb", False),
])
def test_value_error_matches_what_jaxlib_accepts(name, value, bad):
    assert (flag_table.value_error(FLAGS[name], value) is not None) == bad


def test_versions_text():
    assert flag_table.versions_text("xla_gpu_graph_level") == "removed in jax 0.7.2"
    assert flag_table.versions_text(flag_table.ACCURACY_CHECKER) == "jax >= 0.4.36"
    assert "every jax pgle supports" in flag_table.versions_text(flag_table.LHS)
    assert "not pinned down" in flag_table.versions_text(
        "xla_gpu_experimental_pipeline_parallelism_opt_level")
    assert flag_table.versions_text("xla_no_such_flag") == "not in pgle's table"


def test_exists_in():
    info = FLAGS[flag_table.ACCURACY_CHECKER]
    assert not flag_table.exists_in(info, (0, 4, 35))
    assert flag_table.exists_in(info, (0, 4, 36)) and flag_table.exists_in(info, None)


def _sample(info):
    if info.kind == "bool":
        return "true"
    if info.kind == "enum":
        return info.values[-1]
    if info.kind == "enum_list":
        return info.values[1]
    return info.default or "1" if info.kind == "int" else "/tmp/pgle-x"


def test_installed_jaxlib_accepts_every_flag_in_the_table():
    jax = versions.jax_version()
    text = " ".join(render_flag(i.name, _sample(i)) for i in FLAGS.values()
                    if flag_table.exists_in(i, jax))
    result = flag_probe.probe(text)
    assert result.accepted, [(v.flag, v.status, v.message) for v in result.rejected()]


def test_installed_jaxlib_rejects_every_removed_flag():
    jax = versions.jax_version()
    names = [r.pattern.replace("*", "all_reduce") for r in REMOVED_FLAGS
             if flag_table.removed_flag(r.pattern.replace("*", "all_reduce"), jax)]
    assert names, "the installed jax should be newer than some removals"
    result = flag_probe.probe(" ".join(f"--{n}=true" for n in names))
    assert not result.accepted
    assert {v.name: v.status for v in result.verdicts} == {n: "unknown" for n in names}
