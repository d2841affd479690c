"""The JSON manifest written beside a collected profile.

It records what the profile was measured on, so `pgle run` can warn when the
second run differs in ways that change instruction names (flags, versions,
device count: XLA names instructions after the optimized HLO).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pgle.atomic import write_text_atomic
from pgle.version import __version__
from pgle.xla import flag_table, versions
from pgle.xla.flags import XlaFlags

# Flags that pgle itself manages between phases: never drift.
PGLE_MANAGED_FLAGS = {flag_table.PGLE_PROFILE_PATH, flag_table.LHS, flag_table.COMMAND_BUFFER}
# Flags that only change where XLA writes things, not what it compiles.
OUTPUT_ONLY_PREFIXES = ("xla_dump", "xla_gpu_dump")


def manifest_path(profile_path: Path | str) -> Path:
    """`profile.pb` -> `profile.pb.manifest.json`; a directory holds `manifest.json`."""
    profile_path = Path(profile_path)
    if profile_path.is_dir() or profile_path.suffix not in (".pb", ".pbtxt"):
        return profile_path / "manifest.json"
    return profile_path.with_name(profile_path.name + ".manifest.json")


def build(
    *,
    workload_argv: list[str],
    user_flags: XlaFlags,
    child_flags: XlaFlags,
    environment: dict[str, str],
    backend: dict[str, Any] | None,
    window: dict[str, Any] | None,
    profile: dict[str, Any] | None,
    trace_dir: str | None,
    converter: dict[str, Any] | None = None,
    modules: list[dict[str, Any]] | None = None,
    effective_flags: str | None = None,
) -> dict[str, Any]:
    """`converter` (pgle's converter: stat, step window, event counts) and `modules` (the
    per-module rows, see `module_rows`) are added only when given."""
    extra: dict[str, Any] = {}
    if converter is not None:
        extra["converter"] = converter
    if modules is not None:
        extra["modules"] = modules
    if effective_flags is not None:
        # XLA_FLAGS as the workload's process had it at its first compile (the harness): what
        # XLA saw, which differs from child_xla_flags when the script assigned XLA_FLAGS.
        extra["effective_xla_flags"] = effective_flags
    return {
        "pgle_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "jax_version": versions.installed("jax"),
        "jaxlib_version": versions.installed("jaxlib"),
        "backend": (backend or {}).get("platform"),
        "device_kind": (backend or {}).get("device_kind"),
        "device_count": (backend or {}).get("device_count"),
        "process_count": (backend or {}).get("process_count"),
        "xla_flags": user_flags.render(),
        "child_xla_flags": child_flags.render(),
        "environment": environment,
        "argv": workload_argv,
        "cwd": os.getcwd(),
        "window": window,
        "profile": profile,
        "trace_dir": trace_dir,
        **extra,
    }


def module_rows(summaries: Iterable[Any], written: dict[str, str]) -> list[dict[str, Any]]:
    """One row per HLO module seen in the trace, for a per-module profile directory.

    `summaries`: `pgle.profiles.convert.ModuleSummary` objects (or dicts of their fields);
    `written`: fingerprint -> file name in the directory. A module without a fingerprint
    has no file (`file` is None); two compilations with one fingerprint share a file.
    """
    rows = []
    for m in summaries:
        d = m if isinstance(m, dict) else m.to_dict()
        fp = d.get("fingerprint")
        rows.append(
            {
                "module": d.get("module") or d.get("name"),
                "name": d.get("name"),
                "program_id": d.get("program_id"),
                "fingerprint": fp,
                "fingerprint_source": d.get("fingerprint_source"),
                "instruction_count": d.get("instruction_count", 0),
                "event_count": d.get("event_count", 0),
                "file": written.get(fp) if fp else None,
            }
        )
    return rows


def write(path: Path, manifest: dict[str, Any]) -> Path:
    return write_text_atomic(path, text(manifest))


def text(manifest: dict[str, Any]) -> str:
    """The manifest as written: the environment's and the arguments' secrets redacted."""
    from pgle.redact import redact_json

    return json.dumps(redact_json(manifest), indent=2) + "\n"


def read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def comparable_flags(flags: XlaFlags) -> dict[str, str | None]:
    return {
        f.name: f.value
        for f in flags.flags
        if f.name not in PGLE_MANAGED_FLAGS and not f.name.startswith(OUTPUT_ONLY_PREFIXES)
    }


def drift(
    manifest: dict[str, Any], *, user_flags: XlaFlags, backend: dict[str, Any] | None = None
) -> list[str]:
    """Differences between the collect run and this one that change instruction names."""
    out = []
    jax_now = versions.installed("jax")
    if manifest.get("jax_version") and jax_now and manifest["jax_version"] != jax_now:
        out.append(f"jax {manifest['jax_version']} collected the profile, jax {jax_now} runs now")
    then = comparable_flags(XlaFlags.parse(manifest.get("xla_flags") or ""))
    now = comparable_flags(user_flags)
    for name in sorted(set(then) | set(now)):
        if then.get(name, "<unset>") != now.get(name, "<unset>"):
            out.append(
                f"XLA flag --{name} was {_show(then, name)} when collecting, now {_show(now, name)}"
            )
    if (
        backend
        and manifest.get("device_count")
        and backend.get("device_count")
        and manifest["device_count"] != backend["device_count"]
    ):
        out.append(
            f"{manifest['device_count']} devices when collecting, {backend['device_count']} now"
        )
    return out


def _show(flags: dict[str, Any], name: str) -> str:
    if name not in flags:
        return "unset"
    value = flags[name]
    return "set" if value is None else repr(value)
