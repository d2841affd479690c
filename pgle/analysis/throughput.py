"""Step time with its spread, the ratio with a confidence interval, FLOPs per step, MFU.

FLOPs come from XLA's cost analysis of the compiled step module (what
`jitted.lower(...).compile().cost_analysis()["flops"]` reports; the harness records it per
module, pgle/launch/jax_internals.py). For an SPMD program that is the work of one device, so
MFU = flops / step time / one device's peak.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Any

from pgle.evidence.event_kinds import ModuleCompiled

# Dense (no structured sparsity) tensor-core peaks in TFLOP/s per GPU. NVIDIA's datasheets
# print the with-sparsity figure for Hopper/Blackwell; dense is half of it.
PEAK_SOURCES = {
    "A100": "NVIDIA A100 Tensor Core GPU Datasheet (SXM4 and PCIe columns)",
    "H100 SXM": "NVIDIA H100 Tensor Core GPU Datasheet, H100 SXM column (with-sparsity / 2)",
    "H100 PCIe": "NVIDIA H100 Tensor Core GPU Datasheet, H100 PCIe column (with-sparsity / 2)",
    "H200": "NVIDIA H200 Tensor Core GPU Datasheet, H200 SXM column (with-sparsity / 2)",
    "B200": "NVIDIA HGX B200 specifications (nvidia.com/data-center/hgx), 8-GPU figures / 8, "
    "with-sparsity / 2",
}
# (regex over jax's device_kind, table row, {dtype: dense TFLOP/s}, source key)
PEAKS: list[tuple[str, str, dict[str, float | None], str]] = [
    (
        r"A100.*(SXM|HGX)",
        "A100 SXM",
        {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp8": None},
        "A100",
    ),
    (r"A100.*PCI", "A100 PCIe", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp8": None}, "A100"),
    (
        r"H100.*PCI",
        "H100 PCIe",
        {"tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0},
        "H100 PCIe",
    ),
    (r"H100", "H100 SXM", {"tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0}, "H100 SXM"),
    (r"H200", "H200", {"tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0}, "H200"),
    (r"B200", "B200", {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0}, "B200"),
]


def peak_for(device_kind: str | None) -> dict[str, Any] | None:
    """The table row for a jax `device_kind` ("NVIDIA H100 80GB HBM3", ...), or None."""
    if not device_kind:
        return None
    for pattern, row, peaks, source in PEAKS:
        if re.search(pattern, device_kind, re.I):
            return {"device": row, "tflops": peaks, "source": PEAK_SOURCES[source]}
    return None


def ratio_interval(
    before: list[float],
    after: list[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Median(after) / median(before) with a percentile-bootstrap interval (seeded, so a
    report is reproducible). An interval containing 1.0 means: within run-to-run noise."""
    if len(before) < 2 or len(after) < 2:
        return None
    ratios = sorted(_bootstrap_ratios(before, after, resamples, seed))
    lo = ratios[int((1 - confidence) / 2 * (resamples - 1))]
    hi = ratios[int((1 + confidence) / 2 * (resamples - 1))]
    return {
        "ratio": statistics.median(after) / statistics.median(before),
        "low": lo,
        "high": hi,
        "confidence": confidence,
        "beyond_noise": not lo <= 1.0 <= hi,
    }


def _bootstrap_ratios(
    before: list[float], after: list[float], resamples: int, seed: int
) -> list[float]:
    """median(resample of after) / median(resample of before), `resamples` times: exactly what
    `random.Random(seed)` with `choices` and `statistics.median` give, in numpy (2000 resamples
    of 30k steps took a minute in Python; issue 25). numpy's legacy generator seeded with the
    seed's 32-bit words is CPython's Mersenne Twister seeded with that int (init_by_array),
    `random_sample` is `random()` (53 bits), and choices() picks `floor(random() * n)`."""
    import numpy as np

    key, x = [], abs(seed)
    while x:
        key.append(x & 0xFFFFFFFF)
        x >>= 32
    rs = np.random.RandomState(key or [0])
    b, a = np.sort(np.asarray(before, np.float64)), np.sort(np.asarray(after, np.float64))
    nb, na = b.size, a.size
    # Which value a draw picks only matters through its rank: draw -> original index -> rank.
    rank_b = np.argsort(np.argsort(np.asarray(before, np.float64), kind="stable"), kind="stable")
    rank_a = np.argsort(np.argsort(np.asarray(after, np.float64), kind="stable"), kind="stable")
    batch = max(1, min(resamples, (1 << 22) // (nb + na)))  # ~32 MB of draws at a time
    out: list[float] = []
    for first in range(0, resamples, batch):
        rows = min(batch, resamples - first)
        draws = rs.random_sample(rows * (nb + na)).reshape(rows, nb + na)
        mb = _medians(b, rank_b[np.floor(draws[:, :nb] * nb).astype(np.int64)])
        ma = _medians(a, rank_a[np.floor(draws[:, nb:] * na).astype(np.int64)])
        out += (ma / mb).tolist()
    return out


def _medians(ordered, ranks):
    """statistics.median of each resample, given as the ranks (in `ordered`) of its values:
    the middle value, or the mean of the middle two. Counting ranks finds the order
    statistics in linear time (no sort or partition per resample)."""
    import numpy as np

    rows, n = ranks.shape
    counts = np.bincount((ranks + np.arange(rows)[:, None] * n).ravel(), minlength=rows * n)
    seen = np.cumsum(counts.reshape(rows, n), axis=1)
    mid = n // 2

    def order_stat(k):  # rank of the k-th smallest value (0-based) of each resample
        return (seen <= k).sum(axis=1)

    if n % 2:
        return ordered[order_stat(mid)]
    return (ordered[order_stat(mid - 1)] + ordered[order_stat(mid)]) / 2


def step_module(modules: Sequence[ModuleCompiled]) -> ModuleCompiled | None:
    """The compiled module with the most FLOPs: only a stand-in for run folders that predate
    pgle's step detection (pgle.launch.step_rule): a one-shot module (equinox's `jit_scan`)
    can outweigh the train step 100-fold."""
    with_flops = [m for m in modules if m.flops]
    return max(with_flops, key=lambda m: m.flops or 0.0) if with_flops else None


def throughput(
    step_s: float | None,
    flops: float | None,
    device_kind: str | None,
    platform: str | None,
    dtype: str = "bf16",
) -> dict[str, Any]:
    """Achieved TFLOP/s per device and MFU, on a device whose peak pgle knows (else neither,
    and `why_no_mfu` says what needs a GPU)."""
    out: dict[str, Any] = {"dtype": dtype, "flops_per_step": flops, "device_kind": device_kind}
    if not step_s or not flops:
        out["achieved_tflops"] = None
        out["mfu"] = None
        out["why_no_mfu"] = (
            "no step time"
            if not step_s
            else "XLA's cost analysis gave no FLOP count for the step module"
        )
        return out
    peak = peak_for(device_kind)
    if peak is None:
        # A FLOP rate on a device of unknown peak reads as a figure of merit and is none: on
        # CPU it came out at 10 TFLOP/s for mnist on 2 cores (issue 33). No rate, no MFU.
        out["achieved_tflops"] = None
        out["mfu"] = None
        out["why_no_mfu"] = (
            f"no {dtype} peak known for device {device_kind!r} ({platform or 'unknown'} "
            "backend): achieved TFLOP/s and MFU need a GPU of the peak table (A100, H100 "
            "SXM/PCIe, H200, B200); the FLOPs per step are XLA's count"
        )
        return out
    achieved = flops / step_s / 1e12
    out["achieved_tflops"] = achieved
    if peak["tflops"].get(dtype) is None:
        out["mfu"] = None
        out["why_no_mfu"] = f"{peak['device']} has no {dtype} tensor cores"
        return out
    out["peak"] = peak
    out["mfu"] = achieved / peak["tflops"][dtype]
    return out
