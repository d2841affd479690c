"""The GPUs `pgle estimate --target` compiles for: XLA's own target specs (specs/, copied from
openxla/xla with their provenance in specs/PROVENANCE.md)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pgle.errors import BadInput

SPECS = Path(__file__).with_name("specs")
TARGETS = {"h100": "h100_sxm.txtpb", "h200": "h200.txtpb", "b200": "b200.txtpb"}
DEFAULT = "h100"
NVLINK_GBPS_PER_LINK = 25e9  # NVLink 4/5, one direction, per link (H100: 18 links, 450 GB/s)


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    path: Path
    text: str
    core_count: int
    clock_ghz: float
    memory_bandwidth: float  # bytes/s
    pcie_bandwidth: float  # bytes/s
    active_links: int
    matrix_rates: dict[int, float]  # PrimitiveType number -> ops/s of the whole GPU

    @property
    def link_bandwidth(self) -> float:
        return max(1, self.active_links) * NVLINK_GBPS_PER_LINK

    def peak_flops(self, primitive: int) -> float:
        rate = self.matrix_rates.get(primitive) or self.matrix_rates.get(11)
        return rate or 2.0 * 128 * self.core_count * self.clock_ghz * 1e9


def _number(text: str, field: str, default: float = 0.0) -> float:
    m = re.search(rf"^\s*{field}:\s*([0-9.eE+]+)\s*$", text, re.M)
    return float(m.group(1)) if m else default


def _matrix_rates(text: str, cores: int) -> dict[int, float]:
    block = (
        text.split("matrix_unit_description", 1)[-1] if "matrix_unit_description" in text else ""
    )
    out: dict[int, float] = {}
    for m in re.finditer(
        r"key:\s*(\d+)\s*value\s*\{\s*clock_rate_ghz:\s*([0-9.]+)\s*units_per_core:\s*(\d+)"
        r"\s*ops_per_clock:\s*(\d+)",
        block,
    ):
        key, clock, units, ops = int(m[1]), float(m[2]), int(m[3]), int(m[4])
        # ops_per_clock counts multiply-adds as two operations (XLA's SoL model, specs 2026).
        out.setdefault(key, clock * 1e9 * units * ops * cores)
    return out


def load(name: str) -> Target:
    key = name.strip().lower()
    if key not in TARGETS:
        raise BadInput(
            f"--target {name!r} is not a GPU pgle has XLA's spec of: use one of "
            f"{', '.join(sorted(TARGETS))}."
        )
    path = SPECS / TARGETS[key]
    text = path.read_text()
    cores = int(_number(text, "core_count", 132))
    return Target(
        key,
        path,
        text,
        cores,
        _number(text, "clock_rate_ghz", 1.98),
        _number(text, "memory_bandwidth", 3.35e12),
        _number(text, "pcie_bandwidth", 3.4e10),
        int(_number(text, "active_links", 18)),
        _matrix_rates(text, cores),
    )


def for_device_kind(kind: str | None) -> str | None:
    """The target of a device kind jax reports (`NVIDIA H100 80GB HBM3` -> h100)."""
    if not kind:
        return None
    low = kind.lower()
    for key in TARGETS:
        if re.search(rf"\b{key}\b", low):
            return key
    return None
