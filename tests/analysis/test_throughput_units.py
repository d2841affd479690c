"""Throughput, MFU and the noise verdict of `pgle report` (README "Report"): the units, the peak
table's device kinds as jax spells them, and the bootstrap interval's meaning."""

from __future__ import annotations

import numpy as np
import pytest

from pgle.analysis.intervals import Coverage, merge
from pgle.analysis.throughput import peak_for, ratio_interval, throughput
from pgle.evidence.steps import summarize


@pytest.mark.parametrize("kind,row", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
    ("NVIDIA H200", "H200"), ("NVIDIA B200", "B200")])
def test_device_kinds_as_jax_spells_them_find_their_peak(kind, row):
    peak = peak_for(kind)
    assert peak is not None and peak["device"] == row


def test_no_peak_for_cpu_or_an_unknown_gpu():
    assert peak_for("cpu") is None and peak_for(None) is None and peak_for("NVIDIA L4") is None


def test_achieved_tflops_and_mfu_units():
    # 989.5e12 FLOPs per 2 s step on an H100 SXM (bf16 dense peak 989.5 TFLOP/s): 50 % MFU.
    out = throughput(2.0, 989.5e12, "NVIDIA H100 80GB HBM3", "gpu")
    assert out["achieved_tflops"] == pytest.approx(494.75)
    assert out["mfu"] == pytest.approx(0.5)
    out = throughput(2.0, 1e12, "cpu", "cpu")
    # No rate on a device of unknown peak (issue 33: 10 TFLOP/s for mnist on 2 CPU cores).
    assert out["mfu"] is None and out["achieved_tflops"] is None
    assert "no bf16 peak known for device 'cpu'" in out["why_no_mfu"]
    assert "need a GPU" in out["why_no_mfu"] and out["flops_per_step"] == 1e12
    assert throughput(2.0, 1e12, "NVIDIA L4", "gpu")["achieved_tflops"] is None
    assert throughput(2.0, 1e12, "NVIDIA A100-SXM4-80GB", "gpu", dtype="fp8")["mfu"] is None


def test_step_time_summary_is_a_median():
    s = summarize([1.0, 1.0, 1.0, 1.0, 100.0])
    assert s["median_s"] == 1.0 and s["count"] == 5 and s["max_s"] == 100.0


def test_beyond_noise_only_when_the_interval_excludes_one():
    before = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 5
    faster = [0.8, 0.81, 0.79, 0.8, 0.82, 0.78] * 5
    r = ratio_interval(before, faster)
    assert r["ratio"] == pytest.approx(0.8) and r["high"] < 1.0 and r["beyond_noise"] is True
    same = ratio_interval(before, list(reversed(before)))
    assert same["low"] <= 1.0 <= same["high"] and same["beyond_noise"] is False
    # One step per arm has no spread to resample: no interval rather than a false certainty.
    assert ratio_interval([1.0], [0.5]) is None and ratio_interval([1.0, 1.1], [0.5]) is None


def test_covered_time_counts_only_inside_the_window():
    cov = Coverage(merge(np.array([0, 20]), np.array([10, 30])))
    assert list(cov.covered(np.array([5, 10, 0, 25]), np.array([8, 20, 30, 40]))) == [3, 0, 20, 5]
