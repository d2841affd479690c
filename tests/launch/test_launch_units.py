"""Small rules of the launcher a user relies on: a signal death's shell code, the SIGKILL grace
variable, the INFO log pgle turns on (and an empty TF_CPP_MIN_LOG_LEVEL, which XLA reads as 0),
and what is redacted from what pgle keeps."""

from __future__ import annotations

import signal
import sys

import pytest

from helpers.pgle_testing import run_pgle
from pgle.errors import BadInput
from pgle.launch.childenv import PGLE_SET_LEVEL, ensure_info_log
from pgle.launch.launcher import KILL_GRACE_VAR, kill_grace, shell_exit_code
from pgle.redact import REDACTED, redact_args, redact_json, redact_text


def test_a_signal_death_is_128_plus_the_signal_as_a_shell_says():
    assert shell_exit_code(-signal.SIGTERM) == 143 and shell_exit_code(-signal.SIGKILL) == 137
    assert shell_exit_code(3) == 3 and shell_exit_code(0) == 0


def test_a_workload_killed_by_a_signal_gives_the_shells_code(project):
    (project / "die.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    proc = run_pgle("collect", "-o", "p.pb", sys.executable, "die.py", cwd=project)
    assert proc.returncode == 137, proc.stderr.decode()[-2000:]


def test_kill_grace_accepts_zero_and_refuses_nonsense():
    assert kill_grace({}) == 30.0
    assert kill_grace({KILL_GRACE_VAR: "0"}) == 0.0
    assert kill_grace({KILL_GRACE_VAR: " 2.5 "}) == 2.5
    assert kill_grace({KILL_GRACE_VAR: "  "}) == 30.0  # blank: the default
    assert kill_grace({KILL_GRACE_VAR: "1e-3"}) == 0.001
    for bad in ("-1", "-0.5", "inf", "nan", "soon"):
        with pytest.raises(BadInput) as e:
            kill_grace({KILL_GRACE_VAR: bad})
        assert e.value.message == f"PGLE_KILL_GRACE_S={bad!r}: a number of seconds >= 0, e.g. 30."


def test_info_log_turned_on_only_where_the_user_chose_no_level():
    env: dict[str, str] = {}
    assert ensure_info_log(env, "checker", "pgle cannot tell") is None
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "0" and env[PGLE_SET_LEVEL] == "1"
    # XLA reads an empty level as 0 (tsl's MinLogLevelFromEnv: no digits -> 0): nothing hidden.
    for level in ("", " ", "0"):
        env = {"TF_CPP_MIN_LOG_LEVEL": level}
        assert ensure_info_log(env, "checker", "pgle cannot tell") is None
        assert env == {"TF_CPP_MIN_LOG_LEVEL": level}  # the user's own choice is kept
    env = {"TF_CPP_MIN_LOG_LEVEL": "1"}
    said = ensure_info_log(env, "checker", "pgle cannot tell")
    assert said and "TF_CPP_MIN_LOG_LEVEL=1 hides" in said and env == {"TF_CPP_MIN_LOG_LEVEL": "1"}


def test_secrets_are_redacted_wherever_their_word_stands():
    env = redact_json({"AWS_SECRET_ACCESS_KEY": "s1", "HF_TOKEN": "s2", "MY_TOKEN_FILE_X": "s3",
                      "XLA_FLAGS": "--xla_dump_to=/tmp", "PATH": "/bin"})
    assert env["AWS_SECRET_ACCESS_KEY"] == REDACTED and env["HF_TOKEN"] == REDACTED
    assert env["MY_TOKEN_FILE_X"] == REDACTED
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp" and env["PATH"] == "/bin"
    args = redact_args(["train.py", "--token", "abc", "--api-key=def",
                        "--xla_gpu_autotune_cache_key=v1", "--steps", "3"])
    assert args == ["train.py", "--token", REDACTED, f"--api-key={REDACTED}",
                    "--xla_gpu_autotune_cache_key=v1", "--steps", "3"]
    assert redact_text("fetch https://alice:hunter2@example.com/x") == \
        f"fetch https://alice:{REDACTED}@example.com/x"
