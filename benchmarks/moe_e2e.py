"""The engine against public end-to-end vLLM measurements of MoE models it was never fitted to.

    python benchmarks/moe_e2e.py [--csv benchmarks/data/moe_public.csv]

Every point in benchmarks/data/moe_public.csv is held out: the MoE terms were fitted only to operator latencies
(benchmarks/moe_kernels.py) and the step constants only to dense models (engine/virtual/calibration.csv), so no
end-to-end MoE number was used to fit anything. Each point is replayed as its source describes it (model, GPU, TP,
random prompts of fixed length in a closed loop of `concurrency` users, or ShareGPT at rate inf), and the error is
reported per point, per in-flight regime (1 / 2-16 / 17-64 / 65-255 / 256+), per source and per metric.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from goodbench import tokenizer  # noqa: E402
from goodbench.arrivals import ArrivalSpec, offsets  # noqa: E402
from goodbench.engine.config import EngineConfig  # noqa: E402
from goodbench.engine.virtual import simulate  # noqa: E402
from goodbench.metrics import summarize  # noqa: E402
from goodbench.records import RunMeta, RunResult  # noqa: E402
from goodbench.workloads import Plan, build_requests  # noqa: E402
from goodbench.workloads.datasets import random_workload, sharegpt_workload  # noqa: E402

DATA = os.path.join(ROOT, "benchmarks", "data", "moe_public.csv")
BINS = ((1, "1"), (16, "2-16"), (64, "17-64"), (255, "65-255"), (10**9, "256+"))


def regime(c: int) -> str:
    return next(name for hi, name in BINS if c <= hi)


def run(key: tuple, tok) -> dict:
    """Simulate one setup; its measured-metric equivalents."""
    model, gpu, tp, dataset, isl, osl, conc = key
    cfg = EngineConfig(gpu=gpu, model=model, tensor_parallel_size=tp, enable_prefix_caching=False)
    if dataset == "sharegpt":
        reqs = build_requests(sharegpt_workload(), tok, conc)
        plan = Plan.at(reqs, offsets(ArrivalSpec(rate=float("inf")), n=conc, seed=0))
    else:
        n = max(4 * conc, 16)
        reqs = build_requests(random_workload(isl, osl), tok, n)
        plan = Plan.closed_loop(reqs, conc)
    out = simulate(cfg, plan)
    s = summarize(RunResult(RunMeta("moe-e2e", mode="simulate", slo={}), out.records))
    prompt = sum(r.prompt_tokens for r in out.records if r.error is None)
    return {
        "tpot_ms": s["tpot_ms"]["p50"],
        "tpot_mean_ms": s["tpot_ms"]["mean"],
        "ttft_ms": s["ttft_ms"]["p50"],
        "output_tok_s": s["output_throughput"],
        "total_tok_s": s["output_throughput"] + prompt / s["duration_s"],
        "total_tok_s_per_gpu": (s["output_throughput"] + prompt / s["duration_s"]) / tp,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=DATA)
    a = ap.parse_args()
    tok = tokenizer.load()
    rows = list(csv.DictReader(open(a.csv, encoding="utf-8")))
    sims: dict = {}
    errs = []
    print(f"{'source':<17} {'model':<14} {'gpu':<13} tp {'isl/osl':>10} {'conc':>5} {'metric':<20} "
          f"{'measured':>9} {'engine':>9} {'error':>7}")  # fmt: skip
    for r in rows:
        key = (r["model"], r["gpu"], int(r["tp"]), r["dataset"], int(r["isl"]), int(r["osl"]), int(r["concurrency"]))
        if key not in sims:
            sims[key] = run(key, tok)
        got, want = sims[key][r["metric"]], float(r["value"])
        e = got / want - 1
        kind = "throughput" if "tok_s" in r["metric"] else "TTFT" if "ttft" in r["metric"] else "TPOT"
        errs.append((r["source"], regime(int(r["concurrency"])), kind, e, int(r["isl"])))
        print(f"{r['source']:<17} {r['model']:<14} {r['gpu']:<13} {r['tp']:>2} {r['isl'] + '/' + r['osl']:>10} "
              f"{r['concurrency']:>5} {r['metric']:<20} {want:9.1f} {got:9.1f} {e:+7.1%}")  # fmt: skip
    print("\nmedian |error| by metric kind and in-flight regime (n):")
    for kind in ("TPOT", "TTFT", "throughput"):
        ks = [x for x in errs if x[2] == kind]
        by = {reg: [abs(x[3]) for x in ks if x[1] == reg] for _, reg in BINS}
        cells = [f"{reg}: {statistics.median(v):.1%} ({len(v)})" for reg, v in by.items() if v]
        pooled = statistics.median([abs(x[3]) for x in ks]) if ks else float("nan")
        print(f"  {kind:<10} pooled {pooled:.1%} (n={len(ks)}); " + "; ".join(cells))
    print("\nmedian |error| by source:")
    for src in dict.fromkeys(x[0] for x in errs):
        v = [abs(x[3]) for x in errs if x[0] == src]
        print(
            f"  {src:<17} {statistics.median(v):.1%} (n={len(v)}), signed mean {np.mean([x[3] for x in errs if x[0] == src]):+.1%}"
        )


if __name__ == "__main__":
    main()
