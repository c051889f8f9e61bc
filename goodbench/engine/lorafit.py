"""The LoRA kernels' floor and per-token cost, fitted to one public table (the rest held out:
benchmarks/lora_overhead.py).

Agulló et al. (arXiv 2508.08343; raw results in github.com/FerranAgulloLopez/GPULLMAdapterOptimization @
bae36e2, benchmarks/lora/definitive_results/performance_analysis/compute_overhead/llama-2-7b/): vLLM 0.5.0,
Llama-2-7B, closed loop, one adapter (K = 1) against base-model requests on the same server (K = 0). The
fit uses the `mean` profile (250 tokens in, 231 out) at ranks 8, 16 and 32: its TPOT ratio K=1/K=0, at the
measured mean running batch, against the engine's decode step with and without the adapter's GEMMs (GPU
not named by the source; an H100-class card: h100-sxm here). The fit takes the `mean` and `p25` profiles
(ranks 8/16/32; 120-815 running): per step, kernels x (floor + tokens x per-token cost) beside the GEMMs'
roofline work, least squares on the step's extra seconds. Held out: the p75 profile of the same table, and
vLLM PR #11267 (A100, ShareGPT, a whole other source). The p25 profile entered the fit after a floor-only fit
to the mean profile had missed it (docs/engine.md says so): it is not held out. `python -m goodbench.engine.lorafit`."""

from __future__ import annotations

# (rank, mean running requests at K=0, prompt, output, TPOT K=1 / K=0)
MEAN_PROFILE = [(8, 155, 250, 231, 1.096), (16, 144, 250, 231, 1.152), (32, 120, 250, 231, 1.127)]
P25_PROFILE = [(8, 815, 23, 27, 1.122), (16, 506, 23, 27, 1.159), (32, 413, 23, 27, 1.146)]
P75_PROFILE = [(8, 112, 423, 358, 1.084), (16, 103, 423, 358, 1.124), (32, 93, 423, 358, 1.098)]


def parts(rank: int, batch: int, prompt: int, output: int, gpu: str = "h100-sxm"):
    """(decode step without LoRA, the adapter's LoraCost) for `batch` requests halfway through their output,
    all on one adapter."""
    from .config import EngineConfig
    from .core import Engine
    from .hardware import get_gpu
    from .lora import LoraCost

    cfg = EngineConfig(gpu=gpu, model="llama-2-7b", max_num_seqs=max(256, batch)).resolved()
    ctx = batch * (prompt + output // 2)
    step = Engine(cfg).cost.step_time(0, batch, ctx, 0, 0, batch)
    return step, LoraCost.of(cfg.shape(), rank, 1, get_gpu(gpu))


def predicted(rank: int, batch: int, prompt: int, output: int, floor_s: float, token_s: float) -> float:
    """The engine's TPOT ratio, one adapter against none, with these kernel terms."""
    step, lc = parts(rank, batch, prompt, output)
    return (step + lc.step_time(batch, 1, floor_s, token_s)) / step


def fit() -> tuple[float, float]:
    """(floor, per token) seconds per kernel: least squares over the MEAN and P25 rows."""
    import numpy as np

    a, y = [], []
    for rank, b, p, o, ratio in MEAN_PROFILE + P25_PROFILE:
        step, lc = parts(rank, b, p, o)
        work = lc.step_time(b, 1, 0.0, 0.0)  # the roofline part: the kernel terms are what is fitted
        a.append([lc.kernels, lc.kernels * b])
        y.append((ratio - 1) * step - work)
    (floor, token), *_ = np.linalg.lstsq(np.array(a, float), np.array(y), rcond=None)
    return float(floor), float(token)


if __name__ == "__main__":
    floor, token = fit()
    print(f"KERNEL_FLOOR_S = {floor * 1e6:.3f} us, KERNEL_TOKEN_S = {token * 1e9:.3f} ns")
