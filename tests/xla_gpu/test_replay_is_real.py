"""The replay workloads print only real XLA:GPU lines (default test run; no lane venv needed).

tests/workloads/replay_xla_log.py stands in for a GPU run in pgle's end-to-end tests. Each XLA
line it prints must be a line the real compiler printed in the lane (tests/data/xla_gpu/<jax>/),
with only its variable fields changed: same prefix style, severity, source file:line and
wording. Checked here for every scenario, both prefix styles, with the environment pgle gives
a run (INFO log on, VMODULE and thread ids asked for).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.pgle_testing import DATA, WORKLOADS

sys.path.insert(0, str(WORKLOADS))
import real_xla_lines

REPLAY = WORKLOADS / "replay_xla_log.py"
_PREFIX = re.compile(r"^(?:[IWEF]\d{4} [\d:.]+ +\d+ |\d{4}-\d\d-\d\d [\d:.]+: [IWEF] (?: *\d+ )?)")


def _shape(line: str) -> str:
    """A log line with its variable fields (time, thread, path, names, numbers) blanked."""
    m = re.match(r"^([IWEF])\d{4} [\d:.]+ +\d+ (\S+:\d+)\] (.*)$", line) or \
        re.match(r"^\d{4}-\d\d-\d\d [\d:.]+: ([IWEF]) (?: *\d+ )?(\S+:\d+)\] (.*)$", line)
    if m is None:
        return re.sub(r"\d+", "N", line)
    style = "absl" if line[1:5].isdigit() and line[5] == " " else "tsl"
    msg = re.sub(r"'?/\S+'?", "PATH", m.group(3))
    msg = re.sub(r"\b[0-9a-f]{32}\b", "FP", msg)
    msg = re.sub(r"module \S+?(?=[(,])", "module M", msg)
    msg = re.sub(r"^  \S+$", "  NAME", msg)
    msg = re.sub(r"\d+", "N", msg)
    return f"{style} {m.group(1)} {m.group(2)}] {msg}"


def _captured_shapes(version: str) -> set[str]:
    return {_shape(ln) for log in (DATA / "xla_gpu" / version).glob("*.log")
            for ln in log.read_text().splitlines()}


def _replay(tmp_path: Path, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("XLA_", "JAX_", "TF_CPP_", "REPLAY_"))}
    base.update(JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_LOG_THREAD_ID="1",
                TF_CPP_VMODULE="gpu_hlo_schedule=1", **env)
    p = subprocess.run([sys.executable, str(REPLAY)], cwd=tmp_path, env=base,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    # XLA:CPU's own lines (the replay's real CPU backend) are real already: only the replayed
    # XLA:GPU scheduler lines are checked.
    return [ln for ln in p.stderr.splitlines()
            if _PREFIX.match(ln) and re.search(r"(gpu_hlo_schedule|profile_guided)", ln)
            or "RuntimeError" in ln]


@pytest.mark.parametrize("style, version", [("absl", "0.10.2"), ("tsl", "0.6.2")])
def test_every_replayed_line_was_printed_by_the_real_compiler(tmp_path, style, version):
    assert real_xla_lines.default_version(style) == version
    real = _captured_shapes(version)
    d = tmp_path / "dir"
    d.mkdir()
    fp = "a" * 32
    (d / f"{fp}.pb").write_bytes(b"")
    flag = "--xla_gpu_pgle_profile_file_or_directory_path="
    cases = [
        {"REPLAY_SCENARIO": "partial", "XLA_FLAGS": f"{flag}{tmp_path}/p.pb"},
        {"REPLAY_SCENARIO": "discard", "XLA_FLAGS": f"{flag}{tmp_path}/p.pb"},
        {"REPLAY_SCENARIO": "directory", "XLA_FLAGS": f"{flag}{d}", "REPLAY_FP_TRAIN": fp,
             "REPLAY_FP_EVAL": "b" * 32},
        {"REPLAY_SCENARIO": "lookup", "XLA_FLAGS": f"{flag}{d}",
             "REPLAY_FPS": f"jit_train_step:{fp},jit_eval_step:{'b' * 32}"},
        {"REPLAY_SCENARIO": "parse_error", "XLA_FLAGS": f"{flag}{tmp_path}/p.pb"},
        {"REPLAY_SCENARIO": "file_missing", "XLA_FLAGS": f"{flag}{tmp_path}/p.pb"},
    ]
    seen = 0
    for case in cases:
        lines = _replay(tmp_path, REPLAY_PREFIX=style, **case)
        assert lines, case
        for line in lines:
            assert _shape(line) in real, (case["REPLAY_SCENARIO"], line)
            seen += 1
    assert seen >= 20


def test_lines_show_only_where_xla_shows_them():
    """INFO below TF_CPP_MIN_LOG_LEVEL and the VLOG(1) fingerprint line hidden as XLA hides
    them (the lane's no-log-level and no-vmodule logs); a tsl prefix names the thread only
    with TF_CPP_LOG_THREAD_ID."""
    cap = real_xla_lines.Captured("0.6.2")
    fp_line = cap.first("good-pbtxt", real_xla_lines.FINGERPRINT)
    warn = cap.first("partial-warn", real_xla_lines.MISSING_N)
    on = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "gpu_hlo_schedule=1"}
    assert fp_line.render(7, on) is not None
    assert fp_line.render(7, {"TF_CPP_MIN_LOG_LEVEL": "0"}) is None
    # jax sets TF_CPP_MIN_LOG_LEVEL=1 when unset: INFO (and VLOG) hidden even with VMODULE.
    assert fp_line.render(7, {"TF_CPP_VMODULE": "gpu_hlo_schedule=1",
                              "TF_CPP_MIN_LOG_LEVEL": "1"}) is None
    assert warn.render(7, {}) is not None
    assert re.match(r"^\S+ \S+: W external/", warn.render(7, {}))
    assert re.match(r"^\S+ \S+: W       7 external/", warn.render(7, {"TF_CPP_LOG_THREAD_ID": "1"}))
    # What the lane's real logs show for the same cases.
    no_vmodule = (DATA / "xla_gpu" / "0.6.2" / "no-vmodule.log").read_text()
    assert "Fingerprint before LHS" not in no_vmodule and "Using PGLE profile" in no_vmodule
