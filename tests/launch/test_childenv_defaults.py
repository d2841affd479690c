"""The child's environment: what pgle must set replaces the user's value with a notice; what it
only suggests (`defaults`: `pgle nsys` replaying the prewarm's JAX variables) never overrides
the user's own setting (issue 37's independent mutants)."""

from __future__ import annotations

from pgle.launch.childenv import build


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
