"""A GPU's power in the simulated engine: what each step draws from what it moves and computes. Pure.

  E(step) = P_idle dur + a bytes / 1e12 + b FLOPs / 1e15,  capped at P_max dur        (per GPU)
  i.e. P = P_idle + a (TB/s read) + b (PFLOP/s done): a memory-bound decode at batch 8 draws what its weight and
  KV reads cost, a compute-bound prefill chunk what its tensor-core work costs, never more than the board's limit.

bytes: the step's weight reads (dense weights, the experts its tokens touch, the LM head) and KV reads; FLOPs:
2 x tokens x active parameters (the experts' top-k only), per GPU. (a, b) per architecture are fitted to ML.ENERGY's
v3 measurements (ml-energy/leaderboard @0cd52da, vLLM 0.11.1, steady-state NVML energy; H100 SXM for Hopper, B200
for Blackwell) by benchmarks/power_fit.py, with each run's measured batch and ITL as the step: in sample, median
|error| 14.5 % (H100, 136 runs) and 7.7 % (B200, 145 runs); on a source held out whole (InferenceX issue #828:
gpt-oss-120b on H100 at TP 2-8, vLLM 0.15.1, nvidia-smi) 5.1 % (6 runs, -18 % at 4 users to +2 %). Idle power is
each tier's measured idle with a model loaded where one is public (else a stated share of its TDP); other
architectures borrow Hopper's or Blackwell's (a, b) and say so."""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import GPU

# arch -> (W per TB/s read, W per PFLOP/s done, the fit); benchmarks/power_fit.py prints these
COEFFS = {
    "hopper": (187.1, 1442.2, "ML.ENERGY v3, H100 SXM (136 runs, vLLM 0.11.1)"),
    "blackwell": (155.0, 603.5, "ML.ENERGY v3, B200 (145 runs, vLLM 0.11.1)"),
}
BORROW = {"ampere": "hopper", "ada": "hopper", "cdna3": "hopper", "cdna4": "blackwell", "blackwell-gddr": "blackwell"}
# measured idle board power with a model loaded (nvidia-smi / amd-smi readings; docs/engine.md lists each source)
IDLE_W = {
    "h100-sxm": (110.0, "gpu-burn #114 / vLLM #27508 readings (~110 W loaded, 74 W bare)"),
    "h200": (115.0, "SGLang #3196 (115 W with the model in memory)"),
    "b200": (195.0, "TensorRT-LLM #10278 (192-196 W)"),
    "mi300x": (128.0, "InferenceX #828 (rocm-smi, ~128 W)"),
    "mi325x": (140.0, "InferenceX #828 / PR #874 (amd-smi, ~140 W)"),
}
IDLE_SHARE = 0.16  # of TDP, for a tier with no public idle reading: H100's 110 of 700 W, B200's 195 of 1,000
FIT_ERROR = 0.145  # the worse fitted tier's in-sample median |error| (H100); engine_uncertainty quotes it


@dataclass(frozen=True)
class PowerModel:
    idle_w: float
    max_w: float
    w_per_tbs: float
    w_per_pflops: float
    basis: str
    borrowed: str | None = None  # the architecture whose (a, b) this tier uses, when not its own

    def energy(self, dur: float, nbytes: float, flops: float) -> float:
        """Joules one GPU uses over a step of dur seconds that reads nbytes and does flops."""
        e = self.idle_w * dur + self.w_per_tbs * nbytes / 1e12 + self.w_per_pflops * flops / 1e15
        return min(e, self.max_w * dur)


def power_model(gpu: GPU) -> PowerModel | None:
    """The tier's model (None for a tier with no TDP in the table)."""
    if not gpu.tdp_w:
        return None
    arch = gpu.arch if gpu.arch in COEFFS else BORROW.get(gpu.arch, "hopper")
    a, b, fit = COEFFS[arch]
    idle, idle_src = IDLE_W.get(gpu.name, (IDLE_SHARE * gpu.tdp_w, f"{IDLE_SHARE:.0%} of its {gpu.tdp_w:g} W TDP"))
    borrowed = None if arch == gpu.arch else arch
    basis = f"{fit}{f' (borrowed from {arch})' if borrowed else ''}; idle {idle:g} W: {idle_src}"
    return PowerModel(idle, float(gpu.tdp_w), a, b, basis, borrowed)
