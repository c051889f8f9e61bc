"""The Argonne H100 FP8 check points (calibration.csv, source argonne-quant-study) replayed three more ways
at the shipped constants, to separate the FP8 GEMMs from the V0 FP8-KV attention kernel:

- as labelled (FP8 weights, FP8 KV: the engine prices FP8 KV as half the KV bytes);
- with a BF16 KV cache (what the rows would cost if the FP8 KV cache cost what a BF16 one does);
- with `fp8_mem_hbm` (the FP8 weight reads HBM tiers pay) at 1.2 / 1.3;

and the same study's BF16-weight, FP8-KV runs (same file, same session) as labelled.

    python benchmarks/fp8_hopper.py

Deterministic (batch replays): prints one line per configuration, signed error against the measurement."""

from __future__ import annotations

from dataclasses import replace

from goodbench.engine.costmodel import CostModel
from goodbench.engine.virtual.calibration import NAMES, constants, shipped_theta
from goodbench.engine.virtual.calpoints import load_points, point_config, replay

# Argonne LLM-Inference-Bench, Plots/Fig_3/A100_H100_quant_all_results.csv @691ffab (H100, Meta-Llama-3-8B,
# "Weight = fp16, KV Cache = fp8"), batch latency in s, keyed by (batch, input = output length).
BF16_WEIGHTS_FP8_KV = {
    (1, 128): 0.9973997483029962,
    (1, 2048): 16.961227899882942,
    (16, 1024): 11.884978183079511,
    (32, 512): 6.570708645973355,
    (64, 128): 1.7918249820359051,
    (64, 1024): 23.043681737035513,
    (64, 2048): 65.51213897718117,
}


def predict(p, theta) -> float:
    return replay(p, CostModel.for_config(point_config(p), constants=constants(theta, p)))[0]


def main() -> None:
    shipped = shipped_theta()
    moved = {}
    for v in (1.2, 1.3):
        moved[v] = shipped.copy()
        moved[v][NAMES.index("fp8_mem_hbm")] = v
    checks = [p for p in load_points() if p.source_id == "argonne-quant-study"]
    head = "batch x length   FP8 W+KV   KV as BF16   hbm 1.2   hbm 1.3   BF16 W + FP8 KV (same study)"
    print(head)
    for p in checks:
        err = {
            "as labelled": predict(p, shipped) / p.value - 1,
            "bf16 kv": predict(replace(p, kv_cache_dtype="auto"), shipped) / p.value - 1,
            **{f"fp8_mem_hbm {v}": predict(p, moved[v]) / p.value - 1 for v in moved},
        }
        key = (p.concurrency, p.input_len)
        b16 = replace(p, dtype="bf16", value=BF16_WEIGHTS_FP8_KV[key] * 1000)
        e16 = predict(b16, shipped) / b16.value - 1
        cells = "   ".join(f"{e:+9.1%}" for e in err.values())
        print(f"{p.concurrency:>5} x {p.input_len:<6}  {cells}   {e16:+9.1%}")


if __name__ == "__main__":
    main()
