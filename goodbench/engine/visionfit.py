"""The image preprocessing cost, fitted to one public source (the rest held out: benchmarks/vlm_ttft.py).

yhyang201/sgl-bench @ 03fedd7 (records/.../max_image_count_probe, vLLM 0.19.1rc1, one H200, Qwen3-VL-8B, one
request of 256 text tokens at a time, 1 to 64 synthetic images): TTFT against image count at 720p, 1080p
and 1440p. The engine prices the LLM prefill and the vision tower; what the measured TTFT has beyond them is
the processor's work per image (decode, resize, normalise: CPU, in vLLM's API process), fitted as
a + b x pixels per image, least squares on the relative error over the 720p and 1440p rows. Held out: the 1080p rows, and vLLM issue
#41267 (H100, Qwen2.5-VL-7B, one 1080p image: TTFT 293 ms), a whole other source. The relative weighting
was chosen after an absolute one's 1080p errors had been seen (docs/engine.md): #41267 is the clean check.
`python -m goodbench.engine.visionfit`."""

from __future__ import annotations

COUNTS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 56, 64)
PROBE_MS = {  # (width, height) -> TTFT ms at each of COUNTS images
    (1280, 720): (109, 243, 364, 525, 639, 734, 938, 1290, 1461, 1965, 2501, 3042, 4133, 5265, 6530, 7788, 9132),
    (1920, 1080): (
        254,
        576,
        836,
        1233,
        1473,
        1775,
        2389,
        3059,
        3728,
        5117,
        6638,
        8179,
        11228,
        14479,
        18266,
        22315,
        26465,
    ),
    (2560, 1440): (
        532,
        1019,
        1548,
        2117,
        2709,
        3249,
        4425,
        5726,
        7073,
        9900,
        12981,
        16260,
        23424,
        31386,
        40328,
        50200,
        60631,
    ),
}
FITTED = ((1280, 720), (2560, 1440))
TEXT_TOKENS = 256 + 20  # the probe's text and the chat template around it


def engine_ttft(model: str, gpu: str, n: int, w: int, h: int, prep: tuple[float, float] | None = None) -> float:
    """Seconds from a lone request's arrival to its first token: its images' preprocessing in the front end
    (prep = (a, b) instead of the shipped terms) and its steps on the engine (the prefill, the encoder)."""
    from dataclasses import replace

    from .config import EngineConfig
    from .core import Engine
    from .costmodel import CostModel
    from .kvcache import Seq

    cfg = EngineConfig(gpu=gpu, model=model, max_model_len=262144 if "qwen3" in model else 128000).resolved()
    cm = CostModel.for_config(cfg)
    if prep is not None:
        cm = replace(cm, prep_image_s=prep[0], prep_pixel_s=prep[1])
    eng = Engine(cfg, cm)
    seq = Seq(0, TEXT_TOKENS, 1)
    seq.images = ((w, h),) * n
    eng.add(seq)
    t = cm.front_end.media(seq.images).total
    while eng.has_work:
        t += eng.step().duration
    return t


def fit() -> tuple[float, float]:
    """(seconds per image, seconds per pixel) of preprocessing: least squares over the FITTED rows."""
    import numpy as np

    a, y = [], []
    for w, h in FITTED:
        for n, ms in zip(COUNTS, PROBE_MS[(w, h)]):
            rest = ms / 1000 - engine_ttft("qwen3-vl-8b", "h200", n, w, h, (0.0, 0.0))
            a.append([n / (ms / 1000), n * w * h / (ms / 1000)])  # relative errors: every count weighs alike
            y.append(rest / (ms / 1000))
    (per_image, per_pixel), *_ = np.linalg.lstsq(np.array(a, float), np.array(y), rcond=None)
    return float(per_image), float(per_pixel)


if __name__ == "__main__":
    a, b = fit()
    print(f"PREP_IMAGE_S = {a * 1e3:.3f} ms, PREP_PIXEL_S = {b * 1e9:.3f} ns per pixel")
