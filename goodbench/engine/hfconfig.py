"""A model shape from its Hugging Face config.json (read at the edge: api/enginefiles.py), so a new model needs
no code. Pure. The standard keys of the Llama, Mistral, Qwen2/Qwen3 (dense and MoE), gpt-oss and DeepSeek-V2/V3
families; anything else is refused with one line naming the key, never guessed."""

from __future__ import annotations

import os

from ..errors import InputError
from .hfvision import TEXT_ARCH, vlm_from_hf
from .models import MLA, Model, MoE

DENSE = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
MOE = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM", "DeepseekV2ForCausalLM")
MOE += ("DeepseekV3ForCausalLM", "MixtralForCausalLM")
KNOWN = "Llama, Mistral, Mixtral, Qwen2/Qwen3 (dense and MoE), gpt-oss, DeepSeek-V2/V3, Qwen2/2.5/3-VL, LLaVA"


class _Keys:
    """The config's keys, each read with the file and key named in any error."""

    def __init__(self, d: dict, path: str):
        self.d, self.path = d, path

    def int(self, key: str, default: int | None = None, lo: int = 1) -> int:
        v = self.d.get(key)
        v = default if v is None else v  # a key given as null means its default, as transformers reads it
        if v is None:
            raise InputError(f"{self.path}: {key}: required (a positive integer) for this architecture")
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"{self.path}: {key}: {v!r} is not an integer >= {lo}")
        return v

    def refuse(self, key: str, why: str) -> None:
        raise InputError(
            f"{self.path}: {key}: {why}; goodbench's engine cannot price it (describe the model in a .toml)"
        )


def quantization(q, k: _Keys, moe: bool) -> tuple[str, str]:
    """(the dense layers' dtype, the experts' weight format) from quantization_config (none: BF16). Dense layers
    are priced in BF16 or FP8 only, so a 4-bit or 8-bit integer checkpoint's dense layers are refused, never
    taken for BF16; gpt-oss's MXFP4 leaves attention and the router in BF16 (its modules_to_not_convert)."""
    key = "quantization_config.quant_method"
    if not q:
        return "bf16", "bf16"
    if not isinstance(q, dict):
        k.refuse("quantization_config", f"{type(q).__name__} is not an object")
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", q.get("format", ""))).lower()
    if method == "mxfp4" and moe:
        return "bf16", "mxfp4"
    if method == "fp8" or (method in ("modelopt", "compressed-tensors") and ("fp8" in algo or "float" in algo)):
        return "fp8", "fp8-block" if q.get("weight_block_size") else "fp8"
    if moe and method in ("modelopt", "compressed-tensors") and "nvfp4" in algo:
        k.refuse(key, f"{method} NVFP4 quantizes the dense layers to 4 bits, which the engine does not price yet")
    if method in ("awq", "gptq"):
        k.refuse(key, f"{method} {q.get('bits', 4)}-bit dense layers are not priced yet (BF16 and FP8 are)")
    k.refuse(key, f"{method or 'missing'} is not a format it knows")
    return "", ""


def _attention(d: dict, k: _Keys, heads: int) -> tuple[int, int, MLA | None]:
    """(kv_heads, head_dim, MLA or None)."""
    if "kv_lora_rank" in d:
        mla = MLA(
            kv_lora_rank=k.int("kv_lora_rank"),
            q_lora_rank=k.int("q_lora_rank", 0, lo=0) if d.get("q_lora_rank") is not None else 0,
            rope_dim=k.int("qk_rope_head_dim"),
            nope_dim=k.int("qk_nope_head_dim"),
            v_dim=k.int("v_head_dim"),
        )
        return heads, mla.nope_dim + mla.rope_dim, mla
    hd = d.get("head_dim") or k.int("hidden_size") // heads
    return k.int("num_key_value_heads", heads), int(hd), None


def _sliding(d: dict, k: _Keys, arch: str, layers: int) -> tuple[int, int]:
    """(window, sliding layers): gpt-oss's layer_types; a sliding window over every layer is refused."""
    types = d.get("layer_types")
    if arch == "GptOssForCausalLM":
        if not isinstance(types, list) or len(types) != layers:
            k.refuse("layer_types", "gpt-oss names each layer's attention (sliding or full) there; missing")
        n = sum(1 for t in types if t == "sliding_attention")
        return (k.int("sliding_window") if n else 0), n
    if d.get("use_sliding_window") or (arch.startswith(("Mistral", "Mixtral")) and d.get("sliding_window")):
        k.refuse("sliding_window", "a window on every layer")
    return 0, 0


def _moe(d: dict, k: _Keys, arch: str, fmt: str) -> MoE:
    if arch in ("GptOssForCausalLM", "MixtralForCausalLM"):
        experts = k.int("num_local_experts")
        top = k.int("num_experts_per_tok", d.get("experts_per_token"))
        return MoE(experts, top, k.int("intermediate_size"), expert_format=fmt)
    if arch.startswith("Deepseek"):
        shared = k.int("n_shared_experts", 0, lo=0) * k.int("moe_intermediate_size")
        return MoE(
            k.int("n_routed_experts"),
            k.int("num_experts_per_tok"),
            k.int("moe_intermediate_size"),
            shared_ffn=shared,
            dense_layers=k.int("first_k_dense_replace", 0, lo=0),
            groups=k.int("n_group", 1),
            topk_groups=k.int("topk_group", 1),
            expert_format=fmt,
        )
    if d.get("mlp_only_layers") or k.int("decoder_sparse_step", 1) != 1:
        k.refuse("mlp_only_layers", "dense layers between MoE layers")
    return MoE(
        k.int("num_experts"),
        k.int("num_experts_per_tok"),
        k.int("moe_intermediate_size"),
        shared_ffn=k.int("shared_expert_intermediate_size", 0, lo=0),
        expert_format=fmt,
    )


def model_from_hf(d: dict, path: str) -> Model:
    """A Model from a Hugging Face config.json's dict; InputError naming the key it cannot use."""
    k = _Keys(d, path)
    archs = d.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else None
    if arch in TEXT_ARCH:  # a vision-language model: its text model here, its tower from vision_config
        return vlm_from_hf(d, path, model_from_hf)
    if arch not in DENSE + MOE:
        raise InputError(f"{path}: architectures: {arch!r} is not a family goodbench reads ({KNOWN}); use a .toml")
    layers, heads = k.int("num_hidden_layers"), k.int("num_attention_heads")
    kv_heads, head_dim, mla = _attention(d, k, heads)
    dtype, fmt = quantization(d.get("quantization_config"), k, arch in MOE)
    moe = _moe(d, k, arch, fmt) if arch in MOE else None
    window, sliding = _sliding(d, k, arch, layers)
    needs_ffn = moe is None or moe.dense_layers > 0
    stem = os.path.splitext(os.path.basename(path))[0]
    name = os.path.basename(os.path.dirname(os.path.abspath(path))) if stem == "config" else stem
    return Model(
        name=str(d.get("_name_or_path") or name).rstrip("/").split("/")[-1].lower(),
        layers=layers,
        hidden=k.int("hidden_size"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        ffn=k.int("intermediate_size") if needs_ffn else 0,
        vocab=k.int("vocab_size"),
        tied_embeddings=bool(d.get("tie_word_embeddings", False)),
        max_position=k.int("max_position_embeddings", 131072),
        source=f"{path} ({arch})",
        moe=moe,
        mla=mla,
        sliding_window=window,
        sliding_layers=sliding,
        dtype=dtype,
    )
