"""`pgle view`: XProf serves a real CPU trace on 127.0.0.1; we fetch the run list, then stop it."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO, pgle_env, pgle_lines, run_pgle
from helpers.processes import start_pgle
from pgle.commands import view
from pgle.errors import BadInput, PgleError

pytest.importorskip("xprof")

TRACE = """
import sys, jax, jax.numpy as jnp
f = jax.jit(lambda x: (x @ x).sum())
x = jnp.ones((64, 64)); f(x).block_until_ready()
jax.profiler.start_trace(sys.argv[1])
f(x).block_until_ready()
jax.profiler.stop_trace()
"""


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A run folder as `pgle collect` keeps it: <run>/trace/plugins/profile/<stamp>/*.xplane.pb."""
    run = tmp_path_factory.mktemp("run ü")
    subprocess.run([sys.executable, "-c", TRACE, str(run / "trace")], check=True, timeout=120,
                   env=pgle_env(), capture_output=True)
    return run


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on `port` (Linux /proc/net/tcp{,6})."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw))
    assert found, f"nothing listens on port {port}"
    return found


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return json.loads(body)


def test_serves_the_run_list_on_localhost_then_stops(run_folder):
    server = view.start(run_folder, port=0)
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.port > 0
        assert server.logdir == (run_folder / "trace").resolve()
        stamps = [p.name for p in (run_folder / "trace" / "plugins" / "profile").iterdir()]
        assert get_json(server.url + "data/plugin/profile/runs") == stamps
        # Bound to loopback only: the kernel's own table of listening sockets says
        # which address the port is bound to (whatever the hostname resolves to).
        assert listening_addresses(server.port) == {"127.0.0.1"}
    finally:
        server.stop()
    assert server.process.poll() is not None and not os.path.exists(server.log_path)


def test_a_trace_folder_itself_and_a_busy_port(run_folder):
    first = view.start(run_folder / "trace", port=0)
    try:
        assert first.logdir == (run_folder / "trace").resolve()
        with pytest.raises(PgleError, match="in use") as e:
            view.start(run_folder, port=first.port)
        assert "--port" in str(e.value)
    finally:
        first.stop()


def test_folders_without_a_trace_are_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        view.find_logdir(tmp_path / "nope")
    (tmp_path / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00").mkdir(parents=True)
    with pytest.raises(BadInput, match="holds no kept trace"):
        view.find_logdir(tmp_path)


def test_cli_prints_the_url_and_stops_on_ctrl_c(run_folder, tmp_path):
    # With SIGINT's default disposition whatever the test runner inherited (`pytest &`).
    proc = start_pgle("view", str(run_folder), "--port", "0", "--json", cwd=tmp_path,
                      env=pgle_env(), text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith("pgle: XProf serves ") and "(Ctrl+C to stop)" in line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert get_json(url + "data/plugin/profile/runs")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and json.loads(out)["url"] == url


def test_missing_xprof_is_one_line_with_the_install_command(run_folder, tmp_path):
    # A stand-in `xprof` that cannot be imported, ahead of the real one on PYTHONPATH.
    (tmp_path / "site" / "xprof").mkdir(parents=True)
    (tmp_path / "site" / "xprof" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'xprof'\")\n")
    env = pgle_env(PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO)]))
    start = time.monotonic()
    proc = run_pgle("view", str(run_folder), "--port", "0", cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 1 and time.monotonic() - start < 60
    [line] = pgle_lines(proc)
    assert "pip install 'pgle[xprof]'" in line and "Traceback" not in proc.stderr.decode()
