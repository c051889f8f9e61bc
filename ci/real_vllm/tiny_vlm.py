"""A tiny random-weight Qwen2-VL (Qwen2VLForConditionalGeneration: a 2-layer text model, a 1-layer vision
tower) with goodbench's bundled tokenizer (Qwen3's, which has Qwen2-VL's <|vision_start|>, <|image_pad|> and
<|vision_end|> at the same ids), so the real-vLLM tests can send images with no download. Run with the vLLM
venv's Python (it has transformers and torch), offline:

    python ci/real_vllm/tiny_vlm.py TOKENIZER_DIR OUT_DIR [--seed 0]

The image processor is Qwen2-VL's with its own defaults for min/max pixels (the values goodbench's
engine/hfvision.py assumes), so a w x h image becomes (round(h/28) * round(w/28)) prompt tokens inside
[min_pixels, max_pixels] (448x448: 256; 224x336: 96), plus <|vision_start|> and <|vision_end|> around them.

vLLM 0.32 cannot load any Qwen-VL (or LLaVA) model without torchvision: its qwen2_vl.py imports transformers'
torchvision image processor module, and transformers 5 builds Qwen2VLProcessor's video processor only with
torchvision. PyPI's torchvision 0.28.0 (the one for torch 2.13) is a CUDA build whose C ops do not load beside
the CPU torch, and its import then fails registering fake kernels for torchvision::nms/qnms. So: install it
apart from the venv (no deps: it would pull a CUDA torch), write the shim beside it, and put that folder on
vLLM's PYTHONPATH:

    pip install --no-deps --target TV_DIR torchvision==0.28.0
    python ci/real_vllm/tiny_vlm.py --torchvision-shim TV_DIR
    PYTHONPATH=TV_DIR vllm serve OUT_DIR ..."""

from __future__ import annotations

import argparse
import json
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PATCH, MERGE, TEMPORAL = 14, 2, 2
MIN_PIXELS = 4 * (PATCH * MERGE) ** 2  # 3,136 (56 x 56): Qwen2-VL's
MAX_PIXELS = 16384 * (PATCH * MERGE) ** 2  # 12,845,056: Qwen2-VL's
HEAD_DIM = 32  # text model: 128 / 4 heads; mrope sections (temporal, height, width) halve it
TEXT = {
    "vocab_size": 151936,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},  # sums to HEAD_DIM / 2
    "use_sliding_window": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "tie_word_embeddings": True,
}
VISION = {
    "depth": 1,
    "embed_dim": 64,  # the tower's width
    "hidden_size": TEXT["hidden_size"],  # the merger's output: the text model's width
    "mlp_ratio": 2,
    "num_heads": 4,
    "in_channels": 3,
    "hidden_act": "quick_gelu",
    "patch_size": PATCH,
    "spatial_merge_size": MERGE,
    "temporal_patch_size": TEMPORAL,
}
TOKENS = {  # the ids of these in the bundled tokenizer (checked against its tokenizer.json)
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
}
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
    "rescale_factor": 1 / 255,
    "resample": 3,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "min_pixels": MIN_PIXELS,
    "max_pixels": MAX_PIXELS,
    "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
    "patch_size": PATCH,
    "temporal_patch_size": TEMPORAL,
    "merge_size": MERGE,
}
# ChatML, as ci/real_vllm/chatml.jinja (no default system prompt), with Qwen2-VL's image and video parts
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] | trim }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' or part['type'] == 'image_url' or 'image' in part %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'video' or 'video' in part %}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif 'text' in part %}{{- part['text'] }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SHIM = '''"""Written by goodbench's ci/real_vllm/tiny_vlm.py: torchvision from PyPI (a CUDA build) beside a CPU torch
cannot load its C ops, and its import then fails registering fake kernels for torchvision::nms and ::qnms.
Define those two schemas the first time torchvision is imported, so that its pure-Python transforms import
(what transformers' image processors use); its C ops (nms, roi_align, ...) stay unusable."""
import sys


class _DefineTorchvisionOps:
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            lib = torch.library.Library("torchvision", "DEF")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            globals()["_lib"] = lib  # the definitions last as long as the Library object
        return None


sys.meta_path.insert(0, _DefineTorchvisionOps())
'''


def _token_ids(tokenizer_dir: str) -> dict[str, int]:
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    missing = [tok for tok in TOKENS.values() if tok not in added]
    if missing:
        raise SystemExit(f"{tokenizer_dir}/tokenizer.json lacks {', '.join(missing)}")
    return {key: added[tok] for key, tok in TOKENS.items()}


def write_vlm(tokenizer_dir: str, out_dir: str, seed: int = 0) -> str:
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    ids = _token_ids(tokenizer_dir)
    torch.manual_seed(seed)
    cfg = Qwen2VLConfig(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=True, **ids)
    model = Qwen2VLForConditionalGeneration(cfg).to(torch.float32)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w", encoding="utf-8") as f:
        json.dump(PREPROCESSOR, f, indent=1)
    with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(CHAT_TEMPLATE)
    n = sum(p.numel() for p in model.parameters())
    v = sum(p.numel() for p in model.model.visual.parameters())
    print(f"tiny Qwen2-VL: {n / 1e6:.1f} M parameters ({v / 1e3:.0f} k in the vision tower), seed {seed} -> {out_dir}")
    return out_dir


def write_shim(tv_dir: str) -> str:
    """sitecustomize.py in tv_dir (where torchvision was pip-installed with --target)."""
    if not os.path.isdir(os.path.join(tv_dir, "torchvision")):
        raise SystemExit(f"{tv_dir}: no torchvision here (pip install --no-deps --target {tv_dir} torchvision==0.28.0)")
    path = os.path.join(tv_dir, "sitecustomize.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(SHIM)
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer_dir", nargs="?")
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torchvision-shim", metavar="TV_DIR", help="write the torchvision shim into TV_DIR instead")
    a = ap.parse_args()
    if a.torchvision_shim:
        print(write_shim(a.torchvision_shim))
    elif a.tokenizer_dir and a.out_dir:
        write_vlm(a.tokenizer_dir, a.out_dir, a.seed)
    else:
        ap.error("TOKENIZER_DIR and OUT_DIR are required (or --torchvision-shim TV_DIR)")
