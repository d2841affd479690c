"""Durations, sizes and times as every command reads and prints them (`--older-than 7d`,
`--max-size 5G`): one parser each, so `store`, `cache` and `runs` agree."""

from __future__ import annotations

import re
import time

from pgle.errors import BadInput

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str = "--older-than") -> float:
    """'7d', '12h', '1d12h', '90m', '30s', '2w' -> seconds."""
    s = text.strip().lower()
    parts = _DURATION.findall(s)
    if not s or not parts or "".join(n + u for n, u in parts) != s:
        raise BadInput(
            f"{option} {text!r} is not a duration.",
            hint="Use a number with a unit: 30m, 12h, 7d, 2w (or combined, 1d12h).",
        )
    return sum(float(n) * _UNIT[u] for n, u in parts)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?")


def parse_size(text: str, option: str = "--max-size") -> int:
    """'5G', '500M', '1.5GiB', '2048' -> bytes (binary units, as `du -h` prints them)."""
    m = _SIZE.fullmatch(text.strip().lower())
    if not m:
        raise BadInput(
            f"{option} {text!r} is not a size.",
            hint="Use a number with a unit: 500M, 5G, 1T (binary units).",
        )
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " "))


def human_bytes(n: float) -> str:
    """The one way pgle prints a size, terminal and HTML alike: '512 B', '26.5 KiB', '1.2 GiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_seconds(seconds: float, units: tuple[tuple[float, float, str], ...]) -> str:
    """`seconds` in the first of `units` ((below, seconds per unit, format), ...) it is below,
    else in the last (whose `below` is not read)."""
    _, per, fmt = next((u for u in units if seconds < u[0]), units[-1])
    return fmt.format(seconds / per)


def iso(t: float) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else None
