"""A vision-language model's shape from its Hugging Face config.json: the text model through hfconfig (its
keys at the top level, or in text_config), the vision tower from vision_config. Qwen2-VL, Qwen2.5-VL, Qwen3-VL
and LLaVA; anything else refused naming the key. Pure."""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from .models import Model
from .vision import Vision

TEXT_ARCH = {
    "Qwen2VLForConditionalGeneration": "Qwen2ForCausalLM",
    "Qwen2_5_VLForConditionalGeneration": "Qwen2ForCausalLM",
    "Qwen3VLForConditionalGeneration": "Qwen3ForCausalLM",
    "LlavaForConditionalGeneration": "LlamaForCausalLM",
}


def _int(v: dict, key: str, path: str, default=None) -> int:
    x = v.get(key, default)
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise InputError(f"{path}: vision_config.{key}: {x!r} is not a positive integer")
    return x


def _tower(arch: str, v: dict, path: str) -> Vision:
    src = f"{path} vision_config"
    if arch == "LlavaForConditionalGeneration":
        size = _int(v, "image_size", path, 336)
        return Vision(
            _int(v, "num_hidden_layers", path, 24), _int(v, "hidden_size", path, 1024),
            _int(v, "intermediate_size", path, 4096), _int(v, "num_attention_heads", path, 16),
            _int(v, "patch_size", path, 14), 1, gated=False, fixed_side=size, source=src,
        )  # fmt: skip
    qwen3 = arch.startswith("Qwen3")
    # Qwen2-VL: embed_dim is the tower's width (its hidden_size the merger's output); Qwen2.5/3-VL: hidden_size
    hidden = _int(v, "embed_dim", path) if "embed_dim" in v else _int(v, "hidden_size", path)
    windows = v.get("fullatt_block_indexes") or []
    patch = _int(v, "patch_size", path, 14)
    merge = _int(v, "spatial_merge_size", path, 2)
    win = (v.get("window_size") or 0) // (patch * merge) * merge if windows else 0
    ffn = v.get("intermediate_size") or hidden * int(v.get("mlp_ratio", 4))
    return Vision(
        _int(v, "depth", path), hidden, ffn, _int(v, "num_heads", path), patch, merge,
        gated=arch == "Qwen2_5_VLForConditionalGeneration", window=win, full_layers=len(windows), wrap=2,
        min_pixels=(64 if qwen3 else 4) * (patch * merge) ** 2, max_pixels=16384 * (patch * merge) ** 2, source=src,
    )  # fmt: skip


def vlm_from_hf(d: dict, path: str, text_model) -> Model:
    """The shape of a vision-language config.json (InputError naming what it cannot use); text_model reads
    the text model's keys (hfconfig.model_from_hf)."""
    arch = d["architectures"][0]
    v = d.get("vision_config")
    if not isinstance(v, dict):
        raise InputError(f"{path}: vision_config: required (an object) for {arch}")
    text = {k: x for k, x in d.items() if k not in ("vision_config", "text_config")} | dict(d.get("text_config") or {})
    text["architectures"] = [TEXT_ARCH[arch]]
    text.setdefault("quantization_config", d.get("quantization_config"))
    return replace(text_model(text, path), vision=_tower(arch, v, path))
