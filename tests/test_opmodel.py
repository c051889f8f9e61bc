"""Operator times on any tier (engine/opmodel.py): the PCIe ring all-reduce and FP8's two roofline sides."""

import numpy as np
import pytest

from goodbench.engine.hardware import get_gpu
from goodbench.engine.opdata import COLLECTIVES
from goodbench.engine.opmodel import (
    PCIE_PRIOR,
    curve_bandwidth,
    gemm_sides,
    gemm_time,
    on_profiled_die,
    pcie_ring_bytes_s,
    pcie_ring_time,
)


def test_the_pcie_ring_at_its_prior_is_the_measured_curve():
    """Latency + ring bytes at the link rate / PCIE_PRIOR follows Vidur's PCIe-class 4-GPU ring (PCIe 4.0
    links) from 2 kB to 400 MB: one measured curve, two numbers."""
    sizes, times = COLLECTIVES["pairwise-a100-4"]
    model = pcie_ring_time(np.asarray(sizes), get_gpu("l40s"), 4, PCIE_PRIOR)
    assert model == pytest.approx(np.asarray(times), rel=0.15)
    big = np.asarray(sizes) >= 1_000_000
    assert model[big] == pytest.approx(np.asarray(times)[big], rel=0.05)


def test_the_pcie_ring_grows_with_the_message_the_tp_size_and_its_inefficiency():
    l40s, mb = get_gpu("l40s"), 8e6
    assert pcie_ring_bytes_s(mb, l40s, 8) / pcie_ring_bytes_s(mb, l40s, 4) == pytest.approx((2 * 7 / 8) / (2 * 3 / 4))
    assert pcie_ring_bytes_s(mb, l40s, 4) == pytest.approx(1.5 * mb / 32e9)
    slow, fast = pcie_ring_time(mb, l40s, 4, 3.0), pcie_ring_time(mb, l40s, 4, 1.0)
    assert slow - fast == pytest.approx(2.0 * pcie_ring_bytes_s(mb, l40s, 4))


def test_fp8_gemms_pay_the_side_of_the_roofline_that_binds():
    """FP8's weight reads (mem) and tensor-core rate (compute) scale separately: decode-sized GEMMs move
    only with mem, prefill-sized ones only with compute, and gemm_sides is gemm_time's exact derivative."""
    h = get_gpu("h100-sxm")
    args = (np.array([1.0, 8.0, 4096.0]), 50e6, h.fp8_tflops * 1e12, h.mem_bw_tbs * 1e12, 1.0, "hopper")
    base = gemm_time(*args, scale=(1.2, 1.5))
    dm, dc = gemm_sides(*args, (1.2, 1.5))
    assert dm[:2].min() > 0 and dc[:2].max() == 0 and dm[2] == 0 and dc[2] > 0
    h_ = 1e-6
    assert (gemm_time(*args, scale=(1.2 + h_, 1.5)) - base) / h_ == pytest.approx(dm, rel=1e-6, abs=1e-15)
    assert (gemm_time(*args, scale=(1.2, 1.5 + h_)) - base) / h_ == pytest.approx(dc, rel=1e-6, abs=1e-15)


def _compare_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_operators_compare.py"
    spec = importlib.util.spec_from_file_location("gpu_operators_compare", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_tier_on_the_profiled_die_keeps_the_dip_at_the_same_token_count():
    """H200 is the H100 SXM's die at its clocks with more bandwidth: its GEMM curve's dip stays at the H100's
    ridge, so decode-sized GEMMs speed up with the bandwidth and prefill-sized ones not at all. Checked
    against both GPUs measured side by side (benchmarks/data/gpu-ops-*.csv, torch 2.11 / cuBLAS, 2026-11-27):
    the model's H200 / H100 layer-time ratio is 2.0% (median) and 20.0% (worst of 105 layers) off the
    measured one, held here under 2.5% and 21%; with the dip at the H200's own ridge it is 3.3% and 23.5%."""
    h100, h200 = get_gpu("h100-sxm"), get_gpu("h200")
    assert curve_bandwidth(h200) == curve_bandwidth(h100) == 3.35e12
    assert curve_bandwidth(get_gpu("h100-pcie")) == 2.0e12  # another die (clocks): its own ridge
    a100 = curve_bandwidth(get_gpu("a100-80g-sxm"))  # the profiled GPU keeps its own
    assert a100 == curve_bandwidth(get_gpu("a100-40g")) == curve_bandwidth(get_gpu("a100-80g-pcie"))
    assert a100 == pytest.approx(2.039e12) and not on_profiled_die(get_gpu("a100-80g-sxm"))
    cmp = _compare_module()
    for rule, worst in ((curve_bandwidth(h200), 0.21), (None, 0.30)):
        errs = [abs(e) for v in cmp.ratio_errors("h200", rule).values() for e in v]
        assert len(errs) == 105 and max(errs) < worst
        if rule:
            assert np.median(errs) < 0.025
        else:
            assert np.median(errs) > 0.025 and max(errs) > 0.21
