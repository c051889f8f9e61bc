"""Extract NVIDIA AIConfigurator's measured vLLM fused-MoE latencies into a small CSV.

Usage::

    python benchmarks/aic_moe_extract.py \
        --repo /work/.mirror/ai-dynamo+aiconfigurator/repo \
        --out benchmarks/data/aic_moe.csv

Source and licence
------------------
AIConfigurator (github.com/ai-dynamo/aiconfigurator), Apache-2.0, read at
commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce (``--rev``) from a bare git
snapshot (files are read with ``git show <rev>:<path>``, no work tree).  Tables:
``aic-core/src/aiconfigurator_core/systems/data/<gpu>/moe/vllm/<ver>/moe_perf.parquet``.

Provenance (from the collection_meta.yaml next to each table and from
``collector/vllm/collect_moe.py`` at that commit)
-----------------------------------------------------------------------
* Every collection_meta.yaml says ``provenance: legacy``, ``status: complete``,
  runtime ``framework: vllm`` with the directory's version.  The 0.24.0 tables
  were appended to in Aug 2026 (Kimi-K3, MiniMax-M3, Nemotron-3 shapes from
  internal CI runs); none of those appended shapes is kept here.  Some appended
  Kimi-K3 rows carry a preview runtime version (0.1.dev19262...) in their
  ``version`` column; the CSV's ``vllm_version`` is the per-row column, and for
  the shapes kept here it equals the directory version.
* Collector: one physical GPU builds vLLM's production ``FusedMoE`` layer
  (vLLM owns routing, TP/EP sharding, weight post-processing and backend
  selection), weights filled with dummy values, then times
  ``moe_module(hidden_states, router_logits)`` under a CUDA graph
  (``collector.helper.benchmark_with_power``).  So latency = top-k routing from
  given router logits + the fused expert kernels (+ quantisation of
  activations where the kernel does that); it EXCLUDES the router/gate GEMM and
  all communication (no all-reduce for TP, no all-to-all dispatch/combine
  for EP).  ``kernel_source`` = ``vllm_<quant method>_<backend>_<experts class>``
  as resolved by vLLM at run time, i.e. the kernel vLLM itself would pick.
* balanced: deterministic round-robin expert assignment.  power_law_<alpha>:
  router logits from ``power_law_logits_v3``; under EP the sampler places the
  most-loaded experts on EP rank 0 (the measured rank), i.e. a worst-rank
  figure.  power_law latency is the mean over 5 different routings.

Conventions found in the data / collector (checked, not assumed)
---------------------------------------------------------------
* ``inter_size`` is the FULL (unsharded) model intermediate size for every
  moe_tp_size: the collector passes ``intermediate_size=inter_size,
  tp_size=moe_tp_size`` to FusedMoE, which shards it to inter_size/tp; the
  tables only contain e.g. inter 2880 for gpt-oss at tp 1..32 (never 1440/720),
  and latency falls with tp at fixed inter_size (h200 gpt-oss-120b w4a16_mxfp4
  balanced, 8192 tokens: tp1 2.91 ms, tp2 1.64, tp4 0.92, tp8 0.57).  The
  collection_meta notes agree ("failure at inter_size/32 = 96" for inter 3072).
* ``num_tokens`` is GLOBAL for EP (and for TP): the collector feeds all
  num_tokens rows of hidden_states and router logits over ALL num_experts to a
  single rank of a logical EP world (``enable_expert_parallel``, local experts
  = num_experts/ep, rank-0 expert map); that rank only computes the
  (token, expert) pairs that land on its local experts.  TP and EP are never
  combined in one row (tp>1 implies ep==1 and vice versa).
* No (gpu, shape, dtype, tp, ep, distribution, num_tokens) key has more than
  one kernel_source in the newest tables: vLLM picks exactly one kernel per
  key.  Where a dtype shows two kernels for one GPU, the choice depends on
  parallelism, e.g. Hopper fp8_block: Triton for ep==1, FlashInfer CUTLASS for
  ep>1.  ``fastest`` is therefore 1 on every row today; it is still computed
  (argmin latency per key, ties -> first row) so the script stays correct if
  several kernels are ever stored for one key.

Selection
---------
* GPUs: h100_sxm, h200_sxm, b200_sxm, b300_sxm, gb200, rtx_pro_6000_server,
  a100_sxm, l40s; for each, the newest vLLM version directory that holds a
  moe_perf.parquet.  Directories holding only a reuse.yaml (a declared
  forward-fill pointing at another version's table, e.g. a100_sxm/0.22.0 ->
  0.14.0, h200_sxm/0.22.0 -> 0.24.0) are SKIPPED, so the version label is the
  version actually measured.  At the pinned commit that is 0.24.0 for every GPU
  except a100_sxm (0.14.0, bfloat16 only, kernel ``vllm_fused_moe``, and only
  power_law distributions -- no balanced rows).
* Shapes (hidden, inter, experts, topk): gpt-oss-120b (2880, 2880, 128, 4),
  gpt-oss-20b (2880, 2880, 32, 4), Qwen3-30B-A3B (2048, 768, 128, 8),
  Qwen3-235B-A22B (4096, 1536, 128, 8), DeepSeek-V3 (7168, 2048, 256, 8).
* distribution in {balanced, power_law_1.01}; tp in {1,2,4,8}; ep in
  {1,2,4,8}; num_tokens in {1, 2, 4, ..., 16384} (powers of two) where present.
* moe_dtype names are AIConfigurator's (bfloat16, fp8 = per-tensor ModelOpt
  FP8, fp8_block = 128x128 block FP8, w4a16_mxfp4, nvfp4, int4_wo, ...).
* If the CSV would exceed ~2 MB, power_law rows with tp>1 are dropped first
  (reported on stdout).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pandas as pd

PINNED_REV = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
DATA_ROOT = "aic-core/src/aiconfigurator_core/systems/data"

GPUS = [
    "h100_sxm",
    "h200_sxm",
    "b200_sxm",
    "b300_sxm",
    "gb200",
    "rtx_pro_6000_server",
    "a100_sxm",
    "l40s",
]

# name -> (hidden_size, inter_size, num_experts, topk)
SHAPES = {
    "gpt-oss-120b": (2880, 2880, 128, 4),
    "gpt-oss-20b": (2880, 2880, 32, 4),
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "qwen3-235b-a22b": (4096, 1536, 128, 8),
    "deepseek-v3": (7168, 2048, 256, 8),
}

DISTRIBUTIONS = ("balanced", "power_law_1.01")
TP_SIZES = (1, 2, 4, 8)
EP_SIZES = (1, 2, 4, 8)
TOKEN_GRID = tuple(2**i for i in range(15))  # 1 .. 16384
MAX_BYTES = 2_000_000

OUT_COLUMNS = [
    "gpu",
    "vllm_version",
    "kernel_source",
    "moe_dtype",
    "hidden",
    "inter",
    "experts",
    "topk",
    "tp",
    "ep",
    "distribution",
    "num_tokens",
    "latency_ms",
    "fastest",
]
GROUP_KEY = ["gpu", "hidden", "inter", "experts", "topk", "moe_dtype", "tp", "ep", "distribution", "num_tokens"]


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def version_key(v: str) -> tuple:
    parts = []
    for p in v.split("."):
        parts.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return tuple(parts)


def newest_moe_table(repo: str, rev: str, gpu: str) -> tuple[str | None, list[str]]:
    """Return (newest version holding moe_perf.parquet, notes about skipped dirs)."""
    base = f"{DATA_ROOT}/{gpu}/moe/vllm/"
    listing = git(repo, "ls-tree", "-r", "--name-only", rev, base).decode().split()
    files_by_ver: dict[str, set[str]] = {}
    for path in listing:
        rel = path[len(base) :]
        if "/" not in rel:
            continue
        ver, name = rel.split("/", 1)
        files_by_ver.setdefault(ver, set()).add(name)
    notes = []
    for ver in sorted(files_by_ver, key=version_key, reverse=True):
        names = files_by_ver[ver]
        if "moe_perf.parquet" in names:
            return ver, notes
        if "reuse.yaml" in names:
            text = git(repo, "show", f"{rev}:{base}{ver}/reuse.yaml").decode()
            donor = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if "from_version" in ln), "?")
            notes.append(f"skipped {ver} (reuse.yaml only -> {donor})")
        else:
            notes.append(f"skipped {ver} (no moe_perf.parquet)")
    return None, notes


def load_gpu(repo: str, rev: str, gpu: str, ver: str) -> pd.DataFrame:
    path = f"{DATA_ROOT}/{gpu}/moe/vllm/{ver}/moe_perf.parquet"
    df = pd.read_parquet(io.BytesIO(git(repo, "show", f"{rev}:{path}")))
    df = df.rename(
        columns={
            "version": "vllm_version",
            "hidden_size": "hidden",
            "inter_size": "inter",
            "num_experts": "experts",
            "moe_tp_size": "tp",
            "moe_ep_size": "ep",
            "latency": "latency_ms",
        }
    )
    df.insert(0, "gpu", gpu)
    shape_mask = pd.Series(False, index=df.index)
    for h, i, e, k in SHAPES.values():
        shape_mask |= (df.hidden == h) & (df.inter == i) & (df.experts == e) & (df.topk == k)
    keep = (
        shape_mask
        & df.distribution.isin(DISTRIBUTIONS)
        & df.tp.isin(TP_SIZES)
        & df.ep.isin(EP_SIZES)
        & df.num_tokens.isin(TOKEN_GRID)
        & (df.op_name == "moe")
    )
    return df.loc[keep].copy()


def mark_fastest(df: pd.DataFrame) -> pd.DataFrame:
    df = df.reset_index(drop=True)
    idx = df.groupby(GROUP_KEY, sort=False)["latency_ms"].idxmin()
    df["fastest"] = 0
    df.loc[idx.values, "fastest"] = 1
    return df


def to_csv_text(df: pd.DataFrame) -> str:
    return df[OUT_COLUMNS].to_csv(index=False, float_format="%.6g", lineterminator="\n")


def shape_name(row) -> str:
    for name, s in SHAPES.items():
        if (row.hidden, row.inter, row.experts, row.topk) == s:
            return name
    return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default="/work/.mirror/ai-dynamo+aiconfigurator/repo")
    ap.add_argument("--rev", default=PINNED_REV, help="git revision of the AIConfigurator snapshot")
    ap.add_argument("--out", default="benchmarks/data/aic_moe.csv")
    args = ap.parse_args(argv)

    commit = git(args.repo, "rev-parse", args.rev).decode().strip()
    print(f"AIConfigurator commit {commit}")

    frames = []
    for gpu in GPUS:
        ver, notes = newest_moe_table(args.repo, args.rev, gpu)
        if ver is None:
            print(f"{gpu:22s} no vLLM moe data ({'; '.join(notes) or 'no dirs'})")
            continue
        df = load_gpu(args.repo, args.rev, gpu, ver)
        row_vers = sorted(df.vllm_version.unique())
        extra = f" row versions {row_vers}" if row_vers != [ver] else ""
        print(f"{gpu:22s} vllm {ver} ({len(df)} rows kept){extra}" + (f"  [{'; '.join(notes)}]" if notes else ""))
        frames.append(df)

    data = pd.concat(frames, ignore_index=True)
    data = mark_fastest(data)
    gpu_order = {g: i for i, g in enumerate(GPUS)}
    data = data.sort_values(
        [
            "gpu",
            "hidden",
            "experts",
            "inter",
            "topk",
            "moe_dtype",
            "kernel_source",
            "distribution",
            "tp",
            "ep",
            "num_tokens",
        ],
        key=lambda s: s.map(gpu_order) if s.name == "gpu" else s,
    ).reset_index(drop=True)

    text = to_csv_text(data)
    if len(text.encode()) > MAX_BYTES:
        before = len(data)
        data = data[~((data.tp > 1) & data.distribution.str.startswith("power_law"))]
        text = to_csv_text(data)
        print(f"CSV over {MAX_BYTES} bytes: dropped {before - len(data)} power_law rows with tp>1")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"\nwrote {out}: {len(data)} rows, {len(text.encode())} bytes")

    multi = data.groupby(GROUP_KEY).size()
    print(f"keys with >1 kernel_source: {(multi > 1).sum()} of {len(multi)}")

    print("\nrows per gpu / moe_dtype:")
    print(data.groupby(["gpu", "moe_dtype"], sort=False).size().to_string())

    print("\nmoe_dtypes per gpu:")
    for gpu, g in data.groupby("gpu", sort=False):
        print(f"  {gpu:22s} {', '.join(sorted(g.moe_dtype.unique()))}")

    print("\nkernel per gpu / dtype / shape (fastest rows; tp/ep where it varies):")
    fast = data[data.fastest == 1].copy()
    fast["shape"] = fast.apply(shape_name, axis=1)
    fast["par"] = fast.ep.map(lambda e: "ep>1" if e > 1 else "ep=1")
    summ = fast.groupby(["gpu", "moe_dtype", "kernel_source"], sort=False).agg(
        shapes=("shape", lambda s: ",".join(sorted(s.unique()))), par=("par", lambda s: "/".join(sorted(s.unique())))
    )
    print(summ.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
