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
    assert flag_table.versions_text(
        "xla_gpu_experimental_pipeline_parallelism_opt_level") == "jax >= 0.5.1"
    assert flag_table.versions_text("xla_gpu_enable_cupti_multi_subscriber") == "jax >= 0.11.1"
    assert flag_table.versions_text("xla_gpu_experimental_ragged_all_to_all_use_barrier") == \
        "added in jax 0.9.1; removed in jax 0.11.1"
    assert flag_table.versions_text("xla_no_such_flag") == "not in pgle's table"


def test_exists_in():
    info = FLAGS[flag_table.ACCURACY_CHECKER]
    assert not flag_table.exists_in(info, (0, 4, 35))
    assert flag_table.exists_in(info, (0, 4, 36)) and flag_table.exists_in(info, None)


def _sample(info, jax):
    if info.kind == "bool":
        return "true"
    if info.kind == "enum":
        return flag_table.values_in(info, jax)[-1]
    if info.kind == "enum_list":
        return flag_table.values_in(info, jax)[1]
    return info.default or "1" if info.kind == "int" else "/tmp/pgle-x"


def test_installed_jaxlib_accepts_every_flag_in_the_table():
    jax = versions.jax_version()
    text = " ".join(render_flag(i.name, _sample(i, jax)) for i in FLAGS.values()
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


def test_values_and_defaults_follow_the_jax_release():
    cb = FLAGS[flag_table.COMMAND_BUFFER]
    # jax 0.12.0 added COLLECTIVES_KERNEL (to the values and the default list); 0.10.2 dropped
    # DYNAMIC_SLICE_COPY_FUSION; 0.4.34/0.4.35 spelled CONDITIONAL "CONDITIONALS".
    assert flag_table.value_error(cb, "+COLLECTIVES_KERNEL", (0, 12, 0, 1)) is None
    assert "needs jax >= 0.12.0" in flag_table.value_error(cb, "+COLLECTIVES_KERNEL", (0, 10, 2))
    assert "removed in jax 0.10.2" in flag_table.value_error(cb, "DYNAMIC_SLICE_COPY_FUSION",
                                                             (0, 10, 2))
    assert flag_table.value_error(cb, "DYNAMIC_SLICE_COPY_FUSION", (0, 9, 2)) is None
    assert flag_table.value_error(cb, "CONDITIONALS", (0, 4, 34)) is None
    assert "COLLECTIVES_KERNEL" in flag_table.default_in(cb, (0, 12, 0))
    assert "COLLECTIVES_KERNEL" not in flag_table.default_in(cb, (0, 10, 2))
    assert flag_table.default_in(FLAGS["xla_gpu_all_reduce_combine_threshold_bytes"],
                                 (0, 4, 34)) == "31457280"
    pipeline = FLAGS["xla_gpu_pipeline_all_reduce"]
    assert flag_table.value_error(pipeline, "OFF", None) is None  # XLA ignores case here
    assert flag_table.value_error(pipeline, "true", None) is not None


def test_an_enum_value_this_jax_lacks_is_refused_before_launch():
    from pgle.errors import FlagError
    from pgle.xla.flags import XlaFlags, lint

    flags = XlaFlags.parse("--xla_gpu_enable_command_buffer=+COLLECTIVES_KERNEL")
    assert lint(flags, (0, 12, 0, 1)) == []
    with pytest.raises(FlagError, match="needs jax >= 0.12.0"):
        lint(flags, (0, 10, 2))
    # A jax newer than the table's: a warning at most, never a refusal.
    assert flag_table.explain_all(flags.flags, (0, 13))[0]["status"] == "ok"


@pytest.mark.parametrize("name, removed", [
    ("xla_gpu_experimental_ragged_all_to_all_use_barrier", "0.11.1"),
    ("xla_gpu_experimental_enable_nvshmem", "0.11.0"),
    ("xla_gpu_experimental_autotuner_cache_dir", "0.11.1"),
])
def test_flags_removed_after_jax_0_10_2_are_refused_before_launch(name, removed):
    from pgle.errors import FlagError
    from pgle.xla.flags import XlaFlags, lint

    flags = XlaFlags.parse(f"--{name}=true")
    with pytest.raises(FlagError, match=f"removed in jax {removed}"):
        lint(flags, (0, 12, 0, 1))
    assert lint(flags, (0, 10, 2)) == []  # still there


def test_pipelined_false_is_no_longer_off_from_jax_0_11_1():
    row = flag_table.explain_flag("xla_gpu_enable_pipelined_all_gather", "false",
                                  "--xla_gpu_enable_pipelined_all_gather=false", (0, 11, 1))
    assert row["status"] == "warn" and "--xla_gpu_pipeline_all_gather=off" in row["message"]
    row = flag_table.explain_flag("xla_gpu_enable_pipelined_all_gather", "false",
                                  "--xla_gpu_enable_pipelined_all_gather=false", (0, 10, 2))
    assert row["status"] == "ok"


def test_flags_explain_knows_the_flags_of_jax_0_12(tmp_path):
    """`pgle flags explain` on this machine's jax: a 0.11/0.12 flag is not `[unknown]` but an
    error naming the release that added it (tests/xla_gpu/test_live.py runs it on jax 0.12)."""
    from helpers.pgle_testing import report_of, run_pgle

    jax = versions.jax_version()
    proc = run_pgle("flags", "explain", "--json",
                    "--xla_gpu_enable_cupti_multi_subscriber=true "
                    "--xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes=0",
                    cwd=tmp_path)
    rows = report_of(proc)["flags"]
    assert [r["versions"] for r in rows] == ["jax >= 0.11.1", "jax >= 0.11.1"]
    if jax is not None and jax < (0, 11, 1):
        assert proc.returncode == 1 and all("needs jax >= 0.11.1" in r["message"] for r in rows)
    else:
        assert proc.returncode == 0 and [r["status"] for r in rows] == ["ok", "ok"]
