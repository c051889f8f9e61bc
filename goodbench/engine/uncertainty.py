"""How sure the engine's step times are, for a simulated run: the out-of-sample error of the public
vLLM measurements in the run's regime (engine/virtual/calibration.py computes the table; docs/engine.md
shows it; tests/test_calibration.py fails when these numbers drift from a recompute), or a calibration
profile's own error on the runs it was fitted to. Pure."""

from __future__ import annotations

import math

from .hardware import get_gpu
from .lora import LORA_HELD_OUT_WORST
from .moe import KERNEL_HELD_OUT, KERNEL_WORST
from .speculative import SPEC_HELD_OUT
from .vision import VISION_HELD_OUT_WORST, VISION_LOADED_MEDIAN, VISION_LOADED_WORST

REGIME_ORDER = ("batch 1", "batch 2-16", "batch 17-64", "batch 65+", "prefill-heavy", "TP > 1")
# Median |out-of-sample error| of the public points in each regime on tiers with fitted points; and the
# largest there, a floor for tiers no public point was fitted on (their efficiencies are borrowed).
REGIME_ERROR = {
    "batch 1": 0.03,
    "batch 2-16": 0.069,
    "batch 17-64": 0.06,
    "batch 65+": 0.177,
    "prefill-heavy": 0.13,
    "TP > 1": 0.124,
}
REGIME_WORST = {
    "batch 1": 0.176,
    "batch 2-16": 0.35,
    "batch 17-64": 0.297,
    "batch 65+": 0.589,
    "prefill-heavy": 0.589,
    "TP > 1": 0.589,
}
CALIBRATED_TIERS = ("a100-40g", "a100-80g-sxm", "h100-sxm", "h200", "l40s")  # tiers with fitted public points
# The public TTFTs' median |out-of-sample error|, on those tiers and over every point: the front end
# (HTTP, tokenizing, the hand-off to the engine) is not priced for vLLM V1 (fitted at 0) and does not
# transfer between servers, so TTFT is less sure than a step.
TTFT_ERROR = {"calibrated": 0.115, "all": 0.145}
FRONT_END_SEEN = "public vLLM V1 servers spent 2-4 ms (IOG, H100 PCIe) to ~50 ms (GPUStack, chat API) per request there"


BATCH_CLASSES = ((1.5, "batch 1"), (16.5, "batch 2-16"), (64.5, "batch 17-64"), (math.inf, "batch 65+"))


def batch_class(mean_batch: float, classes=BATCH_CLASSES) -> str:
    """The class of a time-weighted mean number of requests per step: the first whose edge lies above it."""
    return next(name for edge, name in classes if mean_batch < edge)


def regimes(mean_batch: float, prefill_share: float, tp: int, ttft_long: bool = False) -> list[str]:
    """The regimes a run or a public point counts in: its batch class by the time-weighted mean number
    of requests per step; prefill-heavy when most busy time is in steps that carry prefill (or for a
    TTFT of long prompts); TP > 1."""
    out = [batch_class(mean_batch)]
    if ttft_long or prefill_share >= 0.5:
        out.append("prefill-heavy")
    if tp > 1:
        out.append("TP > 1")
    return out


def _tiers(engine: dict, stats: dict) -> list[tuple[str, int]]:
    inst = stats.get("instances") or []
    if inst:
        return [(x["gpu"], int(x.get("tp") or 1)) for x in inst]
    return [(engine.get("gpu", "h100-sxm"), int(engine.get("tensor_parallel_size") or 1))]


def _below_fitted_bandwidth(gpus: list[str]) -> str:
    """A note for tiers slower in memory than every calibrated one: their per-request decode cost
    (opmodel.request_scale) extrapolates the bandwidth rule beyond where public points checked it."""
    slowest = min((get_gpu(g) for g in CALIBRATED_TIERS), key=lambda g: g.bandwidth)
    low = [g for g in gpus if get_gpu(g).bandwidth < slowest.bandwidth]
    if not low:
        return ""
    return (
        f"; the per-request decode cost on {', '.join(low)} extrapolates its scaling with memory bandwidth "
        f"below the slowest fitted tier's ({slowest.name}, {slowest.bandwidth / 1e9:.0f} GB/s)"
    )


def engine_uncertainty(engine: dict | None, stats: dict | None) -> dict | None:
    """{step_time_pct, basis, regimes, ttft_pct, ttft_basis} for a simulated run from run.json's engine
    config and the simulation's counters (None for a run without them). step_time_pct is a typical
    (median) error: half the public points in that regime were further off. ttft_pct: on public tiers it
    adds the front end the shipped model does not price; a calibration profile (which fits its own front
    end) gives its own TTFT error, held out where it was fitted to several runs."""
    if not engine or not stats or not stats.get("busy_s"):
        return None
    prof = stats.get("profile")
    tiers = _tiers(engine, stats)
    regs = regimes(stats.get("mean_batch") or 1.0, stats.get("prefill_share") or 0.0, max(tp for _, tp in tiers))
    if prof:
        return _profile_uncertainty(prof, regs)
    blind = sorted({g for g, _ in tiers if g not in CALIBRATED_TIERS})
    table = REGIME_WORST if blind else REGIME_ERROR
    pct = max(table[r] for r in regs) * 100
    basis = (
        f"public vLLM measurements, out of sample, {' + '.join(regs)}: median |error| on calibrated tiers"
        if not blind
        else f"no public measurement fitted on {', '.join(blind)} (efficiencies borrowed from a profiled GPU): "
        f"at least the worst out-of-sample error on calibrated tiers in {' + '.join(regs)}"
        + _below_fitted_bandwidth(blind)
    )
    if stats.get("moe"):
        pct, basis = _moe(stats["moe"], pct, basis)
    if stats.get("images"):  # requests carried images: their preprocessing and encoder
        pct = max(pct, VISION_LOADED_MEDIAN * 100)
        basis += (
            f"; images: held-out lone-request VLM TTFTs within {VISION_HELD_OUT_WORST:.0%} (benchmarks/vlm_ttft.py), "
            f"loaded ones median |error| up to {VISION_LOADED_MEDIAN:.0%}, a few 720p images a request too slow by up "
            f"to {VISION_LOADED_WORST:.1f}x (benchmarks/vlm_loaded.py)"
        )
    if stats.get("lora_loads"):  # requests ran LoRA adapters
        pct = max(pct, LORA_HELD_OUT_WORST * 100)
        basis += (
            f"; LoRA: held-out vLLM throughput off by up to {LORA_HELD_OUT_WORST:.0%} (vLLM PR #11267; "
            "benchmarks/lora_overhead.py)"
        )
    if stats.get("speculative"):
        pct = max(pct, SPEC_HELD_OUT * 100)
        basis += (
            f"; speculative decoding: public speedups against batch held out, median |error| {SPEC_HELD_OUT:.0%} "
            "(benchmarks/spec_decode.py), the acceptance rates as given"
        )
    ttft = max(TTFT_ERROR["all" if blind else "calibrated"] * 100, pct)  # a TTFT is made of steps too
    ttft_basis = (
        f"public vLLM TTFTs, out of sample, median |error| {'over every point' if blind else 'on calibrated tiers'}; "
        f"no server front end is priced (HTTP, tokenizing): {FRONT_END_SEEN}"
    )
    return {
        "step_time_pct": round(pct, 1),
        "basis": basis,
        "regimes": regs,
        "ttft_pct": round(ttft, 1),
        "ttft_basis": ttft_basis,
    }


def _moe(moe: dict, pct: float, basis: str) -> tuple[float, str]:
    """A MoE model's steps: its routed experts are priced by fused-MoE kernels fitted to AIConfigurator's
    measured vLLM latencies (engine/moe.py), whose error on held-out rows bounds how sure a step can be;
    on a tier with no measured MoE kernel of its format the efficiencies are borrowed and the worst applies."""
    borrowed = moe.get("borrowed")
    err = (KERNEL_WORST if borrowed else KERNEL_HELD_OUT) * 100
    how = (
        f"borrowed efficiencies: no measured {moe['format']} MoE kernel on this tier ({borrowed}'s used)"
        if borrowed
        else f"{moe['format']} MoE kernels held out of their fit: median |error| {KERNEL_HELD_OUT:.0%}"
    )
    return max(pct, err), f"{basis}; routed experts: {how} (benchmarks/moe_kernels.py)"


def statements(u: dict | None) -> list[tuple[str, float, str]]:
    """(what, ± percent, basis) for each figure an engine_uncertainty gives, as every report prints them:
    the step times, then TTFT where given."""
    if not u or u.get("step_time_pct") is None:
        return []
    out = [("step times", u["step_time_pct"], u["basis"])]
    if u.get("ttft_pct") is not None:
        out.append(("TTFT", u["ttft_pct"], u["ttft_basis"]))
    return out


def _profile_uncertainty(prof: dict, regs: list[str]) -> dict:
    """A calibration profile's own errors: its step times' (ITL and TPOT), and its TTFT's where it has one
    (profiles from before it pooled all three into step_time_pct), on the basis it says (held out or in
    sample); its steps' scatter."""
    said = prof.get("error_basis") or "its error on the runs it was fitted to"
    scatter = (
        "; its steps scatter as its server's did (x{:.2f} to x{:.2f}, 10th to 90th percentile)".format(*prof["scatter"])
        if prof.get("scatter")
        else "; its steps take their model time exactly"
    )
    out = {
        "step_time_pct": prof.get("step_time_pct"),
        "basis": f"calibration profile {prof.get('path')}: {said}{scatter}",
        "regimes": regs,
    }
    if prof.get("ttft_pct") is not None:
        out |= {"ttft_pct": prof["ttft_pct"], "ttft_basis": f"calibration profile {prof.get('path')}: {said}"}
    return out
