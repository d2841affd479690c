"""Redaction on generated secrets in every position (issue 37): at the start of a text, after
`=`, as `--password x` (spaced) at the start and inside a command line, as DB_PASSWORD-style
environment names, in a URL's password, in argv lists, environments and JSON. The secret's
value never survives; its name always does; text without a secret comes back unchanged."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgle.redact import REDACTED, redact_args, redact_json, redact_text

# Values: a marker no other part of the text holds, then characters a shell word may hold.
values = st.text(string.ascii_letters + string.digits + "_+/.:@%~^!*&$#", min_size=1,
                 max_size=24).map(lambda s: "Zq9" + s)
env_words = st.sampled_from(["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
                             "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE"])
env_names = st.builds(lambda a, w, b: a + w + b,
                      st.sampled_from(["", "DB_", "AWS_", "HF_", "MY_APP_", "X"]), env_words,
                      st.sampled_from(["", "_FILE", "_ID", "S", "_2"]))
option_names = st.sampled_from([
    "password", "passwd", "pass", "pwd", "token", "hf_token", "hf-token", "api-key", "api_key",
    "apikey", "secret", "client-secret", "auth", "auth-token", "cookie", "credentials",
    "private_key", "access_key", "key", "db.password", "wandb.api_key",
])
dashes = st.sampled_from(["--", "-"])
words = st.lists(st.sampled_from(["python", "train.py", "--steps", "10", "--out", "/tmp/o",
                                  "--keep", "3", "-v", "x=1", "--lr=0.1"]), max_size=4)
separators = st.sampled_from([" ", "  ", "\t", "\n"])


def _place(before: list[str], secret: str, after: list[str], sep: str) -> str:
    return sep.join([*before, secret, *after])


@given(words, env_names, values, words, separators)
def test_environment_style_assignments_anywhere(before, name, value, after, sep):
    text = _place(before, f"{name}={value}", after, sep)
    out = redact_text(text)
    assert value not in out and f"{name}={REDACTED}" in out, (text, out)


@given(words, dashes, option_names, values, words, separators)
def test_options_with_equals_anywhere(before, dash, name, value, after, sep):
    text = _place(before, f"{dash}{name}={value}", after, sep)
    out = redact_text(text)
    assert value not in out and f"{dash}{name}={REDACTED}" in out, (text, out)


@given(words, dashes, option_names, st.sampled_from(["", "-"]).flatmap(
    lambda lead: values.map(lambda v: lead + v)), words,
       st.sampled_from([" ", "  "]))
def test_spaced_options_anywhere_including_the_start_of_the_text(before, dash, name, value,
                                                                  after, sep):
    text = _place(before, f"{dash}{name} {value}", after, sep)
    out = redact_text(text)
    assert value not in out and f"{dash}{name} {REDACTED}" in out, (text, out)


@given(words.filter(bool), dashes, option_names, values, st.sampled_from(["\t", "\n"]))
def test_spaced_options_after_a_tab_or_newline(before, dash, name, value, sep):
    text = sep.join([*before, f"{dash}{name} {value}"])
    out = redact_text(text)
    assert value not in out, (text, out)


@given(dashes, option_names, values)
def test_a_text_that_is_only_a_spaced_secret_option(dash, name, value):
    assert redact_text(f"{dash}{name} {value}") == f"{dash}{name} {REDACTED}"


@given(st.sampled_from(["https", "http", "postgres", "redis", "s3+http"]),
       st.text(string.ascii_lowercase, min_size=1, max_size=8), values.filter(lambda v: "@" not in v
       and "/" not in v), words)
def test_url_passwords(scheme, user, pw, after):
    text = " ".join([f"{scheme}://{user}:{pw}@host.example:5432/db", *after])
    out = redact_text(text)
    assert pw not in out and f"{scheme}://{user}:{REDACTED}@host" in out


@given(words, dashes, option_names, st.sampled_from(["", "-"]).flatmap(
    lambda lead: values.map(lambda v: lead + v)), words)
def test_argv_lists_hide_the_value_after_a_secret_option(before, dash, name, value, after):
    """The value may start with one `-` (`--password -s3cr3t`: click takes it as the value)."""
    argv = [*before, f"{dash}{name}", value, *after]
    out = redact_args(argv)
    assert value not in " ".join(out)
    assert out[len(before)] == f"{dash}{name}" and out[len(before) + 1] == REDACTED
    assert out[: len(before)] == redact_args(before)
    assert out[len(before) + 2 :] == redact_args(after)  # only the one value is hidden


@given(st.dictionaries(env_names, values, min_size=1, max_size=4),
       st.dictionaries(st.sampled_from(["PATH", "HOME", "XLA_FLAGS", "JAX_PLATFORMS", "USER"]),
                       st.text(string.ascii_letters + "/:", max_size=10), max_size=3))
def test_environments_and_json_hide_secret_variables(secrets, plain):
    env = {**plain, **secrets}
    out = redact_json(env)
    assert all(out[k] == REDACTED for k in secrets) and all(out[k] == v for k, v in plain.items())
    doc = redact_json({"env": env, "argv": ["python", "t.py"], "n": 3})
    assert all(doc["env"][k] == REDACTED for k in secrets)
    assert all(v not in str(doc) for v in secrets.values())


@given(st.lists(st.sampled_from(["--keep", "3", "--monkey-patch", "x", "train.py", "--steps=5",
                                 "/data/key=3/p.pb", "--xla_gpu_pgle_profile_file_or_directory_path=/k",
                                 "--keyboard", "layout", "-n", "4", "JAX_PLATFORMS=cpu"]), max_size=6),
       separators)
def test_text_without_a_secret_comes_back_unchanged(parts, sep):
    text = sep.join(parts)
    assert redact_text(text) == text
    assert redact_args(parts) == parts


@given(dashes, option_names, values, st.sampled_from(["train.py", "--steps", "10", "x=1"]))
def test_an_option_and_its_value_in_one_argument_hide_only_that_value(dash, name, value, after):
    assert redact_args([f"{dash}{name} {value}", after]) == [f"{dash}{name} {REDACTED}", after]
