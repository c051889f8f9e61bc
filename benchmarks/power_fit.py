"""Fit the simulated engine's power model (engine/power.py COEFFS) to public measured GPU power, and check it on a
source held out whole.

    python benchmarks/power_fit.py           # fit per architecture, print the errors and COEFFS

Fit data: benchmarks/data/mlenergy_v3_llm.csv, ML.ENERGY Leaderboard v3 (github.com/ml-energy/leaderboard
@0cd52da, public/data/models/*.json, data of 2026-02-16; vLLM 0.11.1; avg_power_watts is the steady-state NVML
energy counter over all the run's GPUs / time, so per GPU = P / n; bs = the mean vllm:num_requests_running; itl =
median ITL in ms). Rows used: BF16 (and gpt-oss's MXFP4) runs of the models in goodbench's catalogue, tasks gpqa and
lm-arena-chat, on H100 SXM (-> Hopper) and B200 (-> Blackwell). Each run is taken as its steady state: a decode step
of `bs` requests lasting its median ITL, reading the active weights (the touched experts' for MoE) and the KV of a
context of prompt + half the output (prompt lengths assumed: gpqa 250, chat 800 tokens), doing 2 x bs x active
parameters FLOPs. Model: P = P_idle + a x (TB/s read) + b x (PFLOP/s done); (a, b) by least squares per architecture.

Held out before fitting (the rule: every source other than ML.ENERGY v3): SemiAnalysis InferenceX issue #828,
gpt-oss-120b on H100 SXM, vLLM 0.15.1, 1k/8k, nvidia-smi 1 s means per GPU; the ITL of each row from its own
numbers (concurrency / (W / J-per-token x GPUs)).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from goodbench.engine.models import MODELS, WEIGHT_FORMATS  # noqa: E402
from goodbench.engine.power import IDLE_W  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "mlenergy_v3_llm.csv")
NAMES = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "Qwen/Qwen3-8B": "qwen3-8b", "Qwen/Qwen3-32B": "qwen3-32b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b", "meta-llama/Llama-3.3-70B-Instruct": "llama-3.3-70b",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-Thinking-2507": "qwen3-30b-a3b",
    "openai/gpt-oss-20b": "gpt-oss-20b", "openai/gpt-oss-120b": "gpt-oss-120b",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-Thinking-2507": "qwen3-235b-a22b",
}  # fmt: skip
PROMPT = {"gpqa": 250, "lm-arena-chat": 800}
TIER = {"H100": ("h100-sxm", "hopper"), "B200": ("b200", "blackwell")}
# InferenceX #828, H100 SXM, gpt-oss-120b, 1k/8k: (GPUs, concurrency, W per GPU, J per output token)
HELD_OUT = [(8, 4, 222, 1.663), (8, 8, 253, 1.043), (8, 16, 291, 0.683), (8, 32, 309, 0.444), (4, 64, 466, 0.286),
            (2, 64, 574, 0.266)]  # fmt: skip


def work(model: str, n: int, bs: float, ctx: float, step_s: float) -> tuple[float, float]:
    """(TB/s read, PFLOP/s done) per GPU for a decode step of bs requests at context ctx lasting step_s."""
    m = MODELS[model]
    wbytes = (m.dense_params + m.vocab * m.hidden) * 2 / n
    active = m.dense_params + m.vocab * m.hidden
    if m.moe is not None:
        per = m.moe.expert_params * m.hidden * WEIGHT_FORMATS[m.moe.expert_format][0] / 8
        wbytes += m.moe_layers * m.moe.touched(bs) * per / n
        active += m.moe_layers * m.moe.top_k * m.moe.expert_params * m.hidden
    kv = bs * ctx * m.kv_bytes_per_token(2.0, n)
    return (wbytes + kv) / step_s / 1e12, 2 * active * bs / n / step_s / 1e15


def load() -> pd.DataFrame:
    d = pd.read_csv(DATA)
    d = d[d.model.isin(NAMES) & d.task.isin(PROMPT) & d.gpu.isin(TIER)].copy()
    d["m"] = d.model.map(NAMES)
    tb, pf = zip(*(work(r.m, int(r.n), r.bs, PROMPT[r.task] + r.outlen / 2, r.itl / 1000) for r in d.itertuples()))
    d["tbs"], d["pfs"] = tb, pf
    d["idle"] = d.gpu.map(lambda g: IDLE_W[TIER[g][0]][0])
    return d


def main() -> None:
    d = load()
    coeffs = {}
    for g, x in d.groupby("gpu"):
        a = np.c_[x.tbs, x.pfs]
        (ca, cb), *_ = np.linalg.lstsq(a, x.Pg - x.idle, rcond=None)
        err = (x.idle + a @ [ca, cb]) / x.Pg - 1
        coeffs[TIER[g][1]] = (ca, cb, len(x))
        by_task = ", ".join(f"{t} {np.median(abs(err[x.task == t])):.1%} ({(x.task == t).sum()})" for t in PROMPT)
        print(f"{g}: a = {ca:.1f} W per TB/s, b = {cb:.1f} W per PFLOP/s; in sample median |error| "
              f"{np.median(abs(err)):.1%} ({len(x)} runs: {by_task})")  # fmt: skip
    ca, cb, _ = coeffs["hopper"]
    m = MODELS["gpt-oss-120b"]
    errs = []
    print("held out: InferenceX #828, gpt-oss-120b on H100 SXM, 1k/8k")
    for n, c, w, jpt in HELD_OUT:
        step = c / (w / jpt * n)
        tb, pf = work("gpt-oss-120b", n, c, 1024 + 4096, step)
        pred = IDLE_W["h100-sxm"][0] + ca * tb + cb * pf
        errs.append(pred / w - 1)
        print(f"  TP{n} x{c}: measured {w} W, model {pred:.0f} W ({errs[-1]:+.1%}); step {step * 1e3:.2f} ms")
    print(f"  median |error| {np.median(np.abs(errs)):.1%} ({len(errs)} runs); {m.name}")
    print("COEFFS = {")
    for arch, (a, b, k) in coeffs.items():
        print(f'    "{arch}": ({a:.1f}, {b:.1f}, ...),  # {k} runs')
    print("}")


if __name__ == "__main__":
    main()
