"""LoRA's overhead in the engine against public vLLM measurements (issue 45's LoRA target).

Fitted: the kernels' floor and per-token cost (engine/lorafit.py) to Agulló et al.'s `mean` (250 in / 231
out) and `p25` (23 / 27) profiles (vLLM 0.5.0, Llama-2-7B, one adapter, ranks 8/16/32: TPOT with one adapter
over base-model requests, 120-815 running). Held out:
  A. the same table's p75 profile (423 / 358, ~100 running): TPOT ratio at the measured running batch (not a
     whole source held out: the same authors and server);
  B. vLLM PR #11267 (a whole other source): 1x A100, Llama-2-7B, ShareGPT, 1,000 prompts offline, one rank-8
     adapter, --max-loras 1: output throughput 1,787.78 against 2,693.62 tok/s without LoRA (0.664). Simulated
     here: the bundled ShareGPT sample, all requests at once, a100-80g-sxm (the PR says "1xA100"), with and
     without LoRA.
  C. the memory a GPU adapter slot takes from the KV cache (engine/lora.slot_bytes, nothing fitted): Agulló et
     al.'s memory_overhead runs (vLLM 0.5.0, Llama-2-7B, base requests): KV blocks the server logged at several
     --max-loras, per added slot, at ranks 8, 16 and 32.

    python benchmarks/lora_overhead.py"""

from __future__ import annotations

import tempfile

import goodbench as gb
from goodbench.engine import lorafit
from goodbench.engine.lora import KERNEL_FLOOR_S, KERNEL_TOKEN_S

PR_11267 = 1787.78 / 2693.62
# (max_lora_rank, slots, slots, KV blocks at each): vLLM 0.5.0's logged "# GPU blocks" (16-token blocks)
SLOT_BLOCKS = ((8, 256, 512, 3597, 2160), (8, 128, 256, 4302, 3597), (16, 128, 256, 3757, 2354),
               (32, 64, 128, 3821, 2514), (32, 128, 192, 2514, 1166))  # fmt: skip


def slot_rows() -> list[tuple]:
    """(rank, measured KV blocks per added slot, the engine's) for Llama-2-7B at TP 1."""
    from goodbench.engine.lora import slot_bytes
    from goodbench.engine.models import get_model

    cfg = gb.EngineConfig(model="llama-2-7b")
    block = cfg.kv_bytes_per_token() * 16
    return [
        (r, (b1 - b2) / (n2 - n1), slot_bytes(get_model("llama-2-7b"), r) / block) for r, n1, n2, b1, b2 in SLOT_BLOCKS
    ]


def table() -> list[tuple]:
    rows = []
    for name, profile in (
        ("mean (fitted)", lorafit.MEAN_PROFILE),
        ("p25 (fitted)", lorafit.P25_PROFILE),
        ("p75", lorafit.P75_PROFILE),
    ):
        for rank, b, p, o, measured in profile:
            terms = (KERNEL_FLOOR_S, KERNEL_TOKEN_S)
            rows.append((name, rank, b, measured, lorafit.predicted(rank, b, p, o, *terms)))
    return rows


def pr_11267(d: str) -> float:
    """Output throughput with one rank-8 adapter over without, the PR's offline ShareGPT run."""
    out = []
    for lora in (True, False):
        kw = {"lora_adapters": "sql"} if lora else {}
        w = gb.load_workload(None, dataset_name="sharegpt", num_prompts=1000, request_rate="inf", **kw)
        cfg = gb.EngineConfig(gpu="a100-80g-sxm", model="llama-2-7b", enable_lora=lora, max_lora_rank=8)
        out.append(gb.simulate(w, cfg, result_dir=d).summary["output_throughput"])
    return out[0] / out[1]


def main() -> None:
    print(
        f"per kernel: {KERNEL_FLOOR_S * 1e6:.2f} us + {KERNEL_TOKEN_S * 1e9:.2f} ns per token "
        "(fitted to the mean and p25 profiles; python -m goodbench.engine.lorafit)"
    )
    print(
        f"{'profile':>14} {'rank':>4} {'running':>7} {'TPOT ratio measured':>20} {'engine':>7} {'TPOT err':>8} {'overhead err':>12}"
    )
    for name, rank, b, m, e in table():
        print(f"{name:>14} {rank:>4} {b:>7} {m:>20.3f} {e:>7.3f} {e / m - 1:>+8.1%} {(e - 1) / (m - 1) - 1:>+12.0%}")
    with tempfile.TemporaryDirectory() as d:
        r = pr_11267(d)
    print(
        f"vLLM PR #11267 (A100, ShareGPT offline, one rank-8 adapter): throughput ratio measured {PR_11267:.3f}, "
        f"engine {r:.3f} ({r / PR_11267 - 1:+.1%}; the overhead {(1 - r) / (1 - PR_11267) - 1:+.0%})"
    )
    print("KV blocks a GPU adapter slot takes (vLLM 0.5.0, Llama-2-7B; rank: measured / engine):")
    print("  " + ", ".join(f"rank {r}: {m:.2f} / {e:.2f} ({e / m - 1:+.1%})" for r, m, e in slot_rows()))


if __name__ == "__main__":
    main()
