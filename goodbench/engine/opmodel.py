"""Measured operator times (engine/opdata.py, derived from Vidur's GPU profiles) applied to any tier and
model shape. Pure; works on numpy arrays of token counts.

Each tier borrows the curves of the profiled GPU of its family: Hopper (H100, H200; B200 and MI300X
by assumption) from the H100 SXM, Ampere HBM (A100) from the A100 80GB SXM, GDDR boards (L40S, L4,
A10G, RTX 6000 Ada) from the A40. The GEMM curve is a function of tokens / ridge, so it moves with
each tier's own compute-to-bandwidth ratio (the mid-M dip sits at the ridge on all three profiled
GPUs), except on a tier built on the profiled GPU's own die at its clocks (the same BF16 peak: H200 on
the H100 SXM's; A100 40GB and 80GB PCIe on the A100 80GB SXM's by the same argument, not measured):
the kernels and their tiles are the same, so the dip stays at the same token count and only the weight
reads move with the bandwidth.
Measured on an H200 and an H100 SXM side by side (benchmarks/gpu_operators.py, data in
benchmarks/data/): the model's H200 / H100 layer-time ratio is 2.0% off the measured one (median of
105 layers) with the dip at the H100's ridge, 3.3% (and up to 23.5%) with it at the H200's own.

Collectives: NVSwitch tiers use the NVSwitch curves of their generation; PCIe tiers (no NVLink) take
their latency from the pairwise-NVLink 4-GPU curves, whose ring crosses PCIe (PCIe 4.0 boards the
A100 system's, PCIe 5.0 the H100's), and their bytes from a ring at the board's own link rate over a
fitted inverse efficiency (the curves' own slope is its prior): a PCIe-class all-reduce that grows with
the message and the TP size, not a PCIe measurement of that board."""

from __future__ import annotations

import math

import numpy as np

from .hardware import GPU, get_gpu
from .opdata import COLLECTIVES, ELEMENTWISE, GEMM

FAMILY_ASSUMED = (
    "b200",
    "b300",
    "gb200",
    "gb300",
    "mi300x",
    "mi325x",
    "mi355x",
    "h20",
    "rtx-6000-ada",
    "rtx-pro-6000",
    "l4",
    "a10g",
)  # no profiled GPU of the same kind


def family(gpu: GPU) -> str:
    if not gpu.hbm:
        return "gddr"
    return "ampere" if gpu.name.startswith("a100") else "hopper"


PROFILED_TIER = {"hopper": "h100-sxm", "ampere": "a100-80g-sxm", "gddr": None}  # opderive.PROFILED's GPUs as tiers


def on_profiled_die(gpu: GPU) -> bool:
    """Another tier on its family's profiled GPU's die at its clocks (the same BF16 peak): H200 on the H100
    SXM's (measured), A100 40GB and 80GB PCIe on the A100 80GB SXM's (by the same argument, not measured)."""
    base = PROFILED_TIER[family(gpu)]
    return base is not None and gpu.name != base and math.isclose(gpu.bf16_tflops, get_gpu(base).bf16_tflops)


def curve_bandwidth(gpu: GPU) -> float:
    """The bandwidth (B/s) a tier's GEMM ridge is taken at: the profiled GPU's for a tier on its die, else
    the tier's own (see the module docstring)."""
    src = get_gpu(PROFILED_TIER[family(gpu)]) if on_profiled_die(gpu) else gpu
    return src.bandwidth


def request_scale(gpu: GPU) -> float:
    """What the per-request decode term (StepConstants.attn_request_s, fitted as the H100 SXM's) is
    multiplied by on a tier: the H100 SXM's bandwidth over the tier's. Modelled, not measured: the
    public vLLM points fit better when the GDDR6 L40S (one source) pays more per decoding request than
    the HBM parts, and bandwidth orders the tiers so with no new constant; torch's bare attention
    kernels on one die (H100 against H200, benchmarks/data) do not show it (docs/engine.md)."""
    return get_gpu(PROFILED_TIER["hopper"]).bandwidth / gpu.bandwidth


def gemm_pricing(gpu: GPU, fp8: bool) -> tuple[float, float, float, str, float]:
    """(peak FLOP/s, bandwidth B/s, bytes per weight, family, ridge bandwidth): what gemm_time prices a
    tier's BF16 or FP8 GEMMs at (one place for the cost model and the GPU checks)."""
    peak = (gpu.fp8_tflops if fp8 else gpu.bf16_tflops) * 1e12
    return peak, gpu.bandwidth, 1.0 if fp8 else 2.0, family(gpu), curve_bandwidth(gpu)


def _sides(n, params: float, peak: float, bw: float, wbytes: float, fam: str, ridge_bw: float | None = None):
    """The roofline's compute and weight-read sides for n tokens, and the family's measured efficiency
    at n / ridge (the ridge at `ridge_bw`, curve_bandwidth; the tier's own bandwidth when None)."""
    xs, eff, _, _ = GEMM[fam]
    ridge = peak * wbytes / (2 * (ridge_bw or bw))
    e = np.interp(np.log(np.maximum(n, 1) / ridge), np.log(xs), eff)
    return 2 * n * params / peak, wbytes * params / bw, e


def gemm_time(
    n,
    params: float,
    peak: float,
    bw: float,
    wbytes: float,
    fam: str,
    count: int = 4,
    scale=(1.0, 1.0),
    ridge_bw: float | None = None,
):
    """Seconds for `count` GEMMs holding `params` weights (per GPU) over n tokens: the roofline divided
    by the family's measured efficiency at n / ridge, plus a per-GEMM latency. `scale` = (mem, compute)
    multiplies the roofline's two sides (inverse efficiencies of a kernel other than the profiled BF16
    one: FP8's weight reads and its tensor-core rate are achieved to different degrees)."""
    comp, mem, e = _sides(n, params, peak, bw, wbytes, fam, ridge_bw)
    return np.maximum(scale[1] * comp, scale[0] * mem) / e + count * GEMM[fam][2]


def gemm_sides(
    n,
    params: float,
    peak: float,
    bw: float,
    wbytes: float,
    fam: str,
    scale: tuple[float, float],
    ridge_bw: float | None = None,
):
    """d gemm_time / d scale for one GEMM's weights: the side of the roofline that binds, over the
    measured efficiency (the other side's derivative is 0)."""
    comp, mem, e = _sides(n, params, peak, bw, wbytes, fam, ridge_bw)
    on_compute = scale[1] * comp >= scale[0] * mem
    return np.where(on_compute, 0.0, mem / e), np.where(on_compute, comp / e, 0.0)


def elementwise_time(n, hidden: int, ffn_per_gpu: float, bw: float, fam: str):
    """Seconds per layer for the norms, RoPE, activation and residual add over n tokens."""
    a, bh, bf, _ = ELEMENTWISE[fam]
    return a + (bh * hidden + bf * ffn_per_gpu) * 2 * n / bw


def fast_fabric(gpu: GPU) -> bool:
    """NVSwitch-class links between the GPUs (MI300X's Infinity Fabric mesh by assumption), not PCIe."""
    return gpu.interconnect_gbs >= 300


def collective_name(gpu: GPU, workers: int) -> str:
    """Which measured all-reduce curve a tier's TP group uses (see the module docstring)."""
    if fast_fabric(gpu):
        gen = "h100" if gpu.interconnect_gbs >= 400 else "a100"
        return f"nvswitch-{gen}-{min(8, max(2, 1 << (workers - 1).bit_length()))}"
    return f"pairwise-{'h100' if gpu.interconnect_gbs >= 64 else 'a100'}-4"


PCIE_PRIOR = 1.36  # Vidur's pairwise A100 4-GPU ring: 23.6 GB/s bus bandwidth on 32 GB/s PCIe 4.0 links
CUSTOM_ALLREDUCE_MAX = 8 * 1024 * 1024  # vLLM's custom all-reduce handles messages up to 8 MiB


def allreduce_time(nbytes, gpu: GPU, workers: int, pcie: float = PCIE_PRIOR):
    """One TP all-reduce. Over NVLink, vLLM's custom all-reduce (one-shot over NVLink P2P) takes
    messages up to 8 MiB: priced as one measured NVLink send/recv of the message (an assumption: Vidur
    profiled NCCL only); larger ones by the measured NCCL curve. Over PCIe: pcie_ring_time."""
    if not fast_fabric(gpu):
        return pcie_ring_time(nbytes, gpu, workers, pcie)
    nccl = collective_time(nbytes, collective_name(gpu, workers))
    p2p = collective_time(nbytes, "nvlink-h100" if gpu.interconnect_gbs >= 400 else "nvlink-a100")
    return np.where(np.asarray(nbytes) <= CUSTOM_ALLREDUCE_MAX, p2p, nccl)


def pcie_ring_bytes_s(nbytes, gpu: GPU, workers: int):
    """Seconds per unit of `pcie` for one ring all-reduce over PCIe: each GPU sends 2 (p - 1) / p of the
    message over its link (interconnect_gbs per direction)."""
    return 2 * (workers - 1) / workers * np.asarray(nbytes, dtype=float) / (gpu.interconnect_gbs * 1e9)


def pcie_ring_time(nbytes, gpu: GPU, workers: int, pcie: float = PCIE_PRIOR):
    """A ring all-reduce over PCIe: the measured PCIe-class curve's small-message time (its latency)
    plus the ring's bytes at the link rate / pcie (pcie: an inverse efficiency, >= 1; at PCIE_PRIOR it
    reproduces the measured curve's slope). The ring's bytes grow with the TP size, which the measured
    4-GPU curve cannot say."""
    sizes, times = COLLECTIVES[collective_name(gpu, workers)]
    return times[0] + pcie * pcie_ring_bytes_s(nbytes, gpu, workers)


def collective_time(nbytes, name: str):
    """Seconds for one collective of nbytes: the measured curve, linear between its points, its last
    slope beyond the largest message."""
    sizes, times = COLLECTIVES[name]
    s, t = np.asarray(sizes), np.asarray(times)
    slope = (t[-1] - t[-2]) / (s[-1] - s[-2])
    b = np.asarray(nbytes, dtype=float)
    return np.where(b > s[-1], t[-1] + (b - s[-1]) * slope, np.interp(b, s, t))
