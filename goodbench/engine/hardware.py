"""GPU tiers and model shapes: plain data with sources.

GPU figures are datasheet dense tensor-core numbers (sparse figures are twice these and are NOT used).
Sources, per entry below: llm-analysis gpu_configs (github.com/cli99/llm-analysis), PyTorch Lightning
`_CUDA_FLOPS`, NVIDIA/AMD datasheets; docs/engine.md summarises them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..errors import InputError, UsageError


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_tflops: float  # dense
    fp8_tflops: float | None  # dense; None = no FP8 tensor cores
    mem_gib: float
    mem_bw_tbs: float  # TB/s
    hbm: bool  # HBM vs GDDR: sets the achievable bandwidth fraction
    interconnect_gbs: float  # per-GPU all-reduce bus bandwidth, GB/s (NVLink or PCIe)
    nvlink: bool
    source: str

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes per second."""
        return self.mem_bw_tbs * 1e12

    @property
    def ridge(self) -> float:
        """FLOP per byte where BF16 GEMMs turn compute-bound."""
        return self.bf16_tflops * 1e12 / self.bandwidth


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU(
            "h100-sxm",
            989,
            1979,
            80,
            3.35,
            True,
            450,
            True,
            "llm-analysis h100-sxm-80gb.json (989 TFLOPS, 3350 GB/s, 450 GB/s intra-node); Lightning 'h100 sxm' 989.4",
        ),
        GPU(
            "h100-pcie",
            756,
            1513,
            80,
            2.0,
            True,
            64,
            False,
            "llm-analysis h100-pcie-80gb.json (756, 2000 GB/s); Lightning 'h100 pcie' 756; PCIe5 x16 ~64 GB/s/dir",
        ),
        GPU(
            "h200",
            989,
            1979,
            141,
            4.8,
            True,
            450,
            True,
            "NVIDIA H200 datasheet: same compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s",
        ),
        GPU(
            "a100-80g-sxm",
            312,
            None,
            80,
            2.039,
            True,
            300,
            True,
            "llm-analysis a100-sxm-80gb; LLM-Viewer A100_80G (2039e9 B/s, 312e12)",
        ),
        GPU(
            "a100-80g-pcie",
            312,
            None,
            80,
            1.935,
            True,
            32,
            False,
            "llm-analysis a100-pcie-80gb.json (312, 1935 GB/s); PCIe4 x16 ~32 GB/s/dir",
        ),
        GPU("a100-40g", 312, None, 40, 1.555, True, 300, True, "LLM-Viewer A100_40G (1555e9 B/s)"),
        GPU(
            "l40s",
            362,
            733,
            48,
            0.864,
            False,
            32,
            False,
            "Lightning 'l40s' 362.05 (nvidia.com/en-us/data-center/l40s); 864 GB/s GDDR6; PCIe4, no NVLink",
        ),
        GPU(
            "a10g",
            70,
            None,
            24,
            0.6,
            False,
            32,
            False,
            "llm-analysis a10g-pcie-24gb.json (70 TFLOPS, 600 GB/s); UNVERIFIED tensor rate (A10 is 125)",
        ),
        GPU("l4", 121, 242.5, 24, 0.3, False, 32, False, "Lightning 'l4' 121 (L4 datasheet); 300 GB/s GDDR6"),
        GPU(
            "rtx-6000-ada",
            364,
            728,
            48,
            0.96,
            False,
            32,
            False,
            "Ada whitepaper values (UNVERIFIED here): ~364 dense BF16 with FP32 accumulate, 960 GB/s",
        ),
        GPU(
            "b200",
            2250,
            4500,
            180,
            7.7,
            True,
            900,
            True,
            "glennklockwood.com B200 (HGX: 2250 dense BF16); NVIDIA table 180 GB, 7.7 TB/s; NVLink5 1.8 TB/s bidir",
        ),
        GPU(
            "mi300x",
            1307,
            2615,
            192,
            5.3,
            True,
            448,
            False,
            "AMD MI300X datasheet (1307 dense FP16/BF16, 5.3 TB/s, 192 GB); Infinity Fabric 7x128 GB/s",
        ),
    )
}


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool = False
    max_position: int = 131072
    source: str = ""

    @property
    def params_per_layer(self) -> int:
        """Matmul weights of one decoder layer (norms are negligible)."""
        attn = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * self.hidden
        return attn + 3 * self.hidden * self.ffn

    @property
    def params_total(self) -> int:
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.params_per_layer + emb

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_dtype_bytes


MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model(
            "llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, False, 131072, "meta-llama/Llama-3.1-8B config.json"
        ),
        Model(
            "llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, False, 131072, "meta-llama/Llama-3.1-70B config.json"
        ),
        Model(
            "llama-3.2-1b",
            16,
            2048,
            32,
            8,
            64,
            8192,
            128256,
            True,
            131072,
            "meta-llama/Llama-3.2-1B config.json (tied embeddings)",
        ),
        Model(
            "llama-3.2-3b",
            28,
            3072,
            24,
            8,
            128,
            8192,
            128256,
            True,
            131072,
            "meta-llama/Llama-3.2-3B config.json (tied embeddings)",
        ),
        Model("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, False, 40960, "Qwen/Qwen3-8B config.json"),
        Model("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, False, 32768, "Qwen/Qwen2.5-7B-Instruct config.json"),
        Model(
            "mistral-7b",
            32,
            4096,
            32,
            8,
            128,
            14336,
            32768,
            False,
            32768,
            "mistralai/Mistral-7B-Instruct-v0.3 config.json",
        ),
    )
}


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


def read_toml(path: str, what: str) -> dict:
    """One of the engine's TOML files (a model shape, a calibration profile); InputError naming the file."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8; tomllib lets the decoder's error through
        raise InputError(f"{path}: not valid TOML: not UTF-8 text (byte {e.start}: {e.reason})") from None


def load_model_file(path: str) -> Model:
    """A custom model from TOML: name, layers, hidden, heads, kv_heads, head_dim (default hidden/heads),
    ffn, vocab, tied_embeddings, max_position."""
    d = read_toml(path, "model file")
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


def get_model(name: str) -> Model:
    if name.endswith(".toml"):
        return load_model_file(name)
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown model {name!r}; known: {', '.join(MODELS)} (or a .toml model file)") from None


GIB = 1024**3
