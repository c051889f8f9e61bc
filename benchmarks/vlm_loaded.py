"""A vision-language model under load: the engine's mean TTFT and request throughput beside public vLLM runs
it was never fitted to (issue 45's multimodal target, the loaded side of benchmarks/vlm_ttft.py).

Held out, whole: yhyang201/sgl-bench @ 03fedd7, records/20260414/20260414_195338_Perf_Qwen3-VL-8B_vLLM (vLLM
0.19.1rc1, one H200, Qwen3-VL-8B, TP 1): `vllm bench serve --dataset-name image --num-prompts 128 --request-rate
inf --max-concurrency C --random-input-len 512 --random-output-len 32 --image-count N --image-resolution R`, three
runs a cell (their means are quoted; the engine's preprocessing terms were fitted to the same probe's unloaded
720p and 1440p rows, engine/visionfit.py, never to these; but these rows were seen before the preprocessing was
moved out of the GPU step into the front end, so they check that move only loosely: docs/engine.md). The engine
runs each cell as `simulate` would: 128 requests of 512 text tokens and N images of R, 32 tokens out, a closed
loop of C users.

    python benchmarks/vlm_loaded.py [--concurrency 16,32,128]     (about 6 minutes on 2 cores)"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import goodbench as gb

RES = {"720p": (1280, 720), "1080p": (1920, 1080)}
COUNTS = (1, 2, 3, 5, 10)
# mean TTFT (ms) of the three runs per cell, by (resolution, images) and concurrency 16 / 32 / 128
TTFT_MS = {
    ("720p", 1): ((582, 541, 547), (1119, 1059, 1045), (4398, 4065, 4038)),
    ("720p", 2): ((1351, 1424, 1492), (1865, 1894, 1783), (8122, 7111, 7290)),
    ("720p", 3): ((2117, 2268, 2454), (4933, 4300, 4792), (12116, 12020, 11722)),
    ("720p", 5): ((5144, 4980, 4968), (9997, 9930, 9917), (25390, 24957, 24705)),
    ("720p", 10): ((10931, 10709, 10728), (20931, 20542, 20252), (51399, 51693, 50702)),
    ("1080p", 1): ((1563, 1558, 1618), (3300, 3005, 3099), (10566, 10658, 10858)),
    ("1080p", 2): ((4824, 4801, 4755), (9476, 9468, 9439), (24293, 24123, 23976)),
    ("1080p", 3): ((7783, 8020, 8040), (14975, 15129, 15105), (37351, 37878, 37356)),
    ("1080p", 5): ((12938, 13265, 13426), (22903, 22802, 22638), (57534, 57933, 57104)),
    ("1080p", 10): ((26207, 26730, 27126), (49980, 49512, 49945), (121545, 121453, 122506)),
}
CONCURRENCY = (16, 32, 128)
# request throughput at concurrency 16 (req/s, the three runs' range)
RPS_C16 = {
    ("720p", 1): (15.4, 15.8), ("720p", 2): (7.8, 8.2), ("720p", 3): (5.3, 5.8), ("720p", 5): (2.76, 2.84),
    ("720p", 10): (1.36, 1.38), ("1080p", 1): (7.09, 7.21), ("1080p", 2): (2.92, 2.96), ("1080p", 3): (1.84, 1.89),
    ("1080p", 5): (1.11, 1.15), ("1080p", 10): (0.55, 0.57),
}  # fmt: skip

WORKLOAD = """
name = "sgl-bench-{res}-x{n}-c{c}"
generator = "mixed"
endpoint = "chat"
num_requests = 128
seed = 0
[arrival]
process = "closed"
concurrency = {c}
[[class]]
name = "image"
input = 512
output = 32
images = {n}
image_size = "{w}x{h}"
"""


def cell(res: str, n: int, c: int, tmp: str) -> dict:
    """The engine's mean TTFT (ms) and request throughput for one cell."""
    w, h = RES[res]
    path = f"{tmp}/w.toml"
    with open(path, "w") as f:
        f.write(WORKLOAD.format(res=res, n=n, c=c, w=w, h=h))
    eng = gb.EngineConfig(model="qwen3-vl-8b", gpu="h200")
    s = gb.simulate(gb.load_workload(path), eng, result_dir=tmp).summary
    return {"ttft_ms": s["ttft_ms"]["mean"], "rps": s["request_throughput"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="the columns to run")
    cs = [int(x) for x in ap.parse_args().concurrency.split(",")]
    errs: dict = {c: [] for c in cs}
    rps_errs = []
    with tempfile.TemporaryDirectory() as tmp:
        print("cell: measured mean TTFT / engine (error) per concurrency; req/s at c=16 measured / engine")
        for (res, n), cols in TTFT_MS.items():
            parts = []
            for c in cs:
                got = cell(res, n, c, tmp)
                ms = statistics.mean(cols[CONCURRENCY.index(c)])
                e = got["ttft_ms"] / ms - 1
                errs[c].append(e)
                parts.append(f"c={c} {ms:,.0f} / {got['ttft_ms']:,.0f} ({e:+.0%})")
                if c == 16:
                    lo, hi = RPS_C16[(res, n)]
                    r = got["rps"] / ((lo + hi) / 2) - 1
                    rps_errs.append(r)
                    parts.append(f"req/s {lo:g}-{hi:g} / {got['rps']:.2f} ({r:+.0%})")
            print(f"{res} x{n}: " + "; ".join(parts), flush=True)
    for c in cs:
        e = errs[c]
        within = sum(abs(x) <= 0.2 for x in e)
        print(
            f"c={c}: mean TTFT median |error| {statistics.median(map(abs, e)):.1%}, worst {max(e, key=abs):+.1%}, "
            f"{within} of {len(e)} within ±20%"
        )
    if rps_errs:
        print(
            f"req/s at c=16: median |error| {statistics.median(map(abs, rps_errs)):.1%}, worst {max(rps_errs, key=abs):+.1%}"
        )


if __name__ == "__main__":
    main()
