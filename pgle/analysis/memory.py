"""Peak device memory per module without and with the profile (XLA's memory analysis).

The latency-hiding scheduler keeps more buffers alive at once when it starts collectives
earlier, so a profile that hides more communication can raise peak memory. Sizes are XLA's
`CompiledMemoryStats` of each executable (recorded by the harness); XLA:GPU fills
`peak_memory_in_bytes`, elsewhere the peak is bounded by arguments + outputs + temporaries -
aliased bytes.
"""

from __future__ import annotations

from typing import Any

# Growth beyond this share is flagged (small buffer-assignment noise is not).
GROWTH_FLAG = 0.01


def peak_bytes(memory: dict[str, Any]) -> int | None:
    if not memory:
        return None
    if memory.get("peak_memory_in_bytes"):
        return memory["peak_memory_in_bytes"]
    return (
        memory.get("argument_size_in_bytes", 0)
        + memory.get("output_size_in_bytes", 0)
        + memory.get("temp_size_in_bytes", 0)
        - memory.get("alias_size_in_bytes", 0)
    )


def compare(before: list[dict], after: list[dict]) -> list[dict[str, Any]]:
    """One row per module name (its last compilation in each phase)."""
    b = {m["module"]: m for m in before if m.get("memory")}
    a = {m["module"]: m for m in after if m.get("memory")}
    rows = []
    for name in sorted(
        set(b) | set(a), key=lambda n: -(peak_bytes((a.get(n) or b[n])["memory"]) or 0)
    ):
        pb = peak_bytes(b[name]["memory"]) if name in b else None
        pa = peak_bytes(a[name]["memory"]) if name in a else None
        growth = (pa - pb) / pb if pa is not None and pb else None
        rows.append(
            {
                "module": name,
                "before_bytes": pb,
                "after_bytes": pa,
                "temp_before_bytes": (b.get(name) or {})
                .get("memory", {})
                .get("temp_size_in_bytes"),
                "temp_after_bytes": (a.get(name) or {}).get("memory", {}).get("temp_size_in_bytes"),
                "growth": growth,
                "flagged": growth is not None and growth > GROWTH_FLAG,
            }
        )
    return rows
