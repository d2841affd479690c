"""What pgle knows about XLA flags that matter to PGLE: lookups and explanations.

The data (which jax release has which flag, kinds, defaults, values) is in
pgle/xla/flag_data.py, taken from every supported jaxlib itself; sources of the PGLE notes:
docs/xla-facts.md sections 3 and 6 and the JAX GPU performance guide.
"""

from __future__ import annotations

import fnmatch
import os
import re

from pgle.xla.flag_data import (
    CHECKED_THROUGH,
    DEFAULTS_FROM,
    FLAGS,
    OLDEST_SUPPORTED_JAX,
    REMOVED_FLAGS,
    FlagInfo,
    RemovedFlag,
    Version,
)
from pgle.xla.versions import version_string

__all__ = [
    "CHECKED_THROUGH",
    "DEFAULTS_FROM",
    "FLAGS",
    "OLDEST_SUPPORTED_JAX",
    "REMOVED_FLAGS",
    "FlagInfo",
    "RemovedFlag",
    "default_in",
    "exists_in",
    "explain_all",
    "explain_flag",
    "flag_info",
    "removed_flag",
    "value_error",
    "values_in",
    "versions_text",
]

_BOOL_TRUE = ("true", "1")
_BOOL_FALSE = ("false", "0")
_INT = re.compile(r"^\s*[-+]?\d+\s*$")  # absl::SimpleAtoi: no hex, no exponent


def removed_flag(name: str, jax_version: Version | None) -> RemovedFlag | None:
    """The removal entry for `name` if that jax no longer knows it.

    An unknown jax version counts as new: pgle targets current jax.
    """
    for entry in REMOVED_FLAGS:
        if fnmatch.fnmatchcase(name, entry.pattern) and (
            jax_version is None or jax_version >= entry.removed_in
        ):
            return entry
    return None


def _removal(name: str) -> RemovedFlag | None:
    return next((e for e in REMOVED_FLAGS if fnmatch.fnmatchcase(name, e.pattern)), None)


def flag_info(name: str) -> FlagInfo | None:
    return FLAGS.get(name)


def default_in(info: FlagInfo, jax_version: Version | None) -> str:
    """The flag's default in that jax (the newest checked one's when unknown)."""
    for until, value in info.older_defaults:
        if jax_version is not None and jax_version < until:
            return value
    return info.default


def values_in(info: FlagInfo, jax_version: Version | None) -> tuple[str, ...]:
    """The enum values that jax's XLA accepts (the newest checked one's when unknown)."""
    since = dict(info.value_since)
    out = [
        v for v in info.values if jax_version is None or v not in since or jax_version >= since[v]
    ]
    if jax_version is not None:
        out += [
            v
            for v, first, removed in info.old_values
            if (first is None or jax_version >= first) and jax_version < removed
        ]
    return tuple(out)


def _value_history(info: FlagInfo, value: str) -> str:
    """Why a value another release accepts is wrong for this one, or ''."""
    for v, first in info.value_since:
        if _same(info, v, value):
            return f"{value!r} needs jax >= {version_string(first)}"
    for v, _, removed in info.old_values:
        if _same(info, v, value):
            return f"{value!r} was removed in jax {version_string(removed)}"
    return ""


def _same(info: FlagInfo, a: str, b: str) -> bool:
    return a.casefold() == b.casefold() if info.ignore_case else a == b


def value_error(
    info: FlagInfo, value: str | None, jax_version: Version | None = None
) -> str | None:
    """Why XLA would reject `value` for this flag (it aborts: 'Flag parsing failed'), or None.

    Bools take true/false (any case), 1 or 0, or no value; ints take decimal only; enums
    take their names exactly (some case-insensitively), as that jax's XLA knows them.
    """
    if info.kind == "bool":
        if value is None or value.lower() in _BOOL_TRUE + _BOOL_FALSE:
            return None
        return f"{value!r} is not a boolean (use true or false)"
    if value is None:
        return f"--{info.name} needs a value"
    if info.kind == "int" and not _INT.match(value):
        return f"{value!r} is not a decimal integer"
    allowed = values_in(info, jax_version)
    if info.kind == "enum" and not any(_same(info, v, value) for v in allowed):
        return _value_history(info, value) or f"{value!r} is not one of {', '.join(allowed)}"
    if info.kind == "enum_list" and value:
        names = [v.strip().lstrip("+-") for v in value.split(",")]
        bad = [v for v in names if not any(_same(info, a, v) for a in allowed)]
        if bad:
            why = [_value_history(info, b) for b in bad]
            if any(why):
                return "; ".join(w for w in why if w)
            return f"{', '.join(repr(b) for b in bad)} not among {', '.join(allowed)}"
    return None


def exists_in(info: FlagInfo, jax_version: Version | None) -> bool:
    """Whether that jax's XLA knows the flag (unknown versions count as new)."""
    return info.since is None or jax_version is None or jax_version >= info.since


def versions_text(name: str) -> str:
    """'jax >= 0.4.36', 'removed in jax 0.7.2', ... for tables and explanations."""
    removed = _removal(name)
    info = FLAGS.get(name)
    parts = []
    if info and info.since:
        parts.append(f"jax >= {version_string(info.since)}")
    elif info:
        parts.append(f"in every jax pgle supports (>= {version_string(OLDEST_SUPPORTED_JAX)})")
    if removed and removed.since:
        parts.append(f"added in jax {version_string(removed.since)}")
    if removed:
        parts.append(f"removed in jax {version_string(removed.removed_in)}")
    return "; ".join(parts) or "not in pgle's table"


def explain_flag(name: str, value: str | None, raw: str, jax: tuple[int, ...] | None) -> dict:
    """One flag: meaning, default, versions, and ok / warn / error / unknown with why."""
    info = flag_info(name)
    row = {
        "flag": raw,
        "name": name,
        "value": value,
        "status": "ok",
        "message": "",
        "meaning": info.meaning if info else "",
        "default": default_in(info, jax) if info else None,
        "pgle": info.pgle if info else "",
        "versions": versions_text(name),
    }

    def verdict(status, message):
        row.update(status=status, message=message)
        return row

    removed = removed_flag(name, jax)
    if removed is not None:
        return verdict(
            "error",
            f"removed in jax {version_string(removed.removed_in)}: XLA aborts on it; "
            f"{removed.replacement}",
        )
    if not raw.startswith("--") or raw.startswith("---"):
        return verdict(
            "error",
            "XLA only reads flags written with exactly two dashes; it aborts "
            "on this one ('Unknown flag in XLA_FLAGS')",
        )
    removal = _removal(name)
    if removal is not None and removal.since and jax is not None and jax < removal.since:
        return verdict(
            "error",
            f"needs jax >= {version_string(removal.since)} (and was removed in jax "
            f"{version_string(removal.removed_in)}): this jax aborts on it "
            "('Unknown flag in XLA_FLAGS')",
        )
    if info is None:
        return verdict("unknown", "not in pgle's table; `--probe` asks the installed jaxlib")
    if not exists_in(info, jax):
        return verdict(
            "error",
            f"needs jax >= {version_string(info.since or OLDEST_SUPPORTED_JAX)}: this jax "
            f"aborts on it ('Unknown flag in XLA_FLAGS')",
        )
    bad = value_error(info, value, jax)
    if bad:
        # The table's enum values are those of every release through CHECKED_THROUGH; a newer
        # (or unknown) jax may accept more.
        checked = jax is not None and jax <= CHECKED_THROUGH
        if info.kind in ("enum", "enum_list") and not checked:
            return verdict(
                "warn",
                f"{bad} in jax <= {version_string(CHECKED_THROUGH)}; this jax may differ "
                "(`--probe` asks it)",
            )
        return verdict("error", f"{bad}; XLA aborts ('Flag parsing failed')")
    hazard = _flag_hazard(name, value, jax)
    return verdict("warn", hazard) if hazard else row


def _flag_hazard(name: str, value: str | None, jax: Version | None) -> str:
    """Values XLA accepts that quietly defeat PGLE or pgle's verdict."""
    value = value or ""
    if name == ACCURACY_CHECKER and value.endswith("_OFF"):
        return (
            "OFF hides the 'Missing <N> instructions' lines: pgle cannot tell whether the "
            "profile fits"
        )
    if name == ACCURACY_CHECKER and value.upper().endswith("_ERROR"):
        # Said on every jax: the flag outlives the upgrade that makes it fail.
        return (
            "ERROR fails the compilation when the profile misses any instruction; "
            + error_strictness_hazard()
        )
    if name == PGLE_PROFILE_PATH and value:
        if (
            not value.endswith((".pb", ".pbtxt"))
            and not os.path.isdir(value)
            and (jax is None or jax >= (0, 5, 1))
        ):
            return "neither a .pb/.pbtxt file nor a directory: XLA silently ignores it"
        return (
            "set globally, every module of every run gets this profile; give it per run "
            "with `pgle run --profile`"
        )
    if name == "xla_enable_command_buffers_during_profiling" and (value or "true").lower() in (
        "true",
        "1",
    ):
        return "a collected profile times whole CUDA graphs, not their kernels"
    op = name.removeprefix("xla_gpu_enable_pipelined_")
    if (
        op in ("all_reduce", "all_gather", "reduce_scatter")
        and op != name
        and (value or "true").lower() in _BOOL_FALSE
        and (jax is None or jax >= (0, 11, 1))
    ):
        # XLA's own help for the flag (jax 0.11.1-0.12.0.1): "false maps to
        # --xla_gpu_pipeline_<op>=default", which follows the optimization effort.
        return (
            f"since jax 0.11.1 false means --xla_gpu_pipeline_{op}=default (XLA decides by "
            f"optimization effort), not off; use --xla_gpu_pipeline_{op}=off to turn it off"
        )
    return ""


def explain_all(flags, jax: tuple[int, ...] | None) -> list[dict]:
    """`explain_flag` for each parsed flag (`xla_flags.Flag`); an earlier duplicate is a
    warning, since the last one wins."""
    rows = [explain_flag(f.name, f.value, f.raw, jax) for f in flags]
    for f, r in zip(flags, rows, strict=False):
        if getattr(f, "unterminated", False):
            r.update(
                status="error",
                message=(
                    "its quote is never closed, so XLA reads the rest of XLA_FLAGS as this value "
                    "and every flag after it (pgle's included) is lost; close the quote"
                ),
            )
    last = {r["name"]: i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        if i != last[r["name"]] and r["status"] in ("ok", "unknown"):
            r.update(status="warn", message="given again later: the last one wins")
    return rows


# jax 0.11.2 and 0.12.0.1 (the real XLA:GPU compiler, deviceless H100 x8): under ERROR
# strictness the HLO verifier fails every module with an async collective XLA makes synchronous
# after scheduling, complete profile or none (`FAILED_PRECONDITION: during context [hlo
# verifier]: Expected instruction name to remain the same. Was 'all-gather-start' is
# 'all_gather.3.2'.`).
ERROR_STRICTNESS_FAILS_SINCE = (0, 11)


def error_strictness_fails(jax: Version | None) -> bool:
    """Whether ERROR strictness may fail modules whatever the profile (None: unknown jax)."""
    return jax is None or jax >= ERROR_STRICTNESS_FAILS_SINCE


def error_strictness_hazard() -> str:
    return (
        "on jax >= 0.11 it also fails every module with an async collective XLA makes "
        "synchronous after scheduling, whatever the profile, even a complete one "
        '("during context [hlo verifier]: Expected instruction name to remain the same"); '
        "use PGLE_STRICTNESS_LEVEL_WARN, which pgle reads (--require-applied fails the job "
        "when the profile does not fit)"
    )


# Flags pgle itself sets; named here once so every module agrees.
PGLE_PROFILE_PATH = "xla_gpu_pgle_profile_file_or_directory_path"
LHS = "xla_gpu_enable_latency_hiding_scheduler"
COMMAND_BUFFER = "xla_gpu_enable_command_buffer"
ACCURACY_CHECKER = "xla_gpu_pgle_accuracy_checker"
# Its predecessor (jax <= 0.4.35): a bool, and strict only: any missing instruction fails the
# compile (`Found N missing instructions. Discarding the profile.`; seen on jax 0.4.34).
OLD_ACCURACY_CHECKER = "xla_gpu_enable_pgle_accuracy_checker"
HOST_DEVICE_COUNT = "xla_force_host_platform_device_count"
