"""The child's environment: what pgle must set replaces the user's value with a notice; what it
only suggests (`defaults`: `pgle nsys` replaying the prewarm's JAX variables) never overrides
the user's own setting (issue 37's independent mutants)."""

from __future__ import annotations

import os

import pytest

from pgle.launch.childenv import build, relevant


def test_defaults_fill_only_what_the_user_left_unset():
    user = {"JAX_DEFAULT_MATMUL_PRECISION": "highest", "PATH": "/usr/bin"}
    child = build(
        user,
        variables={"JAX_ENABLE_PGLE": "false"},
        defaults={"JAX_DEFAULT_MATMUL_PRECISION": "bfloat16", "JAX_THREEFRY_PARTITIONABLE": "1"},
    )
    env = child.env
    assert env["JAX_DEFAULT_MATMUL_PRECISION"] == "highest"  # the user's, kept, silently
    assert env["JAX_THREEFRY_PARTITIONABLE"] == "1"  # unset by the user: the default
    assert env["JAX_ENABLE_PGLE"] == "false" and env["PATH"] == "/usr/bin"
    assert not any("MATMUL_PRECISION" in n for n in child.notices), child.notices
    # A variable pgle must set does replace the user's, and says so.
    forced = build({"JAX_ENABLE_PGLE": "true"}, variables={"JAX_ENABLE_PGLE": "false"})
    assert forced.env["JAX_ENABLE_PGLE"] == "false"
    assert forced.notices == ["replacing your JAX_ENABLE_PGLE=true with JAX_ENABLE_PGLE=false"]


def test_the_terminal_hides_the_info_lines_pgle_turned_on_unless_verbose():
    """pgle turns XLA's INFO log on to read it; the terminal keeps hiding what the user never
    asked for, unless `--verbose` or PGLE_VERBOSE=1 (docs/guide/real-scripts.md); 0 is off."""
    assert build({}, info_log=True).terminal_level == 1
    assert build({"PGLE_VERBOSE": "0"}, info_log=True).terminal_level == 1
    assert build({"PGLE_VERBOSE": "1"}, info_log=True).terminal_level is None
    # The user's own level: pgle lowered nothing, the terminal shows what XLA prints.
    assert build({"TF_CPP_MIN_LOG_LEVEL": "0"}, info_log=True).terminal_level is None


def test_pgles_flags_merge_into_the_users_with_a_notice_per_replaced_flag():
    user = "--xla_gpu_enable_latency_hiding_scheduler=false --xla_dump_to=/tmp/d"
    child = build({"XLA_FLAGS": user}, xla={
        "xla_gpu_enable_latency_hiding_scheduler": "true",
        "xla_gpu_pgle_profile_file_or_directory_path": "/p.pb"}, info_log=True)
    assert child.env["XLA_FLAGS"] == (
        "--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/tmp/d "
        "--xla_gpu_pgle_profile_file_or_directory_path=/p.pb")
    assert child.flags.render() == child.env["XLA_FLAGS"] and child.user_flags.render() == user
    assert child.notices == ["replacing your --xla_gpu_enable_latency_hiding_scheduler=false "
                             "with --xla_gpu_enable_latency_hiding_scheduler=true"]
    # The INFO log pgle turned on, with the thread id that tells parallel compiles apart.
    assert child.env["TF_CPP_MIN_LOG_LEVEL"] == "0" and child.env["TF_CPP_LOG_THREAD_ID"] == "1"
    assert child.warnings == [] and child.terminal_level == 1
    assert build({"TF_CPP_LOG_THREAD_ID": "0"}, info_log=True).env["TF_CPP_LOG_THREAD_ID"] == "0"
    # Without xla flags nor info_log, the user's environment passes untouched.
    plain = build({"XLA_FLAGS": user, "PATH": "/bin"})
    assert plain.env == {"XLA_FLAGS": user, "PATH": "/bin"} and plain.notices == []
    assert plain.terminal_level is None


def test_a_level_that_hides_the_evidence_is_a_warning_and_the_variables_shown():
    child = build({"TF_CPP_MIN_LOG_LEVEL": "2"}, info_log=True)
    assert child.warnings == [
        "TF_CPP_MIN_LOG_LEVEL=2 hides XLA's 'Using PGLE profile', 'Found profile for module' "
        "lines, so pgle cannot see whether the profile was used; unset it or set it to 0."]
    assert child.env["TF_CPP_MIN_LOG_LEVEL"] == "2" and child.terminal_level is None
    env = {"PATH": "x", "JAX_A": "1", "NCCL_X": "2", "CUDA_VISIBLE_DEVICES": "0",
           "NVIDIA_V": "1", "XLA_FLAGS": "f", "TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_HOME": "h"}
    assert list(relevant(env).items()) == [
        ("CUDA_VISIBLE_DEVICES", "0"), ("JAX_A", "1"), ("NCCL_X", "2"), ("NVIDIA_V", "1"),
        ("TF_CPP_MIN_LOG_LEVEL", "0"), ("XLA_FLAGS", "f")]


def test_the_users_environment_by_default_and_flags_judged_by_the_installed_jax(monkeypatch):
    """No environment given: pgle's own (os.environ). A flag of XLA_FLAGS newer than the
    installed jax is refused by its version (an unknown version would count as new)."""
    import pytest

    from pgle.errors import PgleError
    from pgle.xla import flag_table, versions

    monkeypatch.setenv("PGLE_TEST_MARK", "from os.environ")
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert build().env["PGLE_TEST_MARK"] == "from os.environ"
    installed = versions.jax_version()
    newer = sorted(n for n, i in flag_table.FLAGS.items()
                   if i.since and installed is not None and i.since > installed)
    if not newer:
        pytest.skip(f"every flag pgle knows exists in jax {installed}")
    with pytest.raises(PgleError) as e:
        build({"XLA_FLAGS": f"--{newer[0]}=true"})
    assert "does not know (it exists since jax" in e.value.message


def test_a_warning_of_the_flags_lint_is_kept_with_those_of_the_probe():
    """XLA_FLAGS with text after its flags: XLA stops reading there; the lint's warning is
    one of the launch's warnings (the jaxlib probe adds its own after it)."""
    child = build({"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true oops"})
    assert child.warnings == [
        "XLA stops reading XLA_FLAGS at 'oops': everything from there on is ignored (every "
        "flag must start with '--')."]


def test_flags_pgle_does_not_know_are_asked_of_the_workloads_own_jax(tmp_path):
    """The jaxlib probe runs in the workload's environment (its PYTHONPATH), not pgle's: here
    a jax that cannot even import, so the probe's failure is a warning; and a flag removed in
    a later jax than the installed one is asked about (this jax may still know it), judged by
    the installed version, not counted as removed."""
    from pgle.xla import flag_table, versions

    site = tmp_path / "site" / "jax"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("raise ImportError('the workload shadows jax')\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONPATH": str(site.parent)}
    made_up = "--xla_pgle_test_made_up_flag=1"
    child = build({**env, "XLA_FLAGS": made_up})
    assert len(child.warnings) == 1, child.warnings
    assert child.warnings[0].startswith(f"could not ask jaxlib about {made_up}: jax exited")
    assert "the workload shadows jax" in child.warnings[0]
    installed = versions.jax_version()
    later = [e.pattern for e in flag_table.REMOVED_FLAGS
             if installed is not None and installed < e.removed_in and "*" not in e.pattern
             and (e.since is None or e.since <= installed) and e.pattern not in flag_table.FLAGS]
    if not later:
        pytest.skip(f"no flag of pgle's table was removed after jax {installed}")
    flag = f"--{later[0]}=true"
    asked = build({**env, "XLA_FLAGS": flag})
    assert [w.split(":")[0] for w in asked.warnings] == [f"could not ask jaxlib about {flag}"]
