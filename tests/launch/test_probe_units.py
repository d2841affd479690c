"""What jax sees, from a short child process (pgle.launch.probe), called in process on this
machine's real jax (CPU): the backend `pgle doctor` shows and `--store` picks its view by, the
CUPTI probe's answer on a host without a GPU, and a child that dies or prints nothing said in
one line (issue 37: only `pgle doctor` subprocesses reached it)."""

from __future__ import annotations

import os
import subprocess
import sys

import jax

from pgle.launch import probe


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "PGLE_"))}
    return env | {"JAX_PLATFORMS": "cpu"} | extra


def test_the_backend_of_this_machine():
    info = probe.backend_info(_env(XLA_FLAGS="--xla_no_such_flag_pgle=1"))  # flags are dropped
    assert info["platform"] == "cpu" and info["kinds"] == ["cpu"] and info["count"] >= 1
    assert info["jax"] == jax.__version__
    assert "error" not in info


def test_a_backend_that_fails_is_its_error_line():
    info = probe.backend_info(_env(JAX_PLATFORMS="nosuchplatform_pgle"))
    assert set(info) == {"error"} and info["error"].startswith("RuntimeError: ")
    assert "nosuchplatform_pgle" in info["error"] and len(info["error"]) <= 300


def test_the_cupti_probe_on_a_host_without_a_gpu():
    info = probe.cupti_trace(_env(JAX_ENABLE_PGLE="true"))
    assert info == {"platform": "cpu", "cupti_lines": []}


def test_a_child_that_dies_or_says_nothing_is_one_line():
    died = subprocess.CompletedProcess([], 3, stdout="noise\n", stderr="a\nlast words\n\n")
    assert probe._result(died, "MARK", "the jax process") == {
        "error": "the jax process died (exit code 3): last words"}
    silent = subprocess.CompletedProcess([], -9, stdout="", stderr="")
    assert probe._result(silent, "MARK", "the tracing process") == {
        "error": "the tracing process died (exit code -9): no output"}
    long = subprocess.CompletedProcess([], 1, stdout="", stderr="x" * 500)
    assert probe._result(long, "MARK", "who")["error"] == "who died (exit code 1): " + "x" * 300
    said = subprocess.CompletedProcess([], 0, stdout='junk\nMARK {"a": 1}\n', stderr="")
    assert probe._result(said, "MARK", "who") == {"a": 1}


def test_the_child_gets_no_xla_flags_and_no_preallocation(monkeypatch):
    seen = {}

    def run_child(code, env, timeout):
        seen.update(env=env, timeout=timeout)
        return subprocess.run([sys.executable, "-c", "print('x')"], capture_output=True,
                              text=True)

    monkeypatch.setattr(probe.flag_probe, "run_child", run_child)
    out = probe.backend_info({"XLA_FLAGS": "--a=1", "B": "2"})
    assert seen == {"env": {"B": "2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                    "timeout": probe.BACKEND_TIMEOUT_S}
    assert out == {"error": "the jax process died (exit code 0): no output"}
    monkeypatch.setattr(probe.flag_probe, "run_child", lambda code, env, timeout: None)
    assert probe.backend_info({}) == {"error": "jax did not list its devices within 30 s"}
    assert probe.cupti_trace({}) == {
        "error": "the one-second trace did not finish within 120 s"}


def test_the_cupti_probe_keeps_five_cupti_lines_and_drops_auto_pgle(monkeypatch):
    seen = {}
    stderr = "\n".join(["noise"] + [f"E CUPTI_ERROR_{i} " + "x" * 400 for i in range(7)]
                       + ["a cupti line", "last words"])

    def run_child(code, env, timeout):
        seen.update(env=env, timeout=timeout)
        return subprocess.CompletedProcess([], 1, stdout="", stderr=stderr)

    monkeypatch.setattr(probe.flag_probe, "run_child", run_child)
    out = probe.cupti_trace({"JAX_ENABLE_PGLE": "true", "XLA_FLAGS": "--a", "B": "1"})
    assert seen == {"env": {"B": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                    "timeout": probe.CUPTI_TIMEOUT_S}
    assert out["error"] == "the tracing process died (exit code 1): last words"
    assert out["cupti_lines"] == [(f"E CUPTI_ERROR_{i} " + "x" * 400)[:300] for i in range(5)]
