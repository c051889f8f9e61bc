"""Time the operators the engine's cost model prices, on the GPU this runs on: the four GEMMs of a decoder
layer (BF16, and FP8 through torch._scaled_mm, vLLM's fallback FP8 kernel), causal prefill attention and
decode attention (torch's SDPA kernels). A measured check of the cost model's tier curves, most of all
for a tier Vidur never profiled (H200): `benchmarks/gpu_operators_compare.py` sets the file this writes
beside what the model prices.

    python3 benchmarks/gpu_operators.py --out gpu-ops.csv          # needs torch and a CUDA GPU
    python3 benchmarks/gpu_operators.py --out /tmp/x.csv --dry-run # tiny shapes on the CPU: the code paths

How it times: each measurement is a CUDA graph of back-to-back calls (vLLM replays decode batches as
graphs, so no launch gaps), cycling over enough weight copies that they cannot sit in L2 (weights are
read from HBM in a real step); the graph is replayed after warm-ups and the median replay / calls is kept.
Only torch is needed (no goodbench), so it runs on a bare GPU machine."""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time

import torch

# (hidden, heads, kv_heads, head_dim, ffn): the catalogue's shapes (goodbench/engine/hardware.py)
MODELS = {
    "llama-3.1-8b": (4096, 32, 8, 128, 14336),
    "llama-3.1-70b": (8192, 64, 8, 128, 28672),
    "qwen2.5-7b": (3584, 28, 4, 128, 18944),
}
SHARDS = (("llama-3.1-8b", 1), ("qwen2.5-7b", 1), ("llama-3.1-70b", 2), ("llama-3.1-70b", 4), ("llama-3.1-70b", 8))
TOKENS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192)
PREFILL = (512, 1024, 2048, 4096, 8192, 16384)
DECODE = ((1, 1024), (1, 8192), (1, 32768), (8, 1024), (8, 8192), (32, 1024), (32, 4096), (64, 1024), (128, 512))
L2_BYTES = 60e6  # H200 (H100: 50 MB): weights cycled over three times this
FIELDS = ("op", "model", "tp", "dtype", "backend", "n", "ctx", "seconds", "spread", "calls", "copies", "note")


def gemm_shapes(model: str, tp: int) -> dict[str, tuple[int, int]]:
    """(in, out) per GPU of each GEMM of one layer, sharded as vLLM shards them (columns, then rows)."""
    h, heads, kv, d, ffn = MODELS[model]
    return {
        "qkv": (h, (heads + 2 * kv) * d // tp),
        "o": (heads * d // tp, h),
        "gate_up": (h, 2 * ffn // tp),
        "down": (ffn // tp, h),
    }


class Timer:
    """Median seconds per call of fn(i) (i: which copy), as a CUDA graph of `calls` calls."""

    def __init__(self, dev: torch.device, dry: bool):
        self.dev, self.dry, self.spread = dev, dry, 0.0  # spread: (max - min) / median over the replays

    def __call__(self, fn, copies: int, est_s: float) -> tuple[float, int]:
        calls = max(copies, min(256, math.ceil(2e-3 / max(est_s, 1e-6))))
        self.spread = float("nan")
        if self.dry:
            t0 = time.perf_counter()
            for i in range(calls):
                fn(i % copies)
            return (time.perf_counter() - t0) / calls, calls
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(copies):  # warm-up: cuBLAS picks and loads its kernels before capture
                fn(i)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                fn(i % copies)
        for _ in range(3):
            graph.replay()
        times = []
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3 / calls)
        del graph
        med = statistics.median(times)
        self.spread = (max(times) - min(times)) / med
        return med, calls


def _failed(exc: Exception) -> str:
    """A failed measurement's note: the error's type and first line (a kernel this torch lacks for a shape)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"


def _copies(nbytes: float) -> int:
    return max(2, min(32, math.ceil(3 * L2_BYTES / nbytes)))


def _fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor e4m3 weights and their scale."""
    scale = (w.abs().max().float() / 448.0).clamp(min=1e-12)
    return (w.float() / scale).to(torch.float8_e4m3fn), scale


def gemms(timer: Timer, dev, out: csv.DictWriter, budget_s: float, dry: bool) -> None:
    t_end = time.monotonic() + budget_s
    shards = SHARDS[:1] if dry else SHARDS
    tokens = TOKENS[:4] if dry else TOKENS
    for dtype in ("bf16", "fp8"):
        for model, tp in shards:
            for op, (k, n_out) in gemm_shapes(model, tp).items():
                if dry:
                    k, n_out = k // 16, n_out // 16
                wbytes = k * n_out * (2 if dtype == "bf16" else 1)
                copies = 2 if dry else _copies(wbytes)
                ws = [torch.randn(n_out, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
                if dtype == "fp8":
                    q = [_fp8(w) for w in ws]
                    ws = [wq.t() for wq, _ in q]  # [in, out], column-major: the layout _scaled_mm takes
                    scales = [s for _, s in q]
                for n in tokens:
                    if time.monotonic() > t_end:
                        print(
                            f"gemms: over the {budget_s:.0f} s budget, stopping at {dtype} {model} tp{tp}", flush=True
                        )
                        return
                    _gemm_row(
                        timer, dev, out, (dtype, model, tp, op, k, n_out, n), ws, scales if dtype == "fp8" else None
                    )
                del ws
                if dev.type == "cuda":
                    torch.cuda.empty_cache()


def _gemm_row(timer, dev, out, key, ws, scales) -> None:
    dtype, model, tp, op, k, n_out, n = key
    copies = len(ws)
    est = max(2 * n * k * n_out / 700e12, k * n_out * (2 if dtype == "bf16" else 1) / 4e12) + 4e-6
    note, timer.spread = "", float("nan")  # a row that fails before timing keeps no earlier row's spread
    try:
        x = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        if dtype == "bf16":
            secs, calls = timer(lambda i: torch.nn.functional.linear(x, ws[i]), copies, est)
        else:
            xq, xs = _fp8(x)
            one = lambda i: torch._scaled_mm(xq, ws[i], scale_a=xs, scale_b=scales[i], out_dtype=torch.bfloat16)  # noqa: E731
            secs, calls = timer(one, copies, est)
    except Exception as exc:  # a kernel this torch has not for the shape: recorded, not fatal
        secs, calls, note = float("nan"), 0, _failed(exc)
    out.writerow(
        dict(
            op=op,
            model=model,
            tp=tp,
            dtype=dtype,
            backend="cublas",
            n=n,
            ctx=0,
            seconds=secs,
            spread=round(timer.spread, 4),
            calls=calls,
            copies=copies,
            note=note,
        )
    )


BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def _sdpa(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, backend)])


def attention(timer: Timer, dev, out: csv.DictWriter, dry: bool) -> None:
    """Llama-3.1-8B's attention shape (32 query heads over 8 KV heads, head dim 128), one layer."""
    _, heads, kv, d, _ = MODELS["llama-3.1-8b"]
    f = torch.nn.functional.scaled_dot_product_attention
    for backend in BACKENDS:
        for length in PREFILL[:1] if dry else PREFILL:
            length = 64 if dry else length
            est = 4 * heads * d * length * length / 2 / 400e12 + 5e-6
            _attn_row(
                timer,
                dev,
                out,
                ("prefill", backend, 1, length),
                est,
                lambda q, k, v: f(q, k, v, is_causal=True, enable_gqa=True),
                (heads, kv, d, length, length),
            )
        for batch, ctx in DECODE[:1] if dry else DECODE:
            ctx = 64 if dry else ctx
            est = batch * ctx * 2 * kv * d * 2 / 4e12 + 5e-6
            _attn_row(
                timer,
                dev,
                out,
                ("decode", backend, batch, ctx),
                est,
                lambda q, k, v: f(q, k, v, enable_gqa=True),
                (heads, kv, d, 1, ctx),
                batch,
            )


def _attn_row(timer, dev, out, key, est, call, dims, batch: int = 1) -> None:
    op, backend, _, ctx = key
    heads, kv, d, q_len, kv_len = dims
    note, timer.spread = "", float("nan")
    try:
        kv_bytes = batch * kv_len * 2 * kv * d * 2
        copies = 2 if timer.dry else _copies(kv_bytes)
        qs = [torch.randn(batch, heads, q_len, d, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        ks = [torch.randn(batch, kv, kv_len, d, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        vs = [torch.randn(batch, kv, kv_len, d, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        with _sdpa(backend):
            secs, calls = timer(lambda i: call(qs[i], ks[i], vs[i]), copies, est)
    except Exception as exc:
        secs, calls, copies, note = float("nan"), 0, 0, _failed(exc)
    out.writerow(
        dict(
            op=f"attn_{op}",
            model="llama-3.1-8b",
            tp=1,
            dtype="bf16",
            backend=backend.lower(),
            n=batch if op == "decode" else q_len,
            ctx=ctx,
            seconds=secs,
            spread=round(timer.spread, 4),
            calls=calls,
            copies=copies,
            note=note,
        )
    )


def environment(dev) -> dict:
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": str(dev)}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        env.update(
            name=p.name,
            sms=p.multi_processor_count,
            memory_gib=round(p.total_memory / 2**30, 1),
            cublas=torch.backends.cuda.preferred_blas_library().name
            if hasattr(torch.backends.cuda, "preferred_blas_library")
            else "?",
            smi=_smi(),
        )
    return env


def _smi() -> str:
    """The driver and the clocks as nvidia-smi reads them ('' without it)."""
    import subprocess

    query = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{query}: {out.stdout.strip()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV to write (one row per measurement)")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU: exercise the code paths only")
    ap.add_argument("--gemm-budget-s", type=float, default=240.0, help="stop the GEMM sweep after this long")
    args = ap.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_operators: no CUDA GPU here (use --dry-run to exercise the code on the CPU)", file=sys.stderr)
        return 2
    dev = torch.device("cpu" if args.dry_run else "cuda")
    torch.manual_seed(0)
    timer = Timer(dev, args.dry_run)
    env = environment(dev)
    print(json.dumps(env), flush=True)
    with open(args.out, "w", newline="") as fh:
        fh.write(f"# {json.dumps(env)}\n")
        out = csv.DictWriter(fh, FIELDS)
        out.writeheader()
        t0 = time.monotonic()
        gemms(timer, dev, out, args.gemm_budget_s, args.dry_run)
        fh.flush()
        print(f"gemms: {time.monotonic() - t0:.0f} s", flush=True)
        attention(timer, dev, out, args.dry_run)
        print(f"all: {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
