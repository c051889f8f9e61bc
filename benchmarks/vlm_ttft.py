"""A vision-language model's TTFT against image count and resolution: the engine beside public vLLM
measurements (issue 45's multimodal target).

Fitted (engine/visionfit.py): the images' preprocessing, a + b x pixels per image, to the 720p and 1440p
rows of yhyang201/sgl-bench's probe (vLLM 0.19.1rc1, one H200, Qwen3-VL-8B, one request of 256 text tokens
with 1-64 images). Held out: the same probe's 1080p rows (the same source), and vLLM issue #41267 (H100,
Qwen2.5-VL-7B, vLLM v0.19.1, one 1080p image: TTFT 293 ms; a whole other source). The engine's prediction
is a lone request's steps (its prefill, the vision tower, the preprocessing), as `simulate` runs them.

    python benchmarks/vlm_ttft.py"""

from __future__ import annotations

import statistics

from goodbench.engine import visionfit as f
from goodbench.engine.vision import PREP_IMAGE_S, PREP_PIXEL_S

ISSUE_41267_MS = 293.0


def main() -> None:
    print(f"preprocessing {PREP_IMAGE_S * 1e3:.1f} ms + {PREP_PIXEL_S * 1e9:.1f} ns per pixel, per image (fitted)")
    for wh, row in f.PROBE_MS.items():
        tag = "fitted" if wh in f.FITTED else "held out"
        errs = []
        print(f"{wh[0]}x{wh[1]} ({tag}): images: measured / engine ms")
        cells = []
        for n, ms in zip(f.COUNTS, row):
            e = f.engine_ttft("qwen3-vl-8b", "h200", n, *wh) * 1000
            errs.append(e / ms - 1)
            cells.append(f"{n}: {ms} / {e:.0f}")
        print("  " + ", ".join(cells))
        print(f"  median |error| {statistics.median(abs(x) for x in errs):.1%}, worst {max(errs, key=abs):+.1%}")
    e = f.engine_ttft("qwen2.5-vl-7b", "h100-sxm", 1, 1920, 1080) * 1000
    print(
        f"vLLM issue #41267 (held out: H100, Qwen2.5-VL-7B, one 1080p image): {ISSUE_41267_MS:.0f} ms measured, "
        f"{e:.0f} ms engine ({e / ISSUE_41267_MS - 1:+.1%})"
    )


if __name__ == "__main__":
    main()
