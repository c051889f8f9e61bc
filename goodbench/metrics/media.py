"""Images and audio over a run (workloads/media.py's per-request stats). Pure.

summary.json's `media` block (only for a run whose requests carried media):
  requests                 requests with images or audio
  images_per_request       mean images per such request; image_pixels_mean: per image
  media_bytes_mean         per request (before base64), audio_s_mean: seconds per request with audio
  prompt_tokens_mean       the server's prompt tokens per such request (usage: text, template and the
                           media's placeholders), where the server said them
  ttft_ms_by_images        TTFT p50 by the number of images a request carried"""

from __future__ import annotations

import numpy as np


def media_block(cols, ttft_s: np.ndarray, ok: np.ndarray) -> dict | None:
    has = cols.images >= 0
    if not has.any():
        return None
    imgs = cols.images[has]
    pix = cols.image_pixels[has]
    audio = cols.audio_ms[has]
    out = {
        "requests": int(has.sum()),
        "images_per_request": float(imgs.mean()),
        "image_pixels_mean": float(pix.sum() / imgs.sum()) if imgs.sum() else None,
        "media_bytes_mean": float(cols.media_bytes[has].mean()),
        "audio_s_mean": float(audio[audio > 0].mean() / 1000) if (audio > 0).any() else None,
        "prompt_tokens_mean": float(cols.prompt_tokens[has].mean()),
    }
    good = has & ok & ~np.isnan(ttft_s)
    out["ttft_ms_by_images"] = {
        str(int(k)): float(np.median(ttft_s[good & (cols.images == k)]) * 1000) for k in np.unique(cols.images[good])
    }
    return out


def describe(b: dict | None) -> str | None:
    """The console's line: '120 requests, 2.0 images each (512x512 px mean), 61 KiB; TTFT p50 by images ...'."""
    if not b:
        return None
    side = b["image_pixels_mean"] ** 0.5 if b.get("image_pixels_mean") else None
    head = f"{b['requests']} requests, {b['images_per_request']:.1f} images each"
    head += f" (~{side:.0f}x{side:.0f} px)" if side else ""
    head += f", {b['media_bytes_mean'] / 1024:.0f} KiB"
    if b.get("audio_s_mean"):
        head += f", {b['audio_s_mean']:.1f} s audio"
    by = b.get("ttft_ms_by_images") or {}
    if len(by) > 1:
        head += "; TTFT p50 by images: " + ", ".join(f"{k}: {v:.0f} ms" for k, v in by.items())
    return head
