"""A random-weight LoRA adapter for the tiny model (PEFT's layout: adapter_config.json and
adapter_model.safetensors with lora_A [r, in] and lora_B [out, r] per targeted module), so the real-vLLM
tests can serve adapters with no download. Run with the vLLM venv's Python (it has safetensors and torch):

    python ci/real_vllm/lora_adapter.py MODEL_DIR OUT_DIR [--rank 8] [--seed 0]"""

from __future__ import annotations

import argparse
import json
import os


def write_adapter(model_dir: str, out_dir: str, rank: int = 8, seed: int = 0) -> str:
    import torch
    from safetensors.torch import save_file

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    shapes = {"q_proj": (h, cfg["num_attention_heads"] * hd), "v_proj": (h, cfg["num_key_value_heads"] * hd)}
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(layers):
        for mod, (din, dout) in shapes.items():
            key = f"base_model.model.model.layers.{i}.self_attn.{mod}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(rank, din, generator=g) * 0.01
            tensors[f"{key}.lora_B.weight"] = torch.randn(dout, rank, generator=g) * 0.01
    os.makedirs(out_dir, exist_ok=True)
    save_file(tensors, os.path.join(out_dir, "adapter_model.safetensors"))
    conf = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": model_dir,
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "target_modules": sorted(shapes),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
    with open(os.path.join(out_dir, "adapter_config.json"), "w") as f:
        json.dump(conf, f, indent=1)
    return out_dir


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(write_adapter(a.model_dir, a.out_dir, a.rank, a.seed))
