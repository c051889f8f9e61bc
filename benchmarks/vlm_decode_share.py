"""How much of a vision-language model's image preprocessing runs in parallel across requests in vLLM's API
server, measured: the share of the per-pixel cost that is decoding the image.

vLLM (0.32, vllm/multimodal/media/connector.py and vllm/renderers/base.py) decodes each request's images in a
thread pool (VLLM_MEDIA_LOADING_THREAD_COUNT, 8: base64, PIL's JPEG decode, which releases the GIL), then runs
the HF processor (resize, rescale, normalise, patchify) on a single-worker executor, one request at a time. The
public fit (engine/visionfit.py) prices the two together for a lone request; under load only the processor
queues. This script times both on this machine for `vllm bench serve`'s synthetic images (i.i.d. random pixels,
JPEG at PIL's default quality) of 720p, 1080p and 1440p, one thread each (OMP_NUM_THREADS=1), and prints the
decode's share of the per-pixel slope (decode slope over decode + processor slopes, least squares over the three
sizes), per repeat. engine/frontend.DECODE_SHARE is the median it printed.

Run it with an interpreter that has transformers and torchvision (vLLM's image processor backend), e.g. the real-
vLLM environment of ci/real_vllm:

    OMP_NUM_THREADS=1 PYTHONPATH=~/.cache/goodbench/vllm-torchvision \\
      ~/.cache/goodbench/vllm-venv/bin/python benchmarks/vlm_decode_share.py ~/.cache/goodbench/tiny-qwen2-vl
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import time

import numpy as np

SIZES = ((1280, 720), (1920, 1080), (2560, 1440))


def _median_ms(fn, n: int) -> float:
    fn()
    times = []
    for _ in range(n):
        a = time.perf_counter()
        fn()
        times.append(time.perf_counter() - a)
    return statistics.median(times) * 1e3


def one_repeat(processor, seed: int, n: int) -> tuple[list, list]:
    """(decode ms, processor ms) at each size, medians of n calls."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    dec, proc = [], []
    for w, h in SIZES:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, format="JPEG")
        b64 = base64.b64encode(buf.getvalue()).decode()

        def load(b64=b64):
            im = Image.open(io.BytesIO(base64.b64decode(b64)))
            im.load()
            return im.convert("RGB")

        image = load()
        dec.append(_median_ms(load, n))
        proc.append(_median_ms(lambda image=image: processor(images=[image], return_tensors="pt"), n))
    return dec, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", help="a directory with a Qwen2-VL preprocessor_config.json")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--calls", type=int, default=15, help="calls per timing (median)")
    args = ap.parse_args()
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    print(f"processor: {type(processor).__name__}")
    pixels = np.array([w * h for w, h in SIZES], float)
    shares = []
    for r in range(args.repeat):
        dec, proc = one_repeat(processor, r, args.calls)
        sd, sp = np.polyfit(pixels, dec, 1)[0], np.polyfit(pixels, proc, 1)[0]
        shares.append(sd / (sd + sp))
        cells = ", ".join(f"{w}x{h}: decode {d:.1f} ms, processor {p:.1f} ms" for (w, h), d, p in zip(SIZES, dec, proc))
        print(f"repeat {r}: {cells}; ns/pixel decode {sd * 1e6:.1f}, processor {sp * 1e6:.1f}; share {shares[-1]:.3f}")
    print(
        f"decode share of the per-pixel cost: median {statistics.median(shares):.3f} ({min(shares):.3f}-{max(shares):.3f})"
    )


if __name__ == "__main__":
    main()
