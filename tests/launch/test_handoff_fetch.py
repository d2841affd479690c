"""`--gather kv`'s fetch inside the held workload (pgle.launch.handoff._fetch), on a real
jax.distributed service of one process: it waits for a key in slices, so that Ctrl-C stops it
at once rather than after the whole gather timeout (issue 37: one blocking get of 30 s held
a Ctrl-C'd rank that long), and a key that never comes is one error naming the whole wait."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

from helpers.pgle_testing import REPO, pgle_env, pythonpath

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
    began = time.monotonic()
    try:  # a wait shorter than a slice: its last slice is what is left, not a whole one
        handoff._fetch(client, "never", began + 0.1)
    except TimeoutError:
        print("short", time.monotonic() - began, flush=True)
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
                            env=pgle_env(PYTHONPATH=pythonpath(str(REPO))), stdout=subprocess.PIPE,
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
        # 0.1 s and a loaded machine's delay, not a slice of FETCH_SLICE_S (0.5 s)
        assert lines[2].startswith("short ") and 0.1 <= float(lines[2].split()[1]) < 0.45, lines
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


HELD = textwrap.dedent("""
    import json, os, socket, sys, threading, time
    import jax
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                               process_id=0)
    from pgle.launch import handoff
    home, timeout_s = sys.argv[1], float(sys.argv[2])
    folder = os.path.join(home, "handoff")
    os.makedirs(folder)  # pgle may make it before the rank holds
    value = os.path.join(home, "value.bin")
    with open(value, "wb") as f:
        f.write(b"rank 0's report")

    def pgle():  # this rank's pgle: two rounds, each asked well inside timeout_s of the last
        for n, final in ((0, False), (1, True)):
            time.sleep(timeout_s * 0.6)
            request = {"publish": {f"k{n}": value} if n == 0 else {},
                       "fetch": [{"key": "k0", "to": os.path.join(home, f"got-{n}")}],
                       "timeout_s": 30, "final": final}
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, "tmp")
            with open(tmp, "w") as f:
                json.dump(request, f)
            os.replace(tmp, os.path.join(folder, f"request-{n}.json"))
            answer = os.path.join(folder, f"answer-{n}.json")
            while not os.path.exists(answer):
                time.sleep(0.01)

    threading.Thread(target=pgle, daemon=True).start()
    written = []
    began = time.monotonic()
    held = handoff.hold(home, lambda kind, **f: written.append([kind, f]), lambda: None,
                        timeout_s)
    took = time.monotonic() - began
    answers = [json.load(open(os.path.join(folder, f"answer-{n}.json"))) for n in (0, 1)]
    print(json.dumps({"held": held, "written": written, "answers": answers, "took": took}))
""")


def test_a_held_rank_serves_each_round_and_goes_on_after_the_final_one(tmp_path):
    """handoff.hold on a real jax.distributed service of one process: each round's wait
    counts from the last answer (two rounds, each asked 0.6 of the timeout after the last, end
    to end longer than one timeout), a fetched key is answered with where it was written, and
    the final round releases the rank at once (not after another timeout)."""
    script = tmp_path / "held.py"
    script.write_text(HELD)
    home = tmp_path / "rank"  # not the rank's working directory
    home.mkdir()
    timeout_s = 5.0
    proc = subprocess.run([sys.executable, str(script), str(home), str(timeout_s)],
                          cwd=tmp_path, env=pgle_env(PYTHONPATH=pythonpath(str(REPO))),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["held"] is True
    assert [w[0] for w in out["written"]] == ["hold", "released"], out["written"]
    assert out["written"][0][1] == {"process_index": 0, "process_count": 1,
                                    "dir": str(home / "handoff")}, out["written"]
    assert out["written"][-1][1]["error"] is None, out["written"]
    for n, answer in enumerate(out["answers"]):
        got = str(home / f"got-{n}")
        assert answer == {"fetched": {"k0": got}, "errors": []}, answer
        assert (home / f"got-{n}").read_bytes() == b"rank 0's report"
    # released as the final answer was written: 2 x 0.6 of the timeout, not one more timeout
    assert out["took"] < 2 * timeout_s, out["took"]


GONE = textwrap.dedent("""
    import os, socket, time
    import jax
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                               process_id=0)
    from pgle.launch import handoff, jax_internals
    client = jax_internals.kv_client()[0]
    client.shutdown()  # the store is gone: every get fails at once
    try:
        handoff._fetch(client, "k0", time.monotonic() + 20)
    except Exception as e:
        print(type(e).__name__, str(e).splitlines()[0], flush=True)
    os._exit(0)  # jax's own exit would shut the client down again
""")


def test_a_get_that_fails_at_once_is_the_answer_not_a_wait(tmp_path):
    """A get that fails without waiting (the store gone: jax 0.10.2 says CANCELLED at once) is
    the fetch's error, not a slice that ran out: the fetch does not wait out the request's
    timeout to end in a TimeoutError that hides why."""
    script = tmp_path / "gone.py"
    script.write_text(GONE)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                          env=pgle_env(PYTHONPATH=pythonpath(str(REPO))), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("JaxRuntimeError CANCELLED"), (proc.stdout, proc.stderr[-2000:])
