"""Model shapes: dense, Mixture-of-Experts and the attention variants that come with them. Plain data with
sources (each built-in's Hugging Face config.json; engine/hfconfig.py reads a user's).

A shape says what the cost model prices per layer: the dense GEMMs (attention projections, dense FFNs, the
router, shared experts: `dense_params`), the routed experts (`MoE`: only those a step's tokens touch are read,
engine/moe.py), the KV each token keeps (GQA heads, or MLA's one latent per layer, replicated on every TP
rank) and the layers whose attention is a sliding window (gpt-oss: a window's KV per request, not per token).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InputError, UsageError
from .vision import Vision

# Expert weight formats: bits per weight with their scales, and the compute dtype the kernel runs in.
# MXFP4: 4-bit E2M1 + one E8M0 scale per 32 (OCP MX spec); NVFP4: + one FP8 scale per 16; INT4 AWQ/GPTQ:
# + one FP16 scale per 128; FP8 128x128-block: one FP32 scale per 16,384 weights (DeepSeek-V3's format).
# Hopper runs the 4-bit formats as weight-only (w4a16: Marlin / Triton); vLLM's gpt-oss path on Blackwell
# runs MXFP4 x BF16 as well (AIConfigurator's kernel names: ..._mxfp4_bf16_...), NVFP4 on its FP4 cores.
WEIGHT_FORMATS: dict[str, tuple[float, str]] = {
    "bf16": (16.0, "bf16"),
    "fp8": (8.0, "fp8"),
    "fp8-block": (8.0 + 32 / 16384, "fp8"),
    "mxfp4": (4.25, "bf16"),
    "nvfp4": (4.5, "fp4"),
    "int4": (4.125, "bf16"),
}


@dataclass(frozen=True)
class MoE:
    """Routed experts of a MoE layer (every layer past `dense_layers` is one)."""

    experts: int
    top_k: int
    expert_ffn: int  # each expert's intermediate size (gated: gate, up, down)
    shared_ffn: int = 0  # the shared expert(s)' total intermediate size, run for every token (DeepSeek: 2048)
    dense_layers: int = 0  # leading dense layers of Model.ffn (DeepSeek's first_k_dense_replace = 3)
    groups: int = 1  # grouped routing (DeepSeek: 8 groups, each token's experts from its top 4): no effect on the
    topk_groups: int = 1  # expected touched experts (tests/test_moe.py samples it); kept for the all-to-all
    expert_format: str = "bf16"  # as the checkpoint ships them (WEIGHT_FORMATS)

    @property
    def expert_params(self) -> int:
        return 3 * self.expert_ffn  # per hidden unit: gate + up + down

    def touched(self, tokens: float) -> float:
        """Expected distinct experts a step of `tokens` tokens reads, routing balanced (uniform): E(1-(1-k/E)^N)."""
        return self.experts * (1 - (1 - self.top_k / self.experts) ** tokens)


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): one latent of kv_lora_rank + rope_dim values per token per
    layer is the whole KV; decode attends in the latent (absorbed), prefill up-projects the context."""

    kv_lora_rank: int
    q_lora_rank: int  # 0: the query is projected straight from the hidden state
    rope_dim: int
    nope_dim: int
    v_dim: int


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # a dense layer's intermediate size (0 when every layer is MoE)
    vocab: int
    tied_embeddings: bool = False
    max_position: int = 131072
    source: str = ""
    moe: MoE | None = None
    mla: MLA | None = None
    sliding_window: int = 0  # tokens a sliding-window layer attends to
    sliding_layers: int = 0  # how many layers are sliding-window ones (gpt-oss: every other)
    dtype: str = "bf16"  # the checkpoint's dense weights (DeepSeek-V3 ships FP8): --dtype's default for it
    vision: Vision | None = None  # a vision-language model's image tower (engine/vision.py)

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def attn_params(self) -> int:
        """One layer's attention projections."""
        h, a = self.hidden, self.mla
        if a is None:
            return h * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * h
        q = (h * a.q_lora_rank + a.q_lora_rank * self.heads * (a.nope_dim + a.rope_dim)) if a.q_lora_rank else 0
        q = q or h * self.heads * (a.nope_dim + a.rope_dim)
        kv = h * (a.kv_lora_rank + a.rope_dim) + a.kv_lora_rank * self.heads * (a.nope_dim + a.v_dim)
        return q + kv + self.heads * a.v_dim * h

    @property
    def dense_params(self) -> int:
        """Every layer's weights but the routed experts': attention, dense FFNs, routers, shared experts."""
        m, h = self.moe, self.hidden
        if m is None:
            return self.layers * (self.attn_params + 3 * h * self.ffn)
        per_moe = h * m.experts + 3 * h * m.shared_ffn
        return self.layers * self.attn_params + m.dense_layers * 3 * h * self.ffn + self.moe_layers * per_moe

    @property
    def expert_params_total(self) -> int:
        m = self.moe
        return 0 if m is None else self.moe_layers * m.experts * m.expert_params * self.hidden

    @property
    def params_per_layer(self) -> int:
        """The dense GEMM weights of an average layer (a dense model's: all of them)."""
        return self.dense_params // self.layers

    @property
    def active_ffn(self) -> float:
        """The FFN width a token's activations pass through, averaged over layers (element-wise work)."""
        m = self.moe
        if m is None:
            return self.ffn
        moe_w = m.top_k * m.expert_ffn + m.shared_ffn
        return (m.dense_layers * self.ffn + self.moe_layers * moe_w) / self.layers

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params_total(self) -> int:
        return self.dense_params + self.expert_params_total + self.embedding_params

    def expert_format(self, dtype: str) -> str | None:
        """The experts' weight format as served: the checkpoint's, or FP8 for BF16 experts under --dtype fp8
        (vLLM quantizes them on load)."""
        if self.moe is None:
            return None
        fmt = self.moe.expert_format
        return "fp8" if fmt == "bf16" and dtype == "fp8" else fmt

    def weight_bytes(self, dtype: str) -> float:
        """All weights in bytes: the experts in their format, the rest in dtype (bf16 or fp8)."""
        fmt = self.expert_format(dtype)
        experts = 0.0 if fmt is None else self.expert_params_total * WEIGHT_FORMATS[fmt][0] / 8
        return (self.dense_params + self.embedding_params) * (1.0 if dtype == "fp8" else 2.0) + experts

    @property
    def kv_layers(self) -> int:
        """Layers whose KV grows with the context (sliding-window layers keep a window per request)."""
        return self.layers - self.sliding_layers

    @property
    def attn_head_dim(self) -> float:
        """The head size prefill attention's FLOPs scale with: (QK + PV) / 2 (MLA: 192 and 128)."""
        a = self.mla
        return self.head_dim if a is None else (a.nope_dim + a.rope_dim + a.v_dim) / 2

    def kv_values(self, tp: int = 1) -> int:
        """KV values one token keeps in one layer on one GPU: K and V of its KV heads split over TP ranks
        (replicated when fewer heads than ranks), or MLA's latent (replicated on every rank)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.rope_dim
        return 2 * max(1, self.kv_heads // tp) * self.head_dim

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0, tp: int = 1) -> float:
        return self.kv_layers * self.kv_values(tp) * kv_dtype_bytes

    def describe(self) -> str:
        """One line of what kind of model this is (engine models, explain)."""
        bits = []
        if self.moe:
            m = self.moe
            bits.append(f"MoE {m.experts}x top-{m.top_k} ({m.expert_format} experts)")
        if self.mla:
            bits.append("MLA")
        if self.sliding_layers:
            bits.append(f"{self.sliding_layers} sliding-window layers ({self.sliding_window})")
        return ", ".join(bits) or "dense"


def _dense(name, layers, hidden, heads, kv, hd, ffn, vocab, tied, maxpos, source) -> Model:
    return Model(name, layers, hidden, heads, kv, hd, ffn, vocab, tied, maxpos, source)


def _qwen25_vl() -> Model:
    tower = Vision(
        32,
        1280,
        3420,
        16,
        14,
        2,
        window=8,
        full_layers=4,
        wrap=2,
        min_pixels=3136,
        max_pixels=12845056,
        source="Qwen/Qwen2.5-VL-7B-Instruct vision_config (depth 32, 1280, 3420, 16 heads, patch 14, merge 2, "
        "112-pixel windows, 4 full-attention layers); preprocessor min/max pixels",
    )
    return Model(
        "qwen2.5-vl-7b", 28, 3584, 28, 4, 128, 18944, 152064, False, 128000,
        "Qwen/Qwen2.5-VL-7B-Instruct config.json (the text model Qwen2.5-7B's)", vision=tower,
    )  # fmt: skip


def _qwen3_vl() -> Model:
    tower = Vision(
        27,
        1152,
        4304,
        16,
        16,
        2,
        gated=False,
        wrap=2,
        min_pixels=65536,
        max_pixels=16777216,
        source="Qwen/Qwen3-VL-8B-Instruct vision_config (depth 27, 1152, 4304, 16 heads, patch 16, merge 2, "
        "full attention); 64-16384 tokens an image",
    )
    return Model(
        "qwen3-vl-8b", 36, 4096, 32, 8, 128, 12288, 151936, False, 262144,
        "Qwen/Qwen3-VL-8B-Instruct config.json (text_config)", vision=tower,
    )  # fmt: skip


def _llava15() -> Model:
    clip = Vision(
        24,
        1024,
        4096,
        16,
        14,
        1,
        gated=False,
        fixed_side=336,
        source="llava-hf/llava-1.5-7b-hf vision_config: CLIP ViT-L/14-336 (24 layers, 1024, 4096), 576 tokens an image",
    )
    return Model(
        "llava-1.5-7b", 32, 4096, 32, 32, 128, 11008, 32064, False, 4096,
        "llava-hf/llava-1.5-7b-hf config.json (Vicuna-7B text model)", vision=clip,
    )  # fmt: skip


def _gpt_oss(name: str, layers: int, experts: int) -> Model:
    return Model(
        name, layers, 2880, 64, 8, 64, 0, 201088, False, 131072,
        f"openai/{name} config.json (MXFP4 experts; attention alternates 128-token windows and full layers)",
        moe=MoE(experts, 4, 2880, expert_format="mxfp4"), sliding_window=128, sliding_layers=layers // 2,
    )  # fmt: skip


def _qwen3_moe(name: str, layers: int, hidden: int, heads: int, ffn: int) -> Model:
    return Model(
        name, layers, hidden, heads, 4, 128, 0, 151936, False, 40960, f"Qwen/{name} config.json",
        moe=MoE(128, 8, ffn),
    )  # fmt: skip


DEEPSEEK_V3 = Model(
    "deepseek-v3", 61, 7168, 128, 128, 128, 18432, 129280, False, 163840,
    "deepseek-ai/DeepSeek-V3 config.json (R1 shares it; FP8 128-block weights as shipped)",
    moe=MoE(256, 8, 2048, shared_ffn=2048, dense_layers=3, groups=8, topk_groups=4, expert_format="fp8-block"),
    mla=MLA(kv_lora_rank=512, q_lora_rank=1536, rope_dim=64, nope_dim=128, v_dim=128), dtype="fp8",
)  # fmt: skip

MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        _dense("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, False, 131072, "meta-llama/Llama-3.1-8B config.json"),
        _dense("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, False, 131072, "meta-llama/Llama-3.1-70B config.json"),
        _dense("llama-3.3-70b", 80, 8192, 64, 8, 128, 28672, 128256, False, 131072,
               "meta-llama/Llama-3.3-70B-Instruct config.json (Llama-3.1-70B's shape)"),
        _dense("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, True, 131072,
               "meta-llama/Llama-3.2-1B config.json (tied embeddings)"),
        _dense("llama-3.2-3b", 28, 3072, 24, 8, 128, 8192, 128256, True, 131072,
               "meta-llama/Llama-3.2-3B config.json (tied embeddings)"),
        _dense("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, False, 40960, "Qwen/Qwen3-8B config.json"),
        _dense("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, False, 40960, "Qwen/Qwen3-32B config.json"),
        _dense("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, False, 4096, "meta-llama/Llama-2-7b-hf config.json"),
        _qwen25_vl(),
        _qwen3_vl(),
        _llava15(),
        _dense("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, False, 32768, "Qwen/Qwen2.5-7B-Instruct config.json"),
        _dense("mistral-7b", 32, 4096, 32, 8, 128, 14336, 32768, False, 32768,
               "mistralai/Mistral-7B-Instruct-v0.3 config.json"),
        _gpt_oss("gpt-oss-20b", 24, 32),
        _gpt_oss("gpt-oss-120b", 36, 128),
        _qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 768),
        _qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 1536),
        DEEPSEEK_V3,
    )
}  # fmt: skip


def model_from_toml(d: dict, path: str) -> Model:
    """A custom dense model from a model file's TOML table (read at the edge: api/enginefiles.py): name, layers,
    hidden, heads, kv_heads, head_dim (default hidden/heads), ffn, vocab, tied_embeddings, max_position. MoE and
    MLA shapes come from a Hugging Face config.json (engine/hfconfig.py)."""
    need = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")
    for k in need:
        if not isinstance(d.get(k), int) or d[k] <= 0:
            raise InputError(f"{path}: {k}: required positive integer")
    return Model(
        name=str(d.get("name", os.path.splitext(os.path.basename(path))[0])),
        layers=d["layers"],
        hidden=d["hidden"],
        heads=d["heads"],
        kv_heads=d["kv_heads"],
        head_dim=int(d.get("head_dim", d["hidden"] // d["heads"])),
        ffn=d["ffn"],
        vocab=d["vocab"],
        tied_embeddings=bool(d.get("tied_embeddings", False)),
        max_position=int(d.get("max_position", 131072)),
        source=path,
    )


def is_model_file(name: str) -> bool:
    """A model named by its file (a .toml shape or a Hugging Face config.json) rather than by a name in MODELS."""
    return name.endswith((".toml", ".json"))


def get_model(name: str) -> Model:
    """A built-in model shape by name. A model file is read once at the edge and carried by the config
    (EngineConfig.shape()), never read here."""
    if is_model_file(name):
        raise UsageError(
            f"model file {name}: the engine reads no files; pass the config through goodbench's API (gb.simulate, "
            "gb.run, ...; goodbench.api.enginefiles.with_files), which reads it once"
        )
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise UsageError(
            f"unknown model {name!r}; known: {', '.join(MODELS)} (or a .toml model file or a config.json)"
        ) from None
