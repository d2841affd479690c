"""pgle.redact's rules, one exact output each (issue 37: mutmut's survivors in pgle/redact.py).

The property tests (tests/properties/test_redact_props.py) check that generated secrets never
survive; these pin what each rule leaves: the header and scheme kept, the name kept, what is
not a secret left alone, and the fast path that skips the regexes on text with no trigger.
"""

from __future__ import annotations

import pytest

from pgle.redact import REDACTED, redact_args, redact_json, redact_text, secret_option

R = REDACTED


@pytest.mark.parametrize(
    "text, expected",
    [
        # HTTP credentials: the header's name and scheme stay, the credential goes. A text whose
        # only trigger is ":" (Basic) or "earer" (Bearer) must not take the fast path.
        ("Authorization: Basic dXNlcjpwdw==", f"Authorization: Basic {R}"),
        ("authorization=Token t0k3n", f"authorization=Token {R}"),
        ("Proxy-Authorization: Digest abc", f"Proxy-Authorization: Digest {R}"),
        ("Authorization: Bearer abc.def", f"Authorization: Bearer {R}"),
        ("Bearer abc.def-ghi", f"Bearer {R}"),
        ("curl -H 'bearer xyz' host", f"curl -H 'bearer {R}' host"),
        # a URL's password, to its @
        ("s3://AKIAX:abc/def+ghi@bucket/p", f"s3://AKIAX:{R}@bucket/p"),
        # nothing to hide: returned as is, whichever path reads it
        ("plain words and /data/key=3/p.pb", "plain words and /data/key=3/p.pb"),
        ("step 5: loss 0.25", "step 5: loss 0.25"),
        ("", ""),
    ],
)
def test_redact_text_exactly(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "name, secret",
    [
        ("--token", True),
        ("--api-key", True),
        ("HF_TOKEN", True),
        ("MONKEY", True),  # an environment variable's name: KEY anywhere in it
        # options match whole words (or a few parts), whatever their case
        ("--MONKEY", False),
        ("--XKEY", False),
        ("--keep", False),
        ("--monkey-patch", False),
        # XLA's flags are never secrets, though their words may be (pass, auth, key)
        ("--xla_dump_hlo_pass_re", False),
        ("--XLA_dump_hlo_pass_re", False),
        ("xla_gpu_auth_key", False),
        ("-", False),
    ],
)
def test_secret_option(name, secret):
    assert secret_option(name) is secret


def test_redact_args_hides_the_value_after_a_secret_option_only():
    assert redact_args(["--token", "abc", "train.py"]) == ["--token", R, "train.py"]
    # a value given with `=` is its own: the next argument is not hidden
    assert redact_args(["--token=abc", "train.py"]) == [f"--token={R}", "train.py"]
    # a long option (or the `--` that ends the options) after a secret option is not its value
    assert redact_args(["--password", "--verbose", "x"]) == ["--password", "--verbose", "x"]
    assert redact_args(["--token", "--", "x"]) == ["--token", "--", "x"]
    # one leading `-` can be the value itself (click takes `--password -s3cr3t` so)
    assert redact_args(["--password", "-s3cr3t", "x"]) == ["--password", R, "x"]
    assert redact_text("run --password -s3cr3t x") == f"run --password {R} x"
    assert redact_text("run --password --verbose x") == "run --password --verbose x"
    assert redact_args(["--keep", "x"]) == ["--keep", "x"]


def test_redact_json_keeps_what_is_not_secret_and_walks_mixed_lists():
    assert redact_json("plain") == "plain"
    assert redact_json({"PATH": "/usr/bin", "HF_TOKEN": "s", "n": 3}) == {
        "PATH": "/usr/bin", "HF_TOKEN": R, "n": 3}
    # a list of strings is a command line; any other list is walked item by item
    assert redact_json(["--token", "abc"]) == ["--token", R]
    assert redact_json([1, {"A_SECRET": "s"}, "--token=x"]) == [1, {"A_SECRET": R}, f"--token={R}"]
    assert redact_json([]) == []
