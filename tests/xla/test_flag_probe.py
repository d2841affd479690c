"""`--probe`: the installed jaxlib itself says which flags it rejects (real child processes)."""

from __future__ import annotations

from helpers.pgle_testing import REPO
from pgle.xla import flag_probe
from pgle.xla import versions

GPU_FLAGS = ("--xla_gpu_enable_latency_hiding_scheduler=true "
             "--xla_gpu_pgle_profile_file_or_directory_path='/tmp/a b/profile.pb' "
             "--xla_gpu_enable_command_buffer='' "
             "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR "
             "--xla_gpu_all_reduce_combine_threshold_bytes=134217728")


def statuses(result):
    return {v.name: v.status for v in result.verdicts}


def test_valid_gpu_flags_are_accepted_by_cpu_jaxlib():
    result = flag_probe.probe(GPU_FLAGS)
    assert result.accepted and not result.error and not result.rejected()
    assert set(statuses(result).values()) == {"accepted"} and len(result.verdicts) == 5
    assert result.jaxlib_version == versions.installed("jaxlib")


def test_removed_and_unknown_flags_are_named():
    result = flag_probe.probe("--xla_gpu_graph_level=0 --xla_dump_to=/tmp/d "
                              "--xla_gpu_no_such_flag=1")
    assert not result.accepted and not result.error
    assert statuses(result) == {"xla_gpu_graph_level": "unknown", "xla_dump_to": "accepted",
                                "xla_gpu_no_such_flag": "unknown"}
    assert [v.flag for v in result.rejected()] == ["--xla_gpu_graph_level=0",
                                                   "--xla_gpu_no_such_flag=1"]


def test_single_dash_flag_is_unknown_to_xla():
    result = flag_probe.probe("-xla_gpu_triton_gemm_any=true")
    assert statuses(result) == {"xla_gpu_triton_gemm_any": "unknown"}


def test_bad_values_hide_unknown_flags_so_the_rest_is_tried_again():
    # XLA stops at values it cannot read before it reports unknown flags.
    result = flag_probe.probe("--xla_gpu_triton_gemm_any=yes --xla_gpu_no_such_flag=1 "
                              "--xla_dump_to=/tmp/d")
    assert statuses(result) == {"xla_gpu_triton_gemm_any": "bad_value",
                                "xla_gpu_no_such_flag": "unknown", "xla_dump_to": "accepted"}
    assert "'yes'" in result.verdicts[0].message


def test_a_value_xla_rejects_without_naming_it_is_found_alone():
    # A bad enum value gets no message of its own: each flag is tried alone.
    result = flag_probe.probe("--xla_gpu_pgle_accuracy_checker=bogus --xla_dump_to=/tmp/d")
    assert statuses(result) == {"xla_gpu_pgle_accuracy_checker": "bad_value",
                                "xla_dump_to": "accepted"}


def test_file_valued_xla_flags(tmp_path):
    f = tmp_path / "xla flags.txt"
    f.write_text("--xla_gpu_enable_latency_hiding_scheduler=true\n--xla_gpu_bogus=2\n")
    result = flag_probe.probe(str(f))
    assert statuses(result) == {"xla_gpu_enable_latency_hiding_scheduler": "accepted",
                                "xla_gpu_bogus": "unknown"}


def test_unopenable_file_or_whitespace_is_a_probe_error(tmp_path):
    for text in (str(tmp_path / "missing"), "  "):
        result = flag_probe.probe(text)
        assert not result.accepted and result.verdicts == []
        assert "could not open" in result.error


def test_empty_flags_need_no_child():
    result = flag_probe.probe("")
    assert result.accepted and result.jaxlib_version == versions.installed("jaxlib")


def test_a_python_without_jax_is_reported_not_raised(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named jax' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = flag_probe.probe("--xla_dump_to=/tmp/d", python=str(fake))
    assert not result.accepted and "No module named jax" in result.error
    assert statuses(result) == {"xla_dump_to": "not_checked"}


def test_parse_output_reads_real_xla_lines():
    # Lines as jaxlib 0.10.2 prints them (absl prefix).
    run = flag_probe.parse_output(1, "", (
        "F1122 04:29:32.447066    8610 parse_flags_from_env.cc:234] Unknown flags in XLA_FLAGS: "
        "--xla_bogus_flag=1 --xla_gpu_graph_level=0\nPerhaps you meant to specify these on the "
        "TF_XLA_FLAGS envvar?\n"))
    assert run.unknown == {"xla_bogus_flag", "xla_gpu_graph_level"} and not run.parse_failed
    run = flag_probe.parse_output(-6, "", (
        "E1122 04:29:38.215662    8926 debug_options_flags.cc:145] Illegal value for "
        "--xla_gpu_enable_command_buffer 'FOO'\n"
        "E1122 04:29:39.833430    9104 command_line_flags.cc:63] Couldn't interpret value abc "
        "for flag xla_gpu_all_reduce_combine_threshold_bytes.\n"
        "F1122 04:29:39.833493    9104 parse_flags_from_env.cc:220] Check failed: "
        "tsl::Flags::Parse(...) Flag parsing failed.\n"))
    assert run.parse_failed and set(run.bad) == {"xla_gpu_enable_command_buffer",
                                                 "xla_gpu_all_reduce_combine_threshold_bytes"}
    run = flag_probe.parse_output(0, "PGLE_PROBE_ACCEPTED 0.10.2\n", "")
    assert run.ok and run.jaxlib_version == "0.10.2"


def test_unknown_flag_message_of_jax_0_5_0_and_older_names_only_the_unknown_flag():
    # jax <= 0.5.0 lists the rest of XLA_FLAGS after two spaces (real lines of the lane's
    # unknown-checker-flag scenario): those flags are valid, the profile path included.
    for version in ("0.4.35", "0.4.38", "0.5.0", "0.5.1", "0.12.0.1"):
        log = REPO / "tests" / "data" / "xla_gpu" / version / "unknown-checker-flag.log"
        line = next(ln for ln in log.read_text().splitlines() if "Unknown flag" in ln)
        run = flag_probe.parse_output(-6, "", line + "\n")
        unknown = "xla_gpu_pgle_accuracy_checker" if version == "0.4.35" \
            else "xla_gpu_enable_pgle_accuracy_checker"
        assert run.unknown == {unknown}, (version, run.unknown)
        assert flag_probe._verdict("--x", "xla_gpu_pgle_profile_file_or_directory_path",
                                   run).status == "accepted"
