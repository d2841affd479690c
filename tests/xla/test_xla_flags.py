"""pgle.xla.flags reads XLA_FLAGS exactly as XLA does (tsl parse_flags_from_env.cc).

The parsing cases are checked against the real jaxlib too: XLA's device count
on CPU shows which value of --xla_force_host_platform_device_count it read.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pgle.xla import flag_table
from pgle.errors import FlagError
from pgle.xla.flags import Flag, XlaFlags, lint, render_flag

COUNT = flag_table.HOST_DEVICE_COUNT


def parse(text):
    p = XlaFlags.parse(text)
    return [(f.name, f.value) for f in p.flags], p.ignored_tail


@pytest.mark.parametrize("text, flags, tail", [
    ("", [], ""),
    ("--a=1 --b", [("a", "1"), ("b", None)], ""),
    ("  \t--a=1\n\n--b=2  ", [("a", "1"), ("b", "2")], ""),
    ('--a="x y" --b=\'p q\'', [("a", "x y"), ("b", "p q")], ""),
    ("--a='' --b=\"\"", [("a", ""), ("b", "")], ""),
    ("--a=", [("a", "")], ""),
    # Backslash escapes only inside double quotes.
    ('--a="q\\"t\\\\" --b=\'x\\y\'', [("a", 'q"t\\'), ("b", "x\\y")], ""),
    # Quotes in the middle of an unquoted value are literal, up to whitespace.
    ("--a=x'y --b", [("a", "x'y"), ("b", None)], ""),
    # An unclosed quote runs to the end.
    ('--a="x y', [("a", "x y")], ""),
    # A closing quote followed by more text: XLA stops at that text.
    ('--a="x"y --b=1', [("a", "x")], "y --b=1"),
    ('--a="x"--b=1', [("a", "x"), ("b", "1")], ""),
    # Parsing silently stops at the first token that does not start with '-'.
    ("--a=1 oops --b=2", [("a", "1")], "oops --b=2"),
    # Single dashes are parsed (and later rejected by XLA as unknown).
    ("-a=1 ---b", [("a", "1"), ("b", None)], ""),
    ("--xla_dump_to=/tmp/ü x", [("xla_dump_to", "/tmp/ü")], "x"),
])
def test_parse_like_xla(text, flags, tail):
    assert parse(text) == (flags, tail)


def test_raw_text_is_kept():
    p = XlaFlags.parse("--a='x y'   --b=1")
    assert [f.raw for f in p.flags] == ["--a='x y'", "--b=1"]


def test_last_occurrence_wins():
    p = XlaFlags.parse("--a=1 --b --a=2")
    assert p.value("a") == "2" and p.value("b") == "true" and p.value("c", "d") == "d"


def test_file_valued_xla_flags(tmp_path):
    f = tmp_path / "flags ü.txt"
    f.write_text("--a=1\n--b='x y'\n", encoding="utf-8")
    p = XlaFlags.parse(str(f))
    assert [(x.name, x.value) for x in p.flags] == [("a", "1"), ("b", "x y")]
    assert p.source_file == str(f)


def test_file_content_is_flags_never_another_file_name(tmp_path):
    # XLA parses the file's text as flags; text that is not a flag is ignored.
    f = tmp_path / "flags"
    f.write_text("other-file-name --a=1", encoding="utf-8")
    p = XlaFlags.parse(str(f))
    assert p.flags == [] and p.ignored_tail == "other-file-name --a=1"


@pytest.mark.parametrize("text", ["/nonexistent/flags", "   ", "xla_dump_to=/tmp"])
def test_unreadable_file_is_one_clear_error(text):
    with pytest.raises(FlagError, match="reads it as a file of flags") as e:
        XlaFlags.parse(text)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)


@pytest.mark.parametrize("value", [None, "", "plain", "a b", "it's", 'say "hi"', "back\\slash x",
                                   "ü ñ", "tab\there"])
def test_render_round_trip(value):
    rendered = render_flag("xla_x", value)
    assert parse(rendered) == ([("xla_x", value)], "")


def test_render_whole_string_round_trips_with_tail():
    text = "--a='x y' --b=\"q\\\"\" --c tail --d=1"
    p = XlaFlags.parse(text)
    again = XlaFlags.parse(p.render())
    assert again.flags == p.flags and again.ignored_tail == p.ignored_tail == "tail --d=1"


def test_merge_keeps_user_order_and_text_and_appends():
    user = XlaFlags.parse("--xla_dump_to='/tmp/a b'  --xla_gpu_autotune_level=2")
    merged, notices = user.merged({flag_table.PGLE_PROFILE_PATH: "/p/profile.pb",
                                   flag_table.COMMAND_BUFFER: ""})
    assert merged.render() == ("--xla_dump_to='/tmp/a b' --xla_gpu_autotune_level=2 "
                               f"--{flag_table.PGLE_PROFILE_PATH}=/p/profile.pb "
                               f"--{flag_table.COMMAND_BUFFER}=''")
    assert notices == []
    assert user.render() == "--xla_dump_to='/tmp/a b' --xla_gpu_autotune_level=2"  # unchanged


def test_merge_replaces_conflicts_in_place_with_a_notice():
    user = XlaFlags.parse(f"--{flag_table.LHS}=false --x=1 --{flag_table.LHS}=false tail")
    merged, notices = user.merged({flag_table.LHS: "true", "x": "1"})
    assert [f.raw for f in merged.flags] == [f"--{flag_table.LHS}=true", "--x=1",
                                             f"--{flag_table.LHS}=true"]
    assert merged.ignored_tail == "tail" and merged.render().endswith(" tail")
    assert notices == [f"replacing your --{flag_table.LHS}=false with --{flag_table.LHS}=true"] * 2


def test_without_drops_names():
    p = XlaFlags.parse("--a=1 --b=2 --a=3").without({"a"})
    assert p.render() == "--b=2"


def test_flag_make_is_canonical():
    assert Flag.make("n", "") == Flag("n", "", "--n=''")


@pytest.mark.parametrize("entry", flag_table.REMOVED_FLAGS, ids=lambda e: e.pattern)
def test_lint_names_the_replacement_for_each_removed_flag(entry):
    name = entry.pattern.replace("*", "all_reduce")
    flags = XlaFlags.parse(f"--xla_dump_to=/tmp --{name}=true")
    with pytest.raises(FlagError) as e:
        lint(flags, None)
    message = str(e.value)
    assert f"--{name}" in message and entry.replacement in message
    assert ".".join(map(str, entry.removed_in)) in message and e.value.exit_code == 2
    # The same flag is fine on a jax that still had it.
    older = tuple(entry.removed_in[:-1]) + (entry.removed_in[-1] - 1,)
    warnings = lint(flags, older)
    if name == flag_table.OLD_ACCURACY_CHECKER:
        # Strict only: seen failing compiles on the real jax 0.4.34 compiler (lane fixtures).
        assert len(warnings) == 1 and "strict" in warnings[0]
    else:
        assert warnings == []


@pytest.mark.parametrize("jax", [(0, 4, 34), (0, 4, 35)])
def test_lint_fails_on_the_checker_flag_before_it_existed(jax):
    # jax 0.4.34 aborts on it: `Unknown flags in XLA_FLAGS: --xla_gpu_pgle_accuracy_checker=...`
    # (tests/data/xla_gpu/0.4.34/unknown-checker-flag.log).
    flags = XlaFlags.parse(f"--{flag_table.ACCURACY_CHECKER}=PGLE_STRICTNESS_LEVEL_WARN")
    with pytest.raises(FlagError) as e:
        lint(flags, jax)
    assert "does not know" in str(e.value) and "0.4.36" in str(e.value)
    assert flag_table.OLD_ACCURACY_CHECKER in str(e.value) and e.value.exit_code == 2
    assert lint(flags, (0, 4, 36)) == [] and lint(flags, None) == []


def test_lint_warns_about_an_extension_xla_ignores():
    flags = XlaFlags.parse(f"--{flag_table.PGLE_PROFILE_PATH}=/p/good.txt")
    (warning,) = lint(flags, (0, 5, 3))
    assert "silently ignores" in warning
    # jax 0.4.x read any extension (lane fixture 0.4.34/wrong-extension.log: applied).
    assert lint(flags, (0, 4, 34)) == []
    assert lint(XlaFlags.parse(f"--{flag_table.PGLE_PROFILE_PATH}=/p/dir"), (0, 8, 3)) == []


def test_lint_warns_about_the_ignored_tail():
    warnings = lint(XlaFlags.parse("--a=1 b --c=2"), None)
    assert len(warnings) == 1 and "'b'" in warnings[0] and "ignored" in warnings[0]


def _xla_device_count(xla_flags: str) -> int:
    code = "import jax; print(jax.device_count())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu",
                               "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])


@pytest.mark.parametrize("text", [
    f"--{COUNT}='3'",
    f"--{COUNT}=2 tail --{COUNT}=5",  # XLA ignores everything after 'tail'
    f"  --{COUNT}=4 --{COUNT}=\"3\"",  # the last one wins
])
def test_real_xla_reads_what_pgle_reads(text):
    assert _xla_device_count(text) == int(XlaFlags.parse(text).value(COUNT))
