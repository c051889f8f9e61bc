"""Derive the cost model's operator tables (engine/opdata.py) from Vidur's measured GPU timings.

    python -m goodbench.engine.opderive reference/vidur-profiles > goodbench/engine/opdata.py

Vidur (microsoft/vidur, data/profiling, MIT; copies and licence in reference/vidur-profiles/) timed
every non-attention operator of one transformer layer on real GPUs for 1 to 4096+ tokens at TP 1-8,
and NCCL all-reduce and send/recv for message sizes up to 134 MB. From them, reproducibly:

- GEMMs (QKV, O, gate+up, down) per GPU family: t(N) = roofline(N) / e(N / ridge) + 4 t0, where
  roofline(N) = max(2 N P / peak, w P / BW) for P matmul weights per GPU, t0 is a per-GEMM latency
  (the same for every shape; it is what makes small TP shards less efficient) and e is a table over
  x = N / ridge, ridge = peak w / (2 BW) the token count where the roofline turns compute-bound: the
  dip of e near x = 1 is the mid-M inefficiency of real GEMM kernels, at the same x on every family.
  t0 is the grid value (0.25 us steps) with the smallest RMS relative error; e(x) is the median over
  the family's (model, TP) shapes at each measured N.
- Element-wise ops (two RMSNorms, RoPE, SiLU-mul, residual add) per layer: a + (bh h + bf f/T) 2 N / BW,
  least squares on relative error.
- All-reduce and send/recv time against message bytes per system and worker count (one node only):
  the median time in each power-of-two byte bin, made non-decreasing. `size` is read as bytes, as
  Vidur's own predictor reads it ("each token is of size 2 * h bytes").
"""

from __future__ import annotations

import csv
import glob
import gzip
import math
import os
import sys

# The profiled GPUs' datasheet dense BF16 peak and memory bandwidth (the roofline the tables normalise
# by; goodbench's tiers h100-sxm and a100-80g-sxm, and NVIDIA's A40 datasheet: 149.7 TF, 696 GB/s).
PROFILED = {
    "hopper": ("h100", 989e12, 3.35e12),
    "ampere": ("a100", 312e12, 2.039e12),
    "gddr": ("a40", 149.7e12, 0.696e12),
}
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE = ("input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")
N_GRID = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
T0_GRID = tuple(k * 0.25e-6 for k in range(41))
# collectives: (file, kind, workers) -> the curve's name in opdata.COLLECTIVES
NETWORK = (
    ("h100_dgx_all_reduce", "all_reduce", (2, 4, 8), "nvswitch-h100"),
    ("a100_dgx_all_reduce", "all_reduce", (2, 4, 8), "nvswitch-a100"),
    ("h100_pairwise_nvlink_all_reduce", "all_reduce", (2, 4), "pairwise-h100"),
    ("a100_pairwise_nvlink_all_reduce", "all_reduce", (2, 4), "pairwise-a100"),
    ("h100_dgx_send_recv", "send_recv", (2,), "nvlink-h100"),
    ("a100_dgx_send_recv", "send_recv", (2,), "nvlink-a100"),
)


def _rows(path: str) -> list[dict]:
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def _med(r: dict, ops) -> float:
    return sum(float(r[f"time_stats.{o}.median"]) for o in ops) * 1e-3


def layer_shapes(directory: str, gpu: str) -> dict:
    """(model file, TP) -> {N: (gemm_s, elementwise_s, matmul params per GPU, hidden, ffn per GPU)};
    duplicate rows of one N are averaged."""
    out: dict = {}
    for path in sorted(glob.glob(os.path.join(directory, f"compute_{gpu}_*_mlp.csv.gz"))):
        for r in _rows(path):
            tp, n = int(r["num_tensor_parallel_workers"]), int(r["num_tokens"])
            h, heads, kv, f = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"]), int(r["n_expanded_embd"])
            hd = h // heads
            params = (h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * f) / tp
            key = (os.path.basename(path), tp)
            out.setdefault(key, {}).setdefault(n, []).append((_med(r, GEMMS), _med(r, ELEMENTWISE), params, h, f / tp))
    return {k: {n: tuple(sum(c) / len(v) for c in zip(*v)) for n, v in d.items()} for k, d in out.items()}


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def gemm_curve(shapes: dict, peak: float, bw: float) -> tuple[tuple, tuple, float, float]:
    """(x grid, efficiency per x, t0 seconds, RMS relative error of the fit over every shape and N)."""
    ridge = peak / bw  # BF16: w = 2 bytes per weight, so peak w / (2 BW) = peak / BW
    best = None
    for t0 in T0_GRID:
        eff, res = [], []
        for n in N_GRID:
            pts = [(max(2 * n * d[n][2] / peak, 2 * d[n][2] / bw), d[n][0]) for d in shapes.values() if n in d]
            if any(t <= 4 * t0 for _, t in pts):
                break
            e = _median([roof / (t - 4 * t0) for roof, t in pts])
            eff.append(e)
            res += [(roof / e + 4 * t0) / t - 1 for roof, t in pts]
        else:
            rms = math.sqrt(sum(r * r for r in res) / len(res))
            if best is None or rms < best[3] - 1e-12:
                best = (tuple(n / ridge for n in N_GRID), tuple(eff), t0, rms)
    return best


def elementwise_fit(shapes: dict, bw: float) -> tuple[float, float, float, float]:
    """(a seconds per layer, bh, bf, RMS relative error): t = a + (bh h + bf f) 2 N / BW, least squares
    on relative error (each row divided by its measured time)."""
    import numpy as np

    x, y = [], []
    for d in shapes.values():
        for n, (_, t, _, h, f) in d.items():
            x.append([1.0, 2 * n * h / bw, 2 * n * f / bw])
            y.append(t)
    x, y = np.array(x), np.array(y)
    coef = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]
    r = x @ coef / y - 1
    return float(coef[0]), float(coef[1]), float(coef[2]), float(np.sqrt(np.mean(r * r)))


def collective_curve(rows: list[dict], kind: str, workers: int) -> tuple[tuple, tuple]:
    """(bytes, seconds): the median time in each power-of-two byte bin (labelled by the bin's median
    size), one node (devices per node = workers; 2 for send/recv), made non-decreasing."""
    dpn = 2 if kind == "send_recv" else workers
    bins: dict[int, list] = {}
    for r in rows:
        if int(r["num_workers"]) == workers and int(r["devices_per_node"]) == dpn and r["rank"] == "0":
            size = int(r["size"])
            bins.setdefault(int(math.log2(size)), []).append((size, float(r[f"time_stats.{kind}.median"]) * 1e-3))
    sizes, times, top = [], [], 0.0
    for b in sorted(bins):
        pts = bins[b]
        top = max(top, _median([t for _, t in pts]))
        sizes.append(float(_median([s for s, _ in pts])))
        times.append(top)
    return tuple(sizes), tuple(times)


def derive(directory: str) -> dict:
    """Every table of opdata.py, from the profile files in `directory`."""
    gemm, elem = {}, {}
    for fam, (gpu, peak, bw) in PROFILED.items():
        shapes = layer_shapes(directory, gpu)
        gemm[fam] = gemm_curve(shapes, peak, bw)
        elem[fam] = elementwise_fit(shapes, bw)
    coll = {}
    for stem, kind, workers, name in NETWORK:
        rows = _rows(os.path.join(directory, f"network_{stem}.csv.gz"))
        for w in workers:
            coll[f"{name}-{w}" if kind == "all_reduce" else name] = collective_curve(rows, kind, w)
    return {"GEMM": gemm, "ELEMENTWISE": elem, "COLLECTIVES": coll}


def _fmt(x) -> str:
    if isinstance(x, tuple):
        return "(" + ", ".join(_fmt(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    return f"{x:.6g}"


def render(tables: dict) -> str:
    """opdata.py's text (what the test compares with the committed file)."""
    out = [
        '"""Operator tables derived from Vidur\'s measured GPU timings (microsoft/vidur data/profiling, MIT;',
        "reference/vidur-profiles/ holds the files and the licence). Generated, do not edit:",
        "",
        "    python -m goodbench.engine.opderive reference/vidur-profiles > goodbench/engine/opdata.py",
        "",
        "GEMM[family] = (x = tokens / ridge, efficiency against the roofline, per-GEMM latency s, RMS fit error);",
        "ELEMENTWISE[family] = (s per layer, bh, bf, RMS fit error): a + (bh hidden + bf ffn/TP) 2 N / BW;",
        'COLLECTIVES[name] = (message bytes, seconds), all-reduce "<system>-<workers>" and send/recv."""',
        "",
    ]
    out.append("# fmt: off")
    for name, table in tables.items():
        out.append(f"{name} = {{")
        out += [f'    "{k}": {_fmt(v)},' for k, v in table.items()]
        out.append("}")
    out.append("# fmt: on")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(derive(sys.argv[1] if len(sys.argv) > 1 else "reference/vidur-profiles")))
