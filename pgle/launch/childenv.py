"""The environment of each workload launch: the user's, plus what the phase needs.

The user's XLA_FLAGS are kept (order and text); pgle's flags are merged in,
replacing a conflicting flag of theirs with a notice.
"""

from __future__ import annotations

import dataclasses
import os

from pgle.xla import flag_probe, versions
from pgle.xla.flags import XlaFlags, lint

# Set in the child when pgle (not the user) turned XLA's INFO log on.
PGLE_SET_LEVEL = "PGLE_SET_TF_CPP_MIN_LOG_LEVEL"
JAX_DEFAULT_LOG_LEVEL = 1  # TF_CPP_MIN_LOG_LEVEL when unset under jax: INFO hidden
# Visible to the user in the manifest and in drift checks.
RELEVANT_PREFIXES = ("JAX_", "TF_CPP_", "XLA_", "NCCL_", "CUDA_VISIBLE_DEVICES", "NVIDIA_")


@dataclasses.dataclass
class ChildEnv:
    env: dict[str, str]
    user_flags: XlaFlags
    flags: XlaFlags  # what the child gets
    notices: list[str]  # one line each: flags replaced, variables set
    warnings: list[str]
    # XLA log lines below this TF_CPP_MIN_LOG_LEVEL reach only workload.log, not the terminal:
    # the level the user had before pgle turned the INFO log on (None: show all).
    terminal_level: int | None = None


def build(
    environ: dict[str, str] | None = None,
    *,
    xla: dict[str, str | None] | None = None,
    variables: dict[str, str] | None = None,
    defaults: dict[str, str] | None = None,
    info_log: bool = False,
) -> ChildEnv:
    """`xla`: flags pgle must set; `variables`: set, replacing the user's (with a notice);
    `defaults`: set only where the user has not."""
    environ = dict(os.environ if environ is None else environ)
    jax_version = versions.jax_version()
    user = XlaFlags.parse(environ.get("XLA_FLAGS"))
    warnings = lint(user, jax_version)
    warnings += flag_probe.refuse_rejected(user, environ, jax_version)
    notices: list[str] = []
    flags = user
    if xla:
        flags, flag_notices = user.merged(xla)
        notices += flag_notices
        environ["XLA_FLAGS"] = flags.render()
    for key, value in (variables or {}).items():
        if key in environ and environ[key] != value:
            notices.append(f"replacing your {key}={environ[key]} with {key}={value}")
        environ[key] = value
    for key, value in (defaults or {}).items():
        environ.setdefault(key, value)
    # No PYTHONUNBUFFERED: where pgle's output is a terminal the launcher gives the program a
    # pseudo-terminal, so it buffers exactly as it would without pgle (pgle.launch.launcher).
    if info_log:
        # tsl's log prefix (jax < 0.7.2) names the logging thread only when asked; modules
        # compiling in parallel threads interleave their checker blocks, and the thread id is
        # how pgle tells them apart (jax >= 0.7.2's absl prefix always has it, and ignores this).
        environ.setdefault("TF_CPP_LOG_THREAD_ID", "1")
        warning = ensure_info_log(
            environ,
            "'Using PGLE profile', 'Found profile for module'",
            "pgle cannot see whether the profile was used",
        )
        if warning:
            warnings.append(warning)
    return ChildEnv(environ, user, flags, notices, warnings, terminal_level(environ))


VERBOSE_VAR = "PGLE_VERBOSE"  # `--verbose`: show the log lines pgle turned on, live


def terminal_level(environ: dict[str, str]) -> int | None:
    """The level to filter the terminal at when pgle, not the user, lowered XLA's log level."""
    if environ.get(VERBOSE_VAR, "") not in ("", "0"):
        return None
    return JAX_DEFAULT_LOG_LEVEL if environ.get(PGLE_SET_LEVEL) else None


def ensure_info_log(environ: dict[str, str], lines: str, consequence: str) -> str | None:
    """Turn XLA's INFO log on (in place) unless the user chose a level; warn if theirs hides
    `lines`."""
    level = environ.get("TF_CPP_MIN_LOG_LEVEL")
    if level is None:
        # JAX defaults it to 1, which hides XLA's INFO lines: the evidence. The terminal
        # keeps showing what the user would have seen (pgle.launch.launcher filters it).
        environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        environ[PGLE_SET_LEVEL] = "1"
        return None
    if level.strip() in ("0", ""):
        return None
    return (
        f"TF_CPP_MIN_LOG_LEVEL={level} hides XLA's {lines} lines, so {consequence}; unset it "
        "or set it to 0."
    )


def relevant(environ: dict[str, str]) -> dict[str, str]:
    """The variables that change what XLA and JAX compile or log."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(RELEVANT_PREFIXES)}
