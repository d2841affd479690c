"""`--gather kv`'s fetch inside the held workload (pgle.launch.handoff._fetch), on a real
jax.distributed service of one process: it waits for a key in slices, so that Ctrl-C stops it
at once rather than after the whole gather timeout (issue 37: one blocking get of 30 s held
a Ctrl-C'd rank that long), and a key that never comes is one error naming the whole wait."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

from helpers.pgle_testing import REPO, pgle_env

from helpers.signals import IN_PROCESS

pytestmark = IN_PROCESS


SCRIPT = textwrap.dedent("""
    import socket, sys, time
    import jax
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                               process_id=0)
    from pgle.launch import handoff, jax_internals
    client = jax_internals.kv_client()[0]
    client.key_value_set_bytes("there", b"value")
    print("got", bytes(handoff._fetch(client, "there", time.monotonic() + 30)).decode(), flush=True)
    try:
        handoff._fetch(client, "never", time.monotonic() + 2)
    except TimeoutError as e:
        print("timeout", e, flush=True)
    print("waiting", flush=True)
    try:
        handoff._fetch(client, "never", time.monotonic() + 300)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def test_a_fetch_waits_in_slices_that_ctrl_c_interrupts(tmp_path):
    script = tmp_path / "fetch.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path,
                            env=pgle_env(PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("waiting"):
                break
        assert lines[:1] == ["got value"], (lines, proc.stderr.read() if proc.poll() else "")
        # The whole 2 s wait in one error, not jax's message about its last slice.
        assert lines[1] == "timeout not in jax.distributed's key-value store within 2 s", lines
        time.sleep(1.0)  # inside the 300 s fetch
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "interrupted" in out, err[-3000:]
    # A slice is FETCH_SLICE_S (0.5 s): the interrupt lands within one, plus a loaded
    # machine's delay; the whole fetch would take 300 s.
    assert took < 60, took
