"""Time one MoE layer's routed experts with random weights on the CUDA GPU this runs on, to check the engine's
touched-experts curve (engine/moe.py): a step's time follows the experts its tokens touch, E (1 - (1 - k/E)^N),
until the grouped GEMMs turn compute-bound.

    python3 benchmarks/gpu_moe.py --out gpu-moe.csv                 # needs torch and a CUDA GPU; no weights to download
    python3 benchmarks/gpu_moe.py --compare gpu-moe.csv             # beside what the engine prices (needs goodbench)

Shapes: gpt-oss-120b's experts (hidden 2880, expert FFN 2880, 128 experts, top-4) and Qwen3-30B-A3B's (2048, 768,
128, top-8), BF16 (plain torch has no MXFP4 kernel: the curve's shape is what is checked, the engine's kernels are
fitted to vLLM's own, benchmarks/moe_kernels.py), 1 to 16,384 tokens routed uniformly at random. How it times:
tokens sorted by expert, each touched expert's gate/up and down GEMMs (torch._grouped_mm where this torch has it,
else one matmul pair per expert), captured as a CUDA graph and replayed; the median replay is kept. Without torch
or a CUDA GPU it says so and exits 0."""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

SHAPES = {"gpt-oss-120b": (2880, 2880, 128, 4), "qwen3-30b-a3b": (2048, 768, 128, 8)}
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
FIELDS = ("model", "tokens", "touched", "seconds", "spread", "kernel")


def layer(torch, x, w13, w2, topk_ids, grouped: bool):
    """The routed experts of one layer: SwiGLU(x W13_e) W2_e for each (token, expert) pick, summed per token."""
    n, k = topk_ids.shape
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat)
    xs = x.repeat_interleave(k, dim=0)[order]
    counts = torch.bincount(flat, minlength=w13.shape[0])
    if grouped:
        offs = torch.cumsum(counts, 0).to(torch.int32)
        h = torch._grouped_mm(xs, w13.transpose(1, 2), offs=offs)
        g, u = h.chunk(2, dim=-1)
        y = torch._grouped_mm(torch.nn.functional.silu(g) * u, w2.transpose(1, 2), offs=offs)
    else:
        parts, start = [], 0
        for e, c in enumerate(counts.tolist()):
            if c:
                h = xs[start : start + c] @ w13[e].T
                g, u = h.chunk(2, dim=-1)
                parts.append((torch.nn.functional.silu(g) * u) @ w2[e].T)
            start += c
        y = torch.cat(parts)
    out = torch.zeros_like(x)
    out.index_add_(0, order // k, y)
    return out


def measure(torch, name: str, n: int, grouped: bool) -> dict:
    hidden, ffn, experts, k = SHAPES[name]
    dev = torch.device("cuda")
    w13 = torch.randn(experts, 2 * ffn, hidden, device=dev, dtype=torch.bfloat16) * 0.02
    w2 = torch.randn(experts, hidden, ffn, device=dev, dtype=torch.bfloat16) * 0.02
    x = torch.randn(n, hidden, device=dev, dtype=torch.bfloat16)
    ids = torch.stack([torch.randperm(experts, device=dev)[:k] for _ in range(n)])
    fn = lambda: layer(torch, x, w13, w2, ids, grouped)  # noqa: E731
    for _ in range(3):
        fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(9):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    med = statistics.median(times)
    touched = int(torch.unique(ids).numel())
    return {"model": name, "tokens": n, "touched": touched, "seconds": med, "spread": (max(times) - min(times)) / med,
            "kernel": "grouped_mm" if grouped else "per-expert matmul"}  # fmt: skip


def run(out: str) -> int:
    try:
        import torch
    except ImportError:
        print("gpu_moe: torch is not installed here; nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("gpu_moe: no CUDA GPU here; nothing measured")
        return 0
    grouped = hasattr(torch, "_grouped_mm")
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for name in SHAPES:
            for n in TOKENS:
                try:
                    row = measure(torch, name, n, grouped)
                except RuntimeError as e:  # a torch without the grouped kernel for this GPU: per-expert matmuls
                    if not grouped:
                        raise
                    print(f"grouped_mm failed ({str(e).splitlines()[0][:80]}); per-expert matmuls instead")
                    grouped = False
                    row = measure(torch, name, n, grouped)
                w.writerow(row)
                f.flush()
                print(f"{name:<14} {n:>6} tokens  {row['touched']:>4} experts  {row['seconds'] * 1e3:8.3f} ms")
    print(f"{torch.cuda.get_device_name()}: wrote {out}")
    return 0


def compare(path: str, gpu: str) -> int:
    """The measured curve beside the engine's, both over their 1-token time (the shape, not the level)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from goodbench.engine.hardware import get_gpu
    from goodbench.engine.models import get_model
    from goodbench.engine.moe import expert_time, kernel

    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    g = get_gpu(gpu)
    for name in SHAPES:
        rs = [r for r in rows if r["model"] == name]
        if not rs:
            continue
        m = get_model(name)
        k, _ = kernel(g, "bf16")
        ns = [int(r["tokens"]) for r in rs]
        eng = expert_time(ns, m, g, "bf16", 1, False, 0.0, k)
        base_m, base_e = float(rs[0]["seconds"]), float(eng[0])
        print(f"{name} on {gpu}: tokens, experts touched (measured / E(1-(1-k/E)^N)), time over 1 token's")
        for r, e in zip(rs, eng):
            n = int(r["tokens"])
            print(f"  {n:>6}  {int(r['touched']):>4} / {m.moe.touched(n):6.1f}   measured x{float(r['seconds']) / base_m:6.2f}"
                  f"   engine x{e / base_e:6.2f}")  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="gpu-moe.csv", help="where to write the measurements (default gpu-moe.csv)")
    ap.add_argument("--compare", metavar="CSV", help="print a measured file beside the engine's curve instead")
    ap.add_argument("--gpu", default="h100-sxm", help="the engine's tier for --compare (default h100-sxm)")
    a = ap.parse_args()
    return compare(a.compare, a.gpu) if a.compare else run(a.out)


if __name__ == "__main__":
    sys.exit(main())
