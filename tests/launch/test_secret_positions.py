"""Secrets where the first secrets test (tests/launch/test_secrets.py) did not put them (issue
37: both survived it): a `DB_PASSWORD`-style variable (PASSWORD inside the name, not KEY or
TOKEN) in the environment and assigned on the command line (`env DB_PASSWORD=x python ...`),
and `--password x` at the very start of a text (a store entry's `--source`, one argv
element holding option and value), where redaction's fast path once skipped it. Real `pgle run`
and `pgle store add`, then `grep -r` of everything."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from helpers.pgle_testing import pgle_env, run_pgle, write_profile

DB_SECRET = "planted-DBPW-91c2e7"
ARG_SECRET = "planted-ARGPW-3f8a1b"
SOURCE_SECRET = "planted-SRCPW-6d0e4c"
ASSIGNED_SECRET = "planted-ASSIGNEDPW-c41d9a"
ARGS = ("--", f"DB_PASSWORD={ASSIGNED_SECRET}", f"--password {ARG_SECRET}", "--steps", "2")

WORKLOAD = """
import hashlib, os, sys
assert hashlib.sha256(os.environ["DB_PASSWORD"].encode()).hexdigest() == {env!r}
assert [hashlib.sha256(a.encode()).hexdigest() for a in sys.argv[1:]] == {args!r}
print("secrets received", flush=True)
"""


def test_db_password_and_a_leading_password_option_are_written_nowhere(project):
    script = project / "train.py"
    script.write_text(WORKLOAD.format(
        env=hashlib.sha256(DB_SECRET.encode()).hexdigest(),
        args=[hashlib.sha256(a.encode()).hexdigest() for a in ARGS[1:]]))
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    env = pgle_env(DB_PASSWORD=DB_SECRET)
    run = run_pgle("run", "--profile", "p.pb", "--run-dir", "r", "--json", str(script), *ARGS,
                   cwd=project, env=env, timeout=300)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    assert b"secrets received" in run.stdout + run.stderr
    store = run_pgle("store", "add", str(project / "store"),
                     str(Path(__file__).parents[1] / "data" / "nsys" / "pgle_costs_reference"),
                     "--device-kind", "cpu", "--source", f"--password {SOURCE_SECRET} nightly",
                     cwd=project, env=env)
    assert store.returncode == 0, store.stderr.decode()
    for secret in (DB_SECRET, ARG_SECRET, ASSIGNED_SECRET, SOURCE_SECRET):
        grep = subprocess.run(["grep", "-r", "-l", "--", secret, str(project)], capture_output=True)
        assert grep.returncode == 1, grep.stdout.decode()
        assert secret.encode() not in run.stdout + run.stderr + store.stdout + store.stderr
    # The names stay: the record says they were set.
    metas = list((project / "store" / "profiles").rglob("*.json"))
    assert metas and all(json.loads(m.read_text())["source"] == "--password <redacted> nightly"
                         for m in metas)
    spec = (project / "r" / "spec.json").read_text()
    assert "--password <redacted>" in spec and "DB_PASSWORD=<redacted>" in spec
