"""Issue 31: the forms of secrets redaction used to miss, and the harness's events.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pgle.redact import REDACTED, redact_args, redact_json, redact_text


@pytest.mark.parametrize("text, secret", [
    ("s3://AKIAIOSFODNN7:wJal/rXUtn+FEMI@host/bucket", "wJal/rXUtn+FEMI"),
    ("fetch https://user:a/b@example.com/x now", "a/b"),
    ("Authorization: Bearer xyz.abc", "xyz.abc"),
    ('curl -H "Authorization: Basic dXNlcjpw" http://h', "dXNlcjpw"),
    # A header alone: no `=`, no option, no URL, only its `:` tells the fast path to look.
    ("Authorization: Basic dXNlcjpw", "dXNlcjpw"),
    ("Proxy-Authorization: Token q9w8e7", "q9w8e7"),
    ("token is Bearer q1w2e3", "q1w2e3"),
    ("--password hunter2", "hunter2"),
    ("first line\n--token t0k3n", "t0k3n"),
    ("DB_PASSWORD=s3cr3t", "s3cr3t"),
    # Dotted option names (Hydra/OmegaConf overrides, `--db.pass`): `.` splits words too.
    ("--db.pass hunter3", "hunter3"),
    ("train db.pwd=hunter4", "hunter4"),
])
def test_each_form_is_redacted(text, secret):
    out = redact_text(text)
    assert secret not in out and REDACTED in out


def test_plain_text_is_left_alone():
    for text in ("http://host:8080/path", "gs://bucket/a.pb", "time: 12:30", "/data/key=3/p.pb"):
        assert redact_text(text) == text


def test_argv_and_env_names():
    assert redact_args(["w.py", "--password", "p", "--token=t"]) == \
        ["w.py", "--password", REDACTED, f"--token={REDACTED}"]
    assert redact_json({"MY_DB_PASSWORD": "x", "env": {"HF_TOKEN": "y"}}) == \
        {"MY_DB_PASSWORD": REDACTED, "env": {"HF_TOKEN": REDACTED}}


def test_the_harness_writes_no_raw_argv_to_events(tmp_path):
    """The harness's Events.write (events.jsonl) redacts each record: `-- COMMAND --token x`."""
    code = (
        "import sys\n"
        "from pgle.launch.harness import Events\n"
        "e = Events(sys.argv[1])\n"
        "e.write('start', argv=['train.py', '--token', 'T0PSECRET', '--url', "
        "'s3://AK:se/cr+et@h/b'])\n"
        "e.flush()\n"
    )
    path = tmp_path / "events.jsonl"
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=60, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert "T0PSECRET" not in text and "se/cr+et" not in text
    assert json.loads(text.splitlines()[0])["argv"][2] == REDACTED
