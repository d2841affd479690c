"""Secrets are never written (issue 20): a key in the environment and a token and a password on
the workload's command line reach the workload untouched, yet no file pgle writes (manifests,
spec.json, events, reports, run folders, the store), nor its stdout or stderr, holds them.

Real collect, run and tune of a real JAX workload on CPU; then `grep -r` of everything."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from helpers.pgle_testing import pgle_env, run_pgle, write_profile

ENV_SECRET = "nvapi-planted-ENV-7f3a9c"  # NVIDIA_API_KEY
TOKEN = "hf_planted-TOKEN-51d2e8"  # --token=...
PASSWORD = "planted-PASSWORD-0b6c4d"  # --password ...
WORKLOAD_ARGS = ("--", "--token=" + TOKEN, "--password", PASSWORD, "--steps", "4")

# The workload checks that it got the real arguments (by their hashes: the script itself must not
# hold the secrets either) and prints nothing of them.
WORKLOAD = """
import hashlib, sys
import jax, jax.numpy as jnp
expected = {expected!r}
got = [hashlib.sha256(a.encode()).hexdigest() for a in sys.argv[1:]]
if got != expected:
    sys.exit(7)
f = jax.jit(lambda x: jnp.sin(x) @ x.T)
x = jnp.ones((16, 16))
for i in range(4):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = f(x)
x.block_until_ready()
print("arguments received", flush=True)
"""


def test_planted_secrets_are_nowhere_pgle_wrote(project):
    expected = [hashlib.sha256(a.encode()).hexdigest() for a in WORKLOAD_ARGS[1:]]
    script = project / "train.py"
    script.write_text(WORKLOAD.format(expected=expected))
    env = pgle_env(NVIDIA_API_KEY=ENV_SECRET, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    store = project / "store"
    write_profile(project / "given.pb", {"fusion.1": 1.0})  # collect on CPU gives an empty one
    commands = [
        ["collect", "--steps", "1:2", "--allow-empty", "-o", "p.pb", "--report", "collect.json",
         "--json", str(script), *WORKLOAD_ARGS],
        ["collect", "--steps", "1:2", "--per-module", "--allow-empty", "-o", "per-module",
         "--report", "per-module.json", str(script), *WORKLOAD_ARGS],
        ["run", "--profile", "given.pb", "--report", "run.json", "--json", "--log", "copy.log",
         str(script), *WORKLOAD_ARGS],
        ["tune", "--steps", "1:2", "--repeat", "1", "--report", "tune.json", "--json",
         str(script), *WORKLOAD_ARGS],
        ["store", "add", str(store), str(Path(__file__).parents[1] / "data" / "nsys" /
                                         "pgle_costs_reference"),
         "--device-kind", "cpu", "--source", f"nightly --token={TOKEN}"],
    ]
    printed = []
    for argv in commands:
        proc = run_pgle(*argv, cwd=project, env=env, timeout=600)
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()
        assert proc.returncode in (0, 1), (argv, proc.stderr.decode())
        printed.append(proc.stdout + proc.stderr)
        if argv[0] != "store":
            assert b"arguments received" in proc.stdout + proc.stderr, proc.stderr.decode()
    written = [p for p in project.rglob("*") if p.is_file() and p != script]
    assert any(p.name == "p.pb.manifest.json" for p in written)
    assert any(p.name == "spec.json" for p in written) and any(p.name == "events.jsonl" for p in written)
    for secret in (ENV_SECRET, TOKEN, PASSWORD):
        grep = subprocess.run(["grep", "-r", "-l", "--", secret, str(project)], capture_output=True)
        assert grep.returncode == 1 and grep.stdout == b"", grep.stdout.decode()
        assert not [out for out in printed if secret.encode() in out]
    # The names stay, so a record still says they were set.
    manifest = (project / "p.pb.manifest.json").read_text()
    assert '"NVIDIA_API_KEY": "<redacted>"' in manifest and '"--token=<redacted>"' in manifest
