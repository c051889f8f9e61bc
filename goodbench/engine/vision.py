"""A vision-language model's image path in the engine: how many prompt tokens an image becomes, and what its
vision encoder costs on the tier. Pure.

Tokens: Qwen2-VL / Qwen2.5-VL resize each image to multiples of patch x merge pixels inside [min_pixels,
max_pixels] (their processor's smart_resize), cut it into patch x patch pieces (the encoder's input tokens)
and merge merge x merge of them into one prompt token; LLaVA-style models resize to a fixed square (CLIP
ViT-L/14-336: 576 tokens an image). Encoder: per layer its GEMMs over the patches (the tier's measured curves,
as the text model's), attention (full over one image's patches, or windows of window x window patches), and
the merger / projector into the text model's width. vLLM runs it in the step that first schedules the image's
placeholder tokens, within an encoder budget of max_num_batched_tokens placeholder tokens a step."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

# an image's preprocessing (decode, resize, normalise: CPU work in vLLM's API process), per image and per pixel
# of the image as sent; fitted to a public TTFT probe (engine/visionfit.py), priced with the image's encoding
PREP_IMAGE_S = 11.055e-3
PREP_PIXEL_S = 81.656e-9
# held out (benchmarks/vlm_ttft.py): the probe's 1080p rows (median 6.1 %, worst -13.0 %) and vLLM issue #41267
# (-6.6 %); the fitted rows reach +13.8 % (at 64 images): what a run with images says in its engine_uncertainty
VISION_HELD_OUT_WORST = 0.14
# under load (benchmarks/vlm_loaded.py: the probe's closed loops of 16-128 users, never fitted, though seen before the
# preprocessing left the step and before its decoding went to a thread pool): mean TTFT median |error| 17.6 % at
# 16 users (the worst C), single cells up to +106 % (two 720p images a request, 32 users)
VISION_LOADED_MEDIAN = 0.176
VISION_LOADED_WORST = 2.1  # the worst cell's engine / measured mean TTFT


@dataclass(frozen=True)
class Vision:
    """A vision tower: its transformer, its patching and the merge into prompt tokens."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    patch: int  # pixels a side of one patch
    merge: int  # merge x merge patches -> one prompt token (1: none)
    gated: bool = True  # SwiGLU (gate, up, down) or a plain MLP (up, down)
    fixed_side: int = 0  # LLaVA: every image resized to this square (0: Qwen's dynamic resize)
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 16384
    window: int = 0  # patches a side of an attention window (0: full attention in every layer)
    full_layers: int = 0  # with windows: layers that attend over the whole image
    wrap: int = 0  # text tokens the chat template puts around each image's (Qwen-VL: <|vision_start|>, _end|>)
    source: str = ""

    def grid(self, w: int, h: int) -> tuple[int, int]:
        """The (width, height) in patches the processor resizes an image to."""
        if self.fixed_side:
            s = self.fixed_side // self.patch
            return s, s
        f = self.patch * self.merge
        hb, wb = max(f, round(h / f) * f), max(f, round(w / f) * f)
        if hb * wb > self.max_pixels:
            beta = math.sqrt(h * w / self.max_pixels)
            hb, wb = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
        elif hb * wb < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (h * w))
            hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
        return wb // self.patch, hb // self.patch

    def tokens(self, w: int, h: int) -> tuple[int, int]:
        """(placeholder tokens, encoder patches) of one w x h image; its prompt tokens are these + wrap."""
        gw, gh = self.grid(w, h)
        patches = gw * gh
        return patches // (self.merge * self.merge), patches

    def prompt_tokens(self, w: int, h: int) -> int:
        """The prompt tokens one w x h image becomes: its placeholders and the template's tokens around them."""
        return self.tokens(w, h)[0] + self.wrap

    @property
    def params_per_layer(self) -> int:
        h = self.hidden
        return 4 * h * h + (3 if self.gated else 2) * h * self.ffn

    def flops(self, patches: int, text_hidden: int) -> tuple[float, float]:
        """(GEMM FLOPs, attention FLOPs) of encoding one image of this many patches (its merger included)."""
        gemm = 2.0 * patches * self.params_per_layer * self.layers
        merged = patches // (self.merge * self.merge)
        d_in = self.hidden * self.merge * self.merge
        gemm += 2.0 * merged * (d_in * d_in + d_in * text_hidden)  # the merger / projector: two linears
        full = self.full_layers if self.window else self.layers
        span = min(patches, self.window * self.window) if self.window else patches
        attn = 4.0 * self.hidden * patches * (full * patches + (self.layers - full) * span)
        return gemm, attn


def image_key(data: bytes) -> str:
    """An image's content key, as vLLM's mm_hash is one: the same bytes, the same key (its prefix-cache blocks and
    encoder output are shared); the workload's client side and `goodbench serve` compute it alike."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def encoder_time(v: Vision, patches: int, text_hidden: int, gpu, tp: int, attn_ineff: float) -> float:
    """Seconds to encode one image of this many patches on the tier (TP-sharded as vLLM shards the tower):
    its layers' GEMMs on the tier's measured curves, the merger's, and its attention's FLOPs at prefill
    attention's fitted inverse efficiency (StepConstants.prefill_attn)."""
    from .opmodel import gemm_pricing, gemm_time

    peak, bw, wbytes, fam, ridge_bw = gemm_pricing(gpu, False)
    layer = float(gemm_time(patches, v.params_per_layer / tp, peak, bw, wbytes, fam, ridge_bw=ridge_bw))
    merged = max(1, patches // (v.merge * v.merge))
    d_in = v.hidden * v.merge * v.merge
    merger = float(
        gemm_time(merged, (d_in * d_in + d_in * text_hidden) / tp, peak, bw, wbytes, fam, count=2, ridge_bw=ridge_bw)
    )
    _, attn = v.flops(patches, text_hidden)
    return v.layers * layer + merger + attn * attn_ineff / (peak * tp)
